package report

import (
	"errors"
	"fmt"
	"image/color"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/meshtrain/meshtrain/mirrored"
)

// resourceRow is the size of one peer's row of panels.
const (
	resourceWidth  = 4.2 * vg.Inch
	resourceHeight = 2.6 * vg.Inch
)

// Resources draws each peer's resource history (mirrored.ResourceSample)
// as a row of three panels against seconds since the run started: CPU
// (user and system, in cores), memory (resident MiB) and I/O (MB/s sent
// and received over the network, read and written on disk), the figures
// dstat showed the course reports; and writes it to path. Peers without
// samples get an empty row naming them.
func PlotResources(path string, peers []mirrored.PeerStats) error {
	if len(peers) == 0 {
		return errors.New("plot: no peers to draw")
	}
	var rows [][3]*gplot.Plot
	for _, p := range peers {
		row, err := resourceRow(p)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	tiles := draw.Tiles{Rows: len(rows), Cols: 3, PadX: vg.Millimeter, PadY: vg.Millimeter}
	return SavePNG(path, 3*resourceWidth, resourceHeight*vg.Length(len(rows)), func(dc draw.Canvas) {
		for r, row := range rows {
			for c, p := range row {
				p.Draw(tiles.At(dc, c, r))
			}
		}
	})
}

func resourceRow(p mirrored.PeerStats) ([3]*gplot.Plot, error) {
	type line struct {
		name string
		y    func(mirrored.ResourceSample) float64
	}
	mb := func(x float64) float64 { return x / 1e6 }
	panels := []struct {
		title, y string
		lines    []line
	}{
		{"CPU", "cores", []line{
			{"user", func(s mirrored.ResourceSample) float64 { return s.CPUUser }},
			{"system", func(s mirrored.ResourceSample) float64 { return s.CPUSystem }}}},
		{"memory", "resident MiB", []line{
			{"RSS", func(s mirrored.ResourceSample) float64 { return float64(s.RSSBytes) / (1 << 20) }}}},
		{"network and disk", "MB/s", []line{
			{"sent", func(s mirrored.ResourceSample) float64 { return mb(s.Sent) }},
			{"received", func(s mirrored.ResourceSample) float64 { return mb(s.Received) }},
			{"disk read", func(s mirrored.ResourceSample) float64 { return mb(s.DiskRead) }},
			{"disk written", func(s mirrored.ResourceSample) float64 { return mb(s.DiskWrite) }}}},
	}
	var row [3]*gplot.Plot
	for i, pn := range panels {
		pl := gplot.New()
		pl.Title.Text = fmt.Sprintf("rank %d: %s", p.Rank, pn.title)
		pl.X.Label.Text, pl.Y.Label.Text = "seconds", pn.y
		pl.Y.Min = 0
		pl.Add(plotter.NewGrid())
		// The legend sits in a band above the data: the axis reaches
		// 1.5× the highest value.
		pl.Legend.Top, pl.Legend.Left = true, true
		pl.Legend.TextStyle.Font.Size = vg.Points(7)
		top := 0.0
		for k, ln := range pn.lines {
			xy := make(plotter.XYs, len(p.Resources))
			for j, s := range p.Resources {
				xy[j].X, xy[j].Y = s.Seconds, ln.y(s)
				top = max(top, xy[j].Y)
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
		pl.Y.Max = 1.5 * top
		if top == 0 {
			pl.Y.Max = 1
		}
		if len(p.Resources) == 0 {
			pl.Title.Text += " (no samples)"
			pl.Title.TextStyle.Color = color.Gray{Y: 100}
		}
		row[i] = pl
	}
	return row, nil
}
