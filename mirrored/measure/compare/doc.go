// Package compare is `meshtrain compare`: the ring (synchronous
// all-reduce) and gossip (decentralised asynchronous averaging) strategies
// side by side on the same data, seed and number of replicas, with and
// without an injected straggler. It is a sweep (package sweep) whose grid
// is the strategies × the two scenarios at one N and batch size, run as
// in-process replicas, and its report is the sweep's: report.md (the
// sweep's table, then the ring-and-gossip table and the aims gossip is
// measured against), results.json and PNG plots (test accuracy against
// training time and against epochs of work, the gossip replicas'
// consensus distance over time, steps per second and bytes sent per
// peer, CPU per run).
//
// Each run is N replicas in this process, each with its own libp2p host on
// 127.0.0.1, so the links, framing and security are the real ones while
// the replicas share the machine's cores (as N worker processes on one
// machine would).
//
// Invariants: every run of one comparison uses the same mirrored.Job
// (model, data, seed, batch, epochs, learning rate); only the strategy and
// the injected slowdown differ. A run that fails is recorded with its
// errors, not dropped; figures that were not reached are reported as such,
// never filled in. A comparison starts afresh in its --out (it does not
// resume, as `meshtrain sweep` does).
package compare
