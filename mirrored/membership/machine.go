package membership

import (
	"fmt"
	"slices"
	"sort"

	"go.uber.org/zap"
)

// State is a peer's place in the protocol, as its status answers give it.
type State string

// The states.
const (
	Starting  State = "starting"  // the first generation is forming
	Running   State = "running"   // a generation trains
	Reforming State = "reforming" // a generation ended: agreeing on the next
	Joining   State = "joining"   // waiting to be admitted
	Done      State = "done"      // the run is over here
)

// Kind names a message.
type Kind string

// The messages: questions, and the one answer to each.
const (
	Status  Kind = "status"  // who are you, in which generation, doing what
	Join    Kind = "join"    // admit me at your next commit
	Propose Kind = "propose" // would you go on with these members (a promise)
	Go      Kind = "go"      // every member promised: take the proposal
	Stop    Kind = "stop"    // the run stops, for Reason
	Answer  Kind = "answer"  // the answer to any of them
)

// Msg is a message of the protocol. Its encoding is the driver's.
type Msg struct {
	Kind    Kind
	Gen     uint64
	Members []int
	State   State
	OK      bool
	Reason  string
	// Change is the proposal's record (propose).
	Change *Change
}

// Send is a message for the driver to deliver to cluster peer To.
type Send struct {
	To  int
	Msg Msg
}

// Wait is what the driver waits for before its next Tick, when an input
// leaves the machine with nothing to send and nothing decided.
type Wait int

// The waits.
const (
	NoWait        Wait = iota // an input is still being answered
	WaitProposal              // not the coordinator: a go or stop (Effects.Wake), or a while
	WaitRetry                 // a proposal was refused: a moment, not a tight loop
	WaitAdmission             // joining: a go (Effects.Wake), the next probe, or a stop asked from outside
)

// DecisionKind names a decision.
type DecisionKind int

// The decisions.
const (
	// Form: form generation Gen over Members (in rank order), then call
	// Forming and Formed (or FormFailed).
	Form DecisionKind = iota
	// Halt: the run stops, for Reason; Coordinator says this peer decided
	// it (it writes the last commit as a checkpoint).
	Halt
	// LeftBySchedule: the schedule never includes this peer.
	LeftBySchedule
	// GaveUp: late, and still no agreement (reforming) or admission
	// (joining).
	GaveUp
	// Reform: the generation ends at this commit (Why), to agree again.
	Reform
	// Leave: this peer leaves the run here (Reason); with Rejoin it waits
	// to be admitted again later (the schedule names it later).
	Leave
	// StopAll: every member was asked to stop, or too few would be left:
	// the run stops after this step, as a plain run does (Leaving asked).
	StopAll
)

// Decision is what the machine decided; the driver carries it out.
type Decision struct {
	Kind        DecisionKind
	Gen         uint64
	Members     []int
	Reason      string
	Coordinator bool
	Rejoin      bool
	Why         Why
	Leaving     []int
}

// Effects is what an input asks of the driver: deliver Sends (questions,
// or the answer to the question received), end its wait (Wake), carry out
// Decision, or wait as Wait says before its next Tick.
type Effects struct {
	Sends    []Send
	Wake     bool
	Decision *Decision
	Wait     Wait
	// Heard: an admission probe was answered by a peer still running.
	Heard bool
}

// Why is why a generation ended: the global Step, the workers to admit
// (Joiners), the members the schedule (or a stop) wants, the reason.
type Why struct {
	Step    int
	Joiners []int
	Want    []int
	Reason  string
}

// Config is the run's elastic settings the protocol needs.
type Config struct {
	Self, Size int // this peer's cluster index; the cluster's peers
	// Initial, if set, is how many of them (the first) start the run: the
	// others are slots for workers that join later (--max-workers).
	Initial     int
	MinWorkers  int
	CommitEvery int
	Schedule    []Change
}

// maxGenerationStep bounds how far a proposal's generation may be ahead
// of a peer's: each attempt at agreeing adds one, and a member gone bad
// must not push the count to its end.
const maxGenerationStep = 1 << 16

