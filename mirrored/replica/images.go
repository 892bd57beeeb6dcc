package replica

import (
	"fmt"

	"github.com/meshtrain/meshtrain/data"
	_ "github.com/meshtrain/meshtrain/data/folder" // image folders and CSV tables: every run's
	_ "github.com/meshtrain/meshtrain/data/table"  // data.OpenImages reads them (mirrored, eval, launch)
	"github.com/meshtrain/meshtrain/nn"
)

// CheckImages refuses images nn's models cannot take: a normalisation
// that cannot be applied (a hand-built set's std of 0). Images of any
// channel count are taken: the batch holds them planar (C×H×W, see
// data.Images.Dataset), and nn.Spec carries the channels to the model.
func CheckImages(im *data.Images) error {
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

// ImageSpec is the nn.Spec of a data set of im's shape in classes
// classes (Channels set only for more than one).
func ImageSpec(im *data.Images, classes int) nn.Spec {
	spec := nn.Spec{Rows: im.Rows, Cols: im.Cols, Classes: classes}
	if im.C() > 1 {
		spec.Channels = im.C()
	}
	return spec
}

// Normalizes says whether model normalises its inputs itself, its first
// layer a Rescaling or a Normalization: data.InputNorm's question, asked
// by training and by eval alike.
func Normalizes(model nn.Model) bool {
	a, ok := model.(interface{ Architecture() nn.Architecture })
	if !ok {
		return false
	}
	l := a.Architecture().Layers
	return len(l) > 0 && (nn.Kind(l[0]) == "rescaling" || nn.Kind(l[0]) == "normalization")
}

// InputNorm applies data.InputNorm, the one normalisation rule, to train
// and test for newModel's model (nil: a built-in model, which does not
// normalise), building it once for the data: a cheap check that it takes
// them, and the only way to see a Job.NewModel's first layer.
func InputNorm(newModel func(nn.Spec, int64, int) (nn.Model, error), train, test *data.Images, classes int, seed int64) (*data.Images, *data.Images, error) {
	normalizes := false
	if newModel != nil {
		m, err := newModel(ImageSpec(test, classes), seed, 1)
		if err != nil { // the model does not take the data (Keras's input shape, classes): the user's to fix
			return nil, nil, data.BadData(err)
		}
		normalizes = Normalizes(m)
	}
	if norm := data.InputNorm(test, normalizes); norm != test.Norm.Resolve() {
		tr, te := *train, *test
		tr.Norm, te.Norm = norm, norm
		return &tr, &te, nil
	}
	return train, test, nil
}
