// Package tfconfig reads the cluster spec of a multi-process run in
// TensorFlow's TF_CONFIG format ({"cluster": {"worker": [...], "chief":
// [...]}, "task": {"type": "worker", "index": 0}}), from a file or the
// TF_CONFIG environment variable, and validates it into a Cluster: the
// peers' addresses in rank order and this process's rank.
//
// Invariants of a Cluster from Load or Parse: Peers is non-empty, its
// addresses are well-formed host:port or multiaddrs and pairwise distinct
// (as endpoints and as /p2p/ peer IDs), the chief is rank 0, and Rank
// indexes Peers. Every error names where the spec came from and, for
// malformed JSON, the line and column.
package tfconfig
