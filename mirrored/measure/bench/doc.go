// Package bench is `meshtrain bench`, in the measuring wing: it measures the collective layer and
// the training loop over the real libp2p transport between local peers.
//
// `bench allreduce` (AllReduce) measures the collective layer the way
// nccl-tests does: it runs N peers on 127.0.0.1 and reports, per size, the
// time of one float32 sum all-reduce, its algbw (size/time) and busbw
// (algbw × 2(N−1)/N), and whether the result was exactly right. `bench
// link` (Link) measures the ceiling a ring can reach: one stream's
// throughput in both directions at once, and its round-trip time, with the
// same security.
//
// `bench sparse` (Sparse) is the speed of synchronous sparse logistic
// regression (mirrored.Run with a sparse Job) at Criteo's width, on generated data
// held in memory. It measures, with the same training loop a real run
// uses:
//
//   - local gradient + update examples/s of one replica on one core
//     (GOMAXPROCS 1, no exchange);
//   - synchronous steps/s for each requested number of peers, with the
//     sparse exchange (one all-gather of the encoded gradients per step)
//     and, for a couple of steps, the dense one (an all-reduce of all D
//     floats), and the bytes each peer sends per step in both modes.
//
// Every benchmark runs its peers the same way (runPeers): rank 0 in this
// process, the others as child processes re-executing the current binary
// with the same command line and their role (rank, peer addresses, a fresh
// random cluster secret, and the sparse benchmark's run) as JSON in the
// environment variable ChildEnv, or, on request, as goroutines of this
// process (still over libp2p on 127.0.0.1; tests use that, since a test
// binary cannot be re-executed as a peer). Each peer is brought up and
// leaves through collective.Member (p2p.Join).
package bench
