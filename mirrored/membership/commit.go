package membership

import (
	"fmt"
	"slices"
)

// AtCommit decides, at the commit of global step step, whether the
// generation goes on: the schedule's next change, members asked to stop
// (stopping: SIGTERM, a pod evicted) or workers asking to join (joining:
// cluster indices, as the commit's all-reduce gathered them) end it here;
// nil goes on. Every member decides alike: the inputs are the cluster's.
func (m *Machine) AtCommit(step int, joining, stopping []int) *Decision {
	if d := m.scheduled(step); d != nil {
		return d
	}
	var leaving []int
	for _, p := range m.members {
		if slices.Contains(stopping, p) {
			leaving = append(leaving, p)
		}
	}
	if len(leaving) > 0 {
		return m.leave(step, leaving)
	}
	var joiners []int
	for _, p := range joining {
		if !slices.Contains(m.members, p) {
			joiners = append(joiners, p)
		}
	}
	if len(joiners) > 0 && len(m.cfg.Schedule) == 0 {
		return &Decision{Kind: Reform, Why: Why{Step: step, Joiners: joiners, Reason: fmt.Sprintf("admitting peer(s) %v", joiners)}}
	}
	return nil
}

// leave ends the generation at this commit for the members asked to stop
// (leaving): they leave the run and the others go on without them; when
// every member was asked (the job deleted), or too few would be left,
// the run stops as a plain run does on SIGTERM: every peer after this
// step, the chief writing a checkpoint.
func (m *Machine) leave(step int, leaving []int) *Decision {
	members := m.members
	if len(leaving) == len(members) || len(members)-len(leaving) < m.cfg.MinWorkers {
		return &Decision{Kind: StopAll, Leaving: leaving}
	}
	reason := fmt.Sprintf("peer(s) %v asked to stop (SIGTERM) and left", leaving)
	if slices.Contains(leaving, m.cfg.Self) {
		return &Decision{Kind: Leave, Reason: fmt.Sprintf("left at step %d: asked to stop (SIGTERM); the other peers go on", step), Why: Why{Step: step, Reason: reason}}
	}
	stay := slices.DeleteFunc(slices.Clone(members), func(p int) bool { return slices.Contains(leaving, p) })
	return &Decision{Kind: Reform, Why: Why{Step: step, Want: stay, Reason: reason}}
}

// scheduled ends the generation if the membership schedule changes the
// members at step (every replica decides alike).
func (m *Machine) scheduled(step int) *Decision {
	s := m.cfg.Schedule
	// The changes in effect are passed (the chief's position reaches
	// every replica at a generation's start, a joiner's included).
	for m.next < len(s) && slices.Equal(s[m.next].Members, m.members) {
		m.next++
	}
	next := m.next
	if next >= len(s) || s[next].Step > step {
		return nil
	}
	c := s[next]
	if !slices.Contains(c.Members, m.cfg.Self) {
		if slices.ContainsFunc(s[next+1:], func(later Change) bool { return slices.Contains(later.Members, m.cfg.Self) }) {
			return &Decision{Kind: Leave, Rejoin: true, Why: Why{Step: step, Reason: "the membership schedule"}} // to come back later
		}
		left := fmt.Sprintf("left at step %d (the membership schedule)", step)
		return &Decision{Kind: Leave, Reason: left, Why: Why{Step: step, Reason: left}}
	}
	return &Decision{Kind: Reform, Why: Why{Step: step, Want: c.Members, Reason: "the membership schedule"}}
}

// Started is called once a generation's loop resumed at global step step
// from the chief's position: every replica takes the chief's record
// (record, if resumed with one) and the schedule's next change (next);
// the schedule may end the generation at once (the change recorded at
// this commit: a loss came before the next). announce is the change that
// led to this generation, if it is one, for the driver to report.
func (m *Machine) Started(resumed bool, record []Change, next, step int) (d *Decision, announce *Change) {
	if resumed && record != nil {
		m.record = record
	}
	if resumed && len(m.cfg.Schedule) > 0 {
		m.next = next
	}
	if d := m.scheduled(step); d != nil {
		return d, nil
	}
	if n := len(m.record); n > 0 && m.record[n-1].Generation == m.gen {
		c := m.record[n-1]
		return nil, &c
	}
	return nil, nil
}

// Paused sets how long the cluster paused for the current generation's
// change (the driver's clock measured it), if the record's last change
// made the current generation.
func (m *Machine) Paused(seconds float64) {
	if n := len(m.record); n > 0 && m.record[n-1].Generation == m.gen {
		m.record[n-1].PauseSeconds = seconds
	}
}