// maxFailedForms is how many generations in a row may fail to form before
// the run stops: peers that agree and then cannot link are not a loss
// that another round mends.
const maxFailedForms = 5

// round is the questions of one kind this peer asked and awaits.
type round struct {
	kind    Kind
	to      []int
	answers []*Msg // nil: not answered (yet)
	waiting int
}

// Machine is one peer's side of the elastic membership protocol as a
// deterministic state machine: no goroutines, locks, network or clock.
// Each input returns the Effects its driver must carry out: the questions
// go out as Sends, their answers (or their failure) come back through
// Receive (or Unanswered), and the answer to a peer's question is the one
// Send of Receive's Effects. A round of questions ends once every one is
// answered or failed; only then does the machine go on.
//
// The protocol: when a generation ends, the lowest surviving member (the
// coordinator) probes who is there (status), applies the majority rule
// (Decide), and proposes the next generation to its members (propose);
// once every one promised, it tells them to take it (go). A promise binds
// a peer to one member list per generation, and a peer takes no
// generation it has not promised, so every member of a generation forms
// it with the same list.
type Machine struct {
	cfg Config
	log *zap.Logger

	state    State
	gen      uint64
	members  []int
	accepted *Msg   // the newest proposal taken, for a generation after gen
	pending  *Msg   // the newest proposal promised (its go not yet come)
	proposed uint64 // the highest generation this peer proposed
	stopMsg  string // the coordinator's reason to stop
	joins    map[int]bool
	isFormed bool // a generation formed: the run is on
	forms    int  // generations in a row that failed to form
	// change is the agreed change that the next generation to form
	// records; formedMembers the members of the last one that formed.
	change        *Change
	formedMembers []int
	record        []Change
	next          int // the schedule's next change

	// The agreement in progress: why the generation ended, its members,
	// the commit to go on from and the last step done.
	why             Why
	ended           []int
	committed, last int
	scheduledJoin   bool   // joining: ask for status only (the schedule admits)
	proposal        *Msg   // proposed, its go not yet sent
	stopReason      string // decided as the coordinator: told to the others, then halts
	round           *round // the questions in flight
}

