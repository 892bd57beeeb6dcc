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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/observe"
	"github.com/meshtrain/meshtrain/mirrored/report"
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
	// does not stop the others (they drop it and finish), and the
	// replicas' parameters differ by design. A run that lost replicas
	// fails with a *LostError unless TolerateLoss.
	Gossip       bool
	TolerateLoss bool
	// Elastic says the workers run the ring's elastic mode
	// (mirrored.Elastic): a worker that dies is restarted, up to
	// MaxRestarts times, with RestartEnv set, and rejoins; the others go
	// on without it meanwhile, and a run that finishes without it
	// succeeds, listing it in report.Report.Lost.
	Elastic     bool
	MaxRestarts int
	// Stdout receives the workers' output prefixed by rank, the status
	// lines and rank 0's training progress: a bar redrawn in place if
	// Stdout is a terminal, else a line every LogEvery steps (the workers'
	// --log-every; 0: observe.DefaultLogEvery). Stderr receives the
	// workers' logs (see report.WriteTable for the summary).
	Stdout, Stderr io.Writer
	LogEvery       int
	Logger         *zap.Logger
	// Info says what the workers were asked to run, for the summary.
	Info report.RunInfo
}

// RestartEnv tells a restarted worker how many times launch restarted it
// (an elastic worker drops the kill faults of its first life).
const RestartEnv = "MESHTRAIN_RESTART"

// FailedError names the worker whose failure ended the run (the root
// cause, as torchrun's report gives it) and why.
type FailedError struct {
	Rank   int
	Reason string // the worker's last error, or how it died
	// Waiting are the ranks whose errors say they were waiting for this
	// one; FirstMissed when the first of them reported it.
	Waiting     []int
	FirstMissed time.Time
	Others      []string // what happened to the rest
}

func (e *FailedError) Error() string {
	s := fmt.Sprintf("rank %d failed: %s", e.Rank, e.Reason)
	if len(e.Waiting) > 0 {
		s += fmt.Sprintf(" (rank(s) %s were waiting for it; first reported missing at %s)",
			joinInts(e.Waiting), e.FirstMissed.UTC().Format("15:04:05.000 UTC"))
	}
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
	lastErr string    // last "error" message, or last stderr line
	errAt   time.Time // when lastErr was first seen
	killed  bool      // its error was the fault injection's kill
	// stoppedRun: its elastic run stopped on purpose (no restart helps)
	stoppedRun bool
	hung       bool // still running StopGrace after the first exit: killed
	mu         sync.Mutex
	exited     bool
	waitErr    error
	stopped    bool // we asked it to stop
	ioDone     sync.WaitGroup
}

type exit struct {
	w   *worker
	err error
}

// Run starts cfg.N workers on 127.0.0.1 and waits for them. If one fails
// it stops the others and returns a *FailedError naming the rank the
// others were waiting for; if ctx ends (Ctrl-C) it forwards SIGINT to
// every worker. Every wait is bounded: once a worker has exited, the rest
// have StopGrace to follow before they are killed, so a stopped or hung
// worker cannot keep the launcher waiting.
func Run(ctx context.Context, cfg Config) (*report.Report, error) {
	start := time.Now()
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	runDir, cleanup, err := cfg.runDir()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	con := newConsole(cfg.Stdout, cfg.LogEvery, cfg.N)
	c := &localCluster{cfg: cfg, console: con, out: con.writer(cfg.Stdout), errOut: con.writer(cfg.Stderr),
		msgs: make(chan Message, 64), status: newStatus(cfg.N, cfg.Elastic), exits: make(chan exit, cfg.N), workers: make([]*worker, cfg.N)}
	c.status.reported, c.status.running = c.reported, c.running
	if err := c.startAll(runDir); err != nil {
		c.stopAll(os.Kill)
		c.reap()
		return nil, err
	}
	o := c.supervise(ctx)
	rep := c.report(start, o)
	return rep, c.verdict(ctx, rep, o)
}

