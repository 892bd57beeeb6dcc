package report

import (
	"errors"
	"fmt"
	"image/color"
	"math"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/meshtrain/meshtrain/mirrored"
)

// resourceRow is the size of one peer's row of panels, and header the
// band above the rows that names the run.
const (
	resourceWidth  = 4.2 * vg.Inch
	resourceHeight = 2.6 * vg.Inch
	resourceHeader = 0.35 * vg.Inch
)

// ResourcePlot says what a resource figure shows besides the samples.
type ResourcePlot struct {
	// Label names the run in the band above the panels (model, peers,
	// batch, date): the figures of several runs side by side say which
	// is which.
	Label string
	// StepsPerEpoch, if above 0, marks each epoch's end in every panel,
	// where a sample's Step first reaches a multiple of it.
	StepsPerEpoch int
}

// PlotResources draws each peer's resource history
// (mirrored.ResourceSample) as a row of three panels against seconds
// since the run started: CPU (user and system, in cores, against a line
// at the host's core count), memory (resident MiB) and I/O (MB/s sent and
// received over the network, read and written on disk), the figures
// dstat showed the course reports; and writes it to path. Every rank's
// panel of a kind has the same axes, so ranks compare at a glance; the
// epochs' ends are dotted lines. Peers without samples get an empty row
// naming them.
func PlotResources(path string, peers []mirrored.PeerStats, opt ResourcePlot) error {
	if len(peers) == 0 {
		return errors.New("plot: no peers to draw")
	}
	ax := sharedAxes(peers)
	var rows [][3]*gplot.Plot
	for _, p := range peers {
		row, err := resourceRow(p, ax, opt.StepsPerEpoch)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	tiles := draw.Tiles{Rows: len(rows), Cols: 3, PadX: 2 * vg.Millimeter, PadY: 2 * vg.Millimeter, PadTop: 2 * vg.Millimeter}
	height := resourceHeight*vg.Length(len(rows)) + resourceHeader
	return SavePNG(path, 3*resourceWidth, height, func(dc draw.Canvas) {
		header := dc
		header.Min.Y = dc.Max.Y - resourceHeader
		sty := draw.TextStyle{Color: color.Black, Font: gplot.DefaultFont, Handler: gplot.DefaultTextHandler}
		sty.Font.Size = vg.Points(11)
		sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
		label := opt.Label
		if label == "" {
			label = fmt.Sprintf("%d peer(s)", len(peers))
		}
		header.FillText(sty, vg.Point{X: dc.Min.X + 4*vg.Millimeter, Y: (header.Min.Y + header.Max.Y) / 2}, label)
		body := dc
		body.Max.Y -= resourceHeader
		for r, row := range rows {
			for c, p := range row {
				p.Draw(tiles.At(body, c, r))
			}
		}
	})
}

// axes are the limits every rank's panels share: the run's last second,
// and each panel's highest value (the CPU panel at least the cores).
type axes struct {
	seconds float64
	top     [3]float64
	cores   int
}

// resourcePanels are the three panels: title, axis and lines.
var resourcePanels = []struct {
	title, y string
	lines    []resourceLine
}{
	{"CPU", "cores", []resourceLine{
		{"user", func(s mirrored.ResourceSample) float64 { return s.CPUUser }},
		{"system", func(s mirrored.ResourceSample) float64 { return s.CPUSystem }}}},
	{"memory", "resident MiB", []resourceLine{
		{"RSS", func(s mirrored.ResourceSample) float64 { return float64(s.RSSBytes) / (1 << 20) }}}},
	{"network and disk", "MB/s", []resourceLine{
		{"sent", func(s mirrored.ResourceSample) float64 { return s.Sent / 1e6 }},
		{"received", func(s mirrored.ResourceSample) float64 { return s.Received / 1e6 }},
		{"disk read", func(s mirrored.ResourceSample) float64 { return s.DiskRead / 1e6 }},
		{"disk written", func(s mirrored.ResourceSample) float64 { return s.DiskWrite / 1e6 }}}},
}

type resourceLine struct {
	name string
	y    func(mirrored.ResourceSample) float64
}

func sharedAxes(peers []mirrored.PeerStats) axes {
	var a axes
	for _, p := range peers {
		a.cores = max(a.cores, p.Cores)
		for _, s := range p.Resources {
			a.seconds = max(a.seconds, s.Seconds)
			for i, pn := range resourcePanels {
				for _, ln := range pn.lines {
					a.top[i] = max(a.top[i], ln.y(s))
				}
			}
		}
	}
	a.top[0] = max(a.top[0], float64(a.cores))
	return a
}

func resourceRow(p mirrored.PeerStats, ax axes, stepsPerEpoch int) ([3]*gplot.Plot, error) {
	var row [3]*gplot.Plot
	for i, pn := range resourcePanels {
		pl := gplot.New()
		pl.Title.Text = fmt.Sprintf("rank %d: %s", p.Rank, pn.title)
		pl.Title.Padding = vg.Points(4)
		pl.X.Label.Text, pl.Y.Label.Text = "seconds", pn.y
		pl.X.Min, pl.Y.Min = 0, 0
		pl.X.Max = math.Max(ax.seconds, 1)
		pl.Add(plotter.NewGrid())
		// The legend sits in a band above the data: the axis reaches
		// 1.5× the highest value of any rank.
		pl.Legend.Top, pl.Legend.Left = true, true
		pl.Legend.TextStyle.Font.Size = vg.Points(7)
		for k, ln := range pn.lines {
			xy := make(plotter.XYs, len(p.Resources))
			for j, s := range p.Resources {
				xy[j].X, xy[j].Y = s.Seconds, ln.y(s)
			}
			if len(xy) == 0 {
				continue
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return row, fmt.Errorf("plot: rank %d %s: %w", p.Rank, ln.name, err)
			}
			l.Color = plotutil.Color(k)
			l.Dashes = plotutil.Dashes(k) // lines that coincide stay visible
			l.Width = vg.Points(1.2)
			pl.Add(l)
			pl.Legend.Add(ln.name, l)
		}
		pl.Y.Max = 1.5 * ax.top[i]
		if ax.top[i] == 0 {
			pl.Y.Max = 1
		}
		if i == 0 && ax.cores > 0 {
			if err := hline(pl, float64(ax.cores), pl.X.Max, fmt.Sprintf("%d cores", ax.cores)); err != nil {
				return row, err
			}
		}
		if err := epochMarks(pl, p.Resources, stepsPerEpoch); err != nil {
			return row, err
		}
		if len(p.Resources) == 0 {
			pl.Title.Text += " (no samples)"
			pl.Title.TextStyle.Color = color.Gray{Y: 100}
		}
		row[i] = pl
	}
	return row, nil
}

// hline draws a grey dashed line at y across the panel, in the legend as
// name.
func hline(pl *gplot.Plot, y, xmax float64, name string) error {
	l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: y}, {X: xmax, Y: y}})
	if err != nil {
		return fmt.Errorf("plot: %s: %w", name, err)
	}
	l.Color, l.Dashes, l.Width = color.Gray{Y: 90}, []vg.Length{vg.Points(4), vg.Points(2)}, vg.Points(1)
	pl.Add(l)
	pl.Legend.Add(name, l)
	return nil
}

// epochMarks draws a dotted vertical line at each epoch's end (epochEnds):
// where the evaluation and any checkpoint show in the figures.
func epochMarks(pl *gplot.Plot, samples []mirrored.ResourceSample, stepsPerEpoch int) error {
	for _, x := range epochEnds(samples, stepsPerEpoch) {
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: pl.Y.Max}})
		if err != nil {
			return fmt.Errorf("plot: epoch mark: %w", err)
		}
		l.Color, l.Dashes, l.Width = color.Gray{Y: 150}, []vg.Length{vg.Points(1), vg.Points(2)}, vg.Points(0.8)
		pl.Add(l)
	}
	return nil
}

// epochEnds are the seconds of the samples whose steps first reach each
// multiple of stepsPerEpoch (none if it is not above 0).
func epochEnds(samples []mirrored.ResourceSample, stepsPerEpoch int) []float64 {
	if stepsPerEpoch <= 0 {
		return nil
	}
	var ends []float64
	next := stepsPerEpoch
	for _, s := range samples {
		if s.Step >= next {
			ends = append(ends, s.Seconds)
			next = (s.Step/stepsPerEpoch + 1) * stepsPerEpoch
		}
	}
	return ends
}
