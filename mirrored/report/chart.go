package report

import (
	"errors"
	"fmt"
	"math"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/meshtrain/meshtrain/collective/cost"
)

// Series is one predicted curve and the measurements that go with it.
type Series struct {
	Name      string
	Predicted plotter.XYs // drawn as a line
	Measured  plotter.XYs // drawn as points; may be empty
}

// Panel is one plot.
type Panel struct {
	Title, X, Y string
	Series      []Series
}

// panelWidth and panelHeight are each panel's size.
const (
	panelWidth  = 5.5 * vg.Inch
	panelHeight = 4.5 * vg.Inch
)

// SavePanels draws the panels side by side on log-log axes, each
// panelWidth × panelHeight, and writes them to path as one PNG (SavePNG).
func SavePanels(path string, panels ...Panel) error {
	if len(panels) == 0 {
		return errors.New("plot: no panels to draw")
	}
	plots := make([]*gplot.Plot, len(panels))
	for i, pn := range panels {
		p, err := panel(pn)
		if err != nil {
			return err
		}
		plots[i] = p
	}
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter, PadY: vg.Millimeter}
	return SavePNG(path, panelWidth*vg.Length(len(plots)), panelHeight, func(dc draw.Canvas) {
		for i, p := range plots {
			p.Draw(tiles.At(dc, i, 0))
		}
	})
}

func panel(pn Panel) (*gplot.Plot, error) {
	p := gplot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = pn.Title, pn.X, pn.Y
	p.X.Scale, p.Y.Scale = gplot.LogScale{}, gplot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = gplot.LogTicks{Prec: -1}, gplot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range pn.Series {
		c := plotutil.Color(i)
		l, err := plotter.NewLine(s.Predicted)
		if err != nil {
			return nil, fmt.Errorf("plot: %s: %w", s.Name, err)
		}
		for _, xy := range append(append(plotter.XYs(nil), s.Predicted...), s.Measured...) {
			if xy.Y > 0 {
				lo, hi = min(lo, xy.Y), max(hi, xy.Y)
			}
		}
		// Curves that coincide (the dense exchange is the ring's
		// all-reduce) stay visible: each its own dashes, the earlier
		// ones wider underneath.
		l.Color = c
		l.Width, l.Dashes = seriesLine(i, len(pn.Series))
		p.Add(l)
		p.Legend.Add(s.Name, l)
		if len(s.Measured) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(s.Measured)
		if err != nil {
			return nil, fmt.Errorf("plot: %s: %w", s.Name, err)
		}
		sc.Color, sc.Shape, sc.Radius = c, draw.CircleGlyph{}, vg.Points(2.5)
		p.Add(sc)
	}
	if lo < hi { // headroom above the data for the legend, at the top left
		p.Y.Min, p.Y.Max = lo/2, hi*math.Pow(hi/lo, 0.45)
	}
	return p, nil
}

// seriesLine is the width and dashes of series i of n: curves that
// coincide stay visible, each with its own dashes and the earlier ones
// wider, underneath.
func seriesLine(i, n int) (vg.Length, []vg.Length) {
	return vg.Points(1 + 1.5*float64(n-1-i)), plotutil.Dashes(i)
}

// Extrapolation is the panel of an extrapolation: time per exchange
// against the number of peers, for the ring and a gossip round, and for
// the dense and sparse gradient exchange.
func Extrapolation(pts []cost.Point) Panel {
	pn := Panel{Title: "predicted time per exchange (a host per peer)", X: "peers", Y: "seconds"}
	for _, s := range []struct {
		name string
		get  func(cost.Point) cost.Estimate
	}{
		{"ring all-reduce (model)", func(pt cost.Point) cost.Estimate { return pt.Ring }},
		{"gossip round (model)", func(pt cost.Point) cost.Estimate { return pt.Gossip }},
		{"dense exchange (model)", func(pt cost.Point) cost.Estimate { return pt.Dense }},
		{"sparse exchange (model)", func(pt cost.Point) cost.Estimate { return pt.Sparse }},
	} {
		xys := make(plotter.XYs, len(pts))
		for i, pt := range pts {
			xys[i] = plotter.XY{X: float64(pt.N), Y: s.get(pt).Seconds}
		}
		pn.Series = append(pn.Series, Series{Name: s.name, Predicted: xys})
	}
	return pn
}
