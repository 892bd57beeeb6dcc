package sweep

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/meshtrain/meshtrain/mirrored"
)

// Straggler is one straggler scenario: rank Rank's steps take Factor× as
// long (injected). A Factor of at most 1 is no straggler.
type Straggler struct {
	Rank   int     `json:"rank"`
	Factor float64 `json:"factor"`
}

// None says whether s is the scenario without a straggler.
func (s Straggler) None() bool { return s.Factor <= 1 }

// String is s as --slow-peer takes it: "none" or RANK:FACTOR.
func (s Straggler) String() string {
	if s.None() {
		return "none"
	}
	return fmt.Sprintf("%d:%g", s.Rank, s.Factor)
}

// describe is s for a reader: "none" or "rank 1 ×3".
func (s Straggler) describe() string {
	if s.None() {
		return "none"
	}
	return fmt.Sprintf("rank %d ×%g", s.Rank, s.Factor)
}

// Grid is a sweep's axes: every combination of its values is a point.
type Grid struct {
	Workers    []int       `json:"workers"`
	Batches    []int       `json:"batch"` // per worker
	Strategies []string    `json:"strategies"`
	Stragglers []Straggler `json:"stragglers"`
}

// Point is one run of a grid.
type Point struct {
	// Index is the point's place among the grid's points that run,
	// from 1.
	Index     int       `json:"index"`
	Workers   int       `json:"workers"`
	Batch     int       `json:"batch"`
	Strategy  string    `json:"strategy"`
	Straggler Straggler `json:"straggler"`
}

// String names the point: "workers 2, batch 100, ring, no straggler".
func (p Point) String() string {
	s := fmt.Sprintf("workers %d, batch %d, %s, ", p.Workers, p.Batch, p.Strategy)
	if p.Straggler.None() {
		return s + "no straggler"
	}
	return s + "straggler " + p.Straggler.describe()
}

// key identifies the point within its grid, whatever its Index.
func (p Point) key() string {
	return fmt.Sprintf("%d/%d/%s/%s", p.Workers, p.Batch, p.Strategy, p.Straggler)
}

// Skipped is a combination of the grid that makes no sense, and why.
type Skipped struct {
	Point
	Reason string `json:"reason"`
}

// Check reports the first problem with g: an empty axis, a value out of
// range, an unknown strategy or a value listed twice.
func (g Grid) Check() error {
	if len(g.Workers) == 0 || len(g.Batches) == 0 || len(g.Strategies) == 0 || len(g.Stragglers) == 0 {
		return errors.New("sweep: every axis needs a value (workers, batch, strategies, straggler scenarios)")
	}
	for _, w := range g.Workers {
		if w < 1 {
			return fmt.Errorf("sweep: %d workers: want at least 1", w)
		}
	}
	for _, b := range g.Batches {
		if b < 1 {
			return fmt.Errorf("sweep: batch %d: want at least 1", b)
		}
	}
	for _, s := range g.Strategies {
		if !slices.Contains(mirrored.Strategies, s) {
			return fmt.Errorf("sweep: strategy %q: want some of %s", s, strings.Join(mirrored.Strategies, ", "))
		}
	}
	for _, s := range g.Stragglers {
		if !s.None() && (s.Rank < 0 || s.Factor > 1000) {
			return fmt.Errorf("sweep: straggler %s: want RANK ≥ 0 and FACTOR in [1, 1000]", s)
		}
	}
	if err := twice(g.Workers, "workers"); err != nil {
		return err
	}
	if err := twice(g.Batches, "batch"); err != nil {
		return err
	}
	if err := twice(g.Strategies, "strategy"); err != nil {
		return err
	}
	names := make([]string, len(g.Stragglers))
	for i, s := range g.Stragglers {
		names[i] = s.String()
	}
	return twice(names, "straggler scenario")
}

func twice[T comparable](vs []T, what string) error {
	for i, v := range vs {
		if slices.Contains(vs[:i], v) {
			return fmt.Errorf("sweep: %s %v listed twice", what, v)
		}
	}
	return nil
}

// Points expands g into the points that run, in order (straggler
// scenarios outermost, then strategies, workers, and batch sizes
// innermost: the course table's order within each scenario and strategy),
// and the combinations that make no sense, with why: one worker under
// gossip or with a straggler, or a straggler rank the point does not
// have. g must have passed Check.
func (g Grid) Points() (run []Point, skipped []Skipped) {
	for _, sl := range g.Stragglers {
		if sl.None() {
			sl = Straggler{}
		}
		for _, st := range g.Strategies {
			for _, w := range g.Workers {
				for _, b := range g.Batches {
					p := Point{Workers: w, Batch: b, Strategy: st, Straggler: sl}
					if why := p.nonsense(); why != "" {
						skipped = append(skipped, Skipped{Point: p, Reason: why})
						continue
					}
					p.Index = len(run) + 1
					run = append(run, p)
				}
			}
		}
	}
	return run, skipped
}

