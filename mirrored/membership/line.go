package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The learning-rate policies of an elastic run (--elastic-lr): how the
// rate follows the number of peers when the global batch changes with it.
const (
	// LRScale multiplies the rate by members/cluster size, so that it
	// follows the global batch (the linear scaling rule; Horovod's docs
	// advise scaling the rate with the workers): a shrunken cluster takes
	// proportionally smaller steps on its smaller, noisier batches.
	LRScale = "scale"
	// LRKeep leaves the rate as given, whatever the peers.
	LRKeep = "keep"
)

// LRPolicies lists the valid policies.
var LRPolicies = []string{LRScale, LRKeep}

// CheckLRPolicy reports a policy that is neither LRScale nor LRKeep.
func CheckLRPolicy(p string) error {
	if !slices.Contains(LRPolicies, p) {
		return fmt.Errorf("--elastic-lr %q: want scale (the rate follows the global batch as peers leave and join) or keep", p)
	}
	return nil
}

// LRFactor is what policy multiplies the given learning rate by when
// members of the cluster's size train.
func LRFactor(policy string, members, size int) float64 {
	if policy != LRScale || members == size || size <= 0 {
		return 1
	}
	return float64(members) / float64(size)
}

// Shift is what a change does to the training, for the line that tells
// it: where the new generation starts (an epoch and the share of it
// done, which no change renumbers), and the global batch and learning
// rate before and after.
type Shift struct {
	Epoch       int     `json:"epoch"`
	Fraction    float64 `json:"fraction"`
	BatchBefore int     `json:"global_batch_before"`
	Batch       int     `json:"global_batch"`
	LRBefore    float64 `json:"lr_before"`
	LR          float64 `json:"lr"`
	Policy      string  `json:"lr_policy"`
}

// NewShift is change c's Shift for a generation that starts at global
// step global of stepsPerEpoch, batch examples per peer, at learning
// rate lr under policy.
func NewShift(c Change, global, stepsPerEpoch, batch int, lr float64, policy string) Shift {
	before := len(c.Members) - len(c.Joined) + len(c.Left)
	s := Shift{Batch: len(c.Members) * batch, BatchBefore: before * batch, LR: lr, LRBefore: lr, Policy: policy}
	if policy == LRScale && len(c.Members) > 0 {
		s.LRBefore = lr * float64(before) / float64(len(c.Members))
	}
	if stepsPerEpoch > 0 {
		s.Epoch, s.Fraction = global/stepsPerEpoch+1, float64(global%stepsPerEpoch)/float64(stepsPerEpoch)
	}
	return s
}

// Line says change c in one line a person can follow: who left and why,
// who joined, where the new members go on from, and what the global
// batch and learning rate became. earlier is the record before c (a
// peer that left in it and joins now rejoined); said, if not nil, may
// say in its own words what happened to a peer that left (a launcher
// saw it die), else the survivors' reason is given.
func Line(c Change, earlier []Change, s Shift, said func(peer int) (string, bool)) string {
	var who []string
	for _, p := range c.Left {
		if w, ok := callSaid(said, p); ok {
			who = append(who, fmt.Sprintf("rank %d %s", p, w))
			continue
		}
		who = append(who, fmt.Sprintf("rank %d %s", p, leftWords(c.Reason)))
	}
	for _, p := range c.Joined {
		verb := "joined"
		if slices.ContainsFunc(earlier, func(e Change) bool { return slices.Contains(e.Left, p) }) {
			verb = "rejoined"
		}
		who = append(who, fmt.Sprintf("rank %d %s", p, verb))
	}
	if len(who) == 0 {
		who = append(who, "no peer left or joined ("+c.Reason+")")
	}
	line := fmt.Sprintf("%s: %d peer(s) %s go on", strings.Join(who, ", "), len(c.Members), ints(c.Members))
	if s.Epoch > 0 {
		line += fmt.Sprintf(" from epoch %d (%.0f%% done)", s.Epoch, 100*s.Fraction)
	}
	if c.RolledBack > 0 {
		line += fmt.Sprintf(", %d step(s) since the last commit redone", c.RolledBack)
	}
	if s.Batch != s.BatchBefore || s.Policy != "" {
		line += fmt.Sprintf("; global batch %d → %d; learning rate %.4g → %.4g (--elastic-lr %s)", s.BatchBefore, s.Batch, s.LRBefore, s.LR, s.Policy)
	}
	return line + fmt.Sprintf("; the cluster paused %.2fs (generation %d)", c.PauseSeconds, c.Generation)
}

func callSaid(said func(int) (string, bool), p int) (string, bool) {
	if said == nil {
		return "", false
	}
	return said(p)
}

// leftWords is why the peers of a change left, from its Reason, without
// the peer list the line already gives.
func leftWords(reason string) string {
	switch {
	case strings.HasPrefix(reason, "lost peer(s) "):
		if _, why, ok := strings.Cut(reason, "]: "); ok {
			return "lost: " + why
		}
		return "lost"
	case strings.Contains(reason, "asked to stop (SIGTERM)"):
		return "left: asked to stop (SIGTERM)"
	case reason == "":
		return "left"
	}
	return "left: " + reason
}

// LossWords says in a few words why a generation lost a peer, from the
// error that ended it (the whole chain goes to the log, once): the
// peer's links closed (it died, or its host went away), or it did not
// answer within timeout (hung, or unreachable).
func LossWords(err error, timeout time.Duration) string {
	msg := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(msg, "deadline exceeded") || strings.Contains(msg, "timed out") || strings.Contains(msg, "timeout"):
		return fmt.Sprintf("no answer within the collective timeout (%v): hung, or its host unreachable", timeout)
	case strings.Contains(msg, "reset") || strings.Contains(msg, "link down") || strings.Contains(msg, "EOF") ||
		strings.Contains(msg, "closed") || strings.Contains(msg, "refused") || strings.Contains(msg, "aborted"):
		return "its connection closed: it died, or its host went away"
	}
	return "its collective failed (the log has the error)"
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return "[" + strings.Join(s, " ") + "]"
}
