package mirrored

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/mirrored/membership"
	"github.com/meshtrain/meshtrain/nn"
)

// Elastic makes a synchronous (ring) run survive the loss of peers and
// admit restarted ones, as Horovod Elastic does: every CommitEvery steps
// (and at every epoch's end) each replica commits its state in memory;
// when a peer dies, hangs past the collective timeout or its host goes
// away, the survivors agree on who is left, roll back to the commit of
// the new chief (the lowest surviving cluster index), re-shard the data
// among themselves and go on. A worker restarted at its place in the
// cluster is admitted at the next commit and receives the state by
// broadcast. Membership changes only at commits, so a run given the same
// seed, data and membership schedule ends with the same parameters, bit
// for bit (Schedule replays one).
//
// Safety: a side with fewer than half of the last membership stops (a
// side with exactly half goes on only if it holds the lowest cluster index
// of that membership), so a partition never continues as two runs; fewer
// than MinWorkers peers stop the run with a checkpoint (with
// Job.CheckpointDir) and an error naming who was lost and why.
//
// The agreement itself is package mirrored/membership's machine; this
// file drives it (sockets, timers, the wire's JSON) and the generations.
type Elastic struct {
	// Membership forms the generations' Groups and carries the membership
	// protocol (launch's worker: one libp2p host for the run).
	Membership Membership
	// MinWorkers is the fewest peers the run goes on with (default 1).
	MinWorkers int
	// CommitEvery is the number of steps between in-memory commits
	// (default DefaultCommitEvery); every epoch's end commits too. A
	// failure costs the steps since the chief's last commit.
	CommitEvery int
	// Schedule, if set, replays a recorded membership: at the commit of
	// each change's Step (or the first after it), in order, the run goes
	// on with its Members (Result.Membership of the run that recorded
	// it); every peer a change names must be there. A peer it drops
	// leaves (or waits to come back, if a later change names it).
	Schedule []MembershipChange
	// Final, if set, is called on every replica that finishes, with its
	// Summary, while the last generation (members, in rank order) is still
	// formed: the worker gathers the peers' summaries over it.
	Final func(ctx context.Context, sum *Summary, members []int) error
	// Timeout is the collective timeout (a hung peer is lost after it),
	// which also bounds each wait of the membership protocol (default
	// collective.DefaultTimeout).
	Timeout time.Duration
	// LR is how the learning rate follows the peers: membership.LRScale
	// (the default: times members/cluster size) or membership.LRKeep.
	LR string
	// Initial, if set, is how many of the cluster's peers (the first)
	// start the run; the others are slots for workers that join later.
	Initial int
	// Logger receives the membership's changes.
	Logger *zap.Logger
}

// DefaultCommitEvery is Elastic.CommitEvery's default (see
// membership.DefaultCommitEvery for what a commit costs).
const DefaultCommitEvery = membership.DefaultCommitEvery

// MembershipChange is one change of an elastic run's membership (see
// membership.Change); Result.Membership lists them.
type MembershipChange = membership.Change

// Membership is the network of an elastic run: the cluster's peers by
// index, the generations formed over some of them, and a channel for the
// membership protocol's messages.
type Membership interface {
	// Self is this peer's index in the cluster; Size the cluster's peers.
	Self() int
	Size() int
	// Form returns generation gen's Group over members (cluster indices,
	// in rank order), once every member is linked, and the function that
	// ends the generation (after a failure, without waiting for anyone).
	Form(ctx context.Context, gen uint64, members []int) (g Group, end func(failed bool) error, err error)
	// Ask sends msg to cluster peer to and returns its answer.
	Ask(ctx context.Context, to int, msg []byte) ([]byte, error)
	// Serve answers the other peers' messages with answer.
	Serve(answer func(from int, msg []byte) []byte)
}

// Elastic is a Strategy: the ring, by generations (runElastic). Its
// name is the ring's, which it runs; it adds its own setting per
// generation.
func (*Elastic) Name() string        { return StrategyRing }
func (*Elastic) Lockstep() bool      { return true }
func (*Elastic) Validate() error     { return nil } // its checks need the Job: check
func (*Elastic) settings() []setting { return nil }

