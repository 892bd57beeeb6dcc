// Package sweep is `meshtrain sweep` and `meshtrain compare`, in the
// measuring wing: a grid of runs (workers × batch size per worker ×
// strategy × straggler scenario, any subset), each point one full
// training run on the same data and seed, reported as one table (as the
// course reports tabulated their dstat, top and iftop readings by hand),
// results.json and PNG plots.
//
// Grid.Points expands the grid in a fixed order and sets aside the
// combinations that make no sense (one worker under gossip or with a
// straggler, a straggler rank a point does not have), which the report
// lists. Run runs the points one after the other through a Runner:
// Processes starts each point's workers as `meshtrain worker` processes
// (launch.Run, as `meshtrain launch` does), so that each peer's CPU time,
// memory and traffic are its own process's, as on separate machines;
// InProcess runs them as replicas in this process, each with its own
// libp2p host (what compare does, and tests, on generated data).
//
// The table's figures per point (Row): CPU (cores busy, from each
// process's once-a-second resource samples while it trained, averaged
// over the run and then over the point's processes: replicas sharing a
// process count it once), peak resident memory, bytes received and sent
// per peer, the final test loss and accuracy (under gossip the survivors'
// average model), training time, global examples/s, time to the target
// accuracy (at the first evaluation that reached it) and the verdict
// (package mirrored/report's verdict) with the straggler's rank.
//
// Invariants: every point runs the same mirrored.Job but for the point's
// workers, batch size, strategy and straggler. After each point,
// results.json is rewritten atomically (internal/atomicfile) with every
// finished point in the grid's order, then the report; so an interrupted
// sweep (its context cancelled: Ctrl-C) loses only the point under way,
// and Config.Resume continues it at the next point, refusing results of
// another grid or other settings (SettingsError names the differences).
// A run that fails is recorded with its errors (and run again on resume),
// never dropped; figures that were not reached are reported as such
// (null in JSON), never filled in.
package sweep
