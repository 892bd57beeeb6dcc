// Package cluster is the running wing's resolver: it finds the cluster a
// worker belongs to (every peer's address in rank order and this process's
// rank) wherever it was started, and validates it into a Cluster.
//
// Discover is the order `meshtrain worker` looks in: the --tf-config file,
// else the TF_CONFIG environment variable (Load, Parse: TensorFlow's format,
// {"cluster": {"worker": [...], "chief": [...]}, "task": {"type":
// "worker", "index": 0}}, as Kubeflow's TFJob writes it, KubeflowTFConfig),
// else the environment srun gives a Slurm job step's tasks (FromSlurm,
// slurm.go), else a Kubernetes Indexed Job's pod (FromIndexedJob,
// indexedjob.go), else an error saying how to write TF_CONFIG. Every source
// builds the same Cluster, so every later check applies to all.
//
// Invariants of a Cluster from Load or Parse: Peers is non-empty, its
// addresses are well-formed host:port or multiaddrs and pairwise distinct
// (as endpoints, however spelled: localhost is 127.0.0.1 and port 07101 is
// 7101; and as /p2p/ peer IDs), the chief is rank 0, and Rank indexes
// Peers, except for the evaluator (Rank -1), which is no peer. No JSON
// object repeats a key. Every error names where the spec came from and,
// for malformed JSON, the line and column.
package cluster
