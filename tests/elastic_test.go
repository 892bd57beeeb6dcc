package tests

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/internal/longtest"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/launch"
	"github.com/meshtrain/meshtrain/tests/netns"
)

// elasticSecret is the cluster secret of the elastic tests' peers.
var elasticSecret = "MESHTRAIN_CLUSTER_SECRET=" + hex.EncodeToString([]byte("the elastic tests' secret, 32 b."))

// elasticRun is a LeNet run short enough for the default test run and
// long enough (about 60 steps an epoch at 4 peers) to lose a peer in.
func elasticRun(extra ...string) []string {
	return append([]string{"worker", "--elastic", "--model", "lenet", "--epochs", "2", "--batch", "16", "--lr", "0.05",
		"--train-examples", "4000", "--test-examples", "500", "--hash-every", "10", "--commit-every", "5",
		"--collective-timeout", "4s", "--log-every", "2", "--events"}, extra...)
}

// elasticPeer is one worker process of an elastic cluster (one life of
// it: a restart is another elasticPeer at the same index).
type elasticPeer struct {
	index  int
	cmd    *exec.Cmd
	report string
	done   chan struct{}
	err    error
	stderr strings.Builder
	mu     sync.Mutex
	steps  int // the highest global step its events showed
	events []mirrored.Event
}

// elasticCluster runs the workers of one cluster list by hand, so that
// the test can kill, stop and restart them.
type elasticCluster struct {
	t     *testing.T
	ctx   context.Context
	addrs []string
	dir   string
	args  []string
	env   []string
	mu    sync.Mutex
	peers [][]*elasticPeer // by index: every life
	// command makes peer i's process (default: the binary on this host).
	command func(i int, args []string) *exec.Cmd
	// noSpec: the peers find their cluster in env alone (no TF_CONFIG).
	noSpec bool
}

func newElasticCluster(t *testing.T, ctx context.Context, n int, args []string) *elasticCluster {
	c := &elasticCluster{t: t, ctx: ctx, addrs: freePorts(t, n), dir: t.TempDir(), args: args, env: []string{elasticSecret}, peers: make([][]*elasticPeer, n),
		command: func(_ int, args []string) *exec.Cmd { return exec.CommandContext(ctx, binary, args...) }}
	t.Cleanup(func() {
		for _, lives := range c.peers {
			for _, p := range lives {
				if p.cmd.Process != nil {
					_ = p.cmd.Process.Signal(syscall.SIGCONT)
					_ = p.cmd.Process.Kill()
				}
			}
		}
	})
	return c
}

// start starts (or restarts) the worker at index i, with extra flags.
func (c *elasticCluster) start(i int, env []string, extra ...string) *elasticPeer {
	c.mu.Lock()
	life := len(c.peers[i])
	c.mu.Unlock()
	p := &elasticPeer{index: i, report: filepath.Join(c.dir, fmt.Sprintf("report-%d-%d.json", i, life)), done: make(chan struct{})}
	args := append(slices.Clone(c.args), "--report", p.report)
	p.cmd = c.command(i, append(args, extra...))
	spec := "TF_CONFIG=" + tfConfig(c.addrs, i)
	if c.noSpec {
		spec = "TF_CONFIG="
	}
	p.cmd.Env = append(append(os.Environ(), c.env...), append(env, spec)...)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	p.cmd.Stderr = &lockedWriter{w: &p.stderr, mu: &p.mu}
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), launch.EventPrefix)
			if !ok {
				continue
			}
			var m launch.Message
			if json.Unmarshal([]byte(line), &m) == nil {
				p.mu.Lock()
				p.events = append(p.events, m.Event)
				p.steps = max(p.steps, m.Step)
				p.mu.Unlock()
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	c.mu.Lock()
	c.peers[i] = append(c.peers[i], p)
	c.mu.Unlock()
	return p
}

// startAll starts every index.
func (c *elasticCluster) startAll() []*elasticPeer {
	ps := make([]*elasticPeer, len(c.addrs))
	for i := range ps {
		ps[i] = c.start(i, nil)
	}
	return ps
}

