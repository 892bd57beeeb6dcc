package sweep

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/report"
)

// axesWidth and plotHeight are the size of every figure's axes; the
// legend gets a column of its own to their right, as wide as its
// longest entry, so that it never covers the data.
const (
	axesWidth  = 6 * vg.Inch
	plotHeight = 4.5 * vg.Inch
	legendFont = 10 // points
	margin     = 8  // points, above and to the right of everything
)

var gray = color.Gray{Y: 110}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks{}, plainTicks{}
	p.Add(plotter.NewGrid())
	return p
}

// layout is where save puts a figure's parts: the whole size, the
// legend's column and the title's font size (shrunk until the title fits
// over the axes).
type layout struct {
	width, height, legendWidth vg.Length
	titleSize                  vg.Length
}

// layoutOf lays p out (see layout).
func layoutOf(p *plot.Plot) layout {
	leg := p.Legend
	leg.TextStyle.Font.Size = vg.Points(legendFont)
	r := leg.Rectangle(draw.Canvas{})
	l := layout{legendWidth: r.Max.X - r.Min.X, titleSize: p.Title.TextStyle.Font.Size}
	if l.legendWidth > 0 {
		l.legendWidth += vg.Points(18) // a gap on either side
	}
	l.width = axesWidth + l.legendWidth + vg.Points(margin)
	ts := p.Title.TextStyle
	for ts.Width(p.Title.Text) > axesWidth-vg.Points(12) && ts.Font.Size > vg.Points(8) {
		ts.Font.Size -= vg.Points(0.5)
	}
	l.titleSize = ts.Font.Size
	l.height = max(plotHeight, r.Max.Y-r.Min.Y+ts.Height(p.Title.Text)+vg.Points(30+margin))
	return l
}

