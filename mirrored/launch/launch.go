package launch

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/mirrored"
)

// Config is a local cluster to launch.
type Config struct {
	// N is the number of worker processes (≥ 1).
	N int
	// Executable is the meshtrain binary the workers run (os.Executable()).
	Executable string
	// GlobalArgs go before the "worker" command (e.g. --log-format json);
	// WorkerArgs after it (training flags, --security, ...), the same for
	// every worker. The launcher adds --tf-config, --report and --events.
	GlobalArgs, WorkerArgs []string
	// QUIC picks UDP ports (for --security quic).
	QUIC bool
	// RunDir holds the TF_CONFIG files and the workers' reports; "" makes
	// a temporary directory that is removed at the end.
	RunDir string
	// StopGrace is how long a worker may take to exit after being asked
	// (SIGINT) before it is killed.
	StopGrace time.Duration
	// Gossip says the workers run the gossip strategy: a worker that fails
	// does not stop the others (they drop it and finish), Run fails only
	// if none finishes, and the replicas' parameters differ by design.
	Gossip bool
	// Stdout receives the workers' output prefixed by rank and the status
	// lines; Stderr the workers' logs (see WriteTable for the summary).
	Stdout, Stderr io.Writer
	Logger         *zap.Logger
}

// Peer is one worker's outcome.
type Peer struct {
	Rank int `json:"rank"`
	// Addr is the worker's address; PID its process.
	Addr string `json:"addr"`
	PID  int    `json:"pid"`
	// Summary is the worker's report (nil if it failed).
	Summary *mirrored.Summary `json:"-"`
	// Err is how the worker failed ("" if it did not).
	Err string `json:"error,omitempty"`
}

// Report is a finished launch.
type Report struct {
	Peers []Peer
	// Identical says whether every peer ended with the same parameters.
	Identical bool
	// Gossip is Config.Gossip: replicas that differ are expected, and
	// Lost lists the ranks that failed while the others finished.
	Gossip      bool
	Lost        []int
	WallSeconds float64
}

// FailedError says which worker failed first and why.
type FailedError struct {
	Rank   int
	Reason string   // the worker's last error, or how it died
	Others []string // what happened to the rest
}

func (e *FailedError) Error() string {
	s := fmt.Sprintf("rank %d failed: %s", e.Rank, e.Reason)
	if len(e.Others) > 0 {
		s += "; then " + strings.Join(e.Others, "; ")
	}
	return s
}

type worker struct {
	rank    int
	cmd     *exec.Cmd
	addr    string
	report  string
	lastErr string // last "error" message, or last stderr line
	killed  bool   // its error was the fault injection's kill
	mu      sync.Mutex
	exited  bool
	waitErr error
	stopped bool // we asked it to stop
	ioDone  sync.WaitGroup
}

type exit struct {
	w   *worker
	err error
}

