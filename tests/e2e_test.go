// Package tests holds meshtrain's end-to-end tests: the real binary, real
// worker processes talking libp2p over 127.0.0.1, real MNIST.
package tests

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/report"
)

// binary is the meshtrain binary built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "meshtrain-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "meshtrain")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", binary, "github.com/meshtrain/meshtrain/cmd/meshtrain")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building meshtrain:", err)
		return 1
	}
	// Find (or fetch, once) MNIST before several workers look for it.
	if _, err := data.LoadMNIST(ctx, data.MNISTOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "MNIST is needed by the end-to-end tests:", err)
		return 1
	}
	return m.Run()
}

// result is a finished process.
type result struct {
	stdout, stderr string
	err            error
	elapsed        time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit: %v\n--- stdout\n%s--- stderr\n%s", r.err, r.stdout, r.stderr)
}

// meshtrain runs the binary with args under ctx.
func meshtrain(ctx context.Context, env []string, args ...string) result {
	return runBinary(ctx, binary, env, args...)
}

// runBinary runs bin with args under ctx.
func runBinary(ctx context.Context, bin string, env []string, args ...string) result {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	return result{out.String(), errb.String(), err, time.Since(start)}
}

// launchPidRE matches launch's line announcing a worker's pid.
var launchPidRE = regexp.MustCompile(`^\[launch\] rank (\d+): pid (\d+),`)

// launchWatched runs the binary with args under ctx and hands react each
// stdout line as it arrives, with the launcher's process and the worker
// pids printed so far (by rank), so a test can act mid-run. It returns
// once the process has exited, with the pids it saw.
func launchWatched(t *testing.T, ctx context.Context, args []string, react func(line string, launcher *os.Process, pids map[int]int)) (result, map[int]int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pids := map[int]int{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if m := launchPidRE.FindStringSubmatch(line); m != nil {
			rank, _ := strconv.Atoi(m[1])
			pids[rank], _ = strconv.Atoi(m[2])
		}
		react(line, cmd.Process, pids)
	}
	_, _ = io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	return result{out.String(), stderr.String(), err, time.Since(start)}, pids
}

func readSummary(t *testing.T, path string) report.SummaryJSON {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s report.SummaryJSON
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("summary %s: %v", path, err)
	}
	return s
}

// checkPeers checks a finished run's summary: n peers, bitwise-identical
// parameters, the accuracy threshold, and plausible per-peer figures.
func checkPeers(t *testing.T, s report.SummaryJSON, n int, minAcc float64) {
	t.Helper()
	if s.Workers != n || len(s.Peers) != n || s.Run == nil {
		t.Fatalf("summary of %d workers, %d peers, run %v", s.Workers, len(s.Peers), s.Run)
	}
	if !s.ParamsIdentical {
		t.Errorf("params_identical is false")
	}
	if _, err := time.Parse(time.RFC3339, s.Started); err != nil || s.Format != report.SummaryFormat || s.Version == "" || s.Strategy != "ring" ||
		s.Security == "" || s.AllReduceAlgo == "" || s.LinkFaults != "none" || len(s.Cluster) != n {
		t.Errorf("summary header: format %q, version %q, started %q (%v), strategy %q, security %q, algo %q, link faults %q, cluster %q",
			s.Format, s.Version, s.Started, err, s.Strategy, s.Security, s.AllReduceAlgo, s.LinkFaults, s.Cluster)
	}
	checkLinks(t, s)
	var sent, received int64
	for _, p := range s.Peers {
		if p.ParamsSHA256 != s.Run.ParamsSHA256 || len(p.ParamsSHA256) != 64 {
			t.Errorf("rank %d params %q, run %q", p.Rank, p.ParamsSHA256, s.Run.ParamsSHA256)
		}
		if p.TestAccuracy < minAcc {
			t.Errorf("rank %d test accuracy %.4f, want ≥ %.2f", p.Rank, p.TestAccuracy, minAcc)
		}
		if len(p.PerEpochAccuracy) != len(s.Run.EpochResults) || p.Steps+p.ResumedStep != s.Run.Steps || p.Steps == 0 {
			t.Errorf("rank %d: %d steps after resuming at %d, per-epoch accuracy %v", p.Rank, p.Steps, p.ResumedStep, p.PerEpochAccuracy)
		}
		// Every step all-reduces the whole gradient: whatever the
		// algorithm, at least (N-1)/N of it leaves and reaches each peer.
		minBytes := int64(float64(p.Steps) * 4 * float64(s.Run.Params) * float64(n-1) / float64(n))
		if p.BytesSent < minBytes || p.BytesReceived < minBytes {
			t.Errorf("rank %d sent %d and received %d bytes, want ≥ %d", p.Rank, p.BytesSent, p.BytesReceived, minBytes)
		}
		sent += p.BytesSent
		received += p.BytesReceived
		if p.CPUSeconds <= 0 || p.PeakRSSBytes <= 0 || p.ComputeShare <= 0 || p.CommShare <= 0 {
			t.Errorf("rank %d: CPU %v s, RSS %v, shares %v/%v/%v", p.Rank, p.CPUSeconds, p.PeakRSSBytes, p.ComputeShare, p.CommShare, p.WaitShare)
		}
	}
	if sent != received {
		t.Errorf("the peers sent %d bytes in all but received %d", sent, received)
	}
}

