package mirrored

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
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
	// Logger receives the membership's changes.
	Logger *zap.Logger
}

// DefaultCommitEvery is Elastic.CommitEvery's default: a commit is a copy
// of a dense model's parameters and optimizer state (sparse-lr's a mark
// in its undo log) and a small all-reduce that admits waiting workers:
// within the noise of 10 LeNet steps at 4 peers, and 0.86x the plain
// run's speed at sparse-lr's 0.7 ms steps (BENCHMARKS.md, "Elastic
// training (issue 21)").
const DefaultCommitEvery = 10

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

// MembershipChange is one change of an elastic run's membership: from the
// commit at global step Step (numbered as the run was before the change),
// generation Generation went on with Members (cluster indices, in rank
// order).
type MembershipChange struct {
	Step       int    `json:"step"`
	Generation uint64 `json:"generation"`
	Members    []int  `json:"members"`
	Left       []int  `json:"left,omitempty"`
	Joined     []int  `json:"joined,omitempty"`
	Reason     string `json:"reason"`
	// PauseSeconds is how long the cluster did not train: from the failure
	// (or the commit that admitted a worker) to the new generation's start
	// on its chief; RolledBack the steps lost.
	PauseSeconds float64 `json:"pause_seconds"`
	RolledBack   int     `json:"rolled_back_steps,omitempty"`
	// CommitEvery is the run's --commit-every: a replay must use the
	// same, or its commits (where changes happen) fall elsewhere.
	CommitEvery int `json:"commit_every,omitempty"`
}

// ParseMembershipSchedule reads a schedule: the JSON of a run summary's
// or Result's "membership", or a list of MembershipChange.
func ParseMembershipSchedule(b []byte) ([]MembershipChange, error) {
	var list []MembershipChange
	if err := json.Unmarshal(b, &list); err != nil {
		var wrap struct {
			Membership []MembershipChange `json:"membership"`
			Run        *struct {
				Membership []MembershipChange `json:"membership"`
			} `json:"run"`
		}
		if err2 := json.Unmarshal(b, &wrap); err2 != nil {
			return nil, fmt.Errorf("membership schedule: want a JSON list of changes ({\"step\":…, \"members\":[…]}) or a summary with \"membership\": %w", err)
		}
		list = wrap.Membership
		if list == nil && wrap.Run != nil {
			list = wrap.Run.Membership
		}
	}
	// The steps need not increase: a change's step counts the steps as
	// the run was before it, and a change that adds peers makes fewer
	// steps per epoch, so the count can go back.
	for i, c := range list {
		switch {
		case c.Step < 0:
			return nil, fmt.Errorf("membership schedule: change %d at step %d: want a step ≥ 0", i+1, c.Step)
		case len(c.Members) == 0:
			return nil, fmt.Errorf("membership schedule: change %d at step %d has no members", i+1, c.Step)
		}
		seen := map[int]bool{}
		for _, m := range c.Members {
			if m < 0 || seen[m] {
				return nil, fmt.Errorf("membership schedule: change %d lists peer %d twice or a negative index", i+1, m)
			}
			seen[m] = true
		}
	}
	return list, nil
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
}

// elasticState is what a replica keeps across generations: its commit.
type commitState struct {
	gen                                  uint64
	step, epoch, stepInEpoch, stepsPerEp int
	params                               []float32
	opt                                  []float32
	history                              []Epoch
	membership                           []MembershipChange
	valid                                bool
	// live, if set, holds the commit in its undo log (see take), and
	// params and opt are not filled in until restore.
	live undoer
	// ck describes the checkpoint the commit would be (fingerprint,
	// settings, layout), for the checkpoint a stopping run writes.
	ck *checkpoint.Checkpoint
}

// take commits rep's state at (epoch, stepInEpoch), global step step: a
// copy, or, for a replica that keeps an undo log (sparse-lr: the old
// values of the features its steps touch), a mark in its log, so that a
// commit costs nothing and holds no second copy (a copy at Criteo's
// width was 270 MB in 60 ms, against about 1 ms a step).
func (c *commitState) take(rep replica, gen uint64, step, epoch, stepInEpoch, steps int, hist []Epoch, ms []MembershipChange) {
	c.live = nil
	if u, ok := rep.(undoer); ok && !fullCommits && u.mark() {
		c.live, c.params, c.opt = u, nil, nil // an earlier generation's arrays go
	} else {
		c.params = append(c.params[:0], rep.Params()...)
		c.opt = c.opt[:0]
		for _, a := range rep.OptState() {
			c.opt = append(c.opt, a...)
		}
	}
	c.gen, c.step, c.epoch, c.stepInEpoch, c.stepsPerEp = gen, step, epoch, stepInEpoch, steps
	c.history = append(c.history[:0], hist...)
	c.membership = append(c.membership[:0], ms...)
	c.valid = true
}