// New returns the machine of peer cfg.Self of cfg.Size, starting.
func New(cfg Config, log *zap.Logger) *Machine {
	if cfg.MinWorkers <= 0 {
		cfg.MinWorkers = 1
	}
	if cfg.CommitEvery <= 0 {
		cfg.CommitEvery = DefaultCommitEvery
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Machine{cfg: cfg, log: log, state: Starting, joins: map[int]bool{}}
}

// State is the machine's state, as its status answers give it.
func (m *Machine) State() State { return m.state }

// Gen is the generation this peer last began to form.
func (m *Machine) Gen() uint64 { return m.gen }

// Members are generation Gen's members, in rank order (not to be changed).
func (m *Machine) Members() []int { return m.members }

// Record is the run's membership changes so far (Result.Membership),
// shared with the machine.
func (m *Machine) Record() []Change { return m.record }

// NextChange is the index of the schedule's next change.
func (m *Machine) NextChange() int { return m.next }

// Joins are the peers asking to join, sorted.
func (m *Machine) Joins() []int {
	var js []int
	for p := range m.joins {
		js = append(js, p)
	}
	sort.Ints(js)
	return js
}

// Receive takes msg from peer from: a question, which it answers (the one
// Send of the Effects), or the answer to one of this peer's questions.
func (m *Machine) Receive(from int, msg Msg) Effects {
	if msg.Kind == Answer {
		return m.answered(from, &msg)
	}
	out, wake := m.answer(from, msg)
	return Effects{Sends: []Send{{To: from, Msg: out}}, Wake: wake}
}

// Unanswered says that the question to peer to got no answer (reason).
func (m *Machine) Unanswered(to int, reason string) Effects {
	return m.answered(to, &Msg{Kind: Answer, Reason: reason}) // no State: not from a peer
}

// answer is this peer's answer to a question from peer from, and whether
// the driver's wait ends (a go or a stop taken).
func (m *Machine) answer(from int, msg Msg) (Msg, bool) {
	out := Msg{Kind: Answer, Gen: m.gen, Members: m.members, State: m.state}
	if m.state == Running && !m.isFormed {
		out.State = Starting // the first generation is still forming: not one to join
	}
	wake := false
	switch msg.Kind {
	case Status:
		out.OK = true
	case Join:
		if m.state == Running || m.state == Reforming {
			if !m.joins[from] {
				m.log.Info("a worker asks to join", zap.Int("peer", from))
			}
			m.joins[from] = true
			out.OK = true
		}
	case Propose: // the first phase: this peer would take it
		if reason := m.refuse(from, msg); reason != "" {
			out.Reason = reason
			break
		}
		p := msg
		m.pending = &p
		out.OK = true
	case Go: // the second: every member promised, so it is taken
		if p := m.pending; p != nil && p.Gen == msg.Gen && (m.accepted == nil || m.accepted.Gen < p.Gen) {
			m.accepted = p
			out.OK, wake = true, true
		}
	case Stop:
		// A peer still running the generation the coordinator saw end
		// takes the stop too: it will see the loss in a moment, and by
		// then the coordinator may have exited and no longer answer.
		if m.state == Reforming || m.state == Joining || m.state == Running && msg.Gen == m.gen {
			m.stopMsg = msg.Reason
			out.OK, wake = true, true
		}
	default:
		out.Reason = "unknown kind " + string(msg.Kind)
	}
	return out, wake
}

// refuse says why proposal msg from peer from cannot be promised ("" if
// it can).
func (m *Machine) refuse(from int, msg Msg) string {
	n := m.cfg.Size
	switch {
	case !slices.Contains(msg.Members, from):
		return fmt.Sprintf("the proposer (peer %d) is not among its members", from)
	case !slices.Contains(msg.Members, m.cfg.Self):
		return "this peer is not among the members"
	case msg.Gen <= m.gen && m.state != Starting:
		return fmt.Sprintf("generation %d is not after this peer's %d", msg.Gen, m.gen)
	case msg.Gen > m.gen+maxGenerationStep:
		return fmt.Sprintf("generation %d is implausibly far after this peer's %d", msg.Gen, m.gen)
	case slices.ContainsFunc(msg.Members, func(p int) bool { return p < 0 || p >= n }) || len(msg.Members) > n ||
		len(slices.Compact(slices.Sorted(slices.Values(msg.Members)))) != len(msg.Members):
		return fmt.Sprintf("members %v name a peer twice or outside the cluster's %d", msg.Members, n)
	case m.accepted != nil && msg.Gen <= m.accepted.Gen:
		return fmt.Sprintf("already took generation %d", m.accepted.Gen)
	case m.pending != nil && msg.Gen == m.pending.Gen && !slices.Equal(msg.Members, m.pending.Members):
		return fmt.Sprintf("already promised generation %d to members %v", msg.Gen, m.pending.Members)
	case m.pending != nil && msg.Gen < m.pending.Gen:
		return fmt.Sprintf("already promised generation %d", m.pending.Gen)
	}
	return ""
}

// ask starts a round of msg to peers to; a round to nobody ends at once.
func (m *Machine) ask(kind Kind, to []int, msg Msg) Effects {
	r := &round{kind: kind, to: slices.Clone(to), answers: make([]*Msg, len(to)), waiting: len(to)}
	m.round = r
	if len(to) == 0 {
		return m.roundDone()
	}
	e := Effects{}
	for _, p := range to {
		e.Sends = append(e.Sends, Send{To: p, Msg: msg})
	}
	return e
}

// answered takes peer from's answer (or failure) to the round in flight.
func (m *Machine) answered(from int, msg *Msg) Effects {
	r := m.round
	if r == nil {
		return Effects{}
	}
	i := slices.Index(r.to, from)
	if i < 0 || r.answers[i] != nil {
		return Effects{} // not asked, or answered already
	}
	r.answers[i] = msg
	if r.waiting--; r.waiting > 0 {
		return Effects{}
	}
	return m.roundDone()
}

// ok says whether answer a came from a peer (not a failure to answer).
func ok(a *Msg) bool { return a.State != "" }

// roundDone goes on from a round whose every question is answered.
func (m *Machine) roundDone() Effects {
	r := m.round
	m.round = nil
	switch r.kind {
	case Status:
		switch m.state {
		case Starting:
			return m.started(r)
		case Reforming:
			return m.probed(r)
		case Joining:
			return m.probedForAdmission(r)
		}
	case Join:
		return m.probedForAdmission(r)
	case Propose:
		return m.promised(r)
	case Go:
		m.accepted = m.proposal
		m.proposal = nil
		c := m.accepted.Change
		m.log.Info("membership agreed", zap.Uint64("generation", m.accepted.Gen), zap.Ints("members", m.accepted.Members), zap.Ints("left", c.Left), zap.Ints("joined", c.Joined), zap.Int("from_step", c.Step))
		return m.Tick(false) // takes its own proposal
	case Stop:
		return Effects{Decision: &Decision{Kind: Halt, Reason: m.stopReason, Coordinator: true}}
	}
	return Effects{}
}

// Start finds this peer's place: the first generation with every peer of
// the cluster (or the schedule's first), or, if the others already run
// (a restarted worker, or one the schedule adds later), admission.
func (m *Machine) Start() Effects {
	all := m.initialMembers()
	if s := m.cfg.Schedule; len(s) > 0 && s[0].Step == 0 {
		if !slices.ContainsFunc(s, func(c Change) bool { return slices.Contains(c.Members, m.cfg.Self) }) {
			return Effects{Decision: &Decision{Kind: LeftBySchedule}}
		}
	}
	if !slices.Contains(all, m.cfg.Self) {
		return m.join(len(m.cfg.Schedule) > 0)
	}
	return m.ask(Status, m.others(all), Msg{Kind: Status})
}

// started: the others' status says whether a run is on already.
func (m *Machine) started(r *round) Effects {
	running := false
	for _, a := range r.answers {
		running = running || ok(a) && (a.State == Running || a.State == Reforming)
	}
	if !running {
		return Effects{Decision: &Decision{Kind: Form, Gen: 0, Members: m.initialMembers()}}
	}
	return m.join(len(m.cfg.Schedule) > 0)
}

// initialMembers is the first generation's: every peer of the cluster, or
// the schedule's change at step 0.
func (m *Machine) initialMembers() []int {
	if s := m.cfg.Schedule; len(s) > 0 && s[0].Step == 0 {
		return slices.Clone(s[0].Members)
	}
	n := m.cfg.Size
	if m.cfg.Initial > 0 {
		n = min(n, m.cfg.Initial)
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return all
}

// others is ps without this peer.
func (m *Machine) others(ps []int) []int {
	return slices.DeleteFunc(slices.Clone(ps), func(p int) bool { return p == m.cfg.Self })
}

// Forming starts generation gen over members: every generation starts
// with no request to join (a worker still waiting asks again, and one
// that died since it asked must not make every commit a change).
func (m *Machine) Forming(gen uint64, members []int) {
	m.gen, m.members, m.accepted, m.pending, m.state = gen, members, nil, nil, Running
	m.proposal, m.round, m.stopReason = nil, nil, ""
	clear(m.joins)
}

// Formed records the change that led to generation gen over members, now
// that it formed: who left and joined since the last generation that
// formed (a generation agreed on that did not form is not a change).
func (m *Machine) Formed(gen uint64, members []int) {
	m.forms, m.isFormed = 0, true
	c := m.change
	m.change = nil
	prev := m.formedMembers
	m.formedMembers = slices.Clone(members)
	if c == nil {
		return
	}
	ch := *c
	ch.Generation, ch.Members, ch.Left, ch.Joined = gen, slices.Clone(members), nil, nil
	if prev == nil {
		// The first generation formed without some peers (they did not
		// come within the connect timeout): the run starts so, which a
		// replay must know (a change at step 0).
		prev, ch.Step, ch.RolledBack = m.initialMembers(), 0, 0
		ch.Reason = "the first generation formed without them: " + ch.Reason
	}
	ch.Left, ch.Joined = Diff(prev, members)
	if len(ch.Left) == 0 && len(ch.Joined) == 0 {
		return // the same members (a worker that asked to join was gone): no change to record or replay
	}
	if n := len(m.record); n == 0 || m.record[n-1].Generation < gen {
		m.record = append(m.record, ch)
	}
}

// FormFailed counts a generation that did not form; false once too many
// did in a row (the run stops).
func (m *Machine) FormFailed() bool {
	m.forms++
	return m.forms <= maxFailedForms
}

// Formations says whether a generation has formed before (the driver
// bounds the later ones' forming).
func (m *Machine) Formations() bool { return m.formedMembers != nil }

// End says the run is over here: answers say so.
func (m *Machine) End() { m.state = Done }

// Reform begins agreeing on the generation after the current one, which
// ended (why) with the last commit at global step committed and last
// steps done: the lowest living member proposes the survivors (and the
// workers asking to join); the others take its proposal. A side without a
// majority of members, or fewer than MinWorkers, stops.
func (m *Machine) Reform(why Why, committed, last int) Effects {
	m.state, m.why, m.ended, m.committed, m.last = Reforming, why, slices.Clone(m.members), committed, last
	return m.Tick(false)
}

// Rejoin makes this peer, left by the schedule until a later change,
// wait for admission.
func (m *Machine) Rejoin() Effects { return m.join(true) }

// join waits to be admitted into the running generation: it asks the
// peers to admit it (for status only when a schedule decides) and takes
// a proposal that includes it.
func (m *Machine) join(scheduled bool) Effects {
	m.state, m.scheduledJoin = Joining, scheduled
	m.log.Info("joining the running cluster", zap.Bool("scheduled", scheduled))
	return m.Tick(false)
}

// Tick is the driver's timer: the machine takes a proposal or stop that
// came, or asks again. late says the driver's deadline passed (no
// agreement, or no peer answered an admission probe, for the timeout).
func (m *Machine) Tick(late bool) Effects {
	if m.round != nil {
		return Effects{} // the questions in flight are answered first
	}
	switch m.state {
	case Reforming, Joining:
	default:
		return Effects{}
	}
	if p := m.accepted; p != nil && (p.Gen > m.gen || m.state == Joining) {
		m.change = p.Change
		return Effects{Decision: &Decision{Kind: Form, Gen: p.Gen, Members: p.Members}}
	}
	if m.state == Joining {
		if late {
			return Effects{Decision: &Decision{Kind: GaveUp}}
		}
		kind := Join
		if m.scheduledJoin {
			kind = Status
		}
		var others []int
		for p := range m.cfg.Size {
			if p != m.cfg.Self {
				others = append(others, p)
			}
		}
		return m.ask(kind, others, Msg{Kind: kind})
	}
	if m.stopMsg != "" {
		return Effects{Decision: &Decision{Kind: Halt, Reason: m.stopMsg}}
	}
	if late {
		return Effects{Decision: &Decision{Kind: GaveUp, Gen: m.gen, Members: m.ended}}
	}
	return m.ask(Status, m.others(m.probeList()), Msg{Kind: Status})
}

// probeList is whom the coordinator's probe asks: every member of the
// ended generation, every worker asking to join, those the change names.
func (m *Machine) probeList() []int {
	ask := slices.Clone(m.ended)
	for _, lists := range [][]int{m.Joins(), m.why.Joiners, m.why.Want} {
		for _, p := range lists {
			if !slices.Contains(ask, p) {
				ask = append(ask, p)
			}
		}
	}
	return ask
}

// probedForAdmission: a joiner's probe came back.
func (m *Machine) probedForAdmission(r *round) Effects {
	e := Effects{Wait: WaitAdmission}
	for _, a := range r.answers {
		e.Heard = e.Heard || ok(a) && a.State != Done
	}
	return e
}

// probed: the status answers to the coordinator's probe. alive are the
// members that answered (this peer among them), sorted; a member joining
// (restarted: it lost its state) and a worker joining are joiners; an
// answer in a later generation without this peer says the others went on
// without it (it hung).
func (m *Machine) probed(r *round) Effects {
	if m.stopMsg != "" {
		// The coordinator decided to stop while this probe was out (and
		// may be gone by now: it no longer answers): its reason is the
		// run's, not one this peer would reach alone without it.
		return Effects{Decision: &Decision{Kind: Halt, Reason: m.stopMsg}}
	}
	members, self := m.ended, m.cfg.Self
	alive, joiners, newer := []int{self}, []int(nil), false
	for i, p := range r.to {
		o := r.answers[i]
		if !ok(o) {
			continue
		}
		switch {
		case o.Gen > m.gen && !slices.Contains(o.Members, self) && (o.State == Running || o.State == Reforming):
			// Whatever they do now, it must not lead them back to this
			// peer's old commit.
			newer = true
		case o.State == Joining:
			// A worker, or a member that restarted (it lost its state).
			joiners = append(joiners, p)
		case o.State == Reforming || o.State == Running || o.State == Starting && !m.isFormed:
			// Before the first generation formed, a peer still waiting
			// for it (its own connect timeout not yet out) is there.
			if slices.Contains(members, p) {
				alive = append(alive, p)
			}
		}
	}
	sort.Ints(alive)
	sort.Ints(joiners)
	joiners = slices.Compact(joiners)
	if newer {
		m.log.Warn("the cluster went on without this peer: asking to rejoin")
		return m.join(len(m.cfg.Schedule) > 0)
	}
	if alive[0] != self {
		return Effects{Wait: WaitProposal} // not the coordinator
	}
	next, stop := Decide(m.gen, members, alive, joiners, m.cfg.MinWorkers, m.why)
	if stop != "" {
		m.stopReason = stop
		return m.ask(Stop, m.others(alive), Msg{Kind: Stop, Gen: m.gen, Reason: stop})
	}
	return m.propose(members, next)
}

// propose sends the next generation's members to each of them.
func (m *Machine) propose(members, next []int) Effects {
	ngen := max(m.gen, m.proposed) + 1
	for _, p := range []*Msg{m.accepted, m.pending} {
		if p != nil && p.Gen >= ngen {
			ngen = p.Gen + 1
		}
	}
	m.proposed = ngen
	why := m.why
	change := &Change{Step: m.committed, Generation: ngen, Members: next, Reason: why.Reason,
		RolledBack: max(0, m.last-m.committed), CommitEvery: m.cfg.CommitEvery}
	change.Left, change.Joined = Diff(members, next)
	switch {
	case why.Want != nil:
		change.Reason = why.Reason // the schedule, or peers asked to stop
	case len(change.Left) > 0:
		change.Reason = fmt.Sprintf("lost peer(s) %v: %s", change.Left, why.Reason)
	}
	m.proposal = &Msg{Kind: Propose, Gen: ngen, Members: next, Change: change}
	return m.ask(Propose, m.others(next), *m.proposal)
}

// promised: every member promised (go), or one did not (probe again
// after a moment: what it answers may change).
func (m *Machine) promised(r *round) Effects {
	for i, a := range r.answers {
		if !a.OK {
			m.log.Warn("a peer refused or missed the proposal", zap.Int("to", r.to[i]), zap.Uint64("generation", m.proposal.Gen), zap.String("reason", a.Reason))
			m.proposal = nil
			return Effects{Wait: WaitRetry}
		}
	}
	// One that dies now fails the formation, and the survivors agree
	// again.
	return m.ask(Go, r.to, Msg{Kind: Go, Gen: m.proposal.Gen})
}
