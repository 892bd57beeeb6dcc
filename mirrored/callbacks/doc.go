// Package callbacks decides what Keras's epoch-end callbacks would do:
// EarlyStopping (stop when the monitored metric has not improved for
// Patience epochs, and restore the best epoch's parameters),
// ReduceLROnPlateau (multiply the learning rate by Factor after
// LRPatience epochs without improvement, then cool down) and
// ModelCheckpoint with save_best_only (save whenever the metric
// improves). The monitored metric is the test set's loss or accuracy,
// evaluated at every epoch's end: Keras's val_loss and val_accuracy, with
// the mode (min or max) taken from the metric as Keras's "auto" does.
//
// The decisions are a pure machine, in the manner of mirrored/membership:
// Machine.Epoch takes one epoch's metrics and returns a Decision (stop,
// the new learning-rate scale, save, snapshot the best) with the lines to
// print; it reads no clock, file or network. The sync loop in mirrored is
// its driver: it snapshots and restores parameters, writes the save-best
// checkpoint and applies the scale. Every replica of a synchronous run
// evaluates the same test set and all-reduces the figures, so every
// replica feeds its machine the same metrics and takes the same decision
// at the same epoch; a resumed run replays the epochs of its checkpoint's
// history into a fresh machine and so continues where the first left off
// (but for the best epoch's parameters, which were only in memory; an
// elastic run's new generation, in the same process, takes them over).
// Gossip's replicas end their epochs apart: the callbacks are refused
// there.
//
// The learning rate a plateau reduces is a multiplier, Scale, on the
// schedule's rate (Rate), floored at MinLR but never above the schedule:
// Keras multiplies the optimizer's current rate, which a schedule would
// overwrite; here both compose, the schedule's shape kept and scaled down.
//
// Invariants: the same Config and the same sequence of Metrics give the
// same Decisions, bit for bit; Scale only falls, by exactly Factor per
// reduction; a Decision with Stop is the last one a run acts on.
package callbacks