// restore makes the commit's state readable (params, opt) after its
// generation ended: a replica with an undo log takes its own arrays back
// to the mark, and they become the commit's. Called once a generation
// failed or changed, before anything reads the commit.
func (c *commitState) restore() {
	u := c.live
	if u == nil {
		return
	}
	c.live = nil
	u.undo()
	c.params = u.Params()
	c.opt = c.opt[:0]
	for _, a := range u.OptState() {
		c.opt = append(c.opt, a...)
	}
}

// fullCommits makes every commit a copy (tests compare the two).
var fullCommits = false

// undoer is a replica that can take its parameters and optimizer state
// back to where they were at its last mark.
type undoer interface {
	replica
	// mark starts a new undo log at the current state; false if this
	// replica cannot undo (then the commit copies).
	mark() bool
	// undo restores the state at the last mark.
	undo()
}

// elastic is one replica's elastic run.
type elastic struct {
	job  *Job
	cfg  *Elastic
	m    Membership
	self int
	n    int
	log  *zap.Logger

	mu       sync.Mutex
	state    string // starting, running, reforming, joining, done
	gen      uint64
	members  []int
	accepted *elasticMsg // the newest proposal taken, for a generation after gen
	pending  *elasticMsg // the newest proposal promised (its go not yet come)
	proposed uint64      // the highest generation this peer proposed
	stopMsg  string      // the coordinator's reason to stop
	joins    map[int]bool
	wake     chan struct{}

	commit     commitState
	membership []MembershipChange
	localSteps int // this process's steps so far (the faults count them)
	failedAt   time.Time
	forms      int  // generations in a row that failed to form
	isFormed   bool // a generation formed: the run is on
	// change is the agreed change that the next generation to form
	// records; formedMembers the members of the last one that formed.
	change        *MembershipChange
	formedMembers []int
	// next is the index of the membership schedule's next change.
	next     int
	lastStep int // the global step this replica last completed
	lock     *checkpoint.Lock
}

// Elastic states, as status answers give them.
const (
	stateStarting  = "starting"
	stateRunning   = "running"
	stateReforming = "reforming"
	stateJoining   = "joining"
	stateDone      = "done"
)