// Runnable says why no point of g can run, or nil if some can.
func (g Grid) Runnable() error {
	run, skipped := g.Points()
	if len(run) > 0 {
		return nil
	}
	var why []string
	n := map[string]int{}
	for _, s := range skipped {
		if n[s.Reason]++; n[s.Reason] == 1 {
			why = append(why, s.Reason)
		}
	}
	for i, r := range why {
		why[i] = fmt.Sprintf("%s (%d of them)", r, n[r])
	}
	return fmt.Errorf("sweep: no point of the grid can run: %s", strings.Join(why, "; "))
}

// nonsense says why p cannot run, or "".
func (p Point) nonsense() string {
	switch {
	case p.Workers == 1 && p.Strategy == mirrored.StrategyGossip:
		return "one worker has nobody to average with under gossip"
	case p.Workers == 1 && !p.Straggler.None():
		return "one worker has nobody waiting for it: a straggler needs at least 2"
	case !p.Straggler.None() && p.Straggler.Rank >= p.Workers:
		return fmt.Sprintf("there is no rank %d among %d workers", p.Straggler.Rank, p.Workers)
	}
	return ""
}

// varies says which axes of g have more than one value.
func (g Grid) varies() (workers, batch, strategy, straggler bool) {
	return len(g.Workers) > 1, len(g.Batches) > 1, len(g.Strategies) > 1, len(g.Stragglers) > 1
}

// scenario names the straggler scenario s of g: "baseline" without a
// straggler; "straggler" when g has only one; else "straggler rank 1 ×3".
func (g Grid) scenario(s Straggler) string {
	if s.None() {
		return "baseline"
	}
	n := 0
	for _, x := range g.Stragglers {
		if !x.None() {
			n++
		}
	}
	if n == 1 {
		return "straggler"
	}
	return "straggler " + s.describe()
}

// scenarioFile is scenario as part of a file name.
func (g Grid) scenarioFile(s Straggler) string {
	name := g.scenario(s)
	if name == "baseline" || name == "straggler" {
		return name
	}
	return fmt.Sprintf("straggler_%dx%s", s.Rank, strings.ReplaceAll(strconv.FormatFloat(s.Factor, 'g', -1, 64), ".", "p"))
}

// ParseInts parses a comma-separated list of integers ("1,2,3") for the
// flag named flag.
func ParseInts(flag, s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("--%s %q: want comma-separated whole numbers, e.g. 1,2,3", flag, s)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--%s %q: want at least one value", flag, s)
	}
	return out, nil
}

// ParseStrategies parses --strategies ("ring,gossip").
func ParseStrategies(s string) ([]string, error) {
	out := splitList(s)
	if len(out) == 0 {
		return nil, fmt.Errorf("--strategies %q: want some of %s", s, strings.Join(mirrored.Strategies, ", "))
	}
	for _, st := range out {
		if !slices.Contains(mirrored.Strategies, st) {
			return nil, fmt.Errorf("--strategies: %q: want some of %s", st, strings.Join(mirrored.Strategies, ", "))
		}
	}
	return out, nil
}

// ParseStragglers parses --slow-peer's straggler scenarios: "none" and
// RANK:FACTOR, comma-separated ("none,1:3").
func ParseStragglers(s string) ([]Straggler, error) {
	var out []Straggler
	for _, f := range splitList(s) {
		rank, factor, err := mirrored.ParseSlowPeer(f)
		if err != nil {
			return nil, fmt.Errorf("%w (or none; several comma-separated: none,1:3)", err)
		}
		out = append(out, Straggler{Rank: rank, Factor: factor})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--slow-peer %q: want none or RANK:FACTOR, or several comma-separated", s)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// join is vs comma-separated, as the flags take them.
func join[T any](vs []T) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ",")
}

// logName is p's directory under a sweep's TensorBoard --logdir: its
// workers and batch where g varies them, its strategy and scenario
// (ring-baseline, w2-b100-gossip-straggler).
func (g Grid) logName(p Point) string {
	vw, vb, _, _ := g.varies()
	var parts []string
	if vw {
		parts = append(parts, fmt.Sprintf("w%d", p.Workers))
	}
	if vb {
		parts = append(parts, fmt.Sprintf("b%d", p.Batch))
	}
	return strings.Join(append(parts, p.Strategy, g.scenarioFile(p.Straggler)), "-")
}
