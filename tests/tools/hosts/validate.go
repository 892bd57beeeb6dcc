package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot/plotter"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/cost"
	"github.com/meshtrain/meshtrain/internal/stats"
	"github.com/meshtrain/meshtrain/mirrored/measure/calibrate"
	"github.com/meshtrain/meshtrain/mirrored/report"
	"github.com/meshtrain/meshtrain/tests/netns"
)

// Point is one validated measurement: what ran, what it took (median of
// the reps), what the model predicted and its bound.
type Point struct {
	Rate      string  `json:"rate"`
	N         int     `json:"n"`
	Op        string  `json:"op"` // ring, tree, star, gather, gossip
	Bytes     int64   `json:"bytes"`
	Touched   int     `json:"touched,omitempty"`
	Measured  float64 `json:"measured_s"`
	Predicted float64 `json:"predicted_s"`
	Error     float64 `json:"error"` // (measured − predicted) / measured
	Bound     string  `json:"bound"`
	// Spread is the interquartile range of the repetitions' times over
	// their median (netns.Spread).
	Spread  float64 `json:"spread"`
	Alpha   float64 `json:"alpha_s"`                    // α of the emulated links (fitted at the first rate)
	Message float64 `json:"message_s"`                  // their CPU a message (fitted with α)
	Gamma   float64 `json:"gamma_s_per_byte,omitempty"` // γ the prediction used
	// Transfer is the predicted transfer time (beyond tbf's bucket), Link
	// the bytes of the busiest link direction over Legs directions one
	// after another: a point whose legs fit in the bucket is not counted
	// (class).
	Transfer float64 `json:"transfer_s"`
	Link     float64 `json:"link_bytes"`
	Legs     float64 `json:"legs"`
	CPU      float64 `json:"cpu_s"`
	// Averaged is a gossip round's share of exchanges that averaged (the
	// others were declined: the peer was busy with its own).
	Averaged float64 `json:"averaged,omitempty"`
	Load     string  `json:"load"`
}

// validation is the sweep's configuration.
type validation struct {
	params      cost.Params
	bin, out    string
	ringSizes   []int64 // also the gossip sizes
	smallSizes  []int64 // recursive doubling and star
	touched     []int
	reps        int
	maxBytesSec float64 // skip sizes whose transfer would take longer
	// fit holds what the first cluster fits and every cluster uses.
	fit *fitted
}

// fitted are the parameters the emulated links change, fitted at the
// first rate before the sweep: α and the CPU of a message (Message), from
// 4 KiB all-reduces on 2, 3 and 4 hosts (fitLatency: the veth pair,
// the bridge and tbf cost each message several times the CPU loopback's
// does), and γ, when it is 0, from the first cluster's largest ring
// all-reduce's CPU time (1500-byte packets cost more CPU per byte than
// loopback's 64 KiB ones). The other parameters come from the calibration,
// and no cluster of the sweep fits its own: what it takes is predicted.
type fitted struct {
	alpha, message, gamma float64
}

// Repetitions: points up to tinyBytes (latency-bound: a few hundred µs)
// are timed tinyReps times as often as -reps, the rest under smallBytes
// smallReps times. Single times of the tiny ones spread widely (the middle
// half spans a quarter to a half of the median on a loaded machine), and a
// median of 100 moved by a third from one run to the next; the median of
// n draws has a standard error of about 1.25·σ/√n, so 500 (σ a third of
// the median) pin it within about 2%, which takes a few seconds a point.
// What moves more is the run of the measuring program they are timed in,
// so the tiny ones are timed in probeRuns runs (inRuns).
const (
	tinyReps   = 100
	tinyBytes  = 64 << 10
	smallReps  = 20
	smallBytes = 1 << 20
)

// repGroup is sizes timed reps times each, in runs runs of the measuring
// program (inRuns).
type repGroup struct {
	sizes      []int64
	reps, runs int
}

// groups splits sizes by how often each is timed (tinyReps, smallReps);
// the tiny ones in probeRuns runs.
func (v validation) groups(sizes []int64) []repGroup {
	var gs []repGroup
	for _, s := range sizes {
		reps, runs := v.reps, 1
		switch {
		case s <= tinyBytes:
			reps, runs = reps*tinyReps, probeRuns
		case s < smallBytes:
			reps *= smallReps
		}
		if len(gs) == 0 || gs[len(gs)-1].reps != reps {
			gs = append(gs, repGroup{reps: reps, runs: runs})
		}
		gs[len(gs)-1].sizes = append(gs[len(gs)-1].sizes, s)
	}
	return gs
}

