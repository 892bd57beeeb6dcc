// Package mirrored trains a model as a set of mirrored replicas: every
// replica holds the whole model, computes gradients on its own shard of
// each global batch, and the replicas stay identical because every step
// combines the gradients across the group before the same optimizer
// update. There is no parameter server and no socket here.
//
// The way in is one function: Run(ctx, Job, Group) on every replica of a
// group (Train is its one-replica form). A Job carries the model (an nn
// model by name, the caller's nn.Model through Job.NewModel, or sparse
// logistic regression through Job.Sparse), the Strategy (the ring, or
// gossip with its knobs), the Faults to inject, checkpoints and the
// consistency checks; every run returns one Summary, with the gossip
// report inside it under gossip. The Observers the caller installs in
// Job.Observers (package mirrored/observe has meshtrain's own) see every
// event.
//
// Inside, in the manner of a raft node, arithmetic is driven by thin
// loops, with data loading, disk, network and printing outside it:
//
//   - run.go: Job, Run and Train; strategy.go: the Strategy, a value
//     whose methods hold all that differs between Ring, Gossip and
//     *Elastic (settings, checks, and the run: each builds its plan and
//     drives its loop). Two builders, one per kind of model, turn a Job
//     into a plan (plan.go) that a loop runs: denseBuilder (dense.go: the
//     nn models on image sets with shapes) and sparseBuilder (sparse.go:
//     sparse logistic regression on files or in-memory sparse sets).
//     A dense model's buffers (batch normalization's moving statistics)
//     travel with the optimizer's state and are compared and broadcast
//     with the parameters.
//   - package mirrored/replica: a replica's model and optimizer, the
//     arithmetic of a step with no loop: its parameters and optimizer
//     state, the gradient of a batch, the combination across the group
//     (a Combiner: Mean by default, Half for --wire bf16|fp16), the update, settling deferred work,
//     evaluation. Dense wraps an nn.Model and sends its gradient in
//     buckets during the backward pass; Sparse is sparse logistic
//     regression, whose exchange carries the touched coordinates. It
//     holds the Group too; group.go, combine.go and faults.go here keep
//     mirrored's names for them (Group, NewGroup, Combiner, Mean, Faults
//     …) as aliases, and replica.go builds a Dense from a Config.
//   - sync.go: syncStep is the synchronous step (gradient → [barrier] →
//     combine → update); runSync the loop around it: the start-up
//     handshake (handshake.go: one hello for every mode, naming every
//     setting that differs and the ranks: fingerprint.go states the
//     settings, package mirrored/settings compares them), resume or
//     broadcast (resume.go: checkpoint.Resumable picks the file, the
//     fingerprint decides whether it may be resumed), the epochs,
//     checkpoints, hash comparisons, the stop vote (stop.go) and the final
//     figures (stats.go).
//   - async.go: runAsync is the gossip loop over the same replicas: each
//     averages its parameters with one peer at a time through the gossip
//     engine (package mirrored/gossip), so a slow or dead peer does not
//     stop the others.
//   - elastic.go: the Strategy *Elastic makes the ring elastic, as
//     Horovod Elastic does: replicas commit their state in memory every CommitEvery steps
//     (elastic_commit.go); when a peer is lost the survivors agree on who
//     is left, roll back to the new chief's commit, re-shard and go on
//     as a new generation, and a restarted worker is admitted at a
//     commit. The agreement (the majority rule, the schedule that replays
//     a recorded membership bit for bit) is a pure machine in package
//     mirrored/membership; elastic.go is its driver (sockets, timers,
//     JSON, the generations). The sync loop sees an elastic run only
//     through loopHook (loophook.go): at its start, before and after
//     each step, at each commit and at its end, where a plain ring run
//     has ringHook.
//   - callbacks.go drives package mirrored/callbacks (Keras's early
//     stopping, plateau and save-best, a pure machine) at every epoch's end.
//   - package mirrored/faults: one hook (Faults.At) both loops call at
//     named Points of every step: after the gradient, before the combine,
//     after the update.
//   - observe.go: the Events every mode emits, in one order, and their
//     fan-out to the caller's Job.Observers (errors joined, each closed
//     once at the end); resources.go: the ResourceSampler a Job may carry,
//     whose samples reach the observers and whose history the Summary.
//     The values themselves (Event, Summary, Result …) are package
//     mirrored/outcome's, aliased here.
//     The observers themselves (the log, the progress lines, TensorBoard
//     event files, the launcher's sampled hook, the OS resource sampler)
//     are package mirrored/observe's: a caller installs what it needs.
//
// The collective layer is reached through Group (mirrored/replica's;
// NewGroup adapts a collective.Comm, LocalGroup is one replica). Gossip
// replicas talk point-to-point through the Comm behind a NewGroup. A saved
// model is scored by package mirrored/evaluate. The strategy's parts
// are packages of their own below this one: mirrored/gossip (the
// averaging protocol) and mirrored/checkpoint (the format); the programs
// that use it are the running wing (mirrored/launch) and the measuring
// wing (mirrored/measure), both writing a run's report through
// mirrored/report.
//
// Invariants: with the same settings (seed included) and the same number of
// replicas, a synchronous run performs the same arithmetic in the same
// order, so it is bitwise reproducible (Result.ParamsSHA256 is the same;
// testdata/golden.txt pins it) and every replica ends with the same bits;
// injected slowness never changes the arithmetic; a run resumed from a
// checkpoint ends bit for bit where the uninterrupted run ends; a NaN or
// Inf loss stops training with an error naming the epoch and step, before
// anything derived from it (checkpoint, summary, event file entry) is
// written.
package mirrored
