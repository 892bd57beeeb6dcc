// Package launch is the running wing: it runs mirrored training as real
// peer processes. The launcher (Run), the worker (RunWorker), the
// evaluator (RunEvaluator) and the pod's health probes (ServeHealth) are
// here; the cluster a worker belongs to is found by its subpackage cluster
// (TF_CONFIG, Slurm's srun, a Kubernetes Indexed Job: cluster.Discover).
//
// RunWorker is one peer (the "meshtrain worker" command): it joins its
// cluster over the libp2p transport (collective/p2p), with identities
// derived from the cluster secret in MESHTRAIN_CLUSTER_SECRET, and runs
// its replica of the job under the chosen strategy (mirrored.Run).
//
// Run is "meshtrain launch -n N": it picks N free ports on 127.0.0.1,
// generates a random cluster secret (passed to the workers in their
// environment, never on the command line), writes each worker's TF_CONFIG
// into the run directory and starts N "meshtrain worker" children of the
// same binary. Their output is prefixed with their rank. Workers talk back
// through marked lines on stdout (EventPrefix + JSON: start, epoch,
// checkpoint, error), from which the launcher prints one status line per
// epoch, and through a report file in the run directory holding their
// mirrored.Summary, from which it builds a report.Report (package
// mirrored/report: the per-peer table, the --summary JSON, the verdict).
//
// Failure: under gossip (Config.Gossip) and the ring's elastic mode
// (Config.Elastic) a worker that fails is lost: it is reported and the
// others carry on without it (an elastic one is restarted, up to
// Config.MaxRestarts times, and rejoins). Otherwise, when a worker exits with
// an error the launcher sends SIGINT to the others (SIGKILL after StopGrace) and returns a *FailedError naming
// the worker that failed first; a worker killed by a signal nobody sent is
// blamed over the workers that failed because they lost it. Ctrl-C is
// forwarded the same way (the workers run in their own process group, and
// die with the launcher on Linux).
//
// Under elastic, the launcher's lines (status.go) count epochs, which a
// change of membership does not renumber, and tell each change once,
// naming in its own words a worker it saw die (a change waits up to
// HoldChange for the lost worker's exit). A worker's cluster may grow
// (Grow, discover.go): slots past the listed workers, whose identities
// come from the cluster secret, get addresses from --discover-cmd (or a
// Kubernetes Indexed Job's pattern), and a newcomer there joins.
package launch