// checkLinks checks the bytes per link: every peer counted each of its
// links, they add up to its totals, and what one end sent the other
// received.
func checkLinks(t *testing.T, s report.SummaryJSON) {
	t.Helper()
	n := len(s.Peers)
	got := make([][]int64, n) // got[from][to]: bytes to received from from
	for i := range got {
		got[i] = make([]int64, n)
	}
	for _, p := range s.Peers {
		var sent, received int64
		for _, l := range p.Links {
			sent, received = sent+l.Sent, received+l.Received
			got[l.Peer][p.Rank] = l.Received
		}
		if len(p.Links) != n-1 || sent != p.BytesSent || received != p.BytesReceived {
			t.Errorf("rank %d's links %+v: want %d of them adding up to %d sent, %d received", p.Rank, p.Links, n-1, p.BytesSent, p.BytesReceived)
		}
	}
	for _, p := range s.Peers {
		for _, l := range p.Links {
			if l.Sent != got[p.Rank][l.Peer] || l.Sent == 0 {
				t.Errorf("link %d→%d: %d bytes sent, %d received", p.Rank, l.Peer, l.Sent, got[p.Rank][l.Peer])
			}
		}
	}
}

func TestLaunchLeNetThreePeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sum := filepath.Join(t.TempDir(), "summary.json")
	r := meshtrain(ctx, nil, "launch", "-n", "3", "--model", "lenet", "--epochs", "1", "--batch", "32",
		"--train-examples", "12000", "--test-examples", "2000", "--hash-every", "25", "--summary", sum)
	if r.err != nil {
		t.Fatal(r)
	}
	for _, want := range []string{"[launch] lenet: 61706 parameters, 3 replica(s) × batch 32 (global batch 96)", "[launch] epoch 1  step 125/125",
		"parameters identical on every peer", "rank  steps  examples/s  test acc"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q\n%s", want, r)
		}
	}
	checkPeers(t, readSummary(t, sum), 3, 0.90)
}

func TestLaunchSoftmaxThreePeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sum := filepath.Join(t.TempDir(), "summary.json")
	logdir := t.TempDir()
	r := meshtrain(ctx, nil, "launch", "-n", "3", "--model", "softmax", "--epochs", "2", "--batch", "32", "--lr", "0.01", "--scale-lr",
		"--train-examples", "12000", "--test-examples", "2000", "--summary", sum, "--logdir", logdir)
	if r.err != nil {
		t.Fatal(r)
	}
	s := readSummary(t, sum)
	checkPeers(t, s, 3, 0.85)
	if s.Run.LR != 0.03 {
		t.Errorf("--scale-lr with 3 workers: lr %v, want 0.03", s.Run.LR)
	}
	// One TensorBoard directory per worker, none overwriting another.
	for r := range 3 {
		files, _ := filepath.Glob(filepath.Join(logdir, fmt.Sprintf("worker-%d", r), "*", "events.out.tfevents.*"))
		if len(files) != 2 { // train and validation
			t.Errorf("worker %d event files: %q", r, files)
		}
	}
}