// elasticMsg is a message of the membership protocol, and its answer.
type elasticMsg struct {
	Kind    string `json:"kind"` // status, join, propose, stop; answer
	Gen     uint64 `json:"gen"`
	Members []int  `json:"members,omitempty"`
	State   string `json:"state,omitempty"`
	OK      bool   `json:"ok,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Change is the proposal's record (propose).
	Change *MembershipChange `json:"change,omitempty"`
}

// maxGenerationStep bounds how far a proposal's generation may be ahead
// of a peer's: each attempt at agreeing adds one, and a member gone bad
// must not push the count to its end.
const maxGenerationStep = 1 << 16

// probeTimeout bounds each question of the membership protocol: a peer
// alive answers in milliseconds; one whose host is gone does not answer.
const probeTimeout = 500 * time.Millisecond

// formTimeout bounds forming a generation after the first: its members
// all promised to come a moment ago (the first waits for the peers to
// start, up to the collective timeout).
const formTimeout = 5 * time.Second

// answer is this peer's side of the membership protocol.
func (e *elastic) answer(from int, b []byte) []byte {
	var msg elasticMsg
	if err := json.Unmarshal(b, &msg); err != nil {
		return mustJSON(elasticMsg{Kind: "answer", Reason: "unreadable message: " + err.Error()})
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := elasticMsg{Kind: "answer", Gen: e.gen, Members: e.members, State: e.state}
	if e.state == stateRunning && !e.isFormed {
		out.State = stateStarting // the first generation is still forming: not one to join
	}
	switch msg.Kind {
	case "status":
		out.OK = true
	case "join":
		if e.state == stateRunning || e.state == stateReforming {
			if !e.joins[from] {
				e.log.Info("a worker asks to join", zap.Int("peer", from))
			}
			e.joins[from] = true
			out.OK = true
		}
	case "propose": // the first phase: this peer would take it
		switch {
		case !slices.Contains(msg.Members, from):
			out.Reason = fmt.Sprintf("the proposer (peer %d) is not among its members", from)
		case !slices.Contains(msg.Members, e.self):
			out.Reason = "this peer is not among the members"
		case msg.Gen <= e.gen && e.state != stateStarting:
			out.Reason = fmt.Sprintf("generation %d is not after this peer's %d", msg.Gen, e.gen)
		case msg.Gen > e.gen+maxGenerationStep:
			out.Reason = fmt.Sprintf("generation %d is implausibly far after this peer's %d", msg.Gen, e.gen)
		case slices.ContainsFunc(msg.Members, func(p int) bool { return p < 0 || p >= e.n }) || len(msg.Members) > e.n ||
			len(slices.Compact(slices.Sorted(slices.Values(msg.Members)))) != len(msg.Members):
			out.Reason = fmt.Sprintf("members %v name a peer twice or outside the cluster's %d", msg.Members, e.n)
		case e.accepted != nil && msg.Gen <= e.accepted.Gen:
			out.Reason = fmt.Sprintf("already took generation %d", e.accepted.Gen)
		case e.pending != nil && msg.Gen == e.pending.Gen && !slices.Equal(msg.Members, e.pending.Members):
			out.Reason = fmt.Sprintf("already promised generation %d to members %v", msg.Gen, e.pending.Members)
		case e.pending != nil && msg.Gen < e.pending.Gen:
			out.Reason = fmt.Sprintf("already promised generation %d", e.pending.Gen)
		default:
			m := msg
			e.pending = &m
			out.OK = true
		}
	case "go": // the second: every member promised, so it is taken
		if p := e.pending; p != nil && p.Gen == msg.Gen && (e.accepted == nil || e.accepted.Gen < p.Gen) {
			e.accepted = p
			out.OK = true
			e.signal()
		}
	case "stop":
		if e.state == stateReforming || e.state == stateJoining {
			e.stopMsg = msg.Reason
			out.OK = true
			e.signal()
		}
	default:
		out.Reason = "unknown kind " + msg.Kind
	}
	return mustJSON(out)
}

func (e *elastic) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v) // plain data: cannot fail
	return b
}

// ask sends msg to peer to within probeTimeout.
func (e *elastic) ask(ctx context.Context, to int, msg elasticMsg) (elasticMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	b, err := e.m.Ask(ctx, to, mustJSON(msg))
	if err != nil {
		return elasticMsg{}, err
	}
	var out elasticMsg
	if err := json.Unmarshal(b, &out); err != nil {
		return elasticMsg{}, fmt.Errorf("peer %d's answer: %w", to, err)
	}
	return out, nil
}

// askAll asks every peer in to at once.
func (e *elastic) askAll(ctx context.Context, to []int, msg elasticMsg) ([]elasticMsg, []error) {
	outs, errs := make([]elasticMsg, len(to)), make([]error, len(to))
	var wg sync.WaitGroup
	for i, p := range to {
		wg.Go(func() { outs[i], errs[i] = e.ask(ctx, p, msg) })
	}
	wg.Wait()
	return outs, errs
}

func (e *elastic) setState(s string) {
	e.mu.Lock()
	e.state = s
	e.mu.Unlock()
}

// runElastic is the elastic synchronous run of job on m.
func runElastic(ctx context.Context, job *Job) (*Summary, error) {
	cfg := job.Elastic
	cfg.fill()
	m := cfg.Membership
	e := &elastic{job: job, cfg: cfg, m: m, self: m.Self(), n: m.Size(), state: stateStarting, joins: map[int]bool{},
		wake: make(chan struct{}, 1), log: cfg.Logger.With(zap.Int("peer", m.Self()))}
	m.Serve(e.answer)
	defer e.setState(stateDone)
	members, gen, err := e.begin(ctx)
	for {
		switch {
		case errors.Is(err, errLeftBySchedule):
			return &Summary{Run: &Result{Membership: e.cfg.Schedule}, Peer: PeerStats{Rank: e.self, Left: "not a member at any step of the membership schedule"}}, nil
		case errors.Is(err, errLeftByStop):
			return &Summary{Run: &Result{Membership: e.membership}, Peer: PeerStats{Rank: e.self, Left: "asked to stop (SIGTERM) while waiting to be admitted"}}, nil
		case err != nil:
			return nil, err
		}
		e.mu.Lock()
		e.gen, e.members, e.accepted, e.pending, e.state = gen, members, nil, nil, stateRunning
		// Every generation starts with no request to join: a worker still
		// waiting asks again within probeTimeout, and one that died since
		// it asked must not make every commit a change.
		clear(e.joins)
		e.mu.Unlock()
		var sum *Summary
		sum, err = e.generation(ctx, gen, members)
		var ch *membershipChangeError
		switch {
		case err == nil:
			return sum, nil
		case errors.As(err, &ch) && ch.leave && ch.rejoin:
			e.commit.restore()
			members, gen, err = e.join(ctx, true)
		case errors.As(err, &ch) && ch.leave:
			return ch.left, nil
		case errors.As(err, &ch):
			e.failedAt = time.Now()
			e.commit.restore()
			members, gen, err = e.reform(ctx, gen, members, ch)
		case e.lost(ctx, err):
			e.failedAt = time.Now()
			e.commit.restore()
			e.log.Warn("a peer was lost: agreeing on who is left", zap.Uint64("generation", gen), zap.Error(err))
			members, gen, err = e.reform(ctx, gen, members, &membershipChangeError{reason: err.Error()})
		}
	}
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
		e.forms++
		return e.forms <= maxFailedForms
	}
	return strings.Contains(err.Error(), "collective: ")
}

// begin finds this peer's place: the first generation with every peer of
// the cluster, or (a restarted worker, or one the schedule adds later)
// admission into the running one.
func (e *elastic) begin(ctx context.Context) ([]int, uint64, error) {
	all := e.initialMembers()
	if s := e.cfg.Schedule; len(s) > 0 && s[0].Step == 0 {
		if !slices.ContainsFunc(s, func(c MembershipChange) bool { return slices.Contains(c.Members, e.self) }) {
			return nil, 0, errLeftBySchedule
		}
	}
	others := slices.DeleteFunc(slices.Clone(all), func(p int) bool { return p == e.self })
	if slices.Contains(all, e.self) {
		outs, errs := e.askAll(ctx, others, elasticMsg{Kind: "status"})
		running := false
		for i := range outs {
			running = running || errs[i] == nil && (outs[i].State == stateRunning || outs[i].State == stateReforming)
		}
		if !running {
			return all, 0, nil
		}
	}
	return e.join(ctx, len(e.cfg.Schedule) > 0)
}

// initialMembers is the first generation's: every peer of the cluster,
// or the schedule's change at step 0.
func (e *elastic) initialMembers() []int {
	if s := e.cfg.Schedule; len(s) > 0 && s[0].Step == 0 {
		return slices.Clone(s[0].Members)
	}
	all := make([]int, e.n)
	for i := range all {
		all[i] = i
	}
	return all
}

// join waits to be admitted into the running generation: it asks the
// peers to admit it (unless a schedule decides) and waits for a proposal
// that includes it, for as long as some peer answers, and at most the
// collective timeout after the last answer.
func (e *elastic) join(ctx context.Context, scheduled bool) ([]int, uint64, error) {
	e.setState(stateJoining)
	timeout := e.cfg.Timeout
	e.log.Info("joining the running cluster", zap.Bool("scheduled", scheduled))
	lastHeard := time.Now()
	var others []int
	for p := range e.n {
		if p != e.self {
			others = append(others, p)
		}
	}
	tick := time.NewTicker(probeTimeout)
	defer tick.Stop()
	for {
		if members, gen, ok := e.takeProposal(); ok {
			return members, gen, nil
		}
		kind := "join"
		if scheduled {
			kind = "status"
		}
		outs, errs := e.askAll(ctx, others, elasticMsg{Kind: kind})
		var heard []int
		for i := range outs {
			if errs[i] == nil && outs[i].State != stateDone {
				heard = append(heard, others[i])
			}
		}
		if len(heard) > 0 {
			lastHeard = time.Now()
		} else if time.Since(lastHeard) > timeout {
			return nil, 0, fmt.Errorf("elastic: waited %v to be admitted into the running cluster, and no peer of %v has answered for %v: is the run over, or its peers unreachable?", time.Since(lastHeard).Round(time.Second), others, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("elastic: waiting to be admitted: %w", ctx.Err())
		case <-e.job.Stop: // asked to stop before it was admitted: nothing to leave
			return nil, 0, errLeftByStop
		case <-e.wake:
		case <-tick.C:
		}
	}
}

// takeProposal returns the accepted proposal, if any.
func (e *elastic) takeProposal() ([]int, uint64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.accepted; p != nil && p.Gen > e.gen || p != nil && e.state == stateJoining {
		e.change = p.Change
		return p.Members, p.Gen, true
	}
	return nil, 0, false
}

// formed records the change that led to generation gen over members,
// now that it formed: who left and joined since the last generation that
// formed (a generation agreed on that did not form is not a change).
func (e *elastic) formed(gen uint64, members []int) {
	c := e.change
	e.change = nil
	prev := e.formedMembers
	e.formedMembers = slices.Clone(members)
	if c == nil {
		return
	}
	ch := *c
	ch.Generation, ch.Members, ch.Left, ch.Joined = gen, slices.Clone(members), nil, nil
	if prev == nil {
		// The first generation formed without some peers (they did not
		// come within the connect timeout): the run starts so, which a
		// replay must know (a change at step 0).
		prev, ch.Step, ch.RolledBack = e.initialMembers(), 0, 0
		ch.Reason = "the first generation formed without them: " + ch.Reason
	}
	ch.Left, ch.Joined = diffMembers(prev, members)
	if len(ch.Left) == 0 && len(ch.Joined) == 0 {
		return // the same members (a worker that asked to join was gone): no change to record or replay
	}
	if n := len(e.membership); n == 0 || e.membership[n-1].Generation < gen {
		e.membership = append(e.membership, ch)
	}
}

// membershipChangeError ends a generation at a commit for a planned
// change (workers to admit, the schedule's next change), or carries the
// reason of a failure.
type membershipChangeError struct {
	step    int
	joiners []int
	want    []int // the schedule's members
	reason  string
	// leave: this peer leaves the run (the schedule drops it); left is
	// its Summary.
	leave  bool
	rejoin bool
	left   *Summary
}

func (e *membershipChangeError) Error() string {
	return fmt.Sprintf("membership change at step %d: %s", e.step, e.reason)
}

// reform agrees on the next generation after generation gen of members
// ended: the lowest living member of gen proposes the survivors (and the
// workers asking to join); the others accept its proposal. A side without
// a majority of members, or fewer than MinWorkers, stops.
func (e *elastic) reform(ctx context.Context, gen uint64, members []int, why *membershipChangeError) ([]int, uint64, error) {
	e.setState(stateReforming)
	deadline := time.Now().Add(e.cfg.Timeout + probeTimeout)
	for {
		if next, ngen, ok := e.takeProposal(); ok {
			return next, ngen, nil
		}
		if msg := e.stopReason(); msg != "" {
			return nil, 0, stopError{msg}
		}
		if time.Now().After(deadline) {
			return nil, 0, fmt.Errorf("elastic: no agreement on the membership after generation %d within %v: the peers of %v did not settle on who is left (check the others' logs)", gen, e.cfg.Timeout+probeTimeout, members)
		}
		alive, joiners, newer := e.probe(ctx, members, why)
		if newer {
			// The others went on without this peer (it hung past the
			// timeout): ask to be admitted again.
			e.log.Warn("the cluster went on without this peer: asking to rejoin")
			return e.join(ctx, len(e.cfg.Schedule) > 0)
		}
		if alive[0] != e.self {
			// Not the coordinator: wait for its proposal, then look again.
			select {
			case <-ctx.Done():
				return nil, 0, fmt.Errorf("elastic: agreeing on the membership: %w", ctx.Err())
			case <-e.wake:
			case <-time.After(2 * probeTimeout):
			}
			continue
		}
		next, stop := e.decide(gen, members, alive, joiners, why)
		if stop != "" {
			e.stopAll(ctx, alive, stop)
			return nil, 0, e.stopRun(stopError{stop})
		}
		if ok := e.propose(ctx, gen, members, next, why); ok {
			continue // takes its own proposal at the top of the loop
		}
	}
}

// stopReason is the coordinator's reason to stop, if it sent one.
func (e *elastic) stopReason() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopMsg
}

// probe asks every member of the ended generation (and every worker asking
// to join) whether it is there: alive are the members that answered
// (this peer first when it is the lowest), sorted; newer says that the
// others already formed a generation after gen without this peer.
func (e *elastic) probe(ctx context.Context, members []int, why *membershipChangeError) (alive, joiners []int, newer bool) {
	e.mu.Lock()
	gen, formedOnce := e.gen, e.isFormed
	ask := slices.Clone(members)
	for p := range e.joins {
		if !slices.Contains(ask, p) {
			ask = append(ask, p)
		}
	}
	e.mu.Unlock()
	for _, p := range why.joiners {
		if !slices.Contains(ask, p) {
			ask = append(ask, p)
		}
	}
	for _, p := range why.want {
		if !slices.Contains(ask, p) {
			ask = append(ask, p)
		}
	}
	ask = slices.DeleteFunc(ask, func(p int) bool { return p == e.self })
	outs, errs := e.askAll(ctx, ask, elasticMsg{Kind: "status"})
	alive = []int{e.self}
	for i, p := range ask {
		if errs[i] != nil {
			continue
		}
		o := outs[i]
		switch {
		case o.Gen > gen && !slices.Contains(o.Members, e.self) && (o.State == stateRunning || o.State == stateReforming):
			// The others formed a generation without this peer (it hung):
			// whatever they do now, it must not lead them back to its old
			// commit.
			newer = true
		case o.State == stateJoining:
			if !slices.Contains(members, p) || why.want != nil {
				joiners = append(joiners, p)
			}
			// A member that restarted (joining) lost its state: it joins.
			if slices.Contains(members, p) {
				joiners = append(joiners, p)
			}
		case o.State == stateReforming || o.State == stateRunning || o.State == stateStarting && !formedOnce:
			// Before the first generation formed, a peer still waiting
			// for it (its own connect timeout not yet out) is there.
			if slices.Contains(members, p) {
				alive = append(alive, p)
			}
		}
	}
	sort.Ints(alive)
	sort.Ints(joiners)
	return alive, slices.Compact(joiners), newer
}

// decide is the coordinator's choice of the next members: the survivors
// in cluster order, then the joiners; or why the run must stop.
func (e *elastic) decide(gen uint64, members, alive, joiners []int, why *membershipChangeError) ([]int, string) {
	var lost []int
	for _, p := range members {
		if !slices.Contains(alive, p) {
			lost = append(lost, p)
		}
	}
	if want := why.want; want != nil { // the schedule decides
		for _, p := range want {
			if !slices.Contains(alive, p) && !slices.Contains(joiners, p) {
				return nil, fmt.Sprintf("elastic: the membership schedule wants peer %d at step %d, and it is not there (alive %v, joining %v)", p, why.step, alive, joiners)
			}
		}
		return want, ""
	}
	if 2*len(alive) < len(members) || 2*len(alive) == len(members) && !slices.Contains(alive, slices.Min(members)) {
		return nil, fmt.Sprintf("elastic: only %v of generation %d's members %v are left, not a majority: this side stops so that a partition never goes on as two runs (lost %v: %s)", alive, gen, members, lost, why.reason)
	}
	var next []int
	for _, p := range alive {
		if !slices.Contains(joiners, p) {
			next = append(next, p)
		}
	}
	for _, p := range joiners {
		if !slices.Contains(next, p) {
			next = append(next, p)
		}
	}
	if len(next) < e.cfg.MinWorkers {
		return nil, fmt.Sprintf("elastic: %d peer(s) left (%v), fewer than --min-workers %d: lost %v: %s", len(next), next, e.cfg.MinWorkers, lost, why.reason)
	}
	return next, ""
}

// propose sends the next generation's members to each of them; it
// returns true once all accepted (the proposal is then this peer's own
// accepted one), false if some did not (they are probed again).
func (e *elastic) propose(ctx context.Context, gen uint64, members, next []int, why *membershipChangeError) bool {
	e.mu.Lock()
	ngen := max(e.gen, e.proposed) + 1
	for _, m := range []*elasticMsg{e.accepted, e.pending} {
		if m != nil && m.Gen >= ngen {
			ngen = m.Gen + 1
		}
	}
	e.proposed = ngen
	e.mu.Unlock()
	change := &MembershipChange{Step: e.commit.step, Generation: ngen, Members: next, Reason: why.reason,
		RolledBack: max(0, e.lastStep-e.commit.step), CommitEvery: e.cfg.CommitEvery}
	change.Left, change.Joined = diffMembers(members, next)
	switch {
	case why.want != nil:
		change.Reason = why.reason // the schedule, or peers asked to stop
	case len(change.Left) > 0:
		change.Reason = fmt.Sprintf("lost peer(s) %v: %s", change.Left, why.reason)
	}
	msg := elasticMsg{Kind: "propose", Gen: ngen, Members: next, Change: change}
	others := slices.DeleteFunc(slices.Clone(next), func(p int) bool { return p == e.self })
	outs, errs := e.askAll(ctx, others, msg)
	for i := range others {
		if errs[i] != nil || !outs[i].OK {
			reason := outs[i].Reason
			if errs[i] != nil {
				reason = errs[i].Error()
			}
			e.log.Warn("a peer refused or missed the proposal", zap.Int("to", others[i]), zap.Uint64("generation", ngen), zap.String("reason", reason))
			time.Sleep(probeTimeout / 10) // what it answers may change: not in a tight loop
			return false
		}
	}
	// Every member promised: go. One that dies now fails the formation,
	// and the survivors agree again.
	e.askAll(ctx, others, elasticMsg{Kind: "go", Gen: ngen})
	e.mu.Lock()
	m := msg
	e.accepted = &m
	e.mu.Unlock()
	e.log.Info("membership agreed", zap.Uint64("generation", ngen), zap.Ints("members", next), zap.Ints("left", change.Left), zap.Ints("joined", change.Joined), zap.Int("from_step", change.Step))
	return true
}

// stopAll tells the other survivors the run stops, and why.
func (e *elastic) stopAll(ctx context.Context, alive []int, reason string) {
	others := slices.DeleteFunc(slices.Clone(alive), func(p int) bool { return p == e.self })
	e.askAll(ctx, others, elasticMsg{Kind: "stop", Reason: reason})
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

// errLeftBySchedule: the membership schedule never includes this peer.
var errLeftBySchedule = errors.New("not in the membership schedule")

// formError is a generation that could not form (a proposed member did
// not come): the membership is agreed again.
type formError struct{ err error }

func (e formError) Error() string { return e.err.Error() }
func (e formError) Unwrap() error { return e.err }

// maxFailedForms is how many generations in a row may fail to form
// before the run stops: peers that agree and then cannot link are not a
// loss that another round mends.
const maxFailedForms = 5

// generation forms generation gen over members and runs the ring on it
// from the chief's commit, until the run ends, a peer is lost or the
// membership changes at a commit.
func (e *elastic) generation(ctx context.Context, gen uint64, members []int) (*Summary, error) {
	fctx := ctx
	if e.formedMembers != nil {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, min(formTimeout, e.cfg.Timeout))
		defer cancel()
	}
	g, end, err := e.m.Form(fctx, gen, members)
	if err != nil {
		return nil, formError{fmt.Errorf("elastic: forming generation %d over peers %v: %w", gen, members, err)}
	}
	e.mu.Lock()
	e.forms, e.isFormed = 0, true
	e.mu.Unlock()
	e.formed(gen, members)
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
	p.settings = append(p.settings, setting{Name: "elastic", Value: fmt.Sprintf("min workers %d, commit every %d steps, schedule of %d changes", e.cfg.MinWorkers, e.cfg.CommitEvery, len(e.cfg.Schedule))})
	p.el = e
	sum, err := runSync(ctx, e.job, g, p)
	if err != nil {
		// Its errors name ranks of this generation: say whose they are.
		return nil, fmt.Errorf("generation %d (ranks 0-%d are peers %v): %w", gen, len(members)-1, members, err)
	}
	if e.cfg.Final != nil {
		if err := e.cfg.Final(ctx, sum, members); err != nil {
			return nil, err
		}
	}
	failed = false
	return sum, nil
}

// atCommit commits l's state at (epoch, stepInEpoch) and learns, with
// one small all-reduce, whether a worker waits to be admitted; the
// schedule's next change, or workers to admit, end the generation here.
func (e *elastic) atCommit(ctx context.Context, l *syncLoop, epoch, stepInEpoch int) error {
	rep := l.run.rep
	rep.Settle()
	e.commit.take(rep, e.gen, l.global, epoch, stepInEpoch, l.steps, l.res.EpochResults, e.membership)
	e.commit.ck = l.checkpointTemplate()
	// A flag per cluster peer that asks to join, then one per member
	// asked to stop (SIGTERM: a pod evicted, a machine preempted).
	v := make([]float32, 2*e.n)
	e.mu.Lock()
	for p := range e.joins {
		v[p] = 1
	}
	members := e.members
	e.mu.Unlock()
	if stopAsked(e.job.Stop) {
		v[e.n+e.self] = 1
	}
	if err := l.g.AllReduceSum(ctx, v); err != nil {
		return fmt.Errorf("step %d: the commit's membership check: %w", l.global, err)
	}
	if err := e.scheduled(l, members); err != nil {
		return err
	}
	var leaving []int
	for _, p := range members {
		if v[e.n+p] > 0 {
			leaving = append(leaving, p)
		}
	}
	if len(leaving) > 0 {
		return e.leave(l, members, leaving)
	}
	v = v[:e.n]
	var joiners []int
	for p, x := range v {
		if x > 0 && !slices.Contains(members, p) {
			joiners = append(joiners, p)
		}
	}
	if len(joiners) > 0 && len(e.cfg.Schedule) == 0 {
		return &membershipChangeError{step: l.global, joiners: joiners, reason: fmt.Sprintf("admitting peer(s) %v", joiners)}
	}
	return nil
}

// diffMembers returns the peers of prev not in next (left) and those of
// next not in prev (joined), in their lists' order.
func diffMembers(prev, next []int) (left, joined []int) {
	for _, p := range prev {
		if !slices.Contains(next, p) {
			left = append(left, p)
		}
	}
	for _, p := range next {
		if !slices.Contains(prev, p) {
			joined = append(joined, p)
		}
	}
	return left, joined
}

// stopAsked says whether stop is closed.
func stopAsked(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// leave ends the generation at this commit for the members asked to stop
// (leaving): they leave the run, saying so, and the others go on without
// them; when every member was asked (the job deleted), or too few would
// be left, the run stops as a plain run does on SIGTERM: every peer after
// this step, the chief writing a checkpoint.
func (e *elastic) leave(l *syncLoop, members, leaving []int) error {
	if len(leaving) == len(members) || len(members)-len(leaving) < e.cfg.MinWorkers {
		l.elasticStop = leaving
		return nil
	}
	reason := fmt.Sprintf("peer(s) %v asked to stop (SIGTERM) and left", leaving)
	if slices.Contains(leaving, e.self) {
		l.res.Membership = e.membership
		l.peer.Left = fmt.Sprintf("left at step %d: asked to stop (SIGTERM); the other peers go on", l.global)
		return &membershipChangeError{step: l.global, leave: true, left: &Summary{Run: l.res, Peer: l.peer}, reason: reason}
	}
	stay := slices.DeleteFunc(slices.Clone(members), func(p int) bool { return slices.Contains(leaving, p) })
	return &membershipChangeError{step: l.global, want: stay, reason: reason}
}

// scheduled ends the generation if the membership schedule changes the
// members at this step (every replica decides alike).
func (e *elastic) scheduled(l *syncLoop, members []int) error {
	s := e.cfg.Schedule
	// The changes in effect are passed (the chief's position reaches
	// every replica at a generation's start, a joiner's included).
	for e.next < len(s) && slices.Equal(s[e.next].Members, members) {
		e.next++
	}
	next := e.next
	if next >= len(s) || s[next].Step > l.global {
		return nil
	}
	c := s[next]
	if !slices.Contains(c.Members, e.self) {
		if slices.ContainsFunc(s[next+1:], func(later MembershipChange) bool { return slices.Contains(later.Members, e.self) }) {
			return &membershipChangeError{step: l.global, leave: true, rejoin: true, reason: "the membership schedule"} // to come back later
		}
		l.res.Membership = e.membership
		l.peer.Left = fmt.Sprintf("left at step %d (the membership schedule)", l.global)
		return &membershipChangeError{step: l.global, leave: true, left: &Summary{Run: l.res, Peer: l.peer}, reason: l.peer.Left}
	}
	return &membershipChangeError{step: l.global, want: c.Members, reason: "the membership schedule"}
}

// resumeFrom is where the generation's chief resumes: its last commit.
func (e *elastic) resumeFrom() (*checkpoint.Checkpoint, *resumePos) {
	c := &e.commit
	if !c.valid {
		return nil, nil
	}
	if n := len(e.membership); n > 0 && !e.failedAt.IsZero() && e.membership[n-1].Generation == e.gen {
		e.membership[n-1].PauseSeconds = time.Since(e.failedAt).Seconds()
	}
	return &checkpoint.Checkpoint{Params: c.params, OptState: c.opt}, &resumePos{
		Path: fmt.Sprintf("the in-memory commit of step %d", c.step), Step: c.step, Epoch: c.epoch, StepInEpoch: c.stepInEpoch,
		StepsPerEpoch: c.stepsPerEp, History: slices.Clone(c.history), Membership: slices.Clone(e.membership), ScheduleNext: e.next,
	}
}

// started is called once generation's loop l has resumed: every replica
// takes the chief's record of the membership, and the state it starts
// from is the first commit.
func (e *elastic) started(l *syncLoop, pos *resumePos) error {
	if pos != nil && pos.Membership != nil {
		e.membership = pos.Membership
	}
	if pos != nil && len(e.cfg.Schedule) > 0 {
		e.next = pos.ScheduleNext
	}
	e.commit.take(l.run.rep, e.gen, l.global, l.startEpoch, l.skip, l.steps, l.res.EpochResults, e.membership)
	e.commit.ck = l.checkpointTemplate()
	if err := e.scheduled(l, e.members); err != nil {
		return err // the change recorded at this commit (a loss before the next)
	}
	if n := len(e.membership); n > 0 && e.membership[n-1].Generation == e.gen {
		c := e.membership[n-1]
		info := fmt.Sprintf("generation %d: peers %v from step %d", c.Generation, c.Members, c.Step)
		if len(c.Left) > 0 {
			info += fmt.Sprintf(", lost %v (%s)", c.Left, c.Reason)
		}
		if len(c.Joined) > 0 {
			info += fmt.Sprintf(", admitted %v", c.Joined)
		}
		info += fmt.Sprintf("; the cluster paused %.2fs", c.PauseSeconds)
		return l.obs.emit(Event{Kind: EventMembership, Step: l.global, Steps: l.total, Info: info, Change: &c})
	}
	return nil
}

// CheckMembershipSchedule checks a membership schedule against a cluster of n
// peers committing every commitEvery steps (0: the default): every peer
// in it, recorded with the same commit interval, and in each change the
// peers that stay listed before those that join (the new chief, rank 0,
// must hold the state; a real run's record is always so).
func CheckMembershipSchedule(s []MembershipChange, n, commitEvery int) error {
	if commitEvery <= 0 {
		commitEvery = DefaultCommitEvery
	}
	cur := make([]int, n)
	for i := range cur {
		cur[i] = i
	}
	for i, c := range s {
		for _, p := range c.Members {
			if p >= n {
				return fmt.Errorf("elastic: the membership schedule names peer %d, outside the cluster's %d", p, n)
			}
		}
		if c.CommitEvery > 0 && c.CommitEvery != commitEvery {
			return fmt.Errorf("elastic: the membership schedule was recorded with --commit-every %d, this run commits every %d steps: replay it with --commit-every %d (changes happen at commits)", c.CommitEvery, commitEvery, c.CommitEvery)
		}
		if i > 0 || c.Step > 0 {
			joined := false
			for _, p := range c.Members {
				stays := slices.Contains(cur, p)
				if stays && joined {
					return fmt.Errorf("elastic: the membership schedule's change at step %d lists peer %d, which stays, after a peer that joins: list the peers that stay first (the first becomes the chief, and must hold the state)", c.Step, p)
				}
				joined = joined || !stays
			}
		}
		cur = c.Members
	}
	return nil
}
