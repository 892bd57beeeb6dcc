package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterCommandsBadInput: bad flags of launch and worker fail at once,
// before any port, process or data is touched, naming the problem.
func TestClusterCommandsBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"launch", "--model", "vgg"}, `model "vgg"`},
		{[]string{"launch", "--batch", "0"}, "batch size 0"},
		{[]string{"launch", "--lr", "-1"}, "learning rate -1"},
		{[]string{"launch", "--checkpoint-every", "-2"}, "checkpoint every -2 steps"},
		{[]string{"launch", "--hash-every", "-1"}, "hash comparison every -1 steps"},
		{[]string{"launch", "--security", "ssl"}, `unknown security "ssl"`},
		{[]string{"launch", "--intra-host", "shm"}, `--intra-host: p2p: unknown --intra-host "shm": want auto`},
		{[]string{"bench", "allreduce", "--intra-host", "unix"}, `unknown --intra-host "unix"`},
		{[]string{"launch", "--collective-timeout", "0s"}, "--collective-timeout 0s"},
		{[]string{"launch", "--target-accuracy", "98"}, "give a fraction"},
		{[]string{"launch", "-n", "0", "--train-examples", "100"}, "-n 0: want at least 1 worker"},
		{[]string{"launch", "extra"}, "no arguments"},
		{[]string{"worker", "--tf-config", "/nonexistent/tf.json"}, "reading the cluster spec"},
		{[]string{"eval", "--checkpoint", "/nonexistent/ckpt.safetensors"}, "reading checkpoint"},
	} {
		args := append([]string{"meshtrain", "--log-level", "error"}, tc.args...)
		err := newApp().Run(args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to mention %q", tc.args, err, tc.want)
		}
	}
}