// inRuns times reps repetitions in runs runs of the measuring program
// (measure, reps/runs each) and pools each result's repetitions (pool adds
// from's to into's). One run's median moved by up to a third from the
// next run's on the same cluster (the probes' five runs), far beyond its
// sampling error, so a latency-bound point timed in one run carries that
// run's luck; pooled over five, a run's luck is a fifth of the
// repetitions.
func inRuns[T any](reps, runs int, measure func(reps int) ([]T, error), pool func(into *T, from T)) ([]T, error) {
	var out []T
	for r := range max(runs, 1) {
		res, err := measure(reps / max(runs, 1))
		if err != nil {
			return nil, err
		}
		if r == 0 {
			out = res
			continue
		}
		if len(res) != len(out) {
			return nil, fmt.Errorf("run %d of %d measured %d sizes, the first %d", r+1, runs, len(res), len(out))
		}
		for i := range out {
			pool(&out[i], res[i])
		}
	}
	return out, nil
}

// poolAllReduce adds from's repetitions to into's (inRuns).
func poolAllReduce(into *netns.AllReduceResult, from netns.AllReduceResult) {
	n, m := float64(len(into.BusBW)), float64(len(from.BusBW))
	into.CPUSeconds = (into.CPUSeconds*n + from.CPUSeconds*m) / (n + m)
	into.BusBW = append(into.BusBW, from.BusBW...)
}

// poolOp adds from's repetitions to into's (inRuns).
func poolOp(into *netns.OpResult, from netns.OpResult) {
	n, m := float64(len(into.Seconds)), float64(len(from.Seconds))
	into.CPUSeconds = (into.CPUSeconds*n + from.CPUSeconds*m) / (n + m)
	into.Averaged = (into.Averaged*n + from.Averaged*m) / (n + m)
	into.Seconds = append(into.Seconds, from.Seconds...)
}

// validate measures every operation of the model on emulated hosts at
// each rate and N and compares with the predictions of -params: a table
// on stdout, every point in OUT/points.json and the figure in OUT/cost-model.png.
func validate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	ns := fs.String("n", "2,3,4", "numbers of hosts")
	rates := fs.String("rate", "1.8gbit,1gbit,100mbit", "link rates; with -fit-gamma the first rate's first cluster fits γ, so give the fastest first")
	paramsFile := fs.String("params", "meshtrain-cost.json", "calibration (meshtrain model calibrate)")
	out := fs.String("out", ".", "directory for points.json and cost-model.png")
	reps := fs.Int("reps", 5, "timed repetitions per point (the median counts)")
	replot := fs.String("replot", "", "draw OUT/cost-model.png again from this points.json, with its α and γ, measuring nothing")
	fitGamma := fs.Bool("fit-gamma", true, "fit γ on the first cluster (the emulated links' 1500-byte packets cost more CPU per byte than loopback's 64 KiB ones) instead of taking the calibrated one")
	fits := fs.Int("fits", 1, "fit α and the CPU of a message this many times and use the median (more show how far the fit moves)")
	fitOnly := fs.Bool("fit-only", false, "stop after fitting α and the CPU of a message")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := calibrate.Load(*paramsFile)
	if err != nil {
		return err
	}
	v := validation{params: f.Params, out: *out, reps: *reps, maxBytesSec: 4,
		ringSizes: []int64{4 << 10, 256 << 10, 4 << 20, 64 << 20}, smallSizes: []int64{4 << 10, 64 << 10, 1 << 20}, touched: []int{100, 1000, 10000}}
	v.params.SharedCores = float64(runtime.NumCPU()) // the hosts share this machine's cores
	v.fit = &fitted{gamma: v.params.Gamma}
	if *fitGamma {
		v.fit.gamma = 0
	}
	if *replot != "" {
		return v.replot(*replot)
	}
	dir, err := os.MkdirTemp("", "meshtrain-validate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if v.bin, err = netns.Build(ctx, dir, netns.NetbenchPackage); err != nil {
		return err
	}
	fmt.Printf("# %s (calibrated under load %s); shared cores %g\n", v.params, f.Load, v.params.SharedCores)
	if err := v.fitLatency(ctx, *rates, *fits); err != nil {
		return err
	}
	if *fitOnly {
		return nil
	}
	var pts []Point
	err = eachCluster(*rates, *ns, func(rate netns.Rate, n int) error {
		got, err := v.cluster(ctx, rate, n)
		if err != nil {
			return err
		}
		writePoints(os.Stdout, got)
		pts = append(pts, got...)
		return nil
	})
	if err != nil {
		return err
	}
	summarize(os.Stdout, pts)
	return v.save(pts)
}

