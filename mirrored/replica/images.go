package replica

import (
	"fmt"

	"github.com/meshtrain/meshtrain/data"
)

// Greyscale refuses images of more than one channel: nn.Spec, which
// shapes the models, has no channels yet, so a colour set would be
// trained as if its channels were extra columns. It also refuses a
// normalisation that cannot be applied (a hand-built set's std of 0).
func Greyscale(im *data.Images) error {
	if im.C() != 1 {
		return fmt.Errorf("the data set's images are %d×%d×%d: nn's models take greyscale images (one channel) for now", im.Rows, im.Cols, im.C())
	}
	if err := im.Norm.Check(); err != nil {
		return fmt.Errorf("the data set's images: %w", err)
	}
	return nil
}

// Examples returns the normalised images [lo, hi) of im and their labels,
// through the data package's Dataset so the normalisation is the
// pipeline's.
func Examples(im *data.Images, lo, hi int) ([]float32, []int32) {
	ds := im.Dataset()
	var b data.Batch
	b.X = make([]float32, 0, (hi-lo)*ds.Dim())
	b.Labels = make([]float32, 0, hi-lo)
	for i := lo; i < hi; i++ {
		ds.Append(&b, i)
	}
	return b.X, b.IntLabels(nil)
}
