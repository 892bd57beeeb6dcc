package compare

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/meshtrain/meshtrain/mirrored"
	mplot "github.com/meshtrain/meshtrain/mirrored/measure/plot"
)

func fmtSeconds(s float64) string {
	if math.IsNaN(s) {
		return "not reached"
	}
	return fmt.Sprintf("%.3g s", s)
}

func fmtPct(a float64) string {
	if math.IsNaN(a) {
		return "—"
	}
	return fmt.Sprintf("%.2f%%", 100*a)
}

func fmtList[T any](vs []T, f string) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf(f, v)
	}
	return strings.Join(parts, " / ")
}

func runName(r *Run) string { return r.Strategy + ", " + r.Scenario }

// writeReport writes report.md and its plots; it returns report.md's path.
func writeReport(cfg Config, rep *Report) (string, error) {
	ms := make([]Measures, len(rep.Runs))
	for i, r := range rep.Runs {
		ms[i] = measure(r, rep.Target)
	}
	var b strings.Builder
	job := cfg.Job
	fmt.Fprintf(&b, "# Ring versus gossip: %s, N = %d\n\n", job.Model, cfg.N)
	fmt.Fprintf(&b, "Same data, seed (%d) and N for every run; batch %d per replica, %d epoch(s) of work, optimizer %s, lr %g (%s schedule); %d training and %d test examples. "+
		"Replicas run in one process, each with its own libp2p host on 127.0.0.1 (%s), sharing this machine's cores. "+
		"Gossip: %s peer schedule, one pairwise average every %d step(s)%s, staleness bound %d. Straggler: %s.\n\n",
		job.Seed, job.BatchSize, job.Epochs, job.Optimizer, job.LR, job.Schedule, job.MNIST.Train.N, job.MNIST.Test.N, cfg.Security,
		cfg.Gossip.Schedule, cfg.Gossip.Every, overlapText(cfg.Gossip.WaitForAverage), cfg.Gossip.MaxStaleness, stragglerText(cfg))
	b.WriteString("Time is training time (evaluation excluded). A ring epoch is one pass over the training set by the cluster; a gossip replica's x position is the cluster's work as it knew it at that evaluation (all replicas' steps over one synchronous epoch's). " +
		"Under gossip, *time to target* is the first replica's, *all replicas* when every surviving replica had reached it, and the final accuracy is that of the survivors' average model.\n\n")
	fmt.Fprintf(&b, "| run | time to %.1f%% | all replicas | epochs to target | final accuracy | mean replica accuracy | steps/s per peer | MB sent per peer | consensus (relative) | wall s | errors |\n", 100*rep.Target)
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range rep.Runs {
		m := ms[i]
		mb := make([]float64, len(m.BytesSent))
		for j, v := range m.BytesSent {
			mb[j] = float64(v) / 1e6
		}
		cons := "—"
		if !math.IsNaN(m.Consensus) {
			cons = fmt.Sprintf("%.2g", m.Consensus)
		}
		epochs := "—"
		if !math.IsNaN(m.EpochsToTarget) {
			epochs = fmt.Sprintf("%.2f", m.EpochsToTarget)
		}
		errs := m.Errors
		if errs == "" {
			errs = "none"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %s |\n", runName(r), fmtSeconds(m.TimeToTarget), fmtSeconds(m.AllTimeToTarget),
			epochs, fmtPct(m.FinalAccuracy), fmtPct(m.MeanReplicaAccuracy), fmtList(m.StepsPerSec, "%.0f"), fmtList(mb, "%.1f"), cons, r.WallSeconds, strings.ReplaceAll(errs, "|", "\\|"))
	}
	b.WriteString("\n")
	b.WriteString(goals(rep, ms))

	var plots []string
	for _, sc := range []string{"baseline", "straggler"} {
		var idx []int
		for i, r := range rep.Runs {
			if r.Scenario == sc {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		for _, axis := range []string{"time", "epochs"} {
			name := fmt.Sprintf("accuracy_vs_%s_%s.png", axis, sc)
			if err := accuracyPlot(filepath.Join(cfg.Out, name), rep, ms, idx, axis, sc); err != nil {
				return "", err
			}
			plots = append(plots, name)
		}
		for _, i := range idx {
			if rep.Runs[i].Strategy == mirrored.StrategyGossip {
				name := fmt.Sprintf("consensus_%s.png", sc)
				if err := consensusPlot(filepath.Join(cfg.Out, name), rep.Runs[i], sc); err != nil {
					return "", err
				}
				plots = append(plots, name)
			}
		}
	}
	for _, what := range []string{"steps_per_sec", "mb_sent"} {
		name := what + ".png"
		if err := barPlot(filepath.Join(cfg.Out, name), rep, ms, what); err != nil {
			return "", err
		}
		plots = append(plots, name)
	}
	b.WriteString("\n## Plots\n\n")
	for _, p := range plots {
		fmt.Fprintf(&b, "![%s](%s)\n\n", strings.TrimSuffix(p, ".png"), p)
	}
	b.WriteString("Raw figures of every replica: results.json.\n")
	path := filepath.Join(cfg.Out, "report.md")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("compare: writing the report: %w", err)
	}
	return path, nil
}

func overlapText(wait bool) string {
	if wait {
		return " (completed before the next step)"
	}
	return " (overlapped with the next step)"
}

func stragglerText(cfg Config) string {
	if cfg.SlowFactor <= 1 {
		return "none"
	}
	return fmt.Sprintf("rank %d's steps take %g× as long (injected)", cfg.SlowRank, cfg.SlowFactor)
}

// goals states what the comparison is for (gossip ahead of the ring under
// a straggler, no more epochs without one) against what was measured.
func goals(rep *Report, ms []Measures) string {
	find := func(strat, sc string) int {
		for i, r := range rep.Runs {
			if r.Strategy == strat && r.Scenario == sc {
				return i
			}
		}
		return -1
	}
	var b strings.Builder
	if g, r := find(mirrored.StrategyGossip, "straggler"), find(mirrored.StrategyRing, "straggler"); g >= 0 && r >= 0 {
		tg, tr := ms[g].TimeToTarget, ms[r].TimeToTarget
		switch {
		case math.IsNaN(tg) || math.IsNaN(tr):
			fmt.Fprintf(&b, "- With the straggler: gossip %s, ring %s to the target; no ratio.\n", fmtSeconds(tg), fmtSeconds(tr))
		default:
			verdict := "met"
			if tg > 0.6*tr {
				verdict = "not met"
			}
			fmt.Fprintf(&b, "- With the straggler, gossip reaches the target in %.2f× the ring's time (aim: at most 0.6×; %s).\n", tg/tr, verdict)
		}
		fs, rs := ms[g].StepsPerSec, ms[r].StepsPerSec
		fmt.Fprintf(&b, "- With the straggler, steps/s per peer: gossip %s, ring %s.\n", fmtList(fs, "%.0f"), fmtList(rs, "%.0f"))
	}
	if g, r := find(mirrored.StrategyGossip, "baseline"), find(mirrored.StrategyRing, "baseline"); g >= 0 && r >= 0 {
		eg, er := ms[g].EpochsToTarget, ms[r].EpochsToTarget
		if math.IsNaN(eg) || math.IsNaN(er) {
			fmt.Fprintf(&b, "- Without a straggler, epochs to the target: ring %s, gossip %s (not both reached).\n", fmtEpochs(er), fmtEpochs(eg))
		} else {
			verdict := "the ring needs fewer epochs"
			switch {
			case er == eg:
				verdict = "the same number of epochs"
			case er > eg:
				verdict = "the ring does not need fewer epochs here"
			}
			fmt.Fprintf(&b, "- Without a straggler, epochs to the target: ring %.2f, gossip %.2f: %s.\n", er, eg, verdict)
		}
	}
	if b.Len() > 0 {
		return "Against what gossip is for:\n\n" + b.String()
	}
	return ""
}

func fmtEpochs(e float64) string {
	if math.IsNaN(e) {
		return "not reached"
	}
	return fmt.Sprintf("%.2f", e)
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	return p
}

// plotWidth and plotHeight are every figure's size; legendWidth is the
// column to the right of the axes where the legend goes, so that it never
// covers the data.
const (
	plotWidth   = 8 * vg.Inch
	plotHeight  = 4.5 * vg.Inch
	legendWidth = 2.1 * vg.Inch
)

// save draws p with its legend in a column of its own to the right of the
// axes, and writes the PNG.
func save(p *plot.Plot, path string) error {
	return mplot.SavePNG(path, plotWidth, plotHeight, func(dc draw.Canvas) {
		leg := p.Legend
		p.Legend = plot.NewLegend() // the plot itself draws none
		p.Draw(draw.Crop(dc, 0, -legendWidth, 0, 0))
		leg.Top, leg.Left = true, true
		leg.YOffs = -p.Title.TextStyle.Height(p.Title.Text) - vg.Points(8)
		leg.Draw(draw.Crop(dc, plotWidth-legendWidth+vg.Points(6), 0, 0, 0))
	})
}

// fitY sets p's y range to the data's [lo, hi] with a margin, so that
// small differences between curves show.
func fitY(p *plot.Plot, lo, hi, floor, ceil float64) {
	if lo > hi {
		return
	}
	pad := max((hi-lo)*0.08, 0.005)
	p.Y.Min, p.Y.Max = max(floor, lo-pad), min(ceil, hi+pad)
}

func accuracyPlot(path string, rep *Report, ms []Measures, idx []int, axis, sc string) error {
	xl := "training time (s)"
	if axis == "epochs" {
		xl = "epochs of work"
	}
	p := newPlot(fmt.Sprintf("%s, N=%d, %s: test accuracy", rep.Model, rep.N, sc), xl, "test accuracy")
	color := 0
	xmax, ymin, ymax := 0.0, math.Inf(1), math.Inf(-1)
	for _, i := range idx {
		r := rep.Runs[i]
		ranks := make([]int, 0, len(ms[i].Curves))
		for k := range ms[i].Curves {
			ranks = append(ranks, k)
		}
		sort.Ints(ranks)
		for _, k := range ranks {
			pts := ms[i].Curves[k]
			if len(pts) == 0 {
				continue
			}
			xys := make(plotter.XYs, len(pts))
			for j, pt := range pts {
				xys[j].X, xys[j].Y = pt.Seconds, pt.Accuracy
				if axis == "epochs" {
					xys[j].X = pt.Epochs
				}
				xmax = max(xmax, xys[j].X)
				ymin, ymax = min(ymin, pt.Accuracy), max(ymax, pt.Accuracy)
			}
			l, s, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			l.Color, s.Color = plotutil.Color(color), plotutil.Color(color)
			s.Shape = plotutil.Shape(color)
			if r.Strategy == mirrored.StrategyGossip {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			}
			color++
			label := r.Strategy
			if r.Strategy == mirrored.StrategyGossip {
				label = fmt.Sprintf("gossip rank %d", k)
			}
			p.Add(l, s)
			p.Legend.Add(label, l, s)
		}
	}
	// The target as a line only when some curve reaches it or comes near
	// (within a quarter of the range shown): otherwise it would squash
	// the curves into a strip.
	if xmax > 0 && rep.Target <= ymax+0.25*max(ymax-ymin, 0.02) {
		target := plotter.XYs{{X: 0, Y: rep.Target}, {X: xmax, Y: rep.Target}}
		l, err := plotter.NewLine(target)
		if err != nil {
			return err
		}
		l.Color = gray
		l.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("target %.1f%%", 100*rep.Target), l)
		ymin, ymax = min(ymin, rep.Target), max(ymax, rep.Target)
	}
	fitY(p, ymin, ymax, 0, 1.01) // a little above 1, so that curves at 100% are not drawn on the frame
	return save(p, path)
}