// TestWorkerClusterSource: worker takes its cluster from --tf-config, else
// TF_CONFIG, else Slurm's environment when SLURM_PROCID is set, and reads
// --slurm-base-port and --secret-file there (each case fails at a point
// that shows which source and setting it used).
func TestWorkerClusterSource(t *testing.T) {
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared-secret")
	if err := os.WriteFile(shared, []byte("00112233445566778899aabbccddeeff"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o640); err != nil {
		t.Fatal(err)
	}
	srun := []string{"SLURM_PROCID=0", "SLURM_STEP_ID=0", "SLURM_STEP_NUM_TASKS=3", "SLURM_STEP_NODELIST=localhost", "SLURM_STEP_TASKS_PER_NODE=3"}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"nothing", nil, nil, "no cluster spec: set TF_CONFIG"},
		{"nothing names srun", nil, nil, "or start the workers with srun inside a Slurm allocation"},
		{"slurm", []string{"SLURM_PROCID=0"}, nil, "Slurm environment: neither SLURM_STEP_NUM_TASKS nor SLURM_NTASKS is set"},
		{"TF_CONFIG before slurm", append([]string{"TF_CONFIG={"}, srun...), nil, "TF_CONFIG (environment): malformed JSON"},
		{"--tf-config before slurm", srun, []string{"--tf-config", "/nonexistent/tf.json"}, "reading the cluster spec"},
		{"empty TF_CONFIG is none", append([]string{"TF_CONFIG= "}, srun...), []string{"--slurm-base-port", "65534"}, "Slurm environment: base port 65534"},
		{"no secret", srun, nil, "MESHTRAIN_CLUSTER_SECRET is not set: every peer needs the same cluster secret (e.g. MESHTRAIN_CLUSTER_SECRET=$(openssl rand -hex 32) on every host, or in a private file given with --secret-file)"},
		{"secret file", srun, []string{"--secret-file", shared}, "cluster secret file " + shared + " has permissions 0640"},
		// Last: a flag's value read from the environment stays in the
		// command's flag (urfave/cli sets it), which every newApp shares.
		{"secret file from the environment", append([]string{"MESHTRAIN_CLUSTER_SECRET_FILE=" + shared}, srun...), nil, "has permissions 0640"},
		{"base port from the environment", append([]string{"MESHTRAIN_SLURM_BASE_PORT=65535"}, srun...), nil, "Slurm environment: base port 65535"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, kv := range os.Environ() {
				if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "SLURM") || strings.HasPrefix(k, "MESHTRAIN_") || k == "TF_CONFIG" {
					t.Setenv(k, "") // restored after the test
					os.Unsetenv(k)
				}
			}
			for _, kv := range tc.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			args := append([]string{"meshtrain", "--log-level", "error", "worker", "--model", "softmax"}, tc.args...)
			err := newApp().Run(args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestWorkerClusterSourceIndexedJob: --tf-config, then TF_CONFIG, then an Indexed
// Job's environment (flags or their variables); with none, the error says
// how to give each. (The cases run in one app's flags, which keep the
// values last set: the one without --num-workers comes first.)
func TestWorkerClusterSourceIndexedJob(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"nothing", nil, nil, "no cluster spec: set TF_CONFIG"},
		{"nothing names the Indexed Job", nil, nil, "or, in a Kubernetes Indexed Job, JOB_COMPLETION_INDEX with --peer-pattern and --num-workers"},
		{"Indexed Job, no count", map[string]string{"JOB_COMPLETION_INDEX": "0"}, []string{"--peer-pattern", "t-{index}.t:7000"},
			"no worker count: set MESHTRAIN_NUM_WORKERS (or --num-workers)"},
		{"TF_CONFIG before the Indexed Job", map[string]string{"TF_CONFIG": `{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}`, "JOB_COMPLETION_INDEX": "0"},
			nil, "TF_CONFIG (environment): task index 3 out of range"},
		{"--tf-config before TF_CONFIG", map[string]string{"TF_CONFIG": `{}`}, []string{"--tf-config", "/nonexistent/tf.json"}, "reading the cluster spec"},
		{"Indexed Job, flags", map[string]string{"JOB_COMPLETION_INDEX": "4"}, []string{"--peer-pattern", "t-{index}.t:7000", "--num-workers", "3"},
			"Indexed Job (JOB_COMPLETION_INDEX=4): index 4 out of range: MESHTRAIN_NUM_WORKERS=3"},
		{"Indexed Job, environment", map[string]string{"JOB_COMPLETION_INDEX": "0", "MESHTRAIN_PEER_PATTERN": "t.t:7000", "MESHTRAIN_NUM_WORKERS": "3"}, nil,
			`peer pattern "t.t:7000" has no {index}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"TF_CONFIG", "JOB_COMPLETION_INDEX", "MESHTRAIN_PEER_PATTERN", "MESHTRAIN_NUM_WORKERS"} {
				t.Setenv(k, tc.env[k])
				if _, ok := tc.env[k]; !ok {
					os.Unsetenv(k)
				}
			}
			err := newApp().Run(append([]string{"meshtrain", "--log-level", "error", "worker"}, tc.args...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestReportPerRank: --report's {rank} becomes the peer's rank, every
// occurrence; a path without it is left as it is (every peer of one
// machine then writes the same file, as before). The worker expands it
// before checking it: task 2 of an srun is refused naming peer-2.json.
func TestReportPerRank(t *testing.T) {
	for _, kv := range []string{"SLURM_PROCID=2", "SLURM_STEP_ID=0", "SLURM_STEP_NUM_TASKS=3", "SLURM_STEP_NODELIST=localhost", "SLURM_STEP_TASKS_PER_NODE=3", "SLURM_LOCALID=2"} {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("TF_CONFIG", "")
	t.Setenv("MESHTRAIN_SLURM_BASE_PORT", "7000") // the flag keeps an earlier test's value from its environment
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := newApp().RunContext(context.Background(), []string{"meshtrain", "--log-level", "error", "worker", "--report", filepath.Join(file, "peer-{rank}.json")})
	if want := filepath.Join(file, "peer-2.json") + " cannot be written"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("worker under srun as task 2: %v, want an error containing %q", err, want)
	}

	for _, tc := range []struct {
		path string
		rank int
		want string
	}{
		{"peer-{rank}.json", 3, "peer-3.json"},
		{"run-{rank}/peer-{rank}.json", 12, "run-12/peer-12.json"},
		{"peer.json", 1, "peer.json"},
		{"", 0, ""},
		{"peer-%t-{RANK}.json", 2, "peer-%t-{RANK}.json"}, // only {rank}, as spelled
	} {
		if got := perRank(tc.path, tc.rank); got != tc.want {
			t.Errorf("perRank(%q, %d) = %q, want %q", tc.path, tc.rank, got, tc.want)
		}
	}
}

// TestBenchSecretFile: bench across hosts takes the cluster secret from a
// file as worker does, and refuses one that others may read.
func TestBenchSecretFile(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tf.json")
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(cfg, []byte(`{"cluster": {"worker": ["127.0.0.1:7901", "127.0.0.1:7902"]}, "task": {"type": "worker", "index": 0}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte(strings.Repeat("ab", 32)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"link", "allreduce"} {
		err := newApp().Run([]string{"meshtrain", "--log-level", "error", "bench", cmd, "--tf-config", cfg, "--secret-file", secret})
		if err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("bench %s with a world-readable secret file: %v, want it refused", cmd, err)
		}
	}
}