// filled is a copy of e with its defaults: each Run drives its own.
func (e *Elastic) filled() Strategy {
	c := *e
	c.fill()
	return &c
}

func (e *Elastic) run(ctx context.Context, job *Job, _ Group) (*Summary, error) {
	if err := e.checkMembership(); err != nil {
		return nil, err
	}
	if _, err := job.builder(); err != nil {
		return nil, err
	}
	return runElastic(ctx, job, e)
}

func (e *Elastic) fill() {
	if e.MinWorkers <= 0 {
		e.MinWorkers = 1
	}
	if e.CommitEvery <= 0 {
		e.CommitEvery = DefaultCommitEvery
	}
	if e.Logger == nil {
		e.Logger = zap.NewNop()
	}
	if e.Timeout <= 0 {
		e.Timeout = collective.DefaultTimeout
	}
	e.LR = cmp.Or(e.LR, membership.LRScale)
}

// elastic is one replica's elastic run: the driver of its membership
// machine, and the generations' loop hook (elastic_commit.go).
type elastic struct {
	job  *Job
	cfg  *Elastic
	m    Membership
	self int
	n    int
	log  *zap.Logger

	// mu guards mach: the driver's loop and the answers to the other
	// peers' questions (Membership.Serve's goroutines) both feed it.
	mu   sync.Mutex
	mach *membership.Machine
	// wake ends the driver's wait: a go or a stop arrived.
	wake chan struct{}

	commit     commitState
	localSteps int // this process's steps so far (the faults count them)
	ran        int // and those that completed
	lastStep   int // the global step this replica last completed
	failedAt   time.Time
	lock       *checkpoint.Lock
	// stopAll: every member was asked to stop (cluster indices); the loop
	// stops before its next step.
	stopAll []int
}

// The driver's waits.
const (
	// probeTimeout bounds each question of the membership protocol: a
	// peer alive answers in milliseconds; one whose host is gone does not
	// answer.
	probeTimeout = 500 * time.Millisecond
	// formTimeout bounds forming a generation after the first: its
	// members all promised to come a moment ago (the first waits for the
	// peers to start, up to the collective timeout).
	formTimeout = 5 * time.Second
)

// wireMsg is a membership message on the wire (JSON); it converts to and
// from membership.Msg, whose fields it has.
type wireMsg struct {
	Kind    membership.Kind   `json:"kind"`
	Gen     uint64            `json:"gen"`
	Members []int             `json:"members,omitempty"`
	State   membership.State  `json:"state,omitempty"`
	OK      bool              `json:"ok,omitempty"`
	Reason  string            `json:"reason,omitempty"`
	Change  *MembershipChange `json:"change,omitempty"`
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v) // plain data: cannot fail
	return b
}

// answer is this peer's side of the protocol: the machine's answer to
// peer from's question b.
func (e *elastic) answer(from int, b []byte) []byte {
	var msg wireMsg
	if err := json.Unmarshal(b, &msg); err != nil {
		return mustJSON(wireMsg{Kind: membership.Answer, Reason: "unreadable message: " + err.Error()})
	}
	if msg.Kind == membership.Answer {
		return mustJSON(wireMsg{Kind: membership.Answer, Reason: "unknown kind answer"})
	}
	e.mu.Lock()
	eff := e.mach.Receive(from, membership.Msg(msg))
	e.mu.Unlock()
	if eff.Wake {
		e.signal()
	}
	return mustJSON(wireMsg(eff.Sends[0].Msg))
}

func (e *elastic) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// ask sends msg to peer to within probeTimeout.
func (e *elastic) ask(ctx context.Context, to int, msg membership.Msg) (membership.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	b, err := e.m.Ask(ctx, to, mustJSON(wireMsg(msg)))
	if err != nil {
		return membership.Msg{}, err
	}
	var out wireMsg
	if err := json.Unmarshal(b, &out); err != nil {
		return membership.Msg{}, fmt.Errorf("peer %d's answer: %w", to, err)
	}
	out.Kind = membership.Answer // whatever it says, it answers
	return membership.Msg(out), nil
}