// fill checks cfg and sets its defaults.
func (cfg *Config) fill() error {
	if cfg.N < 1 {
		return fmt.Errorf("launch: -n %d: want at least 1 worker", cfg.N)
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
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.LogEvery <= 0 {
		cfg.LogEvery = observe.DefaultLogEvery
	}
	return nil
}

// runDir returns the directory for the TF_CONFIG files and reports, and
// what removes it (a temporary one) at the end.
func (cfg *Config) runDir() (string, func(), error) {
	if cfg.RunDir != "" {
		if err := os.MkdirAll(cfg.RunDir, 0o755); err != nil {
			return "", nil, fmt.Errorf("launch: run directory: %w", err)
		}
		return cfg.RunDir, func() {}, nil
	}
	d, err := os.MkdirTemp("", "meshtrain-launch-")
	if err != nil {
		return "", nil, fmt.Errorf("launch: run directory: %w", err)
	}
	return d, func() { os.RemoveAll(d) }, nil
}

// localCluster is one launch in progress: the local workers it started.
type localCluster struct {
	cfg         Config
	console     *console
	out, errOut io.Writer
	msgs        chan Message
	status      *status
	exits       chan exit
	workers     []*worker
	started     int
	// what restarting a worker needs (Config.Elastic)
	runDir   string
	addrs    []string
	secret   []byte
	restarts []int
	finished int // workers that exited 0: the run is over, none is restarted
	// quiet, after Ctrl-C: the workers' own last words ("interrupted",
	// the collectives they abandoned) are not shown; the user knows.
	quiet atomic.Bool
}

// startAll writes each worker's TF_CONFIG and starts it.
func (c *localCluster) startAll(runDir string) error {
	addrs, err := p2p.LocalAddrs(c.cfg.N, c.cfg.QUIC)
	if err != nil {
		return fmt.Errorf("launch: picking free ports: %w", err)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	c.runDir, c.addrs, c.secret, c.restarts = runDir, addrs, secret, make([]int, c.cfg.N)
	for r := range c.cfg.N {
		if err := c.start(runDir, r, addrs, secret); err != nil {
			return err
		}
	}
	return nil
}

// start starts rank r's worker and the goroutines that read its output
// and wait for it.
func (c *localCluster) start(runDir string, r int, addrs []string, secret []byte) error {
	w := &worker{rank: r, addr: addrs[r], report: filepath.Join(runDir, fmt.Sprintf("report-%d.json", r))}
	tfc, _ := json.Marshal(map[string]any{ // plain data: cannot fail
		"cluster": map[string][]string{"worker": addrs},
		"task":    map[string]any{"type": "worker", "index": r},
	})
	tfFile := filepath.Join(runDir, fmt.Sprintf("tf_config-%d.json", r))
	if err := atomicfile.WriteFile(tfFile, tfc, 0o600); err != nil { // never blocks on what is there (a FIFO)
		return fmt.Errorf("launch: writing rank %d's TF_CONFIG: %w", r, err)
	}
	_ = os.Remove(w.report)
	args := append(slices.Clone(c.cfg.GlobalArgs), "worker", "--tf-config", tfFile, "--report", w.report, "--events")
	args = append(args, c.cfg.WorkerArgs...)
	cmd := exec.Command(c.cfg.Executable, args...)
	cmd.Env = append(os.Environ(), SecretEnv+"="+hex.EncodeToString(secret), "TF_CONFIG=")
	if c.restarts != nil && c.restarts[r] > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", RestartEnv, c.restarts[r]))
	}
	cmd.SysProcAttr = sysProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("launch: starting rank %d (%s): %w", r, c.cfg.Executable, err)
	}
	w.cmd = cmd
	c.workers[r] = w
	c.started++
	restart := ""
	if c.restarts != nil && c.restarts[r] > 0 {
		restart = fmt.Sprintf(" (restart %d of --max-restarts %d: it rejoins at the next commit)", c.restarts[r], c.cfg.MaxRestarts)
	}
	fmt.Fprintf(c.out, "[launch] rank %d: pid %d, %s%s\n", r, cmd.Process.Pid, w.addr, restart)
	w.ioDone.Add(2)
	go w.pumpStdout(stdout, c.out, c.msgs)
	go w.pumpStderr(stderr, c.errOut, &c.quiet)
	go func() {
		w.ioDone.Wait() // read all output before reaping, so lastErr is complete
		err := cmd.Wait()
		w.mu.Lock()
		w.exited, w.waitErr = true, err
		w.mu.Unlock()
		c.exits <- exit{w, err}
	}()
	return nil
}

