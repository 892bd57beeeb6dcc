// Package collective runs collective operations (all-reduce, broadcast,
// barrier, all-gather) and tagged point-to-point messages
// among the N ranks of a training cluster, with no parameter server.
//
// The package is split the way KungFu splits it:
//
//   - schedule.go holds pure functions that say which chunk goes to whom and
//     in what order (ring, recursive doubling, chain, dissemination). They
//     are unit-tested by simulating all ranks without any transport.
//   - A Transport only moves framed bytes to and from a rank. Two exist: the
//     in-memory MemNetwork here (which can drop and cut links, for tests) and
//     the libp2p one in collective/p2p.
//   - Comm executes schedules over a Transport.
//   - A Member (Join, Leave) is one rank's part in a cluster: a Comm over a
//     CountingTransport (the bytes it moves), and on leaving a final barrier
//     and the transport's Close, their errors joined and naming the rank.
//     Every peer bring-up (worker, benchmarks, comparison, tests) uses it.
//
// Invariants:
//
//   - Every frame carries a Header: operation kind, sequence number, dtype,
//     reduction op, total element count and chunk offset. A receiver checks
//     the header against what it expects before touching the payload; a
//     mismatch (different length, different operation order, different
//     algorithm) is an error on every rank naming both ranks and both shapes:
//     the rank that detects it aborts the communicator, which tells every
//     other rank why.
//   - Payload lengths read from the wire are bounded (MaxFrame) before any
//     allocation.
//   - Every wait runs under Options.Timeout. A timed-out wait, a reset link or
//     a peer that died is an error naming the rank waited on and the
//     operation; a failing rank aborts the others so nobody hangs.
//   - Each element of a result is reduced in one fixed order, so results are
//     bitwise identical on all ranks and from run to run.
//   - After any failed collective the Comm is broken: later collectives fail
//     at once, since the ranks no longer agree on the frame sequence.
//
// Point-to-point messages (Send, Recv) share the links but have their own
// inbound queue, so they can run beside collectives; they match in order
// per pair of ranks and check the user tag. Point-to-point receives fail
// only when their own link does (an abort or a lost link elsewhere cancels
// collectives only), so a protocol built on them, such as the gossip
// averaging of package mirrored/gossip, can drop a dead peer and carry on.
//
// Algorithms: all-reduce is a pipelined ring (reduce-scatter then
// all-gather, 2(N-1)/N of the buffer sent per rank, chunks of
// Options.ChunkBytes so sending one chunk overlaps receiving and reducing the
// next) or, up to Options.SmallBytes, recursive doubling (log2 N rounds, any
// N). For 3 to StarMaxRanks ranks and up to Options.StarBytes, auto picks
// Star instead: every rank sends to one root, which folds the buffers in rank
// order and sends the result back. Two message latencies beat log2 N rounds
// on small buffers; the root rotates with the sequence number so no rank
// carries every fold, and the fixed fold order keeps results bitwise equal
// on every rank. Broadcast is a pipelined chain, Barrier a dissemination barrier,
// AllGatherV a ring over per-rank blocks after a ring exchange of lengths.
//
// When the Comm knows each rank's host (Options.Hosts, SetHosts, or
// LearnHosts at start-up: a Topology) and there are several hosts with
// several ranks on some host, Auto picks Hierarchical instead of the ring
// (hierarchical.go): the ranks of a host send their buffers to its leader
// (lowest rank), which folds them in rank order; the leaders run the ring;
// each leader sends the result back. The three run at once a chunk at a
// time on disjoint links, so each host's link carries 2(H-1)/H of the
// buffer for H hosts, not 2(N-1)/N; every rank ends with the leaders'
// bits. Ranks that disagree on the hosts fail before the first one
// (agreeHosts), naming the ranks that differ.
//
// AllReduceFloat32Half is the ring with 16-bit frames (package half: bf16,
// or fp16 with a power-of-two scale per frame), half the bytes: each hop
// of the reduce-scatter adds the received values to its own in float32
// and rounds once to send on, the owner rounds the total, and the
// all-gather forwards that frame's bytes unchanged, so every rank, the
// owner too, ends with the same bits. Its frames' dtype (bf16, fp16) is in
// the header, so a rank sending another format is a mismatch naming both.
// It stays a ring whatever the hosts (DescribeHalf says so): the
// hierarchical all-reduce would change where the 16-bit roundings happen.
//
// Payloads are the in-memory bytes of the slices (little-endian hosts only;
// New refuses a big-endian host), so no element is encoded one by one. On
// the receiving side the executor offers its own buffer for the next frame
// of a link (a Landing, landing.go): the link's reader copies the payload
// straight into it, or folds it in from a 64 KiB piece still in cache, so a
// ring's payload is not staged in a pooled buffer and copied again. A frame
// that arrives before the offer is staged as before. While an operation
// takes a link's frames this way the link's reader waits for each offer
// rather than reading ahead, so a transport that waits must buffer at least
// a frame of what the peer sends (libp2p's stream window does); the
// in-memory transport lands only frames already offered, and never waits.
package collective