// waitStep waits until peer p's events reach global step s.
func (c *elasticCluster) waitStep(p *elasticPeer, s int) {
	c.t.Helper()
	for {
		p.mu.Lock()
		got := p.steps
		p.mu.Unlock()
		if got >= s {
			return
		}
		select {
		case <-p.done:
			c.t.Fatalf("peer %d exited (%v) before step %d:\n%s", p.index, p.err, s, p.stderrText())
		case <-c.ctx.Done():
			c.t.Fatalf("peer %d did not reach step %d: %v", p.index, s, c.ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitEvent waits until peer p emitted an event of kind.
func (c *elasticCluster) waitEvent(p *elasticPeer, kind string) mirrored.Event {
	c.t.Helper()
	for {
		p.mu.Lock()
		for _, e := range p.events {
			if e.Kind == kind {
				p.mu.Unlock()
				return e
			}
		}
		p.mu.Unlock()
		select {
		case <-p.done:
			c.t.Fatalf("peer %d exited (%v) before a %s event:\n%s", p.index, p.err, kind, p.stderrText())
		case <-c.ctx.Done():
			c.t.Fatalf("peer %d: no %s event: %v", p.index, kind, c.ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// wait waits for p to exit.
func (c *elasticCluster) wait(p *elasticPeer) error {
	select {
	case <-p.done:
		return p.err
	case <-c.ctx.Done():
		c.t.Fatalf("peer %d still running: %v\n%s", p.index, c.ctx.Err(), p.stderrText())
		return nil
	}
}

func (p *elasticPeer) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func (p *elasticPeer) summary(t *testing.T) *mirrored.Summary {
	t.Helper()
	b, err := os.ReadFile(p.report)
	if err != nil {
		t.Fatalf("peer %d's report: %v\n%s", p.index, err, p.stderrText())
	}
	var s mirrored.Summary
	if err := json.Unmarshal(b, &s); err != nil || s.Run == nil {
		t.Fatalf("peer %d's report: %v", p.index, err)
	}
	return &s
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// finished checks that the peers ps exited 0 with identical parameters
// and the same membership record, and returns the first's summary.
func finished(t *testing.T, c *elasticCluster, ps ...*elasticPeer) *mirrored.Summary {
	t.Helper()
	var first *mirrored.Summary
	for _, p := range ps {
		if err := c.wait(p); err != nil {
			t.Fatalf("peer %d: %v\n%s", p.index, err, p.stderrText())
		}
		s := p.summary(t)
		if first == nil {
			first = s
			continue
		}
		if s.Run.ParamsSHA256 != first.Run.ParamsSHA256 {
			t.Errorf("peer %d ended with parameters %s, peer %d with %s", p.index, s.Run.ParamsSHA256, ps[0].index, first.Run.ParamsSHA256)
		}
		a, _ := json.Marshal(s.Run.Membership)
		b, _ := json.Marshal(first.Run.Membership)
		if string(a) != string(b) {
			t.Errorf("peer %d's membership record %s differs from peer %d's %s", p.index, a, ps[0].index, b)
		}
	}
	return first
}

// TestElasticLosesAPeer: SIGKILL of a random peer at a random step (a
// non-chief, then the chief): the others agree on who is left, roll back
// to the last commit and finish the run with identical parameters; the
// summary records who left, from which step and why; the time from the
// kill to the next completed step is under the collective timeout plus
// 1 s (a killed peer's links close at once, so it is far under).
func TestElasticLosesAPeer(t *testing.T) {
	for _, tc := range []struct {
		name string
		kill func(r *rand.Rand) int
	}{
		{"non-chief", func(r *rand.Rand) int { return 1 + r.IntN(3) }},
		{"chief", func(*rand.Rand) int { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			seed := uint64(time.Now().UnixNano())
			r := rand.New(rand.NewPCG(seed, 1))
			victim, at := tc.kill(r), 8+r.IntN(40)
			t.Logf("seed %d: killing peer %d at step %d", seed, victim, at)
			c := newElasticCluster(t, ctx, 4, elasticRun())
			ps := c.startAll()
			c.waitStep(ps[victim], at)
			killed := time.Now()
			_ = ps[victim].cmd.Process.Kill()
			var rest []*elasticPeer
			for _, p := range ps {
				if p != ps[victim] {
					rest = append(rest, p)
				}
			}
			ev := c.waitEvent(rest[0], mirrored.EventMembership)
			from := ev.Step
			c.waitStep(rest[0], from+1)
			resumed := time.Since(killed)
			s := finished(t, c, rest...)
			t.Logf("from the kill to the next completed step: %v; membership %+v", resumed, s.Run.Membership)
			if resumed > 5*time.Second {
				t.Errorf("from the kill to the next step took %v, want under the 4 s timeout + 1 s", resumed)
			}
			if len(s.Run.Membership) != 1 {
				t.Fatalf("membership record %+v: want one change", s.Run.Membership)
			}
			ch := s.Run.Membership[0]
			if !slices.Equal(ch.Left, []int{victim}) || len(ch.Members) != 3 || slices.Contains(ch.Members, victim) || ch.Reason == "" {
				t.Errorf("change %+v: want peer %d left, the 3 others members, and why", ch, victim)
			}
			if s.Run.Replicas != 3 || s.Run.FinalAccuracy < 0.5 {
				t.Errorf("the run ended on %d replicas with accuracy %.3f", s.Run.Replicas, s.Run.FinalAccuracy)
			}
		})
	}
}

// TestElasticRejoinAndReplay: a killed peer's restart (same index, same
// address) is admitted at the next commit and receives the state; all
// four end identical, and the record says who left and who joined. A
// second cluster given that record (--membership-schedule) replays it,
// the peer leaving and coming back at the recorded steps, and ends with
// the same parameters, bit for bit.
func TestElasticRejoinAndReplay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	c := newElasticCluster(t, ctx, 4, elasticRun())
	s := killAndRestart(t, c, 2, 20)
	ms := s.Run.Membership
	t.Logf("membership %+v", ms)
	if s.Run.Replicas != 4 {
		t.Errorf("the run ended with %d replicas, want 4", s.Run.Replicas)
	}
	record := filepath.Join(t.TempDir(), "record.json")
	b, _ := json.Marshal(s)
	if err := os.WriteFile(record, b, 0o644); err != nil {
		t.Fatal(err)
	}
	replay := newElasticCluster(t, ctx, 4, elasticRun("--membership-schedule", record))
	rs := replay.startAll()
	r := finished(t, replay, rs...)
	if r.Run.ParamsSHA256 != s.Run.ParamsSHA256 {
		t.Errorf("the replay ended with parameters %s, the recorded run with %s", r.Run.ParamsSHA256, s.Run.ParamsSHA256)
	}
	if len(r.Run.Membership) != 2 || r.Run.Membership[0].Step != ms[0].Step || r.Run.Membership[1].Step != ms[1].Step {
		t.Errorf("the replay's record %+v, the run's %+v", r.Run.Membership, ms)
	}
}

// TestElasticHang: a peer stopped with SIGSTOP (a hang, not a death) is
// dropped once the collective timeout passes; the others finish. Woken,
// it finds the cluster gone on without it and rejoins.
func TestElasticHang(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := newElasticCluster(t, ctx, 4, elasticRun("--epochs", "3"))
	ps := c.startAll()
	c.waitStep(ps[3], 15)
	stopped := time.Now()
	_ = ps[3].cmd.Process.Signal(syscall.SIGSTOP)
	ev := c.waitEvent(ps[0], mirrored.EventMembership)
	c.waitStep(ps[0], ev.Step+1)
	resumed := time.Since(stopped)
	_ = ps[3].cmd.Process.Signal(syscall.SIGCONT)
	s := finished(t, c, ps...)
	t.Logf("from SIGSTOP to the next step: %v; membership %+v", resumed, s.Run.Membership)
	if resumed > 4*time.Second+1500*time.Millisecond {
		t.Errorf("from SIGSTOP to the next step: %v, want the 4 s timeout, the probes' 0.5 s and a little", resumed)
	}
	ms := s.Run.Membership
	if len(ms) < 2 || !slices.Equal(ms[0].Left, []int{3}) || !slices.Contains(ms[len(ms)-1].Members, 3) {
		t.Errorf("membership %+v: want peer 3 dropped, then back", ms)
	}
}

// TestElasticBelowMinWorkers: two of four peers killed at once with
// --min-workers 3: the two left (half, with the lowest index) stop
// cleanly, naming the lost peers and the minimum; the last commit is
// saved as a checkpoint, from which a new elastic cluster resumes.
func TestElasticBelowMinWorkers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	c := newElasticCluster(t, ctx, 4, elasticRun("--min-workers", "3", "--checkpoint-dir", dir))
	ps := c.startAll()
	c.waitStep(ps[0], 12)
	_ = ps[1].cmd.Process.Kill()
	_ = ps[3].cmd.Process.Kill()
	for _, p := range []*elasticPeer{ps[0], ps[2]} {
		err := c.wait(p)
		msg := p.stderrText()
		if err == nil || !strings.Contains(msg, "fewer than --min-workers 3") || !strings.Contains(msg, "lost [1 3]") {
			t.Errorf("peer %d: %v, want a stop naming the lost peers 1 and 3 and --min-workers 3:\n%s", p.index, err, msg)
		}
	}
	if msg := ps[0].stderrText(); !strings.Contains(msg, "is saved as "+dir) {
		t.Errorf("the chief does not say where the last commit is saved:\n%s", msg)
	}
	again := newElasticCluster(t, ctx, 4, elasticRun("--checkpoint-dir", dir))
	rs := again.startAll()
	s := finished(t, again, rs...)
	sum := rs[0].summary(t)
	if sum.Peer.ResumedFrom == "" || sum.Peer.ResumedStep == 0 || s.Run.Replicas != 4 {
		t.Errorf("the new cluster did not resume from the saved commit: %+v", sum.Peer)
	}
}

// TestElasticStranger: a process started at a lost peer's place with
// another cluster secret is refused (its identity is not the cluster's:
// the peers' gater admits the listed peer IDs only, and it finds that
// theirs are not the ones its secret derives), says why, and the run
// finishes without it.
func TestElasticStranger(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := newElasticCluster(t, ctx, 3, elasticRun("--epochs", "3"))
	ps := c.startAll()
	c.waitStep(ps[1], 10)
	_ = ps[1].cmd.Process.Kill()
	c.waitEvent(ps[0], mirrored.EventMembership)
	other := "MESHTRAIN_CLUSTER_SECRET=" + hex.EncodeToString([]byte("not the cluster's secret at all."))
	stranger := c.start(1, []string{other})
	if err := c.wait(stranger); err == nil || !strings.Contains(stranger.stderrText(), "identity does not match") {
		t.Errorf("the stranger: %v, want it refused for its identity:\n%s", err, stranger.stderrText())
	}
	s := finished(t, c, ps[0], ps[2])
	if last := s.Run.Membership[len(s.Run.Membership)-1]; slices.Contains(last.Members, 1) {
		t.Errorf("the stranger was admitted: %+v", s.Run.Membership)
	}
}

// TestElasticLossDuringChange: a second peer dies while the survivors of
// the first loss agree on who is left: they agree again, without it, and
// finish (3 of 5: a majority).
func TestElasticLossDuringChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := newElasticCluster(t, ctx, 5, elasticRun("--epochs", "3"))
	ps := c.startAll()
	c.waitStep(ps[0], 10)
	_ = ps[4].cmd.Process.Kill()
	for !strings.Contains(ps[0].stderrText()+ps[1].stderrText()+ps[2].stderrText()+ps[3].stderrText(), "agreeing on who is left") {
		select {
		case <-ctx.Done():
			t.Fatal("no survivor began to agree")
		case <-time.After(time.Millisecond):
		}
	}
	_ = ps[3].cmd.Process.Kill()
	s := finished(t, c, ps[:3]...)
	last := s.Run.Membership[len(s.Run.Membership)-1]
	if !slices.Equal(last.Members, []int{0, 1, 2}) {
		t.Errorf("membership %+v: want peers 0, 1 and 2 at the end", s.Run.Membership)
	}
}

// TestElasticLossDuringCheckpoint: the chief, writing a checkpoint every
// step, is killed (most likely mid-write); peer 1 takes the checkpoints
// over and writes the last one, which matches the run's end.
func TestElasticLossDuringCheckpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	summary := filepath.Join(t.TempDir(), "summary.json")
	c := newElasticCluster(t, ctx, 3, elasticRun("--checkpoint-dir", dir, "--checkpoint-every", "1", "--summary", summary))
	ps := c.startAll()
	c.waitEvent(ps[0], mirrored.EventCheckpoint)
	c.waitStep(ps[0], 20)
	_ = ps[0].cmd.Process.Kill()
	s := finished(t, c, ps[1:]...)
	var last mirrored.Event
	for _, e := range ps[1].events {
		if e.Kind == mirrored.EventCheckpoint {
			last = e
		}
	}
	if last.Step != s.Run.Steps || !strings.HasPrefix(last.Path, dir) {
		t.Errorf("peer 1's last checkpoint %+v: want one at the run's last step %d in %s", last, s.Run.Steps, dir)
	}
	sum := readSummary(t, summary) // the last generation's chief wrote it
	if sum.Run == nil || len(sum.Run.Membership) != 1 || sum.Peers[0].Error == "" || sum.Peers[1].Error != "" {
		t.Errorf("summary: %+v", sum)
	}
	// The checkpoint written after the change (by 2 peers) resumes on 3,
	// the run extended by an epoch.
	again := newElasticCluster(t, ctx, 3, elasticRun("--checkpoint-dir", dir, "--epochs", "3"))
	rs := again.startAll()
	more := finished(t, again, rs...)
	p := rs[0].summary(t).Peer
	if p.ResumedFrom == "" || len(more.Run.EpochResults) != 3 || more.Run.Replicas != 3 {
		t.Errorf("resuming the run on 3 peers: resumed from %q, %d epochs, %d replicas", p.ResumedFrom, len(more.Run.EpochResults), more.Run.Replicas)
	}
}

// TestLongEmulatedHostsElasticPartition: 3 hosts, and host 2 is cut off the
// others in mid-run (its port on the bridge goes down): a partition. The
// minority (host 2 alone) stops, saying it has no majority; the majority
// (hosts 0 and 1) goes on without it and finishes.
func TestLongEmulatedHostsElasticPartition(t *testing.T) {
	longtest.Require(t, "an elastic partition of emulated hosts")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	h, c := emulatedElasticCluster(t, ctx, 3)
	ps := c.startAll()
	c.waitStep(ps[0], 15)
	if err := h.Isolate(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.wait(ps[2]); err == nil || !strings.Contains(ps[2].stderrText(), "not a majority") {
		t.Errorf("the minority (host 2): %v, want it stopped for want of a majority:\n%s", err, ps[2].stderrText())
	}
	s := finished(t, c, ps[0], ps[1])
	if len(s.Run.Membership) != 1 || !slices.Equal(s.Run.Membership[0].Left, []int{2}) {
		t.Errorf("the majority's record %+v: want host 2 left", s.Run.Membership)
	}
}

// TestLongEmulatedHostsElasticRestart: the path every scheduler's restart
// takes (launch --max-restarts, a Kubernetes pod recreated at its index,
// a Slurm task's own retry loop): the worker on host 1 dies and a new
// process starts on the same host, at the same address and index; it
// rejoins at the next commit and the three hosts finish identical.
func TestLongEmulatedHostsElasticRestart(t *testing.T) {
	longtest.Require(t, "an elastic restart across emulated hosts")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	_, c := emulatedElasticCluster(t, ctx, 3)
	killAndRestart(t, c, 1, 15)
}

// killAndRestart starts c's peers, SIGKILLs peer victim at step at,
// starts it again once the others went on without it, and checks that
// every peer finishes identical, with a record of the victim leaving and
// then joining; it returns the first peer's summary.
func killAndRestart(t *testing.T, c *elasticCluster, victim, at int) *mirrored.Summary {
	t.Helper()
	ps := c.startAll()
	c.waitStep(ps[victim], at)
	_ = ps[victim].cmd.Process.Kill()
	c.waitEvent(ps[(victim+1)%len(ps)], mirrored.EventMembership)
	ps[victim] = c.start(victim, nil)
	s := finished(t, c, ps...)
	ms := s.Run.Membership
	if len(ms) != 2 || !slices.Equal(ms[0].Left, []int{victim}) || !slices.Equal(ms[1].Joined, []int{victim}) || len(ms[1].Members) != len(ps) {
		t.Fatalf("membership record %+v: want peer %d to leave, then to join", ms, victim)
	}
	return s
}

// emulatedElasticCluster is an elastic cluster of n emulated hosts at
// 1 Gbit, peer i on host i at port 7000.
func emulatedElasticCluster(t *testing.T, ctx context.Context, n int) (*netns.Hosts, *elasticCluster) {
	h := emulatedHosts(t, ctx, n, netns.Gbit)
	c := newElasticCluster(t, ctx, n, elasticRun("--epochs", "3"))
	for i := range c.addrs {
		c.addrs[i] = net.JoinHostPort(h.IP(i), "7000")
	}
	c.command = func(i int, args []string) *exec.Cmd { return h.Command(ctx, i, binary, args...) }
	return h, c
}

// TestElasticSIGTERMLeaves: SIGTERM to one of four elastic workers (a pod
// evicted, a machine preempted) makes it leave at the next commit, exit
// 143 (the code schedulers retry; a restart would rejoin) saying so,
// while the three others go on and finish identical.
func TestElasticSIGTERMLeaves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := newElasticCluster(t, ctx, 4, elasticRun())
	ps := c.startAll()
	c.waitStep(ps[2], 12)
	_ = ps[2].cmd.Process.Signal(syscall.SIGTERM)
	err := c.wait(ps[2])
	if exitCode(err) != 143 || !strings.Contains(ps[2].stderrText(), "asked to stop (SIGTERM); the other peers go on") {
		t.Errorf("the signalled peer: %v, want exit 143 saying it left:\n%s", err, ps[2].stderrText())
	}
	s := finished(t, c, ps[0], ps[1], ps[3])
	if len(s.Run.Membership) != 1 || !slices.Equal(s.Run.Membership[0].Left, []int{2}) || s.Run.Replicas != 3 || s.Run.Stopped != nil {
		t.Errorf("record %+v on %d replicas, stopped %+v: want peer 2 gone, the others to the end", s.Run.Membership, s.Run.Replicas, s.Run.Stopped)
	}
}