// carry asks the machine's questions at once and feeds it the answers
// (or failures), in the order asked; the last one ends the round.
func (e *elastic) carry(ctx context.Context, sends []membership.Send) membership.Effects {
	outs, errs := make([]membership.Msg, len(sends)), make([]error, len(sends))
	var wg sync.WaitGroup
	for i, s := range sends {
		wg.Go(func() { outs[i], errs[i] = e.ask(ctx, s.To, s.Msg) })
	}
	wg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	var eff membership.Effects
	for i, s := range sends {
		var x membership.Effects
		if errs[i] != nil {
			x = e.mach.Unanswered(s.To, errs[i].Error())
		} else {
			x = e.mach.Receive(s.To, outs[i])
		}
		if x.Decision != nil || len(x.Sends) > 0 || x.Wait != membership.NoWait {
			eff = x
		}
	}
	return eff
}

// locked runs input on the machine under mu.
func (e *elastic) locked(input func() membership.Effects) membership.Effects {
	e.mu.Lock()
	defer e.mu.Unlock()
	return input()
}

func (e *elastic) state() membership.State {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mach.State()
}

// drive carries out the machine's effects, from eff on, until it decides
// on a generation to form (or that this peer is not in the schedule).
func (e *elastic) drive(ctx context.Context, eff membership.Effects) (*membership.Decision, error) {
	var t membership.Timers
	defer t.Stop()
	for {
		state := e.state()
		t.Enter(state, e.cfg.Timeout+probeTimeout, probeTimeout)
		switch {
		case eff.Decision != nil:
			return e.decision(eff.Decision, state, &t)
		case len(eff.Sends) > 0:
			eff = e.carry(ctx, eff.Sends)
			continue
		}
		if err := e.wait(ctx, eff, state, &t); err != nil {
			return nil, err
		}
		late := t.Late(state, e.cfg.Timeout)
		eff = e.locked(func() membership.Effects { return e.mach.Tick(late) })
	}
}

// decision returns d for the caller to carry out, or the error with which
// the run stops here.
func (e *elastic) decision(d *membership.Decision, state membership.State, t *membership.Timers) (*membership.Decision, error) {
	switch d.Kind {
	case membership.Halt:
		if d.Coordinator {
			return nil, e.stopRun(stopError{d.Reason})
		}
		return nil, stopError{d.Reason}
	case membership.GaveUp:
		if state == membership.Joining {
			return nil, fmt.Errorf("elastic: waited %v to be admitted into the running cluster, and no peer has answered for %v: is the run over, or its peers unreachable?", time.Since(t.Heard).Round(time.Second), e.cfg.Timeout)
		}
		return nil, fmt.Errorf("elastic: no agreement on the membership after generation %d within %v: the peers of %v did not settle on who is left (check the others' logs)", d.Gen, e.cfg.Timeout+probeTimeout, d.Members)
	}
	return d, nil
}

// wait waits as eff says before the machine's next tick.
func (e *elastic) wait(ctx context.Context, eff membership.Effects, state membership.State, t *membership.Timers) error {
	switch eff.Wait {
	case membership.WaitRetry: // what the peers answer may change: not in a tight loop
		time.Sleep(probeTimeout / 10)
	case membership.WaitProposal:
		select {
		case <-ctx.Done():
			return fmt.Errorf("elastic: agreeing on the membership: %w", ctx.Err())
		case <-e.wake:
		case <-time.After(2 * probeTimeout):
		}
	case membership.WaitAdmission:
		if eff.Heard {
			t.Heard = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("elastic: waiting to be admitted: %w", ctx.Err())
		case <-e.job.Stop: // asked to stop before it was admitted: nothing to leave
			return errLeftByStop
		case <-e.wake:
		case <-t.Tick.C:
		}
	default:
		return fmt.Errorf("elastic: the membership protocol waits for nothing in state %s", state)
	}
	return nil
}

