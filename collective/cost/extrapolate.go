package cost

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// Point is one cluster size of an extrapolation: a model of M bytes
// all-reduced by the ring or averaged by one gossip round, and a sparse
// model's gradient exchanged dense (an all-reduce of all D floats) or
// sparse (an all-gather of the k touched features of each rank).
type Point struct {
	N                           int
	Ring, Gossip, Dense, Sparse Estimate
}

// Extrapolate prices each cluster size in ns.
func (p Params) Extrapolate(ns []int, m, d, k float64) []Point {
	out := make([]Point, len(ns))
	for i, n := range ns {
		_, dense := AllReduce(n, 4*d)
		out[i] = Point{N: n,
			Ring:   p.Estimate(Ring(n, m)),
			Gossip: p.Estimate(GossipRound(n, m)),
			Dense:  p.Estimate(dense),
			Sparse: p.Estimate(SparseAllGather(n, k, SparseBytesPerPair)),
		}
	}
	return out
}

// Sizes returns 2, 3, …, 10 and then sizes growing by about a quarter up
// to and including max: the x axis of an extrapolation.
func Sizes(maxN int) []int {
	var ns []int
	for n := 2; n <= maxN; {
		ns = append(ns, n)
		if n < 10 {
			n++
		} else {
			n = int(math.Ceil(float64(n) * 1.25))
		}
	}
	if len(ns) > 0 && ns[len(ns)-1] != maxN && maxN >= 2 {
		ns = append(ns, maxN)
	}
	return ns
}

// Span is a range of cluster sizes over which one side wins.
type Span struct {
	Winner   string
	From, To int
	// Ratio is the loser's time over the winner's at To.
	Ratio float64
}

// Wins splits pts into the spans where a (named nameA) or b is faster.
func Wins(pts []Point, nameA string, a func(Point) float64, nameB string, b func(Point) float64) []Span {
	var out []Span
	for _, pt := range pts {
		w, ratio := nameA, b(pt)/a(pt)
		if b(pt) < a(pt) {
			w, ratio = nameB, a(pt)/b(pt)
		}
		if len(out) > 0 && out[len(out)-1].Winner == w {
			out[len(out)-1].To, out[len(out)-1].Ratio = pt.N, ratio
			continue
		}
		out = append(out, Span{Winner: w, From: pt.N, To: pt.N, Ratio: ratio})
	}
	return out
}

// Describe writes spans as one sentence, e.g. "ring wins for N = 2–77
// (1.30× at 77), gossip wins for N = 96–1000 (9.80× at 1000)".
func Describe(spans []Span) string {
	parts := make([]string, len(spans))
	for i, s := range spans {
		parts[i] = fmt.Sprintf("%s wins for N = %d–%d (%.2f× at %d)", s.Winner, s.From, s.To, s.Ratio, s.To)
	}
	return strings.Join(parts, "; ")
}

// WriteExtrapolation prints each point's four times and bounds, then where
// the ring beats gossip (per exchange: a gossip round averages one pair,
// the ring all) and where the dense exchange beats the sparse one.
func WriteExtrapolation(w io.Writer, pts []Point) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\tring\tgossip round\tdense exchange\tsparse exchange\t")
	cell := func(e Estimate) string { return Seconds(e.Seconds) + " " + e.Bound.String() }
	for _, pt := range pts {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t\n", pt.N, cell(pt.Ring), cell(pt.Gossip), cell(pt.Dense), cell(pt.Sparse))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ring := func(pt Point) float64 { return pt.Ring.Seconds }
	gossip := func(pt Point) float64 { return pt.Gossip.Seconds }
	dense := func(pt Point) float64 { return pt.Dense.Seconds }
	sparse := func(pt Point) float64 { return pt.Sparse.Seconds }
	_, err := fmt.Fprintf(w, "per exchange (a gossip round averages one pair, the ring all): %s\ngradient exchange: %s\n",
		Describe(Wins(pts, "ring", ring, "gossip", gossip)), Describe(Wins(pts, "dense", dense, "sparse", sparse)))
	return err
}