// stopAll sends sig to every worker still running.
func (c *localCluster) stopAll(sig os.Signal) { c.stopAllBut(sig, nil) }

// stopAllBut signals every running worker but spare.
func (c *localCluster) stopAllBut(sig os.Signal, spare *worker) {
	for _, w := range c.workers {
		if w != nil && w != spare {
			w.stop(sig)
		}
	}
}

// stop signals w if it is still running, and marks it stopped by us.
func (w *worker) stop(sig os.Signal) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.exited {
		w.stopped = true
		_ = w.cmd.Process.Signal(sig)
	}
}

// RootCauseGrace is how long the rank a failed worker says it waited for
// may run on, after the others are stopped, to report its own error (a
// chief that could not start says why) before it is stopped too.
const RootCauseGrace = 2 * time.Second

// reap waits (a bounded time) for the workers started so far to exit,
// after a failed start killed them.
func (c *localCluster) reap() {
	timeout := time.After(c.cfg.StopGrace)
	for range c.started {
		select {
		case <-c.exits:
		case <-timeout:
			return
		}
	}
}

// outcome is how the workers ended, as supervise saw it.
type outcome struct {
	failed    *worker   // the first to fail (ring)
	lost      []*worker // gossip: failed while others ran on
	abandoned []*worker // still running StopGrace after the others: killed
	// spared is the rank the first failure says it waited for, left
	// running for RootCauseGrace so that its own error is the one named.
	spared      *worker
	interrupted bool
}

// supervise relays the workers' events until every worker has exited. A
// worker that finishes, a failure that stops the rest, or Ctrl-C starts
// a StopGrace clock: a worker still running when it runs out (stopped,
// hung) is killed and named.
func (c *localCluster) supervise(ctx context.Context) outcome {
	var o outcome
	var deadline, spareEnds, holdEnds <-chan time.Time
	status := c.status
	for running := c.cfg.N; running > 0; {
		if status.held != nil && holdEnds == nil {
			holdEnds = time.After(HoldChange)
		}
		select {
		case <-holdEnds: // the lost worker's process did not exit: the survivors' words
			c.tell(status.release())
			holdEnds = nil
		case m := <-c.msgs:
			c.relay(status, m)
		case e := <-c.exits:
			running--
			if c.exited(&o, e, running) {
				running++ // restarted
				continue
			}
			// Once a worker has finished (or failed in lock-step, where
			// the rest are asked to stop), the rest have StopGrace. A
			// gossip worker's failure starts no clock: the others may
			// have most of their training still to do.
			if deadline == nil && (e.err == nil || !c.cfg.Gossip && !c.cfg.Elastic) {
				deadline = time.After(c.cfg.StopGrace)
			}
			if o.spared != nil && spareEnds == nil {
				spareEnds = time.After(min(RootCauseGrace, c.cfg.StopGrace))
			}
		case <-spareEnds:
			o.spared.stop(os.Interrupt)
		case <-ctx.Done():
			if !o.interrupted {
				o.interrupted = true
				c.quiet.Store(true)
				c.stopAll(os.Interrupt)
				deadline = time.After(c.cfg.StopGrace)
			}
			ctx = context.Background() // Done once
		case <-deadline:
			o.abandoned = c.abandon(o.interrupted)
			deadline = nil
		}
	}
	for drained := false; !drained; {
		select {
		case m := <-c.msgs:
			c.relay(status, m)
		default:
			drained = true
		}
	}
	c.console.clear()
	c.tell(status.release())
	for _, line := range status.untold() {
		fmt.Fprintln(c.out, line)
	}
	return o
}