// Goal classes of a point.
const (
	classBandwidth = "bandwidth" // bound by bandwidth: the goal is 15%
	classOther     = "cpu/latency"
	// classBucket: bytes matter to the time (their transfer at β would be
	// at least a quarter of it) but each leg's fit in tbf's bucket
	// (netns.Rate.Burst),
	// which passes them at the veth pair's speed: the time then says how
	// fast the veth pair is, which no real link has. Shown, not counted.
	classBucket = "tbf bucket"
)

// class is the goal p counts towards.
func (p Point) class() string {
	rate, _ := netns.ParseRate(p.Rate)
	switch {
	case p.Link <= max(p.Legs, 1)*float64(rate.Burst()) && p.Link/cost.LinkBeta(float64(rate)) >= p.Predicted/4:
		return classBucket
	case p.Bound == cost.Bandwidth.String():
		return classBandwidth
	}
	return classOther
}

// summarize prints how many points meet the goals: within 15% where
// bandwidth dominates and within 25% where CPU or latency does.
func summarize(w *os.File, pts []Point) {
	within := map[string]float64{classBandwidth: 0.15, classOther: 0.25}
	ok, all := map[string]int{}, map[string]int{}
	for _, p := range pts {
		c := p.class()
		all[c]++
		if math.Abs(p.Error) <= within[c] {
			ok[c]++
		}
	}
	fmt.Fprintf(w, "bandwidth-dominated: %d of %d points within 15%%; CPU- or latency-dominated: %d of %d within 25%%; in tbf's bucket (not counted): %d\n",
		ok[classBandwidth], all[classBandwidth], ok[classOther], all[classOther], all[classBucket])
}

// cluster measures one rate and N.
func (v validation) cluster(ctx context.Context, rate netns.Rate, n int) ([]Point, error) {
	h, err := netns.Up(ctx, netns.TagForProcess(), n, rate)
	if err != nil {
		return nil, err
	}
	defer h.Down()
	p := v.params
	p.Beta, p.Burst, p.BurstRate = cost.LinkBeta(float64(rate)), float64(rate.Burst()), v.params.Beta
	ring, err := v.allReduce(ctx, h, collective.Ring, v.ringSizes, p)
	if err != nil {
		return nil, err
	}
	if last := ring[len(ring)-1]; v.fit.gamma == 0 && last.Bytes >= 16<<20 {
		v.fit.gamma = last.CPUSeconds / cost.Ring(n, float64(last.Bytes)).Total
		fmt.Printf("# γ fitted here: %.2f ns/B (%.3f CPU s for a %d-byte ring all-reduce)\n", v.fit.gamma*1e9, last.CPUSeconds, last.Bytes)
	}
	p.Alpha, p.Message, p.Gamma = v.fit.alpha, v.fit.message, v.fit.gamma
	fmt.Printf("# %s, N=%d: %s\n", rate, n, p)
	var pts []Point
	add := func(op string, bytes int64, touched int, secs []float64, cpu float64, t cost.Traffic) {
		e, med := p.Estimate(t), stats.Median(secs)
		pts = append(pts, Point{Rate: rate.String(), N: n, Op: op, Bytes: bytes, Touched: touched, Measured: med, Predicted: e.Seconds,
			Error: (med - e.Seconds) / med, Bound: e.Bound.String(), Spread: stats.Spread(secs), Alpha: p.Alpha, Message: p.Message, Gamma: p.Gamma,
			Transfer: e.Transfer, Link: t.Link, Legs: t.Legs, CPU: cpu, Load: netns.LoadAverage()})
	}
	addAll := func(algo collective.Algo, res []netns.AllReduceResult) {
		for _, r := range res {
			add(algo.String(), r.Bytes, 0, r.Seconds(), r.CPUSeconds, traffic(algo, n, float64(r.Bytes)))
		}
	}
	addAll(collective.Ring, ring)
	for _, algo := range []collective.Algo{collective.Tree, collective.Star} {
		res, err := v.allReduce(ctx, h, algo, v.smallSizes, p)
		if err != nil {
			return nil, err
		}
		addAll(algo, res)
	}
	ops, err := v.ops(ctx, h, p)
	for _, r := range ops {
		t := cost.GossipRound(n, float64(r.Bytes))
		if r.Op == "gather" {
			t = cost.SparseAllGather(n, float64(r.Touched), float64(r.Bytes)/float64(r.Touched))
		}
		add(r.Op, r.Bytes, r.Touched, r.Seconds, r.CPUSeconds, t)
		pts[len(pts)-1].Averaged = r.Averaged
	}
	if err != nil {
		return nil, err
	}
	return pts, h.Down()
}

