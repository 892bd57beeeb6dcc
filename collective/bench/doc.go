// Package bench measures the collective layer the way nccl-tests does:
// `meshtrain bench allreduce` runs N peers (separate processes by default,
// re-executing the current binary; goroutines in one process on request) on
// 127.0.0.1 over the libp2p transport and reports, per size, the time of one
// float32 sum all-reduce, its algbw (size/time) and busbw (algbw × 2(N−1)/N),
// and whether the result was exactly right. `meshtrain bench link` measures
// the ceiling a ring can reach: one stream's throughput in both directions at
// once, and its round-trip time, with the same security.
//
// A parent process starts the children with the same command line and an
// environment variable (ChildEnv) carrying the child's rank, the peer
// addresses and a fresh random cluster secret.
package bench
