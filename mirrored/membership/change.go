package membership

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// DefaultCommitEvery is the steps between commits when none is set: a
// commit is a copy of a dense model's parameters and optimizer state
// (sparse-lr's a mark in its undo log) and a small all-reduce that admits
// waiting workers: within the noise of 10 LeNet steps at 4 peers, and
// 0.86x the plain run's speed at sparse-lr's 0.7 ms steps (BENCHMARKS.md,
// "Elastic training (issue 21)").
const DefaultCommitEvery = 10

// Change is one change of an elastic run's membership: from the commit at
// global step Step (numbered as the run was before the change),
// generation Generation went on with Members (cluster indices, in rank
// order). A run's list of them is its record, and replayed as a schedule
// it reproduces the run.
type Change struct {
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

// MaxScheduleBytes caps a schedule file: a run's summary with its
// membership, every peer's figures and resource history is well under a
// megabyte at a hundred peers; a larger file is not a record (a 120 MB
// file was parsed whole).
const MaxScheduleBytes = 16 << 20

// ErrNothingToReplay is wrapped by the error for a schedule with no
// change: `null`, `[]`, `{"run": {}}` or any JSON without "membership",
// which would replay nothing, in silence.
var ErrNothingToReplay = errors.New("no membership changes to replay")

// ErrPastEnd is wrapped by the error for a schedule change at a step the
// run never reaches.
var ErrPastEnd = errors.New("a membership change after the run's last step")

// Record is what a schedule file holds: the changes to replay and, when
// it is a run's summary or Result, the final parameters' hash the replay
// must end with.
type Record struct {
	Changes      []Change
	ParamsSHA256 string
}

// ParseSchedule reads a schedule: the JSON of a run summary's or Result's
// "membership", or a list of Change.
func ParseSchedule(b []byte) ([]Change, error) {
	r, err := ParseRecord(b)
	return r.Changes, err
}

// ParseRecord reads a schedule and, from a summary ("run") or a Result,
// the recorded final parameters' hash. A schedule with no change is
// refused (ErrNothingToReplay), as is one over MaxScheduleBytes.
func ParseRecord(b []byte) (Record, error) {
	if len(b) > MaxScheduleBytes {
		return Record{}, fmt.Errorf("membership schedule: %d bytes, over the cap of %d: not a run's record", len(b), MaxScheduleBytes)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec.Changes); err != nil {
		var wrap struct {
			Membership []Change `json:"membership"`
			Params     string   `json:"params_sha256"`
			Run        *struct {
				Membership []Change `json:"membership"`
				Params     string   `json:"params_sha256"`
			} `json:"run"`
		}
		if err2 := json.Unmarshal(b, &wrap); err2 != nil {
			return Record{}, fmt.Errorf("membership schedule: want a JSON list of changes ({\"step\":…, \"members\":[…]}) or a summary with \"membership\": %w", err)
		}
		rec.Changes, rec.ParamsSHA256 = wrap.Membership, wrap.Params
		if rec.Changes == nil && wrap.Run != nil {
			rec.Changes, rec.ParamsSHA256 = wrap.Run.Membership, wrap.Run.Params
		}
	}
	if len(rec.Changes) == 0 {
		return Record{}, fmt.Errorf("membership schedule: %w: want a JSON list of changes or a summary, report or result whose \"membership\" lists at least one (a run with no change has nothing to replay)", ErrNothingToReplay)
	}
	list := rec.Changes
	// The steps need not increase: a change's step counts the steps as
	// the run was before it, and a change that adds peers makes fewer
	// steps per epoch, so the count can go back.
	for i, c := range list {
		switch {
		case c.Step < 0:
			return Record{}, fmt.Errorf("membership schedule: change %d at step %d: want a step ≥ 0", i+1, c.Step)
		case len(c.Members) == 0:
			return Record{}, fmt.Errorf("membership schedule: change %d at step %d has no members", i+1, c.Step)
		}
		seen := map[int]bool{}
		for _, m := range c.Members {
			if m < 0 || seen[m] {
				return Record{}, fmt.Errorf("membership schedule: change %d lists peer %d twice or a negative index", i+1, m)
			}
			seen[m] = true
		}
	}
	return rec, nil
}

// CheckSchedule checks a membership schedule against a cluster of n peers
// committing every commitEvery steps (0: the default): every peer in it,
// recorded with the same commit interval, and in each change the peers
// that stay listed before those that join (the new chief, rank 0, must
// hold the state; a real run's record is always so).
func CheckSchedule(s []Change, n, commitEvery int) error {
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

// Diff returns the peers of prev not in next (left) and those of next not
// in prev (joined), in their lists' order.
func Diff(prev, next []int) (left, joined []int) {
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

// Decide is the coordinator's choice of the generation after gen of
// members, given the members alive (sorted), the workers asking to join
// and why the generation ended: the schedule's members (want), else the
// survivors in cluster order, then the joiners; or why the run must stop.
// The majority rule: a side with fewer than half of members stops, one
// with exactly half only if it holds the lowest index of members, so a
// partition never goes on as two runs; fewer than minWorkers stop too.
func Decide(gen uint64, members, alive, joiners []int, minWorkers int, why Why) ([]int, string) {
	var lost []int
	for _, p := range members {
		if !slices.Contains(alive, p) {
			lost = append(lost, p)
		}
	}
	if want := why.Want; want != nil { // the schedule decides
		for _, p := range want {
			if !slices.Contains(alive, p) && !slices.Contains(joiners, p) {
				return nil, fmt.Sprintf("elastic: the membership schedule wants peer %d at step %d, and it is not there (alive %v, joining %v)", p, why.Step, alive, joiners)
			}
		}
		return want, ""
	}
	if 2*len(alive) < len(members) || 2*len(alive) == len(members) && !slices.Contains(alive, slices.Min(members)) {
		return nil, fmt.Sprintf("elastic: only %v of generation %d's members %v are left, not a majority: this side stops so that a partition never goes on as two runs (lost %v: %s)", alive, gen, members, lost, why.Reason)
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
	if len(next) < minWorkers {
		return nil, fmt.Sprintf("elastic: %d peer(s) left (%v), fewer than --min-workers %d: lost %v: %s", len(next), next, minWorkers, lost, why.Reason)
	}
	return next, ""
}
