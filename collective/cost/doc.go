// Package cost is meshtrain's cost model: what an all-reduce, a sparse
// all-gather, a gossip round or a training step should take on N peers,
// given a few measured parameters. It is pure arithmetic: no network, no
// clock; it sits beside the collectives it prices. The measuring lives in
// mirrored/measure/calibrate, the figures in mirrored/report and the
// commands that use it in cmd/meshtrain (`meshtrain model`).
//
// The parameters (Params):
//
//   - α (Alpha): one-way latency of one message through the stack (TLS,
//     yamux, the wake-ups on both ends, the wire).
//   - β (Beta): payload rate of one direction of a link, bytes/s.
//   - γ (Gamma): CPU seconds per byte moved from one rank to another, both
//     ends together: encryption and decryption, the copies of yamux and the
//     kernel, the reduction.
//   - Fixed: the fixed cost of one operation (entering and leaving the
//     collective, scheduling, the per-step bookkeeping of a sparse exchange),
//     paid whatever the size.
//   - RankCores and SharedCores: how many cores one rank's CPU work can use,
//     and how many all the ranks share (emulated hosts on one machine);
//     SharedCores 0 means each rank has a host of its own.
//   - Burst and BurstRate: what a token-bucket shaper passes at the
//     unshaped path's rate after the link idled (tc tbf's bucket on the
//     emulated hosts; 0 on real links), once per leg of an operation.
//
// Each operation is reduced to its traffic: the message latencies on its
// critical path, the bytes the busiest link direction carries one after
// another, the bytes the busiest rank sends and the bytes all ranks send.
// From that, an Estimate is
//
//	latency  = Fixed + rounds·α
//	transfer = (link bytes − Burst) / β + Burst / BurstRate
//	cpu      = γ · max(rank bytes / RankCores, all bytes / SharedCores)
//	time     = max(latency + transfer, Fixed + cpu)
//
// because the CPU work of a pipelined exchange overlaps its transfer, and
// the bound is whichever term is largest: Bandwidth (transfer), Latency
// (latency) or CPU. A training step is its measured compute (stretched when
// more ranks compute than there are shared cores) plus its exchange.
package cost
