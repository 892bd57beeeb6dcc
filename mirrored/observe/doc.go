// Package observe holds the observers of a mirrored run: what watches a
// replica train without taking part in it. The engine (package mirrored)
// only emits its Events to the Observers a caller installs in
// Job.Observers, one set per replica; everything that prints, writes or
// samples lives here, and a caller takes what it needs:
//
//   - Log: the run's start, resume, epochs, checkpoints and end to a zap
//     logger (steps at debug level);
//   - Progress: what a person watching reads: the run's header, a
//     Keras-style bar (a terminal) or a line every few steps (a log file,
//     CI) inside each epoch, a line per epoch and the end. StepProgress is
//     its bar, also used by the launcher for rank 0's relayed steps;
//   - TensorBoard: event files laid out as Keras writes them (train and
//     validation runs, epoch_* tags), per-step scalars every few steps and
//     the resource samples under system/;
//   - Sampled: a caller's hook (the launcher's event relay) that gets every
//     event but the steps at a bounded rate, each summing up the steps
//     since the last;
//   - Resources: the OS resource sampler (CPU, memory, disk, network per
//     link) a caller installs as Job.Resources; the run keeps its history
//     in PeerStats.Resources and passes each sample to the observers.
//
// Standard builds the set meshtrain's own commands install, from the
// settings its flags give (the log, the progress on the replicas that
// show it, TensorBoard under a log directory, a hook), so that a CLI user
// sees the same lines whichever command trains.
//
// Invariants: observers are called on the replica's goroutine, in order,
// so none here locks; each is one replica's (give every replica run in
// one process its own). An observer that is an io.Closer is closed by the
// run at its end; an elastic run closes its observers at the end of every
// generation and goes on emitting to them in the next, so TensorBoard
// opens its files again at the next event (as a new event file beside the
// first, which TensorBoard reads as one run).
package observe