// relay shows a worker's message: rank 0's steps as progress, other
// events as status lines.
func (c *localCluster) relay(status *status, m Message) {
	switch {
	case m.Kind == mirrored.EventStep && m.Rank == 0:
		c.console.step(m.Event)
		return
	case m.Kind == mirrored.EventStart && m.Rank == 0:
		c.console.started(m.Event, c.cfg.Elastic)
	}
	if line := status.update(m); line != "" {
		fmt.Fprintln(c.out, line)
	}
}

// tell prints lines, if any.
func (c *localCluster) tell(lines string) {
	if lines != "" {
		fmt.Fprintln(c.out, lines)
	}
}

// exited records a worker's exit: under gossip a failed worker is lost
// and the others carry on; an elastic one is restarted (it says so) while
// it has restarts left, else lost; otherwise the first failure stops the
// rest.
func (c *localCluster) exited(o *outcome, e exit, running int) (restarted bool) {
	switch {
	case e.err == nil:
		c.finished++
	case o.interrupted || e.w.hung: // hung: abandon recorded it
	case c.cfg.Elastic && running > 0 && c.restarts[e.w.rank] < c.cfg.MaxRestarts && !e.w.stoppedRun && c.finished == 0:
		r := e.w.rank
		c.restarts[r]++
		c.tell(c.status.diedWorker(r, e.w.deathWords()))
		if err := c.start(c.runDir, r, c.addrs, c.secret); err != nil {
			fmt.Fprintf(c.out, "[launch] restarting rank %d: %v\n", r, err)
			o.lost = append(o.lost, e.w)
			return false
		}
		return true
	case c.cfg.Elastic:
		if running > 0 {
			c.tell(c.status.diedWorker(e.w.rank, e.w.deathWords()))
			fmt.Fprintf(c.out, "[launch] rank %d is not restarted (--max-restarts %d used): the other elastic peers carry on without it\n", e.w.rank, c.cfg.MaxRestarts)
		}
		o.lost = append(o.lost, e.w)
	case c.cfg.Gossip:
		if running > 0 {
			fmt.Fprintf(c.out, "[launch] rank %d was lost (%s); the other gossip peers carry on without it\n", e.w.rank, e.w.describe())
		}
		o.lost = append(o.lost, e.w)
	case o.failed == nil:
		o.failed = e.w
		c.cfg.Logger.Debug("worker failed", zap.Int("rank", e.w.rank), zap.Error(e.err))
		if r, ok := namedRank(e.w.lastErr, e.w.rank, len(c.workers)); ok {
			o.spared = c.workers[r]
		}
		c.stopAllBut(os.Interrupt, o.spared)
	}
	return false
}

// abandon kills the workers still running when the stop clock ran out,
// says so, and returns them.
func (c *localCluster) abandon(interrupted bool) []*worker {
	var left []*worker
	for _, w := range c.workers {
		w.mu.Lock()
		if !w.exited {
			w.hung = true
			left = append(left, w)
		}
		w.mu.Unlock()
	}
	if len(left) > 0 && !interrupted {
		ranks := make([]string, len(left))
		for i, w := range left {
			ranks[i] = strconv.Itoa(w.rank)
		}
		fmt.Fprintf(c.out, "[launch] rank(s) %s still running %v after the first worker exited: killing them\n", strings.Join(ranks, ", "), c.cfg.StopGrace)
	}
	c.stopAll(os.Kill)
	return left
}

