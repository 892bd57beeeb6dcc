package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// envOf is an environment holding the pairs kv (name, value, ...).
func envOf(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestDiscover is the order worker finds its cluster in: the spec file,
// TF_CONFIG, srun's environment, an Indexed Job's, else the error saying
// how to describe one.
func TestDiscover(t *testing.T) {
	spec := func(index string, peers ...string) string {
		return `{"cluster": {"worker": ["` + strings.Join(peers, `", "`) + `"]}, "task": {"type": "worker", "index": ` + index + `}}`
	}
	file := filepath.Join(t.TempDir(), "tf_config.json")
	if err := os.WriteFile(file, []byte(spec("2", "f0:1", "f1:1", "f2:1")), 0o600); err != nil {
		t.Fatal(err)
	}
	// Every source at once: srun's step of two tasks on vm (rank 1), an
	// Indexed Job's pod 0 of 3, a TF_CONFIG of rank 1 of 2.
	indexed := []string{JobIndexEnv, "0", PeerPatternEnv, "pod-{index}:7000", NumWorkersEnv, "3"}
	slurm := func(extra ...string) func(string) (string, bool) {
		return srunEnv("1", "1", "0", "vm", "vm", "2", "2", append(slices.Clone(indexed), extra...)...)
	}
	tests := []struct {
		name  string
		opts  DiscoverOptions
		peers []string
		rank  int
		err   []string // what the error says, if one is wanted
	}{
		{name: "the file wins over TF_CONFIG, Slurm and the Indexed Job",
			opts:  DiscoverOptions{File: file, Lookup: slurm(Env, spec("1", "e0:1", "e1:1"))},
			peers: []string{"f0:1", "f1:1", "f2:1"}, rank: 2},
		{name: "TF_CONFIG wins over Slurm and the Indexed Job",
			opts:  DiscoverOptions{Lookup: slurm(Env, spec("1", "e0:1", "e1:1"))},
			peers: []string{"e0:1", "e1:1"}, rank: 1},
		{name: "a blank TF_CONFIG is unset: Slurm",
			opts:  DiscoverOptions{SlurmBasePort: 7000, Lookup: slurm(Env, " \n")},
			peers: []string{"vm:7000", "vm:7001"}, rank: 1},
		{name: "Slurm wins over the Indexed Job, at the base port given",
			opts:  DiscoverOptions{SlurmBasePort: 9000, Lookup: slurm()},
			peers: []string{"vm:9000", "vm:9001"}, rank: 1},
		{name: "the Indexed Job from its environment",
			opts:  DiscoverOptions{Lookup: envOf(indexed...)},
			peers: []string{"pod-0:7000", "pod-1:7000", "pod-2:7000"}, rank: 0},
		{name: "the Indexed Job's pattern and count from the options, over the environment",
			opts:  DiscoverOptions{PeerPattern: "w-{index}:1", NumWorkers: 2, Lookup: envOf(indexed...)},
			peers: []string{"w-0:1", "w-1:1"}, rank: 0},
		{name: "a broken TF_CONFIG is its error, not Slurm's cluster",
			opts: DiscoverOptions{Lookup: slurm(Env, "{")},
			err:  []string{"TF_CONFIG (environment)"}},
		{name: "a broken Slurm environment is its error, not the Indexed Job's cluster",
			opts: DiscoverOptions{SlurmBasePort: 7000, Lookup: slurm("SLURM_PROCID", "5")},
			err:  []string{"Slurm environment", "SLURM_PROCID=5 out of range"}},
		{name: "the Indexed Job without a pattern",
			opts: DiscoverOptions{Lookup: envOf(JobIndexEnv, "0", NumWorkersEnv, "2")},
			err:  []string{"Indexed Job (JOB_COMPLETION_INDEX=0)", "no peer pattern"}},
		{name: "nothing: how to write TF_CONFIG, or use srun or an Indexed Job",
			opts: DiscoverOptions{Lookup: envOf(PeerPatternEnv, "pod-{index}:7000")},
			err: []string{`no cluster spec: set TF_CONFIG to a JSON like {"cluster"`, "or pass --tf-config FILE",
				"or start the workers with srun", "in a Kubernetes Indexed Job, JOB_COMPLETION_INDEX with --peer-pattern and --num-workers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Discover(tt.opts)
			if tt.err != nil {
				if err == nil {
					t.Fatalf("got %+v, want an error saying %q", c, tt.err)
				}
				for _, want := range tt.err {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Peers, tt.peers) || c.Rank != tt.rank {
				t.Errorf("got peers %q rank %d, want %q rank %d", c.Peers, c.Rank, tt.peers, tt.rank)
			}
		})
	}
}