// runElastic is the elastic synchronous run of job on m.
func runElastic(ctx context.Context, job *Job, cfg *Elastic) (*Summary, error) {
	m := cfg.Membership
	e := &elastic{job: job, cfg: cfg, m: m, self: m.Self(), n: m.Size(), wake: make(chan struct{}, 1),
		log: cfg.Logger.With(zap.Int("rank", m.Self()))}
	e.mach = membership.New(membership.Config{Self: e.self, Size: e.n, Initial: cfg.Initial, MinWorkers: cfg.MinWorkers, CommitEvery: cfg.CommitEvery, Schedule: cfg.Schedule}, e.log)
	m.Serve(e.answer)
	defer e.locked(func() membership.Effects { e.mach.End(); return membership.Effects{} })
	d, err := e.drive(ctx, e.locked(e.mach.Start))
	for {
		switch {
		case errors.Is(err, errLeftByStop):
			return &Summary{Run: &Result{Membership: e.record()}, Peer: PeerStats{Rank: e.self, Left: "asked to stop (SIGTERM) while waiting to be admitted"}}, nil
		case err != nil:
			return nil, err
		case d.Kind == membership.LeftBySchedule:
			return &Summary{Run: &Result{Membership: e.cfg.Schedule}, Peer: PeerStats{Rank: e.self, Left: "not a member at any step of the membership schedule"}}, nil
		}
		gen, members := d.Gen, d.Members
		e.mu.Lock()
		e.mach.Forming(gen, members)
		e.mu.Unlock()
		sum, gerr := e.generation(ctx, gen, members)
		var ch *membershipChangeError
		switch {
		case gerr == nil:
			return sum, nil
		case errors.As(gerr, &ch) && ch.rejoin:
			e.commit.restore()
			d, err = e.drive(ctx, e.locked(e.mach.Rejoin))
		case errors.As(gerr, &ch) && ch.left != nil:
			return ch.left, nil
		case errors.As(gerr, &ch):
			e.failedAt = time.Now()
			e.commit.restore()
			d, err = e.drive(ctx, e.reform(ch.why))
		case e.lost(ctx, gerr):
			e.failedAt = time.Now()
			e.commit.restore()
			e.log.Warn("a peer was lost: agreeing on who is left", zap.Uint64("generation", gen), zap.Error(gerr))
			d, err = e.drive(ctx, e.reform(membership.Why{Reason: membership.LossWords(gerr, e.cfg.Timeout)}))
		default:
			return nil, gerr
		}
	}
}

// reform starts agreeing on the next generation, from the chief's commit.
func (e *elastic) reform(why membership.Why) membership.Effects {
	return e.locked(func() membership.Effects { return e.mach.Reform(why, e.commit.step, e.lastStep) })
}

// record is the membership's record so far.
func (e *elastic) record() []MembershipChange {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mach.Record()
}

// lost says whether err ended the generation because a peer was lost
// (its link, an abort, a timeout) rather than for a reason of this
// replica's own or of the run's (a mismatch, a non-finite loss).
func (e *elastic) lost(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var pe *collective.PeerError
	var mm *MismatchError
	var nf *NonFiniteError
	switch {
	case errors.As(err, &mm), errors.As(err, &nf), errors.Is(err, ErrInjectedKill):
		return false
	case errors.As(err, &pe), errors.Is(err, context.DeadlineExceeded), errors.Is(err, collective.ErrClosed):
		return true
	case errors.As(err, new(interface{ Permanent() bool })):
		return false // another secret, another cluster list: no retry mends it
	case errors.As(err, new(formError)):
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.mach.FormFailed()
	}
	return strings.Contains(err.Error(), "collective: ")
}

// stopRun (the coordinator) writes the last commit as a checkpoint, with
// Job.CheckpointDir, before the run stops with err.
func (e *elastic) stopRun(err error) error {
	c := &e.commit
	if e.job.CheckpointDir == "" || !c.valid {
		return err
	}
	hist, _ := json.Marshal(c.history)
	ck := *c.ck
	ck.Params, ck.OptState, ck.Step, ck.Epoch, ck.StepInEpoch, ck.StepsPerEpoch = c.params, c.opt, c.step, c.epoch, c.stepInEpoch, c.stepsPerEp
	ck.History, ck.SavedAt = string(hist), time.Now()
	path, werr := checkpoint.Write(e.job.CheckpointDir, &ck, e.job.KeepCheckpoints)
	if werr != nil {
		return errors.Join(err, fmt.Errorf("writing the last commit as a checkpoint: %w", werr))
	}
	return fmt.Errorf("%w; the last commit (step %d) is saved as %s", err, c.step, path)
}

