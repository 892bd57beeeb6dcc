package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/internal/longtest"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/launch/cluster"
	"github.com/meshtrain/meshtrain/mirrored/report"
)

// roleEnv makes the test binary act as a fake worker (see fakeWorker).
const roleEnv = "MESHTRAIN_LAUNCH_TEST_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(fakeWorker(role, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeWorker behaves like "meshtrain worker" as far as the launcher can
// see: it reads its rank from --tf-config, prints marked events and writes
// a report, or fails the way role says.
func fakeWorker(role string, args []string) int {
	var tfFile, report string
	for i, a := range args {
		switch a {
		case "--tf-config":
			tfFile = args[i+1]
		case "--report":
			report = args[i+1]
		}
	}
	b, err := os.ReadFile(tfFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "meshtrain:", err)
		return 1
	}
	spec, err := cluster.Parse(b, tfFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "meshtrain:", err)
		return 1
	}
	rank, n := spec.Rank, len(spec.Peers)
	if os.Getenv(SecretEnv) == "" || !strings.Contains(strings.Join(args, " "), "--events --model softmax") {
		fmt.Fprintln(os.Stderr, "meshtrain: no secret or wrong arguments:", args)
		return 1
	}
	event := func(m Message) {
		m.Rank = rank
		b, _ := json.Marshal(m)
		fmt.Printf("%s%s\n", EventPrefix, b)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Printf("hello from rank %d of %d\n", rank, n)
	fmt.Fprintf(os.Stderr, "a log line from rank %d\n", rank)
	fmt.Fprintf(os.Stderr, "{\"level\":\"info\",\"rank\":%d}\n", rank)
	event(Message{Event: mirrored.Event{Kind: "start", Steps: 10, Info: "fake: 10 steps"}})
	switch {
	case role == "fail-1" && rank == 1:
		event(Message{Event: mirrored.Event{Kind: "error"}, Error: "rank 1: something broke"})
		fmt.Fprintln(os.Stderr, "meshtrain: worker: rank 1: something broke")
		return 1
	case role == "crash-2" && rank == 2:
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case role == "kill-1" && rank == 1:
		// A ring worker killed by fault injection: it reports its error
		// at once but is slower to exit than the peers that lost it.
		err := fmt.Errorf("rank 1: rank 1 after 3 steps: %w", mirrored.ErrInjectedKill)
		event(Message{Event: mirrored.Event{Kind: "error"}, Error: err.Error(), Injected: errors.Is(err, mirrored.ErrInjectedKill)})
		_ = os.WriteFile(killedMark(tfFile), nil, 0o644)
		<-ctx.Done()
		fmt.Fprintln(os.Stderr, "meshtrain: worker:", err)
		return 1
	case role == "kill-1":
		// The peers notice the loss once rank 1 is down.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(killedMark(tfFile)); err == nil {
				break
			}
		}
		event(Message{Event: mirrored.Event{Kind: "error"}, Error: fmt.Sprintf("rank %d: collective: allreduce(ring) #7 on rank %d: rank 1 link down: stream reset", rank, rank)})
		fmt.Fprintf(os.Stderr, "meshtrain: worker: rank %d: rank 1 link down\n", rank)
		return 1
	case role == "fail-1" || role == "crash-2" || role == "wait":
		<-ctx.Done() // a peer that would have waited on the failed one
		fmt.Fprintf(os.Stderr, "meshtrain: worker: rank %d: lost a peer: %v\n", rank, ctx.Err())
		return 1
	case role == "hang":
		signal.Ignore(os.Interrupt)
		select {}
	case (role == "stall-2" || role == "gossip-stop-2") && rank == 2:
		// Stopped (SIGSTOP) or hung: it never answers, ignores SIGINT,
		// and only SIGKILL ends it.
		signal.Ignore(os.Interrupt)
		_ = os.WriteFile(stoppedMark(tfFile), nil, 0o644)
		select {}
	case role == "stall-2":
		// Its peers give up waiting for it, as a collective timeout does,
		// once it is hung (on a loaded machine its start can take longer
		// than theirs).
		waitMark(stoppedMark(tfFile))
		time.Sleep(100 * time.Millisecond)
		msg := fmt.Sprintf("rank %d: collective: allreduce(ring) #5 on rank %d: waiting for rank 2: timed out after 20s", rank, rank)
		event(Message{Event: mirrored.Event{Kind: "error"}, Error: msg})
		fmt.Fprintln(os.Stderr, "meshtrain: worker:", msg)
		return 1
	case (role == "elastic-restart-1" || role == "elastic-stop-1") && rank == 1 && os.Getenv(RestartEnv) == "":
		// Its first life dies (or stops the run on purpose).
		msg := "rank 1: something broke"
		if role == "elastic-stop-1" {
			msg = "elastic: fewer than --min-workers 3"
		}
		event(Message{Event: mirrored.Event{Kind: "error"}, Error: msg, Stopped: role == "elastic-stop-1"})
		fmt.Fprintln(os.Stderr, "meshtrain: worker:", msg)
		return 1
	case role == "elastic-restart-1" && rank == 1:
		_ = os.WriteFile(killedMark(tfFile), nil, 0o644) // its second life: the others may finish
	case role == "elastic-restart-1":
		waitMark(killedMark(tfFile))
	case strings.HasPrefix(role, "stop-"):
		return stoppedPeer(role, rank, n, stoppedMark(tfFile), event)
	case role == "chief-0" && rank == 0:
		// The chief cannot start, and is the last to say so.
		time.Sleep(300 * time.Millisecond)
		event(Message{Event: mirrored.Event{Kind: "error"}, Error: "rank 0: checkpoint directory /ro: read-only file system"})
		fmt.Fprintln(os.Stderr, "meshtrain: worker: rank 0: checkpoint directory /ro: read-only file system")
		return 1
	case role == "chief-0":
		msg := fmt.Sprintf("rank %d: rank 0 (the chief) could not start: checkpoint directory /ro: read-only file system", rank)
		event(Message{Event: mirrored.Event{Kind: "error"}, Error: msg})
		fmt.Fprintln(os.Stderr, "meshtrain: worker:", msg)
		return 1
	}
	ep := mirrored.Epoch{Epoch: 1, Loss: 0.5, TestAccuracy: 0.9}
	event(Message{Event: mirrored.Event{Kind: "epoch", Step: 10, Steps: 10, Epoch: &ep}})
	sum := mirrored.Summary{
		Run:  &mirrored.Result{Model: "softmax", Replicas: n, BatchSize: 8, Steps: 10, FinalAccuracy: 0.9, ParamsSHA256: "abc", EpochResults: []mirrored.Epoch{ep}},
		Peer: mirrored.PeerStats{Rank: rank, Steps: 10, TestAccuracy: 0.9, BytesSent: 1 << 20, BytesReceived: 1 << 20, ComputeShare: 0.5, CommShare: 0.3, WaitShare: 0.2, ParamsSHA256: "abc"},
	}
	if role == "diverge" && rank == 1 {
		sum.Run.ParamsSHA256 = "def"
	}
	b, _ = json.Marshal(sum)
	if err := os.WriteFile(report, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "meshtrain:", err)
		return 1
	}
	return 0
}

