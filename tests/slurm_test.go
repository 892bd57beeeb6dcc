package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// freeBase returns a port p such that p..p+n-1 are free on all
// interfaces, for --slurm-base-port.
func freeBase(t *testing.T, n int) int {
	t.Helper()
	for range 100 {
		base := 20000 + rand.IntN(40000)
		var ls []net.Listener
		for i := range n {
			l, err := net.Listen("tcp", fmt.Sprintf(":%d", base+i))
			if err != nil {
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			_ = l.Close()
		}
		if len(ls) == n {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// srunTaskEnv is the environment srun (Slurm 22.05) gives task r of an
// n-task step on one node named localhost, with the worker's base port.
func srunTaskEnv(r, n, base int) []string {
	return []string{
		"TF_CONFIG=", "SLURM_STEP_ID=0", "SLURM_JOB_ID=1", "SLURMD_NODENAME=localhost", "SLURM_NODEID=0",
		"SLURM_PROCID=" + strconv.Itoa(r), "SLURM_LOCALID=" + strconv.Itoa(r),
		"SLURM_NTASKS=" + strconv.Itoa(n), "SLURM_STEP_NUM_TASKS=" + strconv.Itoa(n),
		"SLURM_JOB_NODELIST=localhost", "SLURM_STEP_NODELIST=localhost",
		"SLURM_TASKS_PER_NODE=" + strconv.Itoa(n), "SLURM_STEP_TASKS_PER_NODE=" + strconv.Itoa(n),
		"MESHTRAIN_SLURM_BASE_PORT=" + strconv.Itoa(base),
	}
}

// TestSlurmEnvironmentWorkers starts three workers with the environment
// srun gives a step's tasks (no Slurm needed): with the same flags they
// train to identical parameters; with another --batch on rank 1, every
// task exits naming it, as with TF_CONFIG.
func TestSlurmEnvironmentWorkers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, otherBatch := range []string{"32", "64"} {
		t.Run("rank 1 with --batch "+otherBatch, func(t *testing.T) {
			base, dir := freeBase(t, 3), t.TempDir()
			results := make([]result, 3)
			var wg sync.WaitGroup
			for r := range results {
				wg.Go(func() {
					batch := map[bool]string{true: otherBatch, false: "32"}[r == 1]
					results[r] = meshtrain(ctx, append(srunTaskEnv(r, 3, base), e2eSecret),
						quickWorker("--batch", batch, "--summary", filepath.Join(dir, "summary.json"))...)
				})
			}
			wg.Wait()
			for r, res := range results {
				switch {
				case otherBatch == "32" && res.err != nil:
					t.Errorf("rank %d: %s", r, res)
				case otherBatch == "64" && (res.err == nil || !strings.Contains(res.stderr, "the peers were started with different settings: batch_size is 32 on ranks 0, 2 but 64 on rank 1")):
					t.Errorf("rank %d does not name the setting and the ranks:\n%s", r, res)
				}
			}
			if otherBatch == "32" && !t.Failed() {
				s := readSummary(t, filepath.Join(dir, "summary.json"))
				checkPeers(t, s, 3, 0.5)
				for i, a := range s.Cluster {
					if want := fmt.Sprintf("localhost:%d", base+i); a != want {
						t.Errorf("rank %d's address %q, want %q", i, a, want)
					}
				}
			}
		})
	}
}

// TestSlurm runs the README's sbatch script, then a step whose tasks
// differ in one flag, on a real Slurm: munged, slurmctld and slurmd started
// here with a generated configuration (one node with 2 CPUs, tasks
// overcommitted), all stopped however the test ends. It needs the Debian
// packages slurm-wlm and munge, and root (slurmd runs the tasks as their
// user); without them it is skipped.
func TestSlurm(t *testing.T) {
	s := startSlurm(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Run("the README's sbatch script", func(t *testing.T) {
		script := filepath.Join(s.dir, "train.sbatch")
		if err := os.WriteFile(script, []byte(readmeSbatch(t)), 0o700); err != nil {
			t.Fatal(err)
		}
		base := freeBase(t, 3)
		// Three tasks on the one node, overcommitted; flags after the
		// script's name go to every worker.
		res := s.run(ctx, []string{"MESHTRAIN_SLURM_BASE_PORT=" + strconv.Itoa(base)}, "sbatch", "--wait", "--overcommit",
			"--nodes=1", "--ntasks=3", "--cpus-per-task=1", "--chdir="+s.dir, script,
			"--model", "lenet", "--epochs", "2", "--train-examples", "6000", "--test-examples", "1000")
		m := regexp.MustCompile(`Submitted batch job (\d+)`).FindStringSubmatch(res.stdout)
		if m == nil {
			t.Fatalf("sbatch: %s", res)
		}
		out, _ := os.ReadFile(filepath.Join(s.dir, "meshtrain-"+m[1]+".out"))
		if res.err != nil {
			t.Fatalf("sbatch: %s\n--- job output\n%s", res, out)
		}
		t.Logf("job %s's output:\n%s", m[1], out)
		for _, want := range []string{"  rank  steps  examples/s  test acc", "bytes sent per link", "parameters identical on every peer"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("the job's output has no %q", want)
			}
		}
		sum := readSummary(t, filepath.Join(s.dir, "meshtrain-"+m[1]+".json"))
		checkPeers(t, sum, 3, 0.5)
		hashes := regexp.MustCompile(`(?m)^rank (\d) done: .* params sha256 ([0-9a-f]{64})$`).FindAllStringSubmatch(string(out), -1)
		if len(hashes) != 3 {
			t.Fatalf("%d 'rank N done' lines, want 3", len(hashes))
		}
		for _, h := range hashes {
			if h[2] != sum.Run.ParamsSHA256 {
				t.Errorf("rank %s's parameters %s, the run's %s", h[1], h[2], sum.Run.ParamsSHA256)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(s.home, ".meshtrain", "secret-*")); len(left) != 0 {
			t.Errorf("the job left its secret behind: %q", left)
		}
	})
	t.Run("a task with another flag", func(t *testing.T) {
		secret := filepath.Join(s.dir, "secret")
		if err := os.WriteFile(secret, []byte(strings.TrimPrefix(e2eSecret, "MESHTRAIN_CLUSTER_SECRET=")), 0o600); err != nil {
			t.Fatal(err)
		}
		worker := binary + " " + strings.Join(quickWorker("--secret-file", secret, "--slurm-base-port", strconv.Itoa(freeBase(t, 3))), " ")
		conf := filepath.Join(s.dir, "multi.conf")
		if err := os.WriteFile(conf, []byte("0,2 "+worker+" --batch 32\n1 "+worker+" --batch 64\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		res := s.run(ctx, nil, "srun", "--overcommit", "-n", "3", "--multi-prog", conf)
		want := "the peers were started with different settings: batch_size is 32 on ranks 0, 2 but 64 on rank 1"
		if res.err == nil || strings.Count(res.stderr, want) != 3 {
			t.Errorf("want every task to exit saying %q:\n%s", want, res)
		}
	})
}

// readmeSbatch returns the README's sbatch script.
func readmeSbatch(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "```sh\n#!/bin/bash\n#SBATCH")
	script, _, closed := strings.Cut(after, "```")
	if !ok || !closed {
		t.Fatal("README.md has no sbatch script (a ```sh block starting #!/bin/bash and #SBATCH)")
	}
	return "#!/bin/bash\n#SBATCH" + script
}