// ErrElasticStopped marks the errors with which an elastic run's peers
// stop on purpose (no majority, fewer than MinWorkers): restarting them
// cannot help (launch does not).
var ErrElasticStopped = errors.New("the elastic run stopped")

// stopError is an elastic run's deliberate stop.
type stopError struct{ msg string }

func (e stopError) Error() string        { return e.msg }
func (e stopError) Is(target error) bool { return target == ErrElasticStopped }

// errLeftByStop: asked to stop while waiting to be admitted.
var errLeftByStop = errors.New("asked to stop before it was admitted")

// formError is a generation that could not form (a proposed member did
// not come): the membership is agreed again.
type formError struct{ err error }

func (e formError) Error() string { return e.err.Error() }
func (e formError) Unwrap() error { return e.err }

// membershipChangeError ends a generation at a commit for a planned
// change (workers to admit, the schedule's next change, members asked to
// stop): why, for the agreement; rejoin says this peer leaves until the
// schedule names it again; left, that it leaves for good (its Summary).
type membershipChangeError struct {
	why    membership.Why
	rejoin bool
	left   *Summary
}

func (e *membershipChangeError) Error() string {
	return fmt.Sprintf("membership change at step %d: %s", e.why.Step, e.why.Reason)
}

// generation forms generation gen over members and runs the ring on it
// from the chief's commit, until the run ends, a peer is lost or the
// membership changes at a commit.
func (e *elastic) generation(ctx context.Context, gen uint64, members []int) (*Summary, error) {
	fctx := ctx
	e.mu.Lock()
	later := e.mach.Formations()
	e.mu.Unlock()
	if later {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, min(formTimeout, e.cfg.Timeout))
		defer cancel()
	}
	g, end, err := e.m.Form(fctx, gen, members)
	if err != nil {
		return nil, formError{fmt.Errorf("elastic: forming generation %d over peers %v: %w", gen, members, err)}
	}
	e.mu.Lock()
	e.mach.Formed(gen, members)
	e.mu.Unlock()
	failed := true
	defer func() {
		if err := end(failed); err != nil {
			e.log.Debug("ending a generation", zap.Error(err))
		}
	}()
	if g.Rank() == 0 && e.job.CheckpointDir != "" && e.lock == nil {
		lock, warning, err := checkpoint.LockDir(e.job.CheckpointDir)
		if err != nil {
			return nil, failStartup(ctx, g, err)
		}
		e.lock = lock
		if warning != "" {
			e.log.Warn(warning)
		}
	}
	p, err := e.job.build(ctx, g)
	if err != nil {
		return nil, failStartup(ctx, g, err)
	}
	for i := range p.settings {
		if p.settings[i].Name == "replicas" {
			// A checkpoint of an elastic run resumes with any number.
			p.settings[i].Resume = false
		}
	}
	// A restarted worker drops the kill that ended its first life
	// (launch's RestartEnv): the faults are each process's own here.
	p.settings = slices.DeleteFunc(p.settings, func(s setting) bool { return s.Name == "kill" })
	p.settings = append(p.settings, setting{Name: "elastic", Value: fmt.Sprintf("min workers %d, commit every %d steps, schedule of %d changes, learning rate %s", e.cfg.MinWorkers, e.cfg.CommitEvery, len(e.cfg.Schedule), e.cfg.LR)})
	if f := membership.LRFactor(e.cfg.LR, len(members), e.n); f != 1 {
		sched := p.schedule
		p.schedule = func(steps int) (nn.Schedule, error) { s, err := sched(steps); return s.Scaled(f), err }
	}
	p.hook = e
	sum, err := runSync(ctx, e.job, g, p)
	if err != nil {
		// Its errors name ranks of this generation: say whose they are.
		return nil, fmt.Errorf("generation %d (ranks 0-%d are peers %v): %w", gen, len(members)-1, members, err)
	}
	sum.Peer.ElasticSteps, sum.Peer.ElasticExamples = e.ran, e.ran*e.job.BatchSize
	if e.cfg.Final != nil {
		if err := e.cfg.Final(ctx, sum, members); err != nil {
			return nil, err
		}
	}
	failed = false
	return sum, nil
}