var gray = color.Gray{Y: 110}

func consensusPlot(path string, r *Run, sc string) error {
	p := newPlot(fmt.Sprintf("gossip, %s: pairwise distance at each exchange", sc), "time since the replicas started (s)", "distance / norm of the pair's mean")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	any := false
	for k, peer := range r.Peers {
		if peer.Gossip == nil || len(peer.Gossip.Distances) == 0 {
			continue
		}
		ds := peer.Gossip.Distances
		// At most 400 points per replica: every k-th sample.
		step := max(1, len(ds)/400)
		var xys plotter.XYs
		for j := 0; j < len(ds); j += step {
			d := ds[j]
			if d.Norm > 0 && d.Distance > 0 {
				xys = append(xys, plotter.XY{X: d.Seconds, Y: d.Distance / d.Norm})
			}
		}
		if len(xys) == 0 {
			continue
		}
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		s.Color = plotutil.Color(k)
		s.Shape = draw.CircleGlyph{}
		s.Radius = vg.Points(1.5)
		p.Add(s)
		p.Legend.Add(fmt.Sprintf("rank %d (final %.2g)", k, peer.Gossip.RelConsensus), s)
		any = true
	}
	if !any {
		p.Y.Scale = plot.LinearScale{}
		p.Y.Tick.Marker = plot.DefaultTicks{}
		p.Title.Text += " (none averaged)"
	}
	return save(p, path)
}