// Run starts cfg.N workers on 127.0.0.1 and waits for them. If one fails
// it stops the others and returns a *FailedError naming it; if ctx ends
// (Ctrl-C) it forwards SIGINT to every worker.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	start := time.Now()
	if cfg.N < 1 {
		return nil, fmt.Errorf("launch: -n %d: want at least 1 worker", cfg.N)
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	runDir := cfg.RunDir
	if runDir == "" {
		d, err := os.MkdirTemp("", "meshtrain-launch-")
		if err != nil {
			return nil, fmt.Errorf("launch: run directory: %w", err)
		}
		defer os.RemoveAll(d)
		runDir = d
	} else if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, fmt.Errorf("launch: run directory: %w", err)
	}
	addrs, err := p2p.LocalAddrs(cfg.N, cfg.QUIC)
	if err != nil {
		return nil, fmt.Errorf("launch: picking free ports: %w", err)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}

	out := &lockedWriter{w: cfg.Stdout}
	errOut := &lockedWriter{w: cfg.Stderr}
	msgs := make(chan Message, 64)
	exits := make(chan exit, cfg.N)
	workers := make([]*worker, cfg.N)
	stopAll := func(sig os.Signal) {
		for _, w := range workers {
			if w == nil {
				continue
			}
			w.mu.Lock()
			if !w.exited {
				w.stopped = true
				_ = w.cmd.Process.Signal(sig)
			}
			w.mu.Unlock()
		}
	}
	for r := range cfg.N {
		w := &worker{rank: r, addr: addrs[r], report: filepath.Join(runDir, fmt.Sprintf("report-%d.json", r))}
		tfc, _ := json.Marshal(map[string]any{ // plain data: cannot fail
			"cluster": map[string][]string{"worker": addrs},
			"task":    map[string]any{"type": "worker", "index": r},
		})
		tfFile := filepath.Join(runDir, fmt.Sprintf("tf_config-%d.json", r))
		if err := os.WriteFile(tfFile, tfc, 0o600); err != nil {
			stopAll(os.Kill)
			return nil, fmt.Errorf("launch: writing rank %d's TF_CONFIG: %w", r, err)
		}
		_ = os.Remove(w.report)
		args := append(slices.Clone(cfg.GlobalArgs), "worker", "--tf-config", tfFile, "--report", w.report, "--events")
		args = append(args, cfg.WorkerArgs...)
		cmd := exec.Command(cfg.Executable, args...)
		cmd.Env = append(os.Environ(), SecretEnv+"="+hex.EncodeToString(secret), "TF_CONFIG=")
		cmd.SysProcAttr = sysProcAttr()
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			stopAll(os.Kill)
			return nil, err
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			stopAll(os.Kill)
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			stopAll(os.Kill)
			return nil, fmt.Errorf("launch: starting rank %d (%s): %w", r, cfg.Executable, err)
		}
		w.cmd = cmd
		workers[r] = w
		fmt.Fprintf(out, "[launch] rank %d: pid %d, %s\n", r, cmd.Process.Pid, w.addr)
		w.ioDone.Add(2)
		go w.pumpStdout(stdout, out, msgs)
		go w.pumpStderr(stderr, errOut)
		go func() {
			w.ioDone.Wait() // read all output before reaping, so lastErr is complete
			err := cmd.Wait()
			w.mu.Lock()
			w.exited, w.waitErr = true, err
			w.mu.Unlock()
			exits <- exit{w, err}
		}()
	}

	var failed *worker
	var lost []*worker // gossip: failed while others ran on
	var interrupted bool
	var killTimer <-chan time.Time
	running := cfg.N
	status := newStatus(cfg.N)
	for running > 0 {
		select {
		case m := <-msgs:
			if line := status.update(m); line != "" {
				fmt.Fprintln(out, line)
			}
		case e := <-exits:
			running--
			if e.err != nil && cfg.Gossip && !interrupted && running > 0 {
				// Gossip peers carry on without it.
				fmt.Fprintf(out, "[launch] rank %d failed; the other gossip peers carry on without it\n", e.w.rank)
				lost = append(lost, e.w)
				continue
			}
			if e.err != nil && failed == nil && !interrupted {
				failed = e.w
				log.Debug("worker failed", zap.Int("rank", e.w.rank), zap.Error(e.err))
				stopAll(os.Interrupt)
				killTimer = time.After(cfg.StopGrace)
			}
		case <-ctx.Done():
			if !interrupted {
				interrupted = true
				fmt.Fprintln(out, "[launch] interrupted: stopping the workers")
				stopAll(os.Interrupt)
				killTimer = time.After(cfg.StopGrace)
			}
		case <-killTimer:
			stopAll(os.Kill)
			killTimer = nil
		}
	}
	for drained := false; !drained; {
		select {
		case m := <-msgs:
			if line := status.update(m); line != "" {
				fmt.Fprintln(out, line)
			}
		default:
			drained = true
		}
	}

	rep := &Report{WallSeconds: time.Since(start).Seconds(), Gossip: cfg.Gossip}
	for _, w := range workers {
		p := Peer{Rank: w.rank, Addr: w.addr, PID: w.cmd.Process.Pid}
		if w.waitErr != nil {
			p.Err = w.describe()
		} else if s, err := readReport(w.report); err != nil {
			p.Err = err.Error()
		} else {
			p.Summary = s
		}
		rep.Peers = append(rep.Peers, p)
	}
	if interrupted {
		return rep, fmt.Errorf("launch: interrupted: %w", ctx.Err())
	}
	if failed != nil {
		return rep, blame(workers, failed)
	}
	if cfg.Gossip {
		var first *Peer
		for i, p := range rep.Peers {
			switch {
			case p.Summary != nil && first == nil:
				first = &rep.Peers[i]
			case p.Summary == nil && !slices.ContainsFunc(lost, func(w *worker) bool { return w.rank == p.Rank }):
				return rep, &FailedError{Rank: p.Rank, Reason: p.Err}
			}
		}
		for _, w := range lost {
			rep.Lost = append(rep.Lost, w.rank)
		}
		rep.Identical = first != nil
		for _, p := range rep.Peers {
			if p.Summary != nil && p.Summary.Run.ParamsSHA256 != first.Summary.Run.ParamsSHA256 {
				rep.Identical = false
			}
		}
		return rep, nil
	}
	rep.Identical = true
	for _, p := range rep.Peers {
		if p.Summary == nil {
			return rep, &FailedError{Rank: p.Rank, Reason: p.Err}
		}
		if p.Summary.Run.ParamsSHA256 != rep.Peers[0].Summary.Run.ParamsSHA256 {
			rep.Identical = false
		}
	}
	return rep, nil
}