// latencyProbes are the clusters and algorithms fitLatency times: ring,
// recursive doubling and star on 2, 3 and 4 hosts, whose rounds (1 to 6)
// and messages on the busiest core (1 to 12) vary apart. Three probes (a
// tree on 2 hosts, a star on 2, a tree on 4) spanned 1-2 rounds and 1-4
// messages: α came from one round's difference of two short times and
// the message from the tree on 4 alone, whose rounds keep all four ranks
// waiting on the two cores at once, and the fits over-predicted the
// sweep's operations with more messages (BENCHMARKS.md, "Figures behind
// the code": three latency probes).
var latencyProbes = []struct {
	n     int
	algos []collective.Algo
}{
	{2, []collective.Algo{collective.Tree, collective.Star, collective.Ring}},
	{3, []collective.Algo{collective.Tree, collective.Star, collective.Ring}},
	{4, []collective.Algo{collective.Tree, collective.Star, collective.Ring}},
}

// probeRuns is how many runs of the measuring program time each latency
// probe, after one warm-up run of each that is discarded. One run of
// 1,000 repetitions on a freshly made cluster moved from one validation
// to the next far beyond its sampling error (BENCHMARKS.md, "Figures
// behind the code": one probe run): what moves it is the machine around
// the run, so the runs alternate between the probes of a cluster and
// each probe takes the median of its runs' medians, which a run or two
// slowed by the machine's other work do not move.
const probeRuns = 5

// fitLatency fits α and the CPU of a message on the emulated links at the
// first of rates (cost.FitLatency) from the latency-bound 4 KiB
// all-reduces of latencyProbes, fits times over; the sweep uses the
// median of the fits' terms (one fit each is the default: more show how
// far the fit moves).
func (v validation) fitLatency(ctx context.Context, rates string, fits int) error {
	rate, err := netns.ParseRate(strings.Split(rates, ",")[0])
	if err != nil {
		return err
	}
	p := v.params
	p.Beta, p.Burst, p.BurstRate = cost.LinkBeta(float64(rate)), float64(rate.Burst()), v.params.Beta
	var alphas, messages []float64
	for range max(fits, 1) {
		var samples []cost.Sample
		for _, c := range latencyProbes {
			got, err := v.probeCluster(ctx, rate, c.n, c.algos)
			if err != nil {
				return err
			}
			samples = append(samples, got...)
		}
		a, m := p.FitLatency(samples...)
		alphas, messages = append(alphas, a), append(messages, m)
		fmt.Printf("# fitted: α %s, %s a message (load %s)\n", cost.Seconds(a), cost.Seconds(m), netns.LoadAverage())
	}
	v.fit.alpha, v.fit.message = stats.Median(alphas), stats.Median(messages)
	if fits > 1 {
		fmt.Printf("# the median of %d fits: α %s, %s a message\n", fits, cost.Seconds(v.fit.alpha), cost.Seconds(v.fit.message))
	}
	return nil
}

