package cost

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Question is what `meshtrain model predict` asks about one cluster.
type Question struct {
	N       int
	Bytes   float64 // the dense vector: model size, or 4·D for sparse-lr
	Touched float64 // features each rank touches per step (0: no sparse rows)
	Compute float64 // seconds of compute per step on a core of its own (0: no step rows)
}

// Row is one predicted operation.
type Row struct {
	Name string
	Estimate
}

// Predict prices every operation of q.
func (p Params) Predict(q Question) []Row {
	algo, auto := AllReduce(q.N, q.Bytes)
	rows := []Row{
		{"ring all-reduce", p.Estimate(Ring(q.N, q.Bytes))},
		{"recursive doubling", p.Estimate(RecursiveDoubling(q.N, q.Bytes))},
		{"star", p.Estimate(Star(q.N, q.Bytes))},
		{"gossip round (dense)", p.Estimate(GossipRound(q.N, q.Bytes))},
	}
	var sparse Traffic
	if q.Touched > 0 {
		sparse = SparseAllGather(q.N, q.Touched, SparseBytesPerPair)
		rows = append(rows,
			Row{fmt.Sprintf("sparse all-gather (k=%.0f)", q.Touched), p.Estimate(sparse)},
			Row{fmt.Sprintf("gossip round (k=%.0f changed)", q.Touched), p.Estimate(GossipRound(q.N, q.Touched*SparseBytesPerPair))})
	}
	if q.Compute > 0 {
		rows = append(rows, Row{fmt.Sprintf("step, dense exchange (%v)", algo), p.Step(q.Compute, auto)})
		if q.Touched > 0 {
			rows = append(rows, Row{"step, sparse exchange", p.Step(q.Compute, sparse)})
		}
	}
	return rows
}

// WriteRows prints rows as a table: time, bound and the three terms.
func WriteRows(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "operation\ttime\tbound\tlatency\ttransfer\tcpu\tcompute\tlink bytes\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t\n", r.Name, Seconds(r.Seconds), r.Bound,
			Seconds(r.Latency), Seconds(r.Transfer), Seconds(r.CPU), Seconds(r.Compute), r.Traffic.Link)
	}
	return tw.Flush()
}

// Seconds writes s with a unit that keeps 3 significant figures.
func Seconds(s float64) string {
	switch {
	case s == 0:
		return "0"
	case s < 1e-3:
		return fmt.Sprintf("%.3g µs", s*1e6)
	case s < 1:
		return fmt.Sprintf("%.3g ms", s*1e3)
	}
	return fmt.Sprintf("%.3g s", s)
}

// String writes p in the units it is read in.
func (p Params) String() string {
	s := fmt.Sprintf("α %s, β %.1f MB/s, γ %.2f ns/B, fixed %s, %s a message, %.1f ns a sparse pair, %g core(s) per rank",
		Seconds(p.Alpha), p.Beta/1e6, p.Gamma*1e9, Seconds(p.Fixed), Seconds(p.Message), p.Pair*1e9, p.RankCores)
	if p.SharedCores > 0 {
		s += fmt.Sprintf(", %g cores shared by all ranks", p.SharedCores)
	}
	return s
}