// report gathers every worker's outcome.
func (c *localCluster) report(start time.Time, o outcome) *report.Report {
	rep := &report.Report{WallSeconds: time.Since(start).Seconds(), Gossip: c.cfg.Gossip, Started: start, Info: c.cfg.Info}
	for _, w := range c.workers {
		p := report.Peer{Rank: w.rank, Addr: w.addr, PID: w.cmd.Process.Pid}
		if w.waitErr != nil {
			p.Err = w.describe()
		} else if s, err := readReport(w.report); err != nil {
			p.Err = err.Error()
		} else {
			p.Summary = s
		}
		rep.Peers = append(rep.Peers, p)
	}
	if c.cfg.Gossip || c.cfg.Elastic {
		for _, w := range append(o.lost, o.abandoned...) {
			rep.Lost = append(rep.Lost, w.rank)
		}
		slices.Sort(rep.Lost)
	}
	return rep
}

// verdict is Run's error: an interruption, the worker to blame for a
// failure, a gossip run that lost replicas (unless tolerated), or a
// worker without a report; and whether the replicas are identical.
func (c *localCluster) verdict(ctx context.Context, rep *report.Report, o outcome) error {
	switch {
	case o.interrupted:
		return fmt.Errorf("launch: interrupted: %w", ctx.Err())
	case o.failed != nil || (!c.cfg.Gossip && !c.cfg.Elastic && len(o.abandoned) > 0):
		first := o.failed
		if first == nil {
			first = o.abandoned[0]
		}
		return blame(c.workers, first)
	}
	var first *report.Peer
	for i, p := range rep.Peers {
		switch {
		case p.Summary != nil && first == nil:
			first = &rep.Peers[i]
		case p.Summary == nil && !slices.Contains(rep.Lost, p.Rank):
			return &FailedError{Rank: p.Rank, Reason: p.Err}
		}
	}
	if first == nil { // gossip, and every replica was lost
		return blame(c.workers, append(o.lost, o.abandoned...)[0])
	}
	rep.Identical = report.Identical(rep.Peers)
	// A replica lost to fault injection (--kill-rank) was lost on request.
	var unasked []int
	for _, r := range rep.Lost {
		if !c.workers[r].killed {
			unasked = append(unasked, r)
		}
	}
	if len(unasked) > 0 && !c.cfg.TolerateLoss && !c.cfg.Elastic {
		return &LostError{Ranks: unasked}
	}
	return nil
}

// LostError says a gossip run finished without some of its replicas.
type LostError struct{ Ranks []int }

func (e *LostError) Error() string {
	return fmt.Sprintf("gossip run lost rank(s) %v: the others finished without them (pass --tolerate-loss to accept a run that loses replicas)", e.Ranks)
}

// waitingFor finds the rank a worker's error says it was waiting for, or
// could not start without: the rank to blame for its failure.
var waitingFor = regexp.MustCompile(`waiting for rank (\d+)|rank (\d+) (?:\(the chief\) )?could not start`)