// stoppedPeer plays role "stop-K-how": rank K is stopped (SIGSTOP) in
// mid-run, and the others fail after the collective timeout with errors
// naming ranks as how says: "inner", rank K+1 waited for K and the others
// for K+1, which aborted them saying it waited for K (an error wrapping
// another); "chain", each rank waited for the next, up to K (a tree
// all-reduce); "misled", every other rank names K+1 alone, which names
// nobody.
func stoppedPeer(role string, rank, n int, mark string, event func(Message)) int {
	var k int
	var how string
	if _, err := fmt.Sscanf(strings.ReplaceAll(role, "-", " "), "stop %d %s", &k, &how); err != nil {
		fmt.Fprintln(os.Stderr, "meshtrain: bad role", role)
		return 2
	}
	if rank == k {
		_ = os.WriteFile(mark, nil, 0o644)
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		select {}
	}
	signal.Ignore(os.Interrupt) // each says what it waited for, whenever asked to stop
	// Once rank K is stopped: on a loaded machine its start can take
	// longer than the others' waits below (it was then interrupted, not
	// stopped, in CI).
	waitMark(mark)
	time.Sleep(50 * time.Millisecond)
	next := (k + 1) % n
	timedOut := func(r, waited int) string {
		return fmt.Sprintf("collective: allreduce(ring) #5 on rank %d: waiting for rank %d: timed out after 3s: context deadline exceeded", r, waited)
	}
	time.Sleep(time.Duration(100+20*((rank-next+n)%n)) * time.Millisecond) // rank K+1 first
	var msg string
	switch {
	case how == "chain":
		msg = timedOut(rank, (rank+1)%n)
	case rank == next && how == "misled":
		msg = "lost a peer: stream reset"
	case rank == next:
		msg = timedOut(rank, k)
	case how == "inner":
		msg = fmt.Sprintf("collective: allreduce(ring) #5 on rank %d: waiting for rank %d: rank %d aborted: %s", rank, next, next, timedOut(next, k))
	default: // misled
		msg = fmt.Sprintf("collective: allreduce(ring) #5 on rank %d: waiting for rank %d: stream reset", rank, next)
	}
	msg = fmt.Sprintf("rank %d: epoch 3 step 229: all-reducing the gradients: %s", rank, msg)
	event(Message{Event: mirrored.Event{Kind: "error"}, Error: msg})
	fmt.Fprintln(os.Stderr, "meshtrain: worker:", msg)
	return 1
}

