package launch

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/membership"
)

// status turns the workers' events into one line per epoch, printed when
// every worker has finished that epoch; under elastic, into one line per
// change of membership too, which names who left and why in the
// launcher's own words where it saw the worker die.
type status struct {
	n      int
	start  time.Time
	epochs map[int]int // epoch -> workers done with it
	// elastic: the membership changed, so the chief's epoch line is shown
	// (the number of workers is not n any more)
	elastic bool
	// Config.Elastic: every generation starts (and resumes) again, with
	// its own steps; the lines count epochs instead, and only the first
	// start's header is shown (a change's line says what changed).
	elasticRun    bool
	started       bool
	stepsPerEpoch int // the current generation's
	// died holds what the launcher saw of the workers that died (rank ->
	// words), until the change that drops them is told; changes are the
	// changes told so far (a rank that left in one and joins rejoined).
	died    map[int]string
	changes []membership.Change
	// told: ranks a change dropped since their last start, whose exit,
	// seen after the change, is not told again.
	told map[int]bool
	// reported, if set, says what a worker that has not exited yet said
	// of its own end (its last error: the fault injection killed it);
	// running, whether its process is still running.
	reported func(rank int) (string, bool)
	running  func(rank int) bool
	// held is a change whose lost workers' processes are still running:
	// told when they exit (in the launcher's words: "died: killed") or at
	// HoldChange, whichever comes first; queued, the lines after it.
	held   *Message
	queued []string
}

// HoldChange bounds how long a change's line waits for the process of a
// worker it lost to exit (a SIGKILLed worker's is reaped in
// milliseconds), so that the line can say how it died.
const HoldChange = 500 * time.Millisecond

func newStatus(n int, elastic bool) *status {
	return &status{n: n, start: time.Now(), epochs: map[int]int{}, elasticRun: elastic, died: map[int]string{}, told: map[int]bool{}}
}

// update is the line m makes, if any: "" while a change is held (the
// lines after it wait with it: release).
func (s *status) update(m Message) string {
	line := s.line(m)
	if s.held != nil && line != "" {
		s.queued = append(s.queued, line)
		return ""
	}
	return line
}

// release is the held change's line and the lines queued after it.
func (s *status) release() string {
	if s.held == nil {
		return ""
	}
	m := *s.held
	s.held = nil
	lines := append([]string{s.change(m)}, s.queued...)
	s.queued = nil
	return strings.Join(lines, "\n")
}

func (s *status) line(m Message) string {
	switch m.Kind {
	case "start":
		if m.Rank != 0 {
			return ""
		}
		s.stepsPerEpoch = m.StepsPerEpoch
		first := !s.started
		s.started = true
		if first || !s.elasticRun {
			return "[launch] " + m.Info
		}
	case "resumed":
		if m.Rank == 0 && !(s.elasticRun && s.started) { // a later elastic generation resumes from its commit: the change's line says where
			return fmt.Sprintf("[launch] resumed from %s at step %d of %d", m.Path, m.Step, m.Steps)
		}
	case "checkpoint":
		return fmt.Sprintf("[launch] checkpoint at step %d: %s", m.Step, m.Path)
	case mirrored.EventCallback: // every replica decided the same: the chief says it
		if m.Rank == 0 {
			return "[launch] " + m.Info
		}
	case mirrored.EventMembership:
		if m.Rank == 0 {
			s.elastic = true // the members change: the chief's epochs are the cluster's
			if s.unexplained(m) && s.held == nil {
				s.held = &m
				return ""
			}
			return s.change(m)
		}
	case "epoch":
		return s.epoch(m)
	}
	return ""
}

// change is the line of a change of membership: the worker's own, or,
// with its Change and Shift, one naming in the launcher's words the
// workers it saw die.
func (s *status) change(m Message) string {
	c, sh := m.Change, m.Shift
	if c == nil || sh == nil {
		return "[launch] " + m.Info
	}
	for _, p := range c.Left {
		if _, seen := s.died[p]; !seen { // its exit, if any, is still to come
			s.told[p] = true
		}
	}
	line := membership.Line(*c, s.changes, *sh, func(p int) (string, bool) {
		if w, ok := s.died[p]; ok {
			delete(s.died, p)
			return w, true
		}
		if s.reported != nil {
			return s.reported(p)
		}
		return "", false
	})
	s.changes = append(s.changes, *c)
	return "[launch] " + line
}