// blame picks the worker to name: one that died of a signal nobody sent
// (killed, crashed), else one the fault injection killed (which may exit
// after the peers that lost it, and is stopped with them), else the first
// to exit with an error; the others then failed because they lost it.
func blame(workers []*worker, first *worker) error {
	culprit := first
	if w := pick(workers, func(w *worker) bool { return !w.stopped && diedOfSignal(w.waitErr) }); w != nil {
		culprit = w
	} else if w := pick(workers, func(w *worker) bool { return w.killed }); w != nil {
		culprit = w
	}
	fe := &FailedError{Rank: culprit.rank, Reason: culprit.describe()}
	for _, w := range workers {
		if w == culprit {
			continue
		}
		switch {
		case w.waitErr == nil:
			fe.Others = append(fe.Others, fmt.Sprintf("rank %d finished", w.rank))
		case w.stopped:
			fe.Others = append(fe.Others, fmt.Sprintf("rank %d was stopped", w.rank))
		default:
			fe.Others = append(fe.Others, fmt.Sprintf("rank %d failed: %s", w.rank, w.describe()))
		}
	}
	return fe
}

// pick returns the first worker that failed and matches, or nil.
func pick(workers []*worker, match func(*worker) bool) *worker {
	for _, w := range workers {
		if w.waitErr != nil && match(w) {
			return w
		}
	}
	return nil
}

func diedOfSignal(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
			return ws.Signaled()
		}
	}
	return false
}

// describe says how a worker ended: its last error, and how it exited.
func (w *worker) describe() string {
	how := "exited"
	if w.waitErr != nil {
		how = w.waitErr.Error() // "exit status 1", "signal: killed"
	}
	if w.lastErr == "" {
		return how
	}
	return w.lastErr + " (" + how + ")"
}

func (w *worker) pumpStdout(r io.Reader, out io.Writer, msgs chan<- Message) {
	defer w.ioDone.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if js, ok := strings.CutPrefix(line, EventPrefix); ok {
			var m Message
			if err := json.Unmarshal([]byte(js), &m); err == nil {
				if m.Kind == "error" {
					w.mu.Lock()
					w.lastErr, w.killed = m.Error, m.Injected
					w.mu.Unlock()
				}
				msgs <- m
				continue
			}
		}
		fmt.Fprintf(out, "[rank %d] %s\n", w.rank, line)
	}
	_, _ = io.Copy(io.Discard, r)
}

func (w *worker) pumpStderr(r io.Reader, out io.Writer) {
	defer w.ioDone.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "{") {
			// A JSON log line (--log-format json) already names its rank;
			// it stays one JSON object per line for jq and log shippers.
			fmt.Fprintln(out, line)
		} else {
			fmt.Fprintf(out, "[rank %d] %s\n", w.rank, line)
		}
		if msg, ok := strings.CutPrefix(line, "meshtrain: "); ok {
			w.mu.Lock()
			if w.lastErr == "" {
				w.lastErr = msg
			}
			w.mu.Unlock()
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

func readReport(path string) (*mirrored.Summary, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("no report from the worker: %w", err)
	}
	var s mirrored.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("unreadable report %s: %w", path, err)
	}
	if s.Run == nil {
		return nil, fmt.Errorf("report %s has no run: the worker stopped before it finished", path)
	}
	return &s, nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// status turns the workers' events into one line per epoch, printed when
// every worker has finished that epoch.
type status struct {
	n      int
	start  time.Time
	epochs map[int]int // epoch -> workers done with it
}

func newStatus(n int) *status { return &status{n: n, start: time.Now(), epochs: map[int]int{}} }

func (s *status) update(m Message) string {
	switch m.Kind {
	case "start":
		if m.Rank == 0 {
			return "[launch] " + m.Info
		}
	case "resumed":
		if m.Rank == 0 {
			return fmt.Sprintf("[launch] resumed from %s at step %d of %d", m.Path, m.Step, m.Steps)
		}
	case "checkpoint":
		return fmt.Sprintf("[launch] checkpoint at step %d: %s", m.Step, m.Path)
	case "epoch":
		if m.Epoch == nil {
			return ""
		}
		s.epochs[m.Epoch.Epoch]++
		if s.epochs[m.Epoch.Epoch] == s.n {
			e := m.Epoch
			auc := ""
			if e.TestAUC > 0 { // sparse-lr
				auc = fmt.Sprintf("  AUC %.4f", e.TestAUC)
			}
			return fmt.Sprintf("[launch] epoch %d  step %d/%d  loss %.4f  test accuracy %6.2f%%%s  %8.0f examples/s  train %.1fs  elapsed %.1fs",
				e.Epoch, m.Step, m.Steps, e.Loss, 100*e.TestAccuracy, auc, e.ExamplesPerSec, e.TrainSeconds, time.Since(s.start).Seconds())
		}
	}
	return ""
}
