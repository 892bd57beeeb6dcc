package plot

import (
	"errors"
	"fmt"

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
	for i, s := range pn.Series {
		c := plotutil.Color(i)
		l, err := plotter.NewLine(s.Predicted)
		if err != nil {
			return nil, fmt.Errorf("plot: %s: %w", s.Name, err)
		}
		l.Color = c
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
	return p, nil
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