// save draws p with its legend in a column of its own to the right of the
// axes, below the title's height, and writes the PNG.
func save(p *plot.Plot, path string) error {
	l := layoutOf(p)
	p.Title.TextStyle.Font.Size = l.titleSize
	leg := p.Legend
	leg.TextStyle.Font.Size = vg.Points(legendFont)
	p.Legend = plot.NewLegend() // the plot itself draws none
	return report.SavePNG(path, l.width, l.height, func(dc draw.Canvas) {
		// A margin above the title and at the right, so that nothing
		// touches the edge.
		dc = draw.Crop(dc, 0, -vg.Points(margin), 0, -vg.Points(margin))
		p.Draw(draw.Crop(dc, 0, -l.legendWidth, 0, 0))
		if l.legendWidth == 0 {
			return
		}
		leg.Top, leg.Left = true, true
		leg.YOffs = -p.Title.TextStyle.Height(p.Title.Text) - vg.Points(12)
		leg.Draw(draw.Crop(dc, dc.Max.X-dc.Min.X-l.legendWidth+vg.Points(10), 0, 0, 0))
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

// style gives curve i its colour and glyph: the colours repeat after
// seven, the glyphs then shift by one, so that no two of the first 56
// curves look alike.
func style(i int) (color.Color, draw.GlyphDrawer) {
	nc := len(plotutil.DefaultColors)
	return plotutil.Color(i), plotutil.Shape(i%nc + i/nc)
}

// plainTicks are gonum's default ticks labelled without trailing zeros
// (25, not 25.00).
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i, t := range ts {
		if t.Label != "" {
			ts[i].Label = strconv.FormatFloat(t.Value, 'g', 6, 64)
		}
	}
	return ts
}

// writePlots draws the report's figures into dir and returns their file
// names, in the order the report shows them.
func writePlots(dir string, res *Results) ([]string, error) {
	var names []string
	add := func(name string, err error) error {
		if err == nil {
			names = append(names, name)
		}
		return err
	}
	vw, vb, _, _ := res.Grid.varies()
	axis := ""
	switch {
	case vw:
		axis = "workers"
	case vb:
		axis = "batch"
	}
	if axis != "" {
		for _, what := range []string{"time", "throughput", "cpu", "network"} {
			name := fmt.Sprintf("%s_vs_%s.png", what, axis)
			if err := add(name, axisPlot(filepath.Join(dir, name), res, axis, what)); err != nil {
				return nil, err
			}
		}
	}
	gridPoints, _ := res.Grid.Points()
	for _, sl := range res.Grid.Stragglers {
		var idx []int
		for i, r := range res.Points {
			if r.Straggler.String() == sl.String() {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		sc := res.Grid.scenarioFile(sl)
		for _, x := range []string{"time", "epochs"} {
			name := fmt.Sprintf("accuracy_vs_%s_%s.png", x, sc)
			if err := add(name, accuracyPlot(filepath.Join(dir, name), res, idx, x, sl)); err != nil {
				return nil, err
			}
		}
		// A figure per gossip point, named by the point when the grid
		// has several in this scenario (finished or not, so that the
		// names do not change as the sweep goes).
		perPoint := 0
		for _, p := range gridPoints {
			if p.Strategy == mirrored.StrategyGossip && p.Straggler.String() == sl.String() {
				perPoint++
			}
		}
		for _, i := range idx {
			r := res.Points[i]
			if r.Strategy != mirrored.StrategyGossip {
				continue
			}
			name := fmt.Sprintf("consensus_%s.png", sc)
			title := fmt.Sprintf("gossip, %s: the pair's distance ÷ its mean's norm, at each exchange", res.Grid.scenario(sl))
			if perPoint > 1 {
				name = fmt.Sprintf("consensus_%s_w%d_b%d.png", sc, r.Workers, r.Batch)
				title = fmt.Sprintf("gossip, %d workers, batch %d, %s: the pair's relative distance", r.Workers, r.Batch, res.Grid.scenario(sl))
			}
			if err := add(name, consensusPlot(filepath.Join(dir, name), r, title)); err != nil {
				return nil, err
			}
		}
	}
	if len(res.Grid.Workers) == 1 && len(res.Points) > 0 {
		for _, what := range []string{"steps_per_sec", "mb_sent"} {
			name := what + ".png"
			if err := add(name, rankBars(filepath.Join(dir, name), res, what)); err != nil {
				return nil, err
			}
		}
		if axis == "" {
			if err := add("cpu_cores.png", cpuBars(filepath.Join(dir, "cpu_cores.png"), res)); err != nil {
				return nil, err
			}
		}
	}
	return names, nil
}

// axisValue is p's value on axis ("workers" or "batch").
func axisValue(p Point, axis string) float64 {
	if axis == "workers" {
		return float64(p.Workers)
	}
	return float64(p.Batch)
}

// axisPlot draws one figure of the points against axis: a line per
// combination of the other axes (batch size, strategy, straggler) through
// the values what ("time", "throughput", "cpu", "network") takes.
func axisPlot(path string, res *Results, axis, what string) error {
	type series struct {
		label  string
		points []*Result
	}
	var ss []*series
	for _, r := range res.Points {
		label := shortLabel(res.Grid, r.Point, axis)
		i := slices.IndexFunc(ss, func(s *series) bool { return s.label == label })
		if i < 0 {
			ss = append(ss, &series{label: label})
			i = len(ss) - 1
		}
		ss[i].points = append(ss[i].points, r)
	}
	xl := "workers"
	if axis == "batch" {
		xl = "batch size per worker (examples)"
	}
	titles := map[string][2]string{
		"time":       {"training time", "training time (s)"},
		"throughput": {"throughput", "examples/s, all workers (thousands)"},
		"cpu":        {"CPU per worker process", "CPU (cores busy, mean over the run)"},
		"network":    {"traffic per peer", "MiB per peer"},
	}
	if res.Runner == KindInProcess && what == "cpu" {
		titles["cpu"] = [2]string{"CPU of the process holding the replicas", "CPU (cores busy, mean over the run)"}
	}
	p := newPlot(fmt.Sprintf("%s: %s against %s", res.Model, titles[what][0], axis), xl, titles[what][1])
	ymax := 0.0
	curve := 0
	addLine := func(label string, xys plotter.XYs, dashed bool) error {
		if len(xys) == 0 {
			return nil
		}
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		c, g := style(curve)
		l.Color, s.Color, s.Shape, s.Radius = c, c, g, vg.Points(3.5)
		l.Width = vg.Points(1.5)
		if dashed { // wider, underneath the solid line it may coincide with
			l.Width, l.Dashes = vg.Points(4), []vg.Length{vg.Points(6), vg.Points(3)}
		}
		p.Add(l, s)
		p.Legend.Add(label, l, s)
		for _, xy := range xys {
			ymax = max(ymax, xy.Y)
		}
		return nil
	}
	for _, s := range ss {
		get := map[string]func(Row) float64{
			"time":       func(r Row) float64 { return float64(r.TrainSeconds) },
			"throughput": func(r Row) float64 { return float64(r.ExamplesPerSec) / 1000 },
			"cpu":        func(r Row) float64 { return float64(r.CPUCores) },
			"network":    func(r Row) float64 { return float64(r.SentBytes) / (1 << 20) },
		}
		xys := func(f func(Row) float64) plotter.XYs {
			var out plotter.XYs
			for _, r := range s.points {
				if v := f(r.Row); !math.IsNaN(v) && r.Row.Errors == "" {
					out = append(out, plotter.XY{X: axisValue(r.Point, axis), Y: v})
				}
			}
			return out
		}
		if what == "network" {
			// Received underneath, wider and dashed: the ring's sent
			// and received coincide.
			if err := addLine(s.label+", received", xys(func(r Row) float64 { return float64(r.ReceivedBytes) / (1 << 20) }), true); err != nil {
				return err
			}
			if err := addLine(s.label+", sent", xys(get["network"]), false); err != nil {
				return err
			}
		} else if err := addLine(s.label, xys(get[what]), false); err != nil {
			return err
		}
		curve++
	}
	if what == "cpu" && res.Cores > 0 {
		// This machine's cores, for scale.
		lo, hi := axisRange(res, axis)
		l, err := plotter.NewLine(plotter.XYs{{X: lo, Y: float64(res.Cores)}, {X: hi, Y: float64(res.Cores)}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes = gray, []vg.Length{vg.Points(1), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("this machine's %d cores", res.Cores), l)
		ymax = max(ymax, float64(res.Cores))
	}
	lo, hi := axisRange(res, axis)
	p.X.Min, p.X.Max = lo, hi
	var ticks []plot.Tick
	vals := res.Grid.Workers
	if axis == "batch" {
		vals = res.Grid.Batches
	}
	for _, v := range vals {
		ticks = append(ticks, plot.Tick{Value: float64(v), Label: strconv.Itoa(v)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = 0, max(ymax*1.12, 1e-9)
	return save(p, path)
}

// axisRange is the x range of an axis plot: the grid's values with room
// beside the first and last.
func axisRange(res *Results, axis string) (float64, float64) {
	vals := res.Grid.Workers
	if axis == "batch" {
		vals = res.Grid.Batches
	}
	lo, hi := float64(slices.Min(vals)), float64(slices.Max(vals))
	pad := max((hi-lo)*0.08, 0.3)
	return lo - pad, hi + pad
}

// accuracyPlot draws test accuracy against training time or epochs of
// work for the points idx of one straggler scenario: a curve per point
// (a gossip point's per replica).
func accuracyPlot(path string, res *Results, idx []int, axis string, sl Straggler) error {
	xl := "training time (s)"
	if axis == "epochs" {
		xl = "epochs of work"
	}
	// The title names what the grid does not vary, and the scenario
	// when the grid has more than one or it has a straggler.
	title := res.Model
	if len(res.Grid.Workers) == 1 {
		title += fmt.Sprintf(", N=%d", res.Grid.Workers[0])
	}
	if len(res.Grid.Stragglers) > 1 || !sl.None() {
		title += ", " + res.Grid.scenario(sl)
	}
	title += ": test accuracy against " + map[string]string{"time": "training time", "epochs": "epochs"}[axis]
	p := newPlot(title, xl, "test accuracy")
	// Over workers × batch sizes (ring), a colour per batch size and a
	// glyph and dashes per workers, as the other figures colour their
	// lines by batch size; else a look per curve.
	vw, vb, _, _ := res.Grid.varies()
	structured := vw && vb && !slices.ContainsFunc(idx, func(i int) bool { return res.Points[i].Strategy == mirrored.StrategyGossip })
	curve := 0
	xmax, ymin, ymax := 0.0, math.Inf(1), math.Inf(-1)
	for _, i := range idx {
		r := res.Points[i]
		m := measure(r.Peers, res.Target)
		for _, k := range ranks(m.Curves) {
			pts := m.Curves[k]
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
			c, g := style(curve)
			if structured {
				w, b := slices.Index(res.Grid.Workers, r.Workers), slices.Index(res.Grid.Batches, r.Batch)
				c, g, l.Dashes = plotutil.Color(b), plotutil.Shape(w), plotutil.Dashes(w)
			}
			l.Color, s.Color, s.Shape, s.Radius = c, c, g, vg.Points(3)
			if r.Strategy == mirrored.StrategyGossip {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			}
			curve++
			label := shortLabel(res.Grid, r.Point, "scenario")
			if r.Strategy == mirrored.StrategyGossip {
				label = fmt.Sprintf("%s rank %d", label, k)
			}
			p.Add(l, s)
			p.Legend.Add(label, l, s)
		}
	}
	// The target as a line only when some curve reaches it or comes near
	// (within a quarter of the range shown): otherwise it would squash
	// the curves into a strip.
	if xmax > 0 && res.Target <= ymax+0.25*max(ymax-ymin, 0.02) {
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: res.Target}, {X: xmax, Y: res.Target}})
		if err != nil {
			return err
		}
		l.Color = gray
		l.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("target %.1f%%", 100*res.Target), l)
		ymin, ymax = min(ymin, res.Target), max(ymax, res.Target)
	}
	p.X.Min = 0
	if xmax > 0 {
		p.X.Max = xmax * 1.05
	}
	fitY(p, ymin, ymax, 0, 1.01) // a little above 1, so that curves at 100% are not drawn on the frame
	return save(p, path)
}

func consensusPlot(path string, r *Result, title string) error {
	// A short y label: a long one squeezes a log axis (gonum).
	p := newPlot(title, "time since the replicas started (s)", "relative distance")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	any := false
	lo, hi := math.Inf(1), math.Inf(-1)
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
				lo, hi = min(lo, d.Distance/d.Norm), max(hi, d.Distance/d.Norm)
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
	if any { // whole decades, where the log ticks are
		p.Y.Min, p.Y.Max = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
		if p.Y.Max <= p.Y.Min {
			p.Y.Max = 10 * p.Y.Min
		}
	} else {
		p.Y.Scale = plot.LinearScale{}
		p.Y.Tick.Marker = plainTicks{}
		p.Title.Text += " (none averaged)"
	}
	return save(p, path)
}

// rankBars draws, for a grid of one workers count, a bar per rank in a
// group per point: local steps/s ("steps_per_sec") or MB sent
// ("mb_sent").
func rankBars(path string, res *Results, what string) error {
	n := res.Grid.Workers[0]
	title, yl := "steps per second, per peer", "local steps/s"
	if what == "mb_sent" {
		title, yl = "MB sent per peer", "MB (10⁶ bytes)"
	}
	p := newPlot(fmt.Sprintf("%s, N=%d: %s", res.Model, n, title), "run", yl)
	names := make([]string, len(res.Points))
	ms := make([]Measures, len(res.Points))
	for i, r := range res.Points {
		names[i] = runLabel(res.Grid, r.Point)
		ms[i] = measure(r.Peers, res.Target)
	}
	w := vg.Points(float64(40) / float64(n))
	for k := range n {
		vals := make(plotter.Values, len(res.Points))
		for i := range res.Points {
			if k >= len(ms[i].BytesSent) {
				continue
			}
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
		bar.Offset = w * vg.Length(float64(k)-float64(n-1)/2)
		p.Add(bar)
		p.Legend.Add(fmt.Sprintf("rank %d", k), bar)
	}
	p.NominalX(names...)
	// Room around the bars: half a group's width beside the first and
	// last groups, a tenth of the tallest bar above it, and the bars
	// standing on zero.
	p.X.Min, p.X.Max = -0.5, float64(len(res.Points))-0.5
	p.Y.Min, p.Y.Max = 0, max(p.Y.Max*1.1, 1e-9)
	return save(p, path)
}

// cpuBars draws a bar per point: the cores the point's processes kept
// busy.
func cpuBars(path string, res *Results) error {
	yl := "CPU per worker process (cores)"
	if res.Runner == KindInProcess {
		yl = "CPU of the process (cores)"
	}
	p := newPlot(fmt.Sprintf("%s: CPU per point", res.Model), "run", yl)
	vals := make(plotter.Values, len(res.Points))
	names := make([]string, len(res.Points))
	for i, r := range res.Points {
		names[i] = runLabel(res.Grid, r.Point)
		if v := float64(r.Row.CPUCores); !math.IsNaN(v) {
			vals[i] = v
		}
	}
	bar, err := plotter.NewBarChart(vals, vg.Points(30))
	if err != nil {
		return err
	}
	bar.Color = plotutil.Color(0)
	bar.LineStyle.Width = 0
	p.Add(bar)
	l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: float64(res.Cores)}, {X: float64(len(res.Points)) - 0.5, Y: float64(res.Cores)}})
	if err != nil {
		return err
	}
	l.Color, l.Dashes = gray, []vg.Length{vg.Points(1), vg.Points(3)}
	p.Add(l)
	p.Legend.Add("CPU (cores)", bar)
	p.Legend.Add(fmt.Sprintf("this machine's %d cores", res.Cores), l)
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(res.Points))-0.5
	p.Y.Min, p.Y.Max = 0, max(p.Y.Max, float64(res.Cores))*1.1
	return save(p, path)
}