// probeCluster times each of algos as a 4 KiB all-reduce on n hosts at
// rate (probeTimes).
func (v validation) probeCluster(ctx context.Context, rate netns.Rate, n int, algos []collective.Algo) ([]cost.Sample, error) {
	h, err := netns.Up(ctx, netns.TagForProcess(), n, rate)
	if err != nil {
		return nil, err
	}
	defer h.Down()
	out, err := probeTimes(n, algos, tinyReps*v.reps, func(algo collective.Algo, reps int) ([]float64, error) {
		res, err := netns.MeasureAllReduce(ctx, h, v.bin, "tls", []int64{4 << 10}, reps, "-algo", algo.String())
		if err != nil {
			return nil, err
		}
		return res[0].Seconds(), nil
	})
	if err != nil {
		return nil, err
	}
	return out, h.Down()
}

// probeTimes times each of algos, a 4 KiB all-reduce on n hosts, by run
// (one run of the measuring program: each repetition's seconds): one
// warm-up run of tinyReps repetitions each (discarded), then probeRuns
// runs of reps, the algorithms alternating. A probe's time is the median
// of its runs' medians.
func probeTimes(n int, algos []collective.Algo, reps int, run func(algo collective.Algo, reps int) ([]float64, error)) ([]cost.Sample, error) {
	medians := make([][]float64, len(algos))
	for r := -1; r < probeRuns; r++ {
		k := reps
		if r < 0 {
			k = tinyReps
		}
		for i, algo := range algos {
			secs, err := run(algo, k)
			if err != nil {
				return nil, fmt.Errorf("timing a 4096-byte %v all-reduce on %d hosts: %w", algo, n, err)
			}
			if r >= 0 {
				medians[i] = append(medians[i], stats.Median(secs))
				continue
			}
			fmt.Printf("# warm-up: a 4096-byte %v all-reduce on %d hosts took %s (%d reps, discarded)\n", algo, n, cost.Seconds(stats.Median(secs)), len(secs))
		}
	}
	out := make([]cost.Sample, len(algos))
	for i, algo := range algos {
		out[i] = cost.Sample{Algo: algo, N: n, Bytes: 4 << 10, Seconds: stats.Median(medians[i])}
		fmt.Printf("# a 4096-byte %v all-reduce on %d hosts took %s (the median of %d runs of %d reps: %s; load %s)\n",
			algo, n, cost.Seconds(out[i].Seconds), probeRuns, reps, seconds(medians[i]), netns.LoadAverage())
	}
	return out, nil
}

// seconds lists times for a log line.
func seconds(ts []float64) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = cost.Seconds(t)
	}
	return strings.Join(s, " ")
}

// allReduce measures algo at each of sizes whose transfer is short enough,
// the small ones more often (groups).
func (v validation) allReduce(ctx context.Context, h *netns.Hosts, algo collective.Algo, sizes []int64, p cost.Params) ([]netns.AllReduceResult, error) {
	var out []netns.AllReduceResult
	for _, g := range v.groups(v.sizes(algo, h.N, sizes, p)) {
		res, err := inRuns(g.reps, g.runs, func(reps int) ([]netns.AllReduceResult, error) {
			return netns.MeasureAllReduce(ctx, h, v.bin, "tls", g.sizes, reps, "-algo", algo.String())
		}, poolAllReduce)
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
	}
	return out, nil
}

// ops measures the sparse all-gathers and the gossip rounds whose
// transfer is short enough, the small ones more often (groups).
func (v validation) ops(ctx context.Context, h *netns.Hosts, p cost.Params) ([]netns.OpResult, error) {
	out, err := inRuns(tinyReps*v.reps, probeRuns, func(reps int) ([]netns.OpResult, error) {
		return netns.MeasureGather(ctx, h, v.bin, v.touched, reps)
	}, poolOp)
	if err != nil {
		return nil, err
	}
	var sizes []int64
	for _, s := range v.ringSizes {
		if cost.GossipRound(h.N, float64(s)).Link/p.Beta <= v.maxBytesSec {
			sizes = append(sizes, s)
		}
	}
	for _, g := range v.groups(sizes) {
		gossip, err := inRuns(g.reps, g.runs, func(reps int) ([]netns.OpResult, error) {
			return netns.MeasureGossip(ctx, h, v.bin, g.sizes, reps)
		}, poolOp)
		if err != nil {
			return out, err
		}
		out = append(out, gossip...)
	}
	return out, nil
}

