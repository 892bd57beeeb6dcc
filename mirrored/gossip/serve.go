package gossip

import (
	"maps"
	"slices"

	"go.uber.org/zap"
)

// serve answers p's request: the average, or BUSY. Messages between two
// ranks arrive in order and answers are applied on arrival, so a request
// that was already served before its sender's own request arrived is
// settled first.
func (m *machine) serve(p int, req *message) []byte {
	if m.refuse(p, req) {
		m.stats.Refused++
		return m.encode(message{kind: msgBusy, id: req.id})
	}
	var rep message
	if req.sparse {
		rep = m.serveSparse(p, req)
	} else {
		rep = m.serveDense(req)
	}
	m.stats.ElementsSent += int64(len(rep.vals))
	if m.computing {
		m.merged++
	}
	if m.pending != nil {
		m.pending.changed = true
	}
	m.stats.Served++
	return m.encode(rep)
}

// refuse says whether p's request must be answered BUSY.
func (m *machine) refuse(p int, req *message) bool {
	initiating := -1
	if m.pending != nil {
		initiating = m.pending.peer
	}
	switch {
	case m.finished:
		return true
	case m.dead(p):
		return true // dropped after a timeout: it gets no answer, so nothing may change
	case initiating == p && p > m.rank:
		return true // two ranks picked each other: the lower rank's request wins
	case initiating >= 0 && initiating != p && m.dirty != nil:
		return true // sparse exchanges stay strictly one at a time (see serveSparse)
	case m.computing && m.merged+boolInt(m.pending != nil) >= m.opts.MaxStaleness:
		// At the bound, counting the answer to this rank's own exchange
		// in flight, which will land during the step and cannot be
		// refused.
		m.stats.RefusedStale++
		return true
	case req.sparse != (m.dirty != nil):
		m.log.Error("gossip peer uses another exchange mode; refusing", zap.Int("peer", p), zap.Bool("peer_sparse", req.sparse))
		return true
	case !req.sparse && len(req.vals) != len(m.params):
		m.log.Error("gossip peer sent a parameter vector of another length; refusing", zap.Int("peer", p), zap.Int("got", len(req.vals)), zap.Int("want", len(m.params)))
		return true
	}
	if u, bad := outside(req.idx, len(m.params)); bad {
		m.log.Error("gossip peer sent a coordinate out of range; refusing", zap.Int("peer", p), zap.Int32("coordinate", u))
		return true
	}
	return false
}

// serveDense averages the whole vector with the request's.
func (m *machine) serveDense(req *message) message {
	rep := message{kind: msgReply, id: req.id}
	for i, theirs := range req.vals {
		mine := m.params[i]
		a := (mine + theirs) * 0.5
		dd := float64(mine) - float64(theirs)
		rep.dist2 += dd * dd
		rep.norm2 += float64(a) * float64(a)
		m.params[i] = a
	}
	rep.vals = m.params
	return rep
}

// serveSparse averages the coordinates either side changed since their
// last exchange: the request's, and those this rank recorded for p, whose
// value on p is the one recorded. Every other coordinate is equal on both
// sides. A rank waiting for its own exchange answers BUSY to everyone but
// that exchange's peer (refuse), because this bookkeeping needs both
// sides' vectors to be exactly equal after each exchange.
func (m *machine) serveSparse(p int, req *message) message {
	if px := m.pending; px != nil && px.peer == p {
		// Two ranks picked each other and this (higher) rank serves; its
		// own request will be declined, so the coordinates it sent are
		// still different from the peer's: average them now.
		m.abandonSent(px)
	}
	d := m.dirty[p]
	rep := message{kind: msgReply, id: req.id, sparse: true,
		idx: make([]int32, 0, len(req.idx)+len(d)), vals: make([]float32, 0, len(req.idx)+len(d))}
	for i, u := range req.idx {
		delete(d, u)
		m.average(&rep, p, u, req.vals[i])
	}
	// Coordinates only this rank changed: the peer still has the value
	// they had before that change. In index order, so that the reply and
	// its distance figures are the same from run to run.
	for _, u := range slices.Sorted(maps.Keys(d)) {
		m.average(&rep, p, u, d[u])
	}
	clear(d)
	return rep
}

// average sets coordinate u to the mean of this rank's value and p's
// (theirs) and adds it to the reply rep.
func (m *machine) average(rep *message, p int, u int32, theirs float32) {
	mine := m.params[u]
	a := (mine + theirs) * 0.5
	dd := float64(mine) - float64(theirs)
	rep.dist2 += dd * dd
	rep.norm2 += float64(a) * float64(a)
	if a != mine {
		if m.moved(mine, a) {
			m.markDirty(u, p)
		}
		m.params[u] = a
	}
	rep.idx = append(rep.idx, u)
	rep.vals = append(rep.vals, a)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
