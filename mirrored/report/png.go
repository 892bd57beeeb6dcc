package report

import (
	"fmt"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/meshtrain/meshtrain/internal/atomicfile"
)

// DPI is every figure's resolution, in dots per inch (vgimg's default).
const DPI = vgimg.DefaultDPI

// SavePNG writes a width × height PNG at DPI to path, drawn by paint on a
// white canvas: a *plot.Plot's Draw method, or a caller's composition of
// plots and legends.
func SavePNG(path string, width, height vg.Length, paint func(draw.Canvas)) error {
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(DPI))
	paint(draw.New(img))
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return fmt.Errorf("plot: %w", err) // names the path
	}
	defer f.Abort()
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		return fmt.Errorf("plot: %w", err) // names the path
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}
