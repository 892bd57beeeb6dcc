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

	"github.com/meshtrain/meshtrain/mirrored/launch/cluster"
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

// jobTaskEnv is srunTaskEnv for Slurm job id, with no base port given:
// the worker derives its ports from the job's ID.
func jobTaskEnv(r, n, id int) []string {
	var env []string
	for _, kv := range srunTaskEnv(r, n, 0) {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "MESHTRAIN_SLURM_BASE_PORT":
		case "SLURM_JOB_ID":
			env = append(env, fmt.Sprintf("SLURM_JOB_ID=%d", id))
		default:
			env = append(env, kv)
		}
	}
	return env
}

// freeJobID returns a Slurm job ID whose ports (cluster.SlurmJobBase) are
// free, n of them, and not among avoid's.
func freeJobID(t *testing.T, n int, avoid ...int) int {
	t.Helper()
	for range 200 {
		id := rand.IntN(1 << 20)
		base, ok := cluster.SlurmJobBase(id), true
		for _, a := range avoid {
			ok = ok && cluster.SlurmJobBase(a) != base
		}
		var ls []net.Listener
		for i := range n {
			l, err := net.Listen("tcp", fmt.Sprintf(":%d", base+i))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			_ = l.Close()
		}
		if ok {
			return id
		}
	}
	t.Fatalf("no job ID with %d free ports", n)
	return 0
}

// TestSlurmJobsShareANode: two Slurm jobs on one node, started with no
// base port, each take the ports their job ID gives them and train side
// by side; a port that is taken makes the task fail at once naming the
// port, the job and the flag to change (not a task started twice).
func TestSlurmJobsShareANode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := freeJobID(t, 2)
	b := freeJobID(t, 2, a)
	dir := t.TempDir()
	results := map[int][]result{a: make([]result, 2), b: make([]result, 2)}
	var wg sync.WaitGroup
	for id, res := range results {
		for r := range res {
			wg.Go(func() {
				res[r] = meshtrain(ctx, append(jobTaskEnv(r, 2, id), e2eSecret),
					quickWorker("--summary", filepath.Join(dir, fmt.Sprintf("job%d.json", id)))...)
			})
		}
	}
	wg.Wait()
	for id, res := range results {
		for r, x := range res {
			if x.err != nil {
				t.Fatalf("job %d rank %d: %s", id, r, x)
			}
		}
		s := readSummary(t, filepath.Join(dir, fmt.Sprintf("job%d.json", id)))
		for i, addr := range s.Cluster {
			if want := fmt.Sprintf("localhost:%d", cluster.SlurmJobBase(id)+i); addr != want {
				t.Errorf("job %d rank %d's address %q, want %q (from the job's ID)", id, i, addr, want)
			}
		}
	}

	id := freeJobID(t, 1, a, b)
	port := cluster.SlurmJobBase(id)
	l, err := net.Listen("tcp", fmt.Sprintf(":%d", port)) // another job's task, say
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	x := meshtrain(ctx, append(jobTaskEnv(0, 1, id), e2eSecret), quickWorker()...)
	want := fmt.Sprintf("the address is in use: port %d (task 0 of node localhost in Slurm job %d, from the job's ID", port, id)
	if exitCode(x.err) != 1 || !strings.Contains(x.stderr, want) || !strings.Contains(x.stderr, "--slurm-base-port") ||
		strings.Contains(x.stderr, "started twice") || x.elapsed > 30*time.Second {
		t.Errorf("want a quick exit 1 saying %q and naming --slurm-base-port, not a task started twice; got (after %v)\n%s", want, x.elapsed.Round(time.Second), x)
	}
}

// TestSlurmQuietRanks: srun gathers every task's output into one file,
// so under srun the ranks other than 0 log only warnings and errors unless
// --log-level (or MESHTRAIN_LOG_LEVEL) asks otherwise, rank 0 prints the
// cluster's table with no flag, and each task's result line gives its
// bytes in units.
func TestSlurmQuietRanks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, level := range []string{"", "info"} {
		t.Run("log level "+level, func(t *testing.T) {
			id := freeJobID(t, 2)
			res := make([]result, 2)
			var wg sync.WaitGroup
			for r := range res {
				wg.Go(func() {
					args := quickWorker()
					if level != "" {
						args = append(args, "--log-level", level)
					}
					res[r] = meshtrain(ctx, append(jobTaskEnv(r, 2, id), e2eSecret), args...)
				})
			}
			wg.Wait()
			for r, x := range res {
				if x.err != nil {
					t.Fatalf("rank %d: %s", r, x)
				}
				if !regexp.MustCompile(fmt.Sprintf(`rank %d done: .* sent [0-9.]+ [KMG]iB, received [0-9.]+ [KMG]iB,`, r)).MatchString(x.stdout) {
					t.Errorf("rank %d's result line does not give its bytes in units:\n%s", r, x)
				}
			}
			infos := strings.Count(res[1].stderr, "\tINFO\t")
			if level == "" && infos > 0 || level == "info" && infos == 0 {
				t.Errorf("rank 1 logged %d info lines with --log-level %q:\n%s", infos, level, res[1])
			}
			if !strings.Contains(res[0].stdout, "rank  steps") || !strings.Contains(res[0].stdout, "parameters identical on every peer") {
				t.Errorf("rank 0 printed no cluster table:\n%s", res[0])
			}
			if strings.Contains(res[1].stdout, "rank  steps") {
				t.Errorf("rank 1 printed a table:\n%s", res[1])
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