// TestKillAndResume kills a worker mid-run: launch must exit non-zero
// within the collective timeout naming it; a relaunch resumes from the
// last checkpoint and ends bit for bit where an uninterrupted run ends.
func TestKillAndResume(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const timeout = 15 * time.Second
	args := []string{"launch", "-n", "3", "--model", "softmax", "--epochs", "2", "--batch", "16", "--lr", "0.02",
		"--train-examples", "30000", "--test-examples", "1000", "--checkpoint-every", "50",
		"--collective-timeout", timeout.String()}
	ckdir := t.TempDir()

	var killedAt time.Time
	run, _ := launchWatched(t, ctx, append(args, "--checkpoint-dir", ckdir), func(line string, _ *os.Process, pids map[int]int) {
		if !strings.HasPrefix(line, "[launch] checkpoint at step") || !killedAt.IsZero() {
			return
		}
		victim, ok := pids[1]
		if !ok {
			t.Fatalf("%q before rank 1's pid was printed", line)
		}
		if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killedAt = time.Now()
	})
	took := time.Since(killedAt)
	if killedAt.IsZero() {
		t.Fatalf("no checkpoint line to kill after:\n%s", run)
	}
	if run.err == nil {
		t.Fatalf("launch succeeded although rank 1 was killed:\n%s", run.stdout)
	}
	t.Logf("launch exited %v after rank 1 was killed", took.Round(time.Millisecond))
	if took > timeout {
		t.Errorf("launch took %v after the kill, more than the collective timeout %v", took, timeout)
	}
	if !strings.Contains(run.stderr, "launch: rank 1 failed: ") || !strings.Contains(run.stderr, "signal: killed") {
		t.Errorf("launch's error does not name rank 1 as killed:\n%s", run.stderr)
	}

	sum := filepath.Join(t.TempDir(), "resumed.json")
	r := meshtrain(ctx, nil, append(args, "--checkpoint-dir", ckdir, "--summary", sum)...)
	if r.err != nil {
		t.Fatalf("relaunch: %s", r)
	}
	if !strings.Contains(r.stdout, "[launch] resumed from "+ckdir) {
		t.Errorf("relaunch did not say it resumed:\n%s", r.stdout)
	}
	resumed := readSummary(t, sum)
	t.Logf("relaunch resumed at step %d of %d", resumed.Peers[0].ResumedStep, resumed.Run.Steps)
	checkPeers(t, resumed, 3, 0.80)
	if resumed.Peers[0].ResumedStep == 0 || resumed.Peers[0].Steps >= resumed.Run.Steps {
		t.Errorf("resumed at step %d, ran %d of %d steps", resumed.Peers[0].ResumedStep, resumed.Peers[0].Steps, resumed.Run.Steps)
	}

	whole := filepath.Join(t.TempDir(), "whole.json")
	r = meshtrain(ctx, nil, append(args, "--checkpoint-dir", t.TempDir(), "--summary", whole)...)
	if r.err != nil {
		t.Fatalf("uninterrupted run: %s", r)
	}
	if w := readSummary(t, whole); w.Run.ParamsSHA256 != resumed.Run.ParamsSHA256 || w.Run.FinalAccuracy != resumed.Run.FinalAccuracy {
		t.Errorf("resumed run ended at %s (accuracy %v), uninterrupted at %s (accuracy %v)",
			resumed.Run.ParamsSHA256, resumed.Run.FinalAccuracy, w.Run.ParamsSHA256, w.Run.FinalAccuracy)
	}

	// The final checkpoint evaluates to the accuracy the run reported.
	files, _ := filepath.Glob(filepath.Join(ckdir, "ckpt-*.safetensors"))
	if len(files) == 0 || len(files) > 3 {
		t.Fatalf("checkpoints kept: %q (want the last 3)", files)
	}
	r = meshtrain(ctx, nil, "eval", "--checkpoint", files[len(files)-1], "--test-examples", "1000", "--json")
	if r.err != nil {
		t.Fatal(r)
	}
	var ev struct {
		Accuracy float64 `json:"test_accuracy"`
		Step     int     `json:"step"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ev); err != nil || ev.Accuracy != resumed.Run.FinalAccuracy || ev.Step != resumed.Run.Steps {
		t.Errorf("eval of the last checkpoint: %+v (%v), run reported accuracy %v at step %d", ev, err, resumed.Run.FinalAccuracy, resumed.Run.Steps)
	}
}

// freePorts returns n free 127.0.0.1 addresses.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	addrs, err := p2p.LocalAddrs(n, false)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

func tfConfig(peers []string, rank int) string {
	b, _ := json.Marshal(map[string]any{
		"cluster": map[string][]string{"worker": peers},
		"task":    map[string]any{"type": "worker", "index": rank},
	})
	return string(b)
}

// TestWorkersWithDifferentBatch starts three workers by hand, one with
// another batch size: every one of them must exit naming the setting.
func TestWorkersWithDifferentBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	peers := freePorts(t, 3)
	secret := "MESHTRAIN_CLUSTER_SECRET=" + hex.EncodeToString([]byte("an e2e test secret, 32 bytes...."))
	results := make([]result, 3)
	var wg sync.WaitGroup
	for r := range 3 {
		batch := "32"
		if r == 1 {
			batch = "64"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[r] = meshtrain(ctx, []string{secret, "TF_CONFIG=" + tfConfig(peers, r)},
				"worker", "--model", "softmax", "--epochs", "1", "--batch", batch, "--train-examples", "3000", "--test-examples", "500",
				"--collective-timeout", "20s")
		}()
	}
	wg.Wait()
	for r, res := range results {
		if res.err == nil {
			t.Errorf("rank %d succeeded:\n%s", r, res)
			continue
		}
		if !strings.Contains(res.stderr, "the peers were started with different settings: batch_size is 32 on ranks 0, 2 but 64 on rank 1") {
			t.Errorf("rank %d does not name the setting and the ranks:\n%s", r, res)
		}
	}
}

// TestMalformedTFConfig checks that a worker rejects bad cluster specs,
// from a file or the environment, with the expected message.
func TestMalformedTFConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tests := []struct{ name, spec, want string }{
		{"syntax", "{\"cluster\": {\"worker\": [\"127.0.0.1:7000\"]},\n \"task\": {\"type\": \"worker\" \"index\": 0}}",
			"malformed JSON at line 2, column 28: invalid character '\"' after object key:value pair"},
		{"truncated", `{"cluster": {"worker": ["127.0.0.1:7000"]}`, "malformed JSON at line 1, column 43: unexpected end of input"},
		{"index out of range", `{"cluster": {"worker": ["127.0.0.1:7000", "127.0.0.1:7001"]}, "task": {"type": "worker", "index": 2}}`,
			"task index 2 out of range: cluster.worker has 2 entries (indices 0 to 1)"},
		{"duplicate", `{"cluster": {"worker": ["127.0.0.1:7000", "127.0.0.1:7000"]}, "task": {"type": "worker", "index": 0}}`,
			"duplicate address: worker 0 and worker 1 are both 127.0.0.1:7000"},
		{"evaluator 1 without evaluator", `{"cluster": {"worker": ["127.0.0.1:7000"]}, "task": {"type": "evaluator", "index": 1}}`,
			`task type "evaluator" but the cluster has no "evaluator" entries`},
		{"repeated task", "{\"cluster\": {\"worker\": [\"127.0.0.1:7000\", \"127.0.0.1:7001\"]},\n \"task\": {\"type\": \"worker\", \"index\": 0}, \"task\": {\"type\": \"worker\", \"index\": 1}}",
			`duplicate key "task" in the top-level object at line 2, column 42`},
		{"one endpoint spelled twice", `{"cluster": {"worker": ["localhost:07000", "127.0.0.1:7000"]}, "task": {"type": "worker", "index": 0}}`,
			"duplicate address: worker 0 (localhost:07000) and worker 1 (127.0.0.1:7000) are the same endpoint spelled differently"},
		{"parameter server", `{"cluster": {"worker": ["127.0.0.1:7000"], "ps": ["127.0.0.1:7001"]}, "task": {"type": "worker", "index": 0}}`,
			`cluster has "ps" entries: meshtrain has no parameter servers`},
		{"bad port", `{"cluster": {"worker": ["127.0.0.1:99999"]}, "task": {"type": "worker", "index": 0}}`,
			`cluster worker 0 address "127.0.0.1:99999": port "99999": want a number in 1..65535`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "tf_config.json")
			if err := os.WriteFile(file, []byte(tt.spec), 0o644); err != nil {
				t.Fatal(err)
			}
			fromFile := meshtrain(ctx, nil, "worker", "--tf-config", file)
			fromEnv := meshtrain(ctx, []string{"TF_CONFIG=" + tt.spec}, "worker")
			for _, c := range []struct {
				res    result
				source string
			}{{fromFile, "TF_CONFIG file " + file}, {fromEnv, "TF_CONFIG (environment)"}} {
				want := "meshtrain: worker: " + c.source + ": " + tt.want
				if c.res.err == nil || !strings.Contains(c.res.stderr, want) {
					t.Errorf("want %q in\n%s", want, c.res)
				}
			}
		})
	}
	// No spec at all.
	r := meshtrain(ctx, []string{"TF_CONFIG="}, "worker")
	if r.err == nil || !strings.Contains(r.stderr, "no cluster spec: set TF_CONFIG") {
		t.Errorf("no spec:\n%s", r)
	}
}

// TestLaunchInterrupt sends Ctrl-C (SIGINT) to launch mid-run: it must
// forward it, and exit non-zero once every worker has exited.
func TestLaunchInterrupt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var interruptedAt time.Time
	args := []string{"launch", "-n", "3", "--model", "lenet", "--epochs", "3", "--batch", "32",
		"--train-examples", "12000", "--test-examples", "500", "--collective-timeout", "20s"}
	run, pids := launchWatched(t, ctx, args, func(line string, launcher *os.Process, _ map[int]int) {
		// The run line is printed once every worker is connected and
		// training.
		if strings.HasPrefix(line, "[launch] lenet: ") && interruptedAt.IsZero() {
			if err := launcher.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			interruptedAt = time.Now()
		}
	})
	if interruptedAt.IsZero() {
		t.Fatalf("training never started:\n%s", run)
	}
	t.Logf("launch exited %v after SIGINT", time.Since(interruptedAt).Round(time.Millisecond))
	// Exit code 130 and one line, not a table of dashes and an error from
	// every rank.
	if exitCode(run.err) != 130 || strings.TrimSpace(run.stderr) != "meshtrain: interrupted" || strings.Contains(run.stdout, "  rank  steps") {
		t.Errorf("launch after Ctrl-C: %s", run)
	}
	if len(pids) != 3 {
		t.Fatalf("saw %d worker pids", len(pids))
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			t.Errorf("worker pid %d still exists after launch exited (kill 0: %v)", pid, err)
		}
	}
}

// TestWorkersWithChief runs a cluster by hand the way a multi-host user
// does: a TF_CONFIG with a chief (rank 0) and a worker (rank 1), each
// started with its own task.
func TestWorkersWithChief(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addrs := freePorts(t, 2)
	spec := func(typ string) string {
		b, _ := json.Marshal(map[string]any{
			"cluster": map[string][]string{"chief": addrs[:1], "worker": addrs[1:]},
			"task":    map[string]any{"type": typ, "index": 0},
		})
		return string(b)
	}
	secret := "MESHTRAIN_CLUSTER_SECRET=" + hex.EncodeToString([]byte("another e2e secret of 32 bytes.."))
	dir := t.TempDir()
	results := make([]result, 2)
	var wg sync.WaitGroup
	for r, typ := range []string{"chief", "worker"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[r] = meshtrain(ctx, []string{secret, "TF_CONFIG=" + spec(typ)}, "worker", "--security", "noise",
				"--model", "softmax", "--epochs", "1", "--batch", "32", "--lr", "0.02", "--train-examples", "6000", "--test-examples", "1000",
				"--report", filepath.Join(dir, typ+".json"), "--summary", filepath.Join(dir, typ+"-summary.json"))
		}()
	}
	wg.Wait()
	var hashes []string
	for r, res := range results {
		if res.err != nil {
			t.Fatalf("rank %d: %s", r, res)
		}
		if !strings.Contains(res.stdout, fmt.Sprintf("rank %d done: 93 steps", r)) {
			t.Errorf("rank %d output:\n%s", r, res)
		}
		var s struct {
			Peer struct {
				Rank         int     `json:"rank"`
				TestAccuracy float64 `json:"test_accuracy"`
				ParamsSHA256 string  `json:"params_sha256"`
			} `json:"peer"`
		}
		b, err := os.ReadFile(filepath.Join(dir, []string{"chief", "worker"}[r]+".json"))
		if err != nil || json.Unmarshal(b, &s) != nil || s.Peer.Rank != r || s.Peer.TestAccuracy < 0.8 {
			t.Fatalf("rank %d report %s (%v)", r, b, err)
		}
		hashes = append(hashes, s.Peer.ParamsSHA256)
	}
	if hashes[0] != hashes[1] {
		t.Errorf("chief and worker ended with different parameters: %q", hashes)
	}
	// Only the chief prints the run's progress, and with --summary the
	// cluster's table and summary, every peer's figures gathered.
	if !strings.Contains(results[0].stdout, "epoch  1  loss") || strings.Contains(results[1].stdout, "epoch  1  loss") {
		t.Errorf("progress lines: chief\n%s\nworker\n%s", results[0].stdout, results[1].stdout)
	}
	for _, want := range []string{"rank  steps  examples/s", "bytes sent per link", "parameters identical on every peer"} {
		if !strings.Contains(results[0].stdout, want) || strings.Contains(results[1].stdout, want) {
			t.Errorf("only the chief should print %q: chief\n%s\nworker\n%s", want, results[0].stdout, results[1].stdout)
		}
	}
	s := readSummary(t, filepath.Join(dir, "chief-summary.json"))
	checkPeers(t, s, 2, 0.8)
	if s.Security != "noise" || s.Cluster[0] != addrs[0] {
		t.Errorf("summary: security %q, cluster %q", s.Security, s.Cluster)
	}
	if _, err := os.Stat(filepath.Join(dir, "worker-summary.json")); err == nil {
		t.Error("a worker other than the chief wrote a summary")
	}
}

// TestWorkersWithPeerIDs runs a cluster listed as /p2p/ multiaddrs, each
// peer with its own key file and no cluster secret.
func TestWorkersWithPeerIDs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	addrs := freePorts(t, 2)
	var peers []string
	for r, a := range addrs {
		key := filepath.Join(dir, fmt.Sprintf("id%d.key", r))
		res := meshtrain(ctx, nil, "worker", "--new-identity", key)
		if res.err != nil {
			t.Fatal(res)
		}
		host, port, _ := net.SplitHostPort(a)
		peers = append(peers, fmt.Sprintf("/ip4/%s/tcp/%s/p2p/%s", host, port, strings.TrimSpace(res.stdout)))
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[r] = meshtrain(ctx, []string{"MESHTRAIN_CLUSTER_SECRET=", "TF_CONFIG=" + tfConfig(peers, r)}, "worker",
				"--identity", filepath.Join(dir, fmt.Sprintf("id%d.key", r)),
				"--model", "softmax", "--epochs", "1", "--batch", "32", "--train-examples", "3000", "--test-examples", "500")
		}()
	}
	wg.Wait()
	for r, res := range results {
		if res.err != nil || !strings.Contains(res.stdout, fmt.Sprintf("rank %d done: 46 steps", r)) {
			t.Errorf("rank %d:\n%s", r, res)
		}
	}
	// Without its key, a peer of such a cluster is told what to do.
	res := meshtrain(ctx, []string{"MESHTRAIN_CLUSTER_SECRET=", "TF_CONFIG=" + tfConfig(peers, 0)}, "worker")
	if res.err == nil || !strings.Contains(res.stderr, "MESHTRAIN_CLUSTER_SECRET is not set") || !strings.Contains(res.stderr, "--identity") {
		t.Errorf("no key, no secret:\n%s", res)
	}
}
