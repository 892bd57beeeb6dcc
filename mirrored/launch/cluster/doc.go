// Package cluster reads the cluster spec of a multi-process run in
// TensorFlow's TF_CONFIG format ({"cluster": {"worker": [...], "chief":
// [...]}, "task": {"type": "worker", "index": 0}}), from a file or the
// TF_CONFIG environment variable, and validates it into a Cluster: the
// peers' addresses in rank order and this process's rank. FromSlurm
// builds the same Cluster from the environment srun gives a job step's
// tasks (slurm.go), so every later check applies to both.
//
// Invariants of a Cluster from Load or Parse: Peers is non-empty, its
// addresses are well-formed host:port or multiaddrs and pairwise distinct
// (as endpoints, however spelled: localhost is 127.0.0.1 and port 07101 is
// 7101; and as /p2p/ peer IDs), the chief is rank 0, and Rank indexes
// Peers, except for the evaluator (Rank -1), which is no peer. No JSON
// object repeats a key. Every error names where the spec came from and,
// for malformed JSON, the line and column.
package cluster