// sizes are those of sizes whose transfer takes at most maxBytesSec.
func (v validation) sizes(a collective.Algo, n int, sizes []int64, p cost.Params) []int64 {
	var out []int64
	for _, s := range sizes {
		if traffic(a, n, float64(s)).Link/p.Beta <= v.maxBytesSec {
			out = append(out, s)
		}
	}
	return out
}

// traffic is the model's traffic of an all-reduce algorithm.
func traffic(a collective.Algo, n int, m float64) cost.Traffic {
	return cost.Sample{Algo: a, N: n, Bytes: m}.Traffic()
}

func writePoints(w *os.File, pts []Point) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate\tN\top\tbytes\ttouched\tmeasured\tspread\tpredicted\terror\tbound\tgoal\tcpu s\tload\t")
	for _, p := range pts {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%.0f%%\t%s\t%+.0f%%\t%s\t%s\t%.4f\t%s\t\n", p.Rate, p.N, p.Op, p.Bytes, p.Touched,
			cost.Seconds(p.Measured), 100*p.Spread, cost.Seconds(p.Predicted), 100*p.Error, p.Bound, p.class(), p.CPU, p.Load)
	}
	tw.Flush()
}

// replot draws the figure of the points in file again, with the α and γ
// they were predicted with (the calibration gives the rest).
func (v validation) replot(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var pts []Point
	if err := json.Unmarshal(b, &pts); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if len(pts) == 0 || pts[0].Gamma == 0 {
		return fmt.Errorf("%s: no points, or no γ in them (written before validate recorded it)", file)
	}
	v.fit.alpha, v.fit.message, v.fit.gamma = pts[0].Alpha, pts[0].Message, pts[0].Gamma
	return v.save(pts)
}

// save writes the points and the figure: one panel per rate, the model's
// curves for each operation at N=2 and the largest N, the measured points
// on them.
func (v validation) save(pts []Point) error {
	b, err := json.MarshalIndent(pts, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(v.out, "points.json"), b, 0o644); err != nil {
		return err
	}
	var panels []report.Panel
	for _, pt := range pts {
		if len(panels) == 0 || panels[len(panels)-1].Title != pt.Rate {
			panels = append(panels, report.Panel{Title: pt.Rate, X: "bytes per rank (vector, or gathered payload)", Y: "seconds"})
		}
	}
	for i := range panels {
		panels[i].Series = v.series(pts, panels[i].Title)
	}
	return report.SavePanels(filepath.Join(v.out, "cost-model.png"), panels...)
}

// series are one rate's curves and points, for N=2 and the largest N.
func (v validation) series(pts []Point, rate string) []report.Series {
	bits, _ := netns.ParseRate(rate)
	p := v.params
	p.Beta, p.Alpha, p.Message, p.Gamma = cost.LinkBeta(float64(bits)), v.fit.alpha, v.fit.message, v.fit.gamma
	p.Burst, p.BurstRate = float64(bits.Burst()), v.params.Beta
	maxN := 2
	for _, pt := range pts {
		maxN = max(maxN, pt.N)
	}
	var out []report.Series
	for _, op := range []string{"ring", "tree", "star", "gossip", "gather"} {
		for _, n := range []int{2, maxN} {
			s := report.Series{Name: fmt.Sprintf("%s N=%d", op, n)}
			perPair := cost.SparseBytesPerPair // a gather's payload per touched feature
			for _, pt := range pts {
				if pt.Rate == rate && pt.N == n && pt.Op == op {
					s.Measured = append(s.Measured, plotter.XY{X: float64(pt.Bytes), Y: pt.Measured})
					if pt.Touched > 0 {
						perPair = float64(pt.Bytes) / float64(pt.Touched)
					}
				}
			}
			for x := 512.0; x <= 1.01*(64<<20); x *= math.Sqrt2 { // 512 B to 64 MiB, the points' range
				var t cost.Traffic
				switch op {
				case "gossip":
					t = cost.GossipRound(n, x)
				case "gather":
					t = cost.SparseAllGather(n, x/perPair, perPair)
				default:
					a, _ := collective.ParseAlgo(op)
					t = traffic(a, n, x)
				}
				s.Predicted = append(s.Predicted, plotter.XY{X: x, Y: p.Estimate(t).Seconds})
			}
			if len(s.Measured) > 0 {
				out = append(out, s)
			}
		}
	}
	return out
}
