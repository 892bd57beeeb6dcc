package cluster

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// DiscoverOptions are what Discover needs besides the environment: the
// settings `meshtrain worker` takes as flags.
type DiscoverOptions struct {
	// File is the cluster spec file (--tf-config); "" reads TF_CONFIG.
	File string
	// SlurmBasePort is the port of each node's first task under srun
	// (--slurm-base-port); 0 chooses (FromSlurm): the step's reserved
	// ports, else a base derived from the job's ID.
	SlurmBasePort int
	// PeerPattern and NumWorkers are a Kubernetes Indexed Job's peers
	// (--peer-pattern, --num-workers); when "" and 0, the environment's
	// PeerPatternEnv and NumWorkersEnv.
	PeerPattern string
	NumWorkers  int
	// MaxWorkers (--max-workers), if set, is MaxWorkersEnv for an Indexed
	// Job: the pods past NumWorkers join a growing elastic run.
	MaxWorkers int
	// Lookup reads the environment: os.LookupEnv when nil (tests pass a
	// map's).
	Lookup func(string) (string, bool)
}

// Discover finds this process's cluster. The first source present wins:
//
//  1. the spec File, else the TF_CONFIG environment variable (as
//     Kubeflow's TFJob sets it; empty counts as unset): Load;
//  2. Slurm's environment when SLURM_PROCID is set (a task of srun):
//     FromSlurm;
//  3. a Kubernetes Indexed Job's, when JOB_COMPLETION_INDEX is set:
//     FromIndexedJob, with the options' peer pattern and worker count.
//
// With none of them, the error says how to write TF_CONFIG and names the
// other two. A source that is present but wrong is that source's error:
// no later source is tried.
func Discover(opts DiscoverOptions) (*Cluster, error) {
	lookup := opts.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if spec, _ := lookup(Env); opts.File != "" || strings.TrimSpace(spec) != "" {
		return load(opts.File, lookup)
	}
	if _, ok := lookup(SlurmProcIDEnv); ok {
		return FromSlurm(lookup, opts.SlurmBasePort)
	}
	c, ok, err := FromIndexedJob(func(key string) (string, bool) {
		switch {
		case key == PeerPatternEnv && opts.PeerPattern != "":
			return opts.PeerPattern, true
		case key == NumWorkersEnv && opts.NumWorkers != 0:
			return strconv.Itoa(opts.NumWorkers), true
		case key == MaxWorkersEnv && opts.MaxWorkers != 0:
			return strconv.Itoa(opts.MaxWorkers), true
		}
		return lookup(key)
	})
	if ok {
		return c, err
	}
	_, err = load("", lookup) // fails, saying how to write TF_CONFIG
	return nil, fmt.Errorf("%w; or start the workers with srun inside a Slurm allocation; or, in a Kubernetes Indexed Job, %s with --peer-pattern and --num-workers", err, JobIndexEnv)
}