// blame picks the worker to name: one that died of a signal nobody sent
// (killed, crashed), else one the fault injection killed (which may exit
// after the peers that lost it, and is stopped with them), else one the
// launcher had to kill because it neither finished nor exited when asked
// (a stopped or hung worker: what the others waited for, whatever rank
// their errors name first), else the rank the others' errors say they
// were waiting for at the end of the chain (a chief that could not
// start), else the first to exit with an error; the others then failed
// because they lost it.
func blame(workers []*worker, first *worker) error {
	culprit := first
	waiting, firstMissed := waitedFor(workers)
	if w := pick(workers, func(w *worker) bool { return !w.stopped && diedOfSignal(w.waitErr) }); w != nil {
		culprit = w
	} else if w := pick(workers, func(w *worker) bool { return w.killed }); w != nil {
		culprit = w
	} else if w := pick(workers, func(w *worker) bool { return w.hung }); w != nil {
		culprit = w
	} else if r, ok := mostNamed(waiting); ok {
		culprit = workers[r]
	}
	fe := &FailedError{Rank: culprit.rank, Reason: culprit.describe(), Waiting: waiting[culprit.rank], FirstMissed: firstMissed[culprit.rank]}
	if culprit.hung {
		fe.Reason = "stopped responding and did not exit: killed (" + culprit.describe() + ")"
	}
	for _, w := range workers {
		if w == culprit {
			continue
		}
		switch {
		case w.waitErr == nil:
			fe.Others = append(fe.Others, fmt.Sprintf("rank %d finished", w.rank))
		case w.stopped && !slices.Contains(fe.Waiting, w.rank):
			fe.Others = append(fe.Others, fmt.Sprintf("rank %d was stopped", w.rank))
		default:
			fe.Others = append(fe.Others, fmt.Sprintf("rank %d failed: %s", w.rank, w.describe()))
		}
	}
	return fe
}

// waitedFor maps each rank to the ranks that were waiting for it (or for
// it to start), and to when the first of them reported it. A rank waits
// for the rank its error names innermost, and through it for whatever
// that rank's own error names, to the end of the chain: rank 0 of a tree
// all-reduce waits for rank 1, which waits for the stopped rank 2, so
// both wait for rank 2.
func waitedFor(workers []*worker) (map[int][]int, map[int]time.Time) {
	waiting, first := map[int][]int{}, map[int]time.Time{}
	named := func(r int) (int, bool) { return namedRank(workers[r].lastErr, r, len(workers)) }
	for _, w := range workers {
		r, ok := named(w.rank)
		if !ok {
			continue
		}
		for seen := map[int]bool{w.rank: true, r: true}; ; {
			next, ok := named(r)
			if !ok || seen[next] {
				break
			}
			r, seen[next] = next, true
		}
		waiting[r] = append(waiting[r], w.rank)
		if t, ok := first[r]; !ok || w.errAt.Before(t) {
			first[r] = w.errAt
		}
	}
	return waiting, first
}

// namedRank is the rank of n that a worker's error (of rank self) says it
// was waiting for, if any: the innermost one named, as an error wraps the
// one it was given ("waiting for rank 0: rank 0 aborted: … waiting for
// rank 2" was waiting for rank 2).
func namedRank(lastErr string, self, n int) (int, bool) {
	all := waitingFor.FindAllStringSubmatch(lastErr, -1)
	for i := len(all) - 1; i >= 0; i-- {
		r, err := strconv.Atoi(all[i][1] + all[i][2])
		if err == nil && r >= 0 && r < n && r != self {
			return r, true
		}
	}
	return 0, false
}

// mostNamed is the rank the most others were waiting for.
func mostNamed(waiting map[int][]int) (int, bool) {
	best, n := -1, 0
	for r, by := range waiting {
		if len(by) > n || (len(by) == n && r < best) {
			best, n = r, len(by)
		}
	}
	return best, best >= 0
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
					w.lastErr, w.killed, w.stoppedRun, w.errAt = m.Error, m.Injected, m.Stopped, time.Now()
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

func (w *worker) pumpStderr(r io.Reader, out io.Writer, quiet *atomic.Bool) {
	defer w.ioDone.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case quiet.Load():
		case strings.HasPrefix(line, "{"):
			// A JSON log line (--log-format json) already names its rank;
			// it stays one JSON object per line for jq and log shippers.
			fmt.Fprintln(out, line)
		default:
			fmt.Fprintf(out, "[rank %d] %s\n", w.rank, line)
		}
		if msg, ok := strings.CutPrefix(line, "meshtrain: "); ok {
			w.mu.Lock()
			if w.lastErr == "" {
				w.lastErr, w.errAt = msg, time.Now()
			}
			w.mu.Unlock()
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
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
