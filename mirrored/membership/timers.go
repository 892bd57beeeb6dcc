package membership

import "time"

// Timers are a driver's clocks while it carries out the machine's
// effects (the machine itself has none): the deadline of an agreement,
// and, while joining, the last answer from a running peer and the
// ticker that probes again.
type Timers struct {
	AgreeBy, Heard time.Time
	Tick           *time.Ticker
}

// Enter starts the clocks of state, once: an agreement must be reached
// within agreeWithin; a joining peer probes every probe.
func (t *Timers) Enter(state State, agreeWithin, probe time.Duration) {
	switch {
	case state == Reforming && t.AgreeBy.IsZero():
		t.AgreeBy = time.Now().Add(agreeWithin)
	case state == Joining && t.Tick == nil:
		t.Heard, t.Tick = time.Now(), time.NewTicker(probe)
	}
}

// Late says whether state's deadline passed: the agreement's, or, while
// joining, timeout without an answer from a running peer.
func (t *Timers) Late(state State, timeout time.Duration) bool {
	return state == Reforming && time.Now().After(t.AgreeBy) ||
		state == Joining && time.Since(t.Heard) > timeout
}

// Stop stops the ticker.
func (t *Timers) Stop() {
	if t.Tick != nil {
		t.Tick.Stop()
	}
}