// stoppedMark is the file by which the fake rank that stops (or hangs)
// tells its peers it is about to.
func stoppedMark(tfFile string) string { return filepath.Join(filepath.Dir(tfFile), "stopped") }

// waitMark waits (at most 10 s) for the file path to exist.
func waitMark(path string) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
}

// killedMark is the file by which the fake rank 1 of role kill-1 tells
// its peers it is down.
func killedMark(tfFile string) string { return filepath.Join(filepath.Dir(tfFile), "killed") }

func launchFake(t *testing.T, ctx context.Context, n int, role string) (*report.Report, error, string) {
	return launchFakeWatch(t, ctx, n, role, "", nil)
}

// launchFakeWatch is launchFake calling onLine once the launcher's output
// contains line.
func launchFakeWatch(t *testing.T, ctx context.Context, n int, role, line string, onLine func()) (*report.Report, error, string) {
	t.Helper()
	t.Setenv(roleEnv, role)
	var errOut bytes.Buffer
	out := &watchWriter{want: line, fn: onLine}
	rep, err := Run(ctx, Config{
		N: n, Executable: os.Args[0], WorkerArgs: []string{"--model", "softmax"}, RunDir: t.TempDir(),
		StopGrace: 2 * time.Second, Stdout: out, Stderr: &errOut,
	})
	return rep, err, out.buf.String() + errOut.String()
}

// watchWriter records what is written and calls fn once it contains want.
type watchWriter struct {
	buf  bytes.Buffer
	want string
	fn   func()
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if w.fn != nil && w.want != "" && strings.Contains(w.buf.String(), w.want) {
		w.fn()
		w.fn = nil
	}
	return len(p), nil
}

func TestRunSuccess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err, out := launchFake(t, ctx, 3, "ok")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"[rank 2] hello from rank 2 of 3", "[rank 0] a log line from rank 0", "\n{\"level\":\"info\",\"rank\":1}\n", "[launch] fake: 10 steps", "[launch] epoch 1  step 10/10  loss 0.5000  test accuracy  90.00%"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "[launch] epoch 1") != 1 {
		t.Errorf("want one status line per epoch:\n%s", out)
	}
	if !rep.Identical || len(rep.Peers) != 3 {
		t.Fatalf("report %+v", rep)
	}
	var table bytes.Buffer
	report.WriteTable(&table, rep)
	for _, want := range []string{"rank  steps  examples/s  test acc", "1.0 MiB", "50%", "parameters identical on every peer"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	path := filepath.Join(t.TempDir(), "s.json")
	if err := report.WriteSummary(path, rep); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var s report.SummaryJSON
	if err := json.Unmarshal(b, &s); err != nil || s.Workers != 3 || len(s.Peers) != 3 || s.Peers[2].Rank != 2 ||
		s.Peers[1].ParamsSHA256 != "abc" || len(s.Peers[0].PerEpochAccuracy) != 1 || !s.ParamsIdentical {
		t.Errorf("summary JSON %s (%v)", b, err)
	}
}

func TestRunDivergedReport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err, out := launchFake(t, ctx, 2, "diverge")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var table bytes.Buffer
	report.WriteTable(&table, rep)
	if rep.Identical || !strings.Contains(table.String(), "NOT identical") {
		t.Errorf("different final hashes not reported:\n%s", table.String())
	}
}

