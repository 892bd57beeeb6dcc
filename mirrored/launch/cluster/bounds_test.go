package cluster

import (
	"strconv"
	"strings"
	"testing"
)

// TestWorkerCountsBounded: a worker count from the environment
// (MESHTRAIN_NUM_WORKERS, srun's task count and tasks per node) larger
// than MaxPeers is refused with the variable's name before anything is
// allocated for it (issue 24 item 8: a billion workers, or Slurm's
// '65535(x65536)', crashed the runtime out of memory); MaxPeers itself is
// accepted.
func TestWorkerCountsBounded(t *testing.T) {
	huge := strconv.Itoa(65535 * 65536)
	for _, tc := range []struct {
		name string
		do   func() error
		want string
	}{
		{"Indexed Job, a billion workers", func() error {
			_, _, err := FromIndexedJob(envOf(JobIndexEnv, "0", PeerPatternEnv, "t-{index}:7000", NumWorkersEnv, "1000000000"))
			return err
		}, `MESHTRAIN_NUM_WORKERS="1000000000": want a number from 1 to 65536`},
		{"Slurm, 65535 tasks on each of 65536 nodes", func() error {
			_, err := FromSlurm(srunEnv("0", "0", "0", "n00000", "n[00000-65535]", "65535(x65536)", huge), 1)
			return err
		}, "SLURM_STEP_NUM_TASKS=" + huge + ": more than the 65536 peers meshtrain runs"},
		{"Slurm, tasks per node adding up past the bound", func() error {
			_, err := ExpandTasksPerNode("65535(x65536)")
			return err
		}, "more than 65536 tasks"},
		{"TF_CONFIG", func() error {
			peers := make([]string, MaxPeers+1)
			for i := range peers {
				peers[i] = `"h` + strconv.Itoa(i) + `:1"`
			}
			_, err := Parse([]byte(`{"cluster": {"worker": [`+strings.Join(peers, ",")+`]}, "task": {"type": "worker", "index": 0}}`), "src")
			return err
		}, "src: cluster lists 65537 peers: more than the 65536 meshtrain runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
	c, _, err := FromIndexedJob(envOf(JobIndexEnv, "65535", PeerPatternEnv, "t-{index}:7000", NumWorkersEnv, strconv.Itoa(MaxPeers)))
	if err != nil || len(c.Peers) != MaxPeers {
		t.Fatalf("MaxPeers workers: %v", err)
	}
}