func barPlot(path string, rep *Report, ms []Measures, what string) error {
	title, yl := "steps per second, per peer", "local steps/s"
	if what == "mb_sent" {
		title, yl = "MB sent per peer", "MB"
	}
	p := newPlot(fmt.Sprintf("%s, N=%d: %s", rep.Model, rep.N, title), "run", yl)
	names := make([]string, len(rep.Runs))
	for i, r := range rep.Runs {
		names[i] = r.Strategy + ", " + r.Scenario
	}
	w := vg.Points(float64(40) / float64(rep.N))
	for k := range rep.N {
		vals := make(plotter.Values, len(rep.Runs))
		for i := range rep.Runs {
			if what == "mb_sent" {
				vals[i] = float64(ms[i].BytesSent[k]) / 1e6
			} else {
				vals[i] = ms[i].StepsPerSec[k]
			}
		}
		bar, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bar.Color = plotutil.Color(k)
		bar.LineStyle.Width = 0
		bar.Offset = w * vg.Length(float64(k)-float64(rep.N-1)/2)
		p.Add(bar)
		p.Legend.Add(fmt.Sprintf("rank %d", k), bar)
	}
	p.NominalX(names...)
	// Room around the bars: half a group's width beside the first and
	// last groups, a tenth of the tallest bar above it, and the bars
	// standing on zero.
	p.X.Min, p.X.Max = -0.5, float64(len(rep.Runs))-0.5
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.1
	return save(p, path)
}
