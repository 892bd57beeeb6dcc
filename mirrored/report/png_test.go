package report

import (
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/meshtrain/meshtrain/collective/cost"
)

// TestSavePNG: a plot saved at 2 × 1 inches is 192 × 96 pixels at DPI 96,
// and a path that cannot be written is named in the error.
func TestSavePNG(t *testing.T) {
	p := gplot.New()
	p.Title.Text = "t"
	path := filepath.Join(t.TempDir(), "p.png")
	if err := SavePNG(path, 2*vg.Inch, vg.Inch, p.Draw); err != nil {
		t.Fatal(err)
	}
	w, h := pngSize(t, path)
	if w != 2*DPI || h != DPI {
		t.Errorf("%d × %d pixels, want %d × %d", w, h, 2*DPI, DPI)
	}
	bad := filepath.Join(t.TempDir(), "missing", "p.png")
	if err := SavePNG(bad, vg.Inch, vg.Inch, p.Draw); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("saving to %s: %v, want an error naming the path", bad, err)
	}
}

// TestSavePanels: two panels side by side are twice one panel's width.
func TestSavePanels(t *testing.T) {
	pn := Panel{Title: "a", X: "x", Y: "y", Series: []Series{{Name: "s",
		Predicted: plotter.XYs{{X: 1, Y: 1}, {X: 10, Y: 5}}, Measured: plotter.XYs{{X: 2, Y: 2}}}}}
	path := filepath.Join(t.TempDir(), "panels.png")
	if err := SavePanels(path, pn, pn); err != nil {
		t.Fatal(err)
	}
	w, _ := pngSize(t, path)
	if want := int(2 * panelWidth.Dots(DPI)); w != want {
		t.Errorf("width %d pixels, want %d", w, want)
	}
	if err := SavePanels(path); err == nil {
		t.Error("no panels: no error")
	}
}

// pngSize is the PNG file's size in pixels.
func pngSize(t *testing.T, path string) (w, h int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Width, cfg.Height
}

// TestExtrapolationReadable: the extrapolation's legend (top left) has
// room above the curves, and curves that coincide (the dense exchange is
// the ring's all-reduce) stay visible: each its own dashes, the earlier
// drawn wider underneath.
func TestExtrapolationReadable(t *testing.T) {
	p := cost.Params{Alpha: 50e-6, Beta: 1.25e8, Gamma: 2e-9, Fixed: 30e-6, RankCores: 1}
	pts := p.Extrapolate(cost.Sizes(1000), 246824, 246824/4, 1000)
	pl, err := panel(Extrapolation(pts))
	if err != nil {
		t.Fatal(err)
	}
	hi := 0.0
	for _, pt := range pts {
		hi = max(hi, pt.Ring.Seconds, pt.Gossip.Seconds, pt.Dense.Seconds, pt.Sparse.Seconds)
	}
	if pl.Y.Max < 3*hi {
		t.Errorf("y axis ends at %v, the data at %v: no room for the legend above the curves", pl.Y.Max, hi)
	}
	// The ring is series 0, the dense exchange series 2.
	rw, rd := seriesLine(0, 4)
	dw, dd := seriesLine(2, 4)
	if rw <= dw || fmt.Sprint(rd) == fmt.Sprint(dd) {
		t.Errorf("the ring (width %v, dashes %v) would hide under the dense exchange (width %v, dashes %v)", rw, rd, dw, dd)
	}
}