// unexplained says whether change m lost a worker whose process still
// runs and has not said why it ends: its exit may be a moment away.
func (s *status) unexplained(m Message) bool {
	if m.Change == nil || m.Shift == nil || s.running == nil {
		return false
	}
	for _, p := range m.Change.Left {
		_, seen := s.died[p]
		said := false
		if s.reported != nil {
			_, said = s.reported(p)
		}
		if !seen && !said && s.running(p) {
			return true
		}
	}
	return false
}

// diedWorker records that an elastic worker died (words), to be told
// with the change that drops it, unless a change already told it; it
// returns the held change's lines once this exit explains it.
func (s *status) diedWorker(rank int, words string) string {
	if s.told[rank] {
		delete(s.told, rank)
		return ""
	}
	s.died[rank] = words
	if s.held != nil && !s.unexplained(*s.held) {
		return s.release()
	}
	return ""
}

// untold is the deaths no change has told (the run ended first), one
// line each.
func (s *status) untold() []string {
	var out []string
	for _, r := range slices.Sorted(maps.Keys(s.died)) {
		out = append(out, fmt.Sprintf("[launch] rank %d %s", r, s.died[r]))
	}
	clear(s.died)
	return out
}

// epoch is an epoch's line, once every worker finished it (under elastic,
// when the chief did): an elastic run's counts epochs, not steps, which
// its changes renumber.
func (s *status) epoch(m Message) string {
	if m.Epoch == nil {
		return ""
	}
	s.epochs[m.Epoch.Epoch]++
	if !(s.elastic && m.Rank == 0 || !s.elastic && s.epochs[m.Epoch.Epoch] == s.n) {
		return ""
	}
	e := m.Epoch
	auc := ""
	if e.TestAUC > 0 { // sparse-lr
		auc = fmt.Sprintf("  AUC %.4f", e.TestAUC)
	}
	where := fmt.Sprintf("  step %d/%d", m.Step, m.Steps)
	if s.elasticRun && s.stepsPerEpoch > 0 {
		where = fmt.Sprintf(" of %d", (m.Steps+s.stepsPerEpoch-1)/s.stepsPerEpoch)
		auc += fmt.Sprintf("  lr %.4g", e.LR) // it follows the peers (--elastic-lr)
	}
	return fmt.Sprintf("[launch] epoch %d%s  loss %.4f  test accuracy %6.2f%%%s  %8.0f examples/s  train %.1fs  elapsed %.1fs",
		e.Epoch, where, e.Loss, 100*e.TestAccuracy, auc, e.ExamplesPerSec, e.TrainSeconds, time.Since(s.start).Seconds())
}

// deathWords says in a few words how a worker ended: killed by the fault
// injection or a signal, or the innermost part of its last error (the
// whole chain is in its log, once).
func (w *worker) deathWords() string {
	switch {
	case w.killed:
		return "died: killed by fault injection (--kill-rank/--kill-after)"
	case w.waitErr != nil && diedOfSignal(w.waitErr): // "signal: killed"
		return "died: " + strings.TrimPrefix(w.waitErr.Error(), "signal: ")
	case w.lastErr != "":
		parts := strings.Split(w.lastErr, ": ")
		return "exited: " + strings.Join(parts[max(0, len(parts)-2):], ": ")
	case w.waitErr != nil:
		return "exited: " + w.waitErr.Error()
	}
	return "exited"
}

// reported is what worker rank, still running, said of its own end: the
// fault injection killed it (its error reached the launcher before its
// exit, and before the survivors' change).
func (c *localCluster) reported(rank int) (string, bool) {
	if rank < 0 || rank >= len(c.workers) || c.workers[rank] == nil {
		return "", false
	}
	w := c.workers[rank]
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.killed {
		return "", false
	}
	return w.deathWords(), true
}

// running says whether worker rank's process is still running.
func (c *localCluster) running(rank int) bool {
	if rank < 0 || rank >= len(c.workers) || c.workers[rank] == nil {
		return false
	}
	w := c.workers[rank]
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.exited
}