func TestRunFailures(t *testing.T) {
	tests := []struct {
		role, want string
	}{
		// Rank 1 reports an error and exits: it is named, with its error,
		// and the others are stopped.
		{"fail-1", "rank 1 failed: rank 1: something broke (exit status 1); then rank 0 was stopped; rank 2 was stopped"},
		// Rank 2 dies of a signal: it is blamed, not the ranks that lost it.
		{"crash-2", "rank 2 failed: signal: killed"},
		// Rank 1 is killed by fault injection and exits after the ranks
		// that lost it: it is blamed, with their errors (at least the
		// first one's: the other may have been stopped) as consequences.
		{"kill-1", "rank 1 failed: rank 1: rank 1 after 3 steps: killed by fault injection (--kill-rank/--kill-after) (exit status 1); then rank 0 "},
	}
	for _, tt := range tests {
		t.Run(tt.role, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			rep, err, out := launchFake(t, ctx, 3, tt.role)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q\n%s", err, tt.want, out)
			}
			if tt.role == "kill-1" && !strings.Contains(err.Error(), "failed: rank 0: collective: allreduce(ring) #7 on rank 0: rank 1 link down") && !strings.Contains(err.Error(), "failed: rank 2: collective: allreduce(ring) #7 on rank 2: rank 1 link down") {
				t.Fatalf("got %v, want the first survivor's error as a consequence\n%s", err, out)
			}
			if time.Since(start) > 2*time.Second {
				t.Errorf("took %v: the others were not stopped promptly", time.Since(start))
			}
			if rep == nil || len(rep.Peers) != 3 || rep.Peers[1].Err == "" {
				t.Errorf("report %+v", rep)
			}
		})
	}
}

func TestRunInterruptAndHang(t *testing.T) {
	// Ctrl-C: every worker gets SIGINT; one that ignores it is killed
	// after StopGrace.
	for _, role := range []string{"wait", "hang"} {
		t.Run(role, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			deadline := time.AfterFunc(30*time.Second, func() { panic("launch did not return") })
			defer deadline.Stop()
			// Interrupt once both workers have printed their greeting.
			_, err, out := launchFakeWatch(t, ctx, 2, role, "hello from rank 1 of 2", cancel)
			if err == nil || !strings.Contains(err.Error(), "launch: interrupted") {
				t.Errorf("got %v\n%s", err, out)
			}
			// The workers' own last words after Ctrl-C are not shown: one
			// line (the caller's) says it was interrupted.
			if strings.Contains(out, "lost a peer") {
				t.Errorf("workers' errors after Ctrl-C shown:\n%s", out)
			}
		})
	}
}

func TestRunBadConfig(t *testing.T) {
	if _, err := Run(context.Background(), Config{N: 0}); err == nil || !strings.Contains(err.Error(), "-n 0: want at least 1 worker") {
		t.Errorf("N=0: %v", err)
	}
	_, err := Run(context.Background(), Config{N: 1, Executable: filepath.Join(t.TempDir(), "missing")})
	if err == nil || !strings.Contains(err.Error(), "starting rank 0") {
		t.Errorf("missing binary: %v", err)
	}
}

// TestRunBlamesWhomOthersWaitedFor: the headline names the rank the others
// were waiting for (a stalled worker, a chief that could not start), with
// who waited and when, not the first rank to exit.
func TestRunBlamesWhomOthersWaitedFor(t *testing.T) {
	for _, tc := range []struct{ role, want string }{
		{"stall-2", "rank 2 failed: stopped responding and did not exit: killed"},
		{"chief-0", "rank 0 failed: rank 0: checkpoint directory /ro: read-only file system"},
	} {
		t.Run(tc.role, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err, out := launchFake(t, ctx, 3, tc.role)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !strings.Contains(err.Error(), "were waiting for it; first reported missing at ") {
				t.Fatalf("got %v, want it to start %q and say who waited\n%s", err, tc.want, out)
			}
		})
	}
}

// TestRunEndsWithAStoppedGossipWorker: the others finish and exit; the
// launcher does not wait forever for a stopped one but kills it after
// StopGrace, and the run fails (a lost replica) unless losses are
// tolerated.
func TestRunEndsWithAStoppedGossipWorker(t *testing.T) {
	for _, tolerate := range []bool{false, true} {
		t.Run(fmt.Sprintf("tolerate=%v", tolerate), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			t.Setenv(roleEnv, "gossip-stop-2")
			var out, errOut bytes.Buffer // separate: Run locks each writer on its own
			start := time.Now()
			rep, err := Run(ctx, Config{
				N: 3, Executable: os.Args[0], WorkerArgs: []string{"--model", "softmax"}, RunDir: t.TempDir(),
				StopGrace: time.Second, Gossip: true, TolerateLoss: tolerate, Stdout: &out, Stderr: &errOut,
			})
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("launch took %v with a stopped worker", d)
			}
			var lost *LostError
			switch {
			case tolerate && err != nil:
				t.Fatalf("tolerating losses: %v\n%s", err, out.String())
			case !tolerate && (!errors.As(err, &lost) || !slices.Equal(lost.Ranks, []int{2})):
				t.Fatalf("got %v, want a LostError for rank 2\n%s", err, out.String())
			}
			if rep == nil || !slices.Equal(rep.Lost, []int{2}) || !strings.Contains(out.String(), "rank(s) 2 still running") {
				t.Errorf("report %+v\n%s", rep, out.String())
			}
		})
	}
}

// TestRunElasticRestarts: under Config.Elastic a worker that dies is
// restarted (with RestartEnv set) while the others run, and the run
// succeeds with every peer; one whose run stopped on purpose (no
// majority, below --min-workers) is not restarted, and is listed lost.
func TestRunElasticRestarts(t *testing.T) {
	for _, tc := range []struct {
		role     string
		restarts bool
	}{{"elastic-restart-1", true}, {"elastic-stop-1", false}} {
		t.Run(tc.role, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			t.Setenv(roleEnv, tc.role)
			var out, errOut bytes.Buffer
			rep, err := Run(ctx, Config{
				N: 3, Executable: os.Args[0], WorkerArgs: []string{"--model", "softmax"}, RunDir: t.TempDir(),
				StopGrace: 5 * time.Second, Elastic: true, MaxRestarts: 2, Stdout: &out, Stderr: &errOut,
			})
			restarted := strings.Contains(out.String(), "(restart 1 of --max-restarts 2: it rejoins at the next commit)")
			switch {
			case err != nil:
				t.Fatalf("%v\n%s", err, out.String())
			case restarted != tc.restarts:
				t.Errorf("restarted %v, want %v:\n%s", restarted, tc.restarts, out.String())
			case tc.restarts && (len(rep.Lost) != 0 || rep.Peers[1].Summary == nil):
				t.Errorf("lost %v, peer 1 %+v", rep.Lost, rep.Peers[1])
			case !tc.restarts && !slices.Equal(rep.Lost, []int{1}):
				t.Errorf("lost %v, want [1]", rep.Lost)
			}
		})
	}
}

// TestRunBlamesTheStoppedRank: whichever rank of 3 or 4 is stopped
// (SIGSTOP), launch names it, whatever rank the others' errors name
// first: the innermost rank an error names counts, a chain of waits is
// followed to its end, and a rank launch had to kill because it did not
// exit comes first (issue 24 item 7: rank 0 named in 5 runs of 5 with
// rank 2 of 3 stopped). The README's test command runs one case a rank
// of 3 and the last of 4, each with another way of naming; the long run
// (TestLongRunBlamesEveryStoppedRank) runs every rank with every way.
func TestRunBlamesTheStoppedRank(t *testing.T) {
	hows := []string{"inner", "chain", "misled"}
	testBlamesTheStoppedRank(t, func(n, k int, how string) bool {
		return (n == 3 && how == hows[k]) || (n == 4 && k == 3 && how == "chain")
	})
}

// TestLongRunBlamesEveryStoppedRank: every rank of 3 and 4, stopped,
// with every way the others' errors can name it (21 launches, about 25 s).
func TestLongRunBlamesEveryStoppedRank(t *testing.T) {
	longtest.Require(t, "21 launches of 3 or 4 peers, one stopped")
	testBlamesTheStoppedRank(t, func(int, int, string) bool { return true })
}

func testBlamesTheStoppedRank(t *testing.T, run func(n, k int, how string) bool) {
	for _, n := range []int{3, 4} {
		for k := range n {
			for _, how := range []string{"inner", "chain", "misled"} {
				if !run(n, k, how) {
					continue
				}
				t.Run(fmt.Sprintf("rank %d of %d, %s", k, n, how), func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					t.Setenv(roleEnv, fmt.Sprintf("stop-%d-%s", k, how))
					var out, errOut bytes.Buffer
					_, err := Run(ctx, Config{
						N: n, Executable: os.Args[0], WorkerArgs: []string{"--model", "softmax"}, RunDir: t.TempDir(),
						StopGrace: time.Second, Stdout: &out, Stderr: &errOut,
					})
					want := fmt.Sprintf("rank %d failed: stopped responding and did not exit: killed", k)
					if err == nil || !strings.HasPrefix(err.Error(), want) {
						t.Fatalf("got %v\nwant it to start %q\n%s%s", err, want, out.String(), errOut.String())
					}
				})
			}
		}
	}
}
