package mirrored

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/nn/keras"
)

// synthColour is a colour image set of n 32×32×3 images per split whose
// class (of 10) sets each channel's mean, with noise: learnable, and
// shaped as CIFAR-10 is.
func synthColour(ntrain, ntest int, seed uint64) *data.ImageSet {
	rng := rand.New(rand.NewPCG(seed, 11))
	mk := func(n int) *data.Images {
		im := &data.Images{N: n, Rows: 32, Cols: 32, Channels: 3, Pixels: make([]uint8, n*32*32*3), Labels: make([]uint8, n), Norm: data.UnitNorm}
		for i := range n {
			c := i % 10
			im.Labels[i] = uint8(c)
			for p := range 32 * 32 * 3 {
				mean := 60 + 40*((c>>(p%3))&1) + 10*(c%4)
				im.Pixels[i*32*32*3+p] = uint8(min(255, mean+rng.IntN(60)))
			}
		}
		return im
	}
	return &data.ImageSet{Train: mk(ntrain), Test: mk(ntest), Classes: 10, Format: "synthetic"}
}

// synthTokens is a set of n sequences of l token ids below 1000 whose
// class (of 4) is which quarter of the vocabulary most of its tokens come
// from, as a text classifier's data set gives them: N×L ids used as
// stored.
func synthTokens(ntrain, ntest, l int, seed uint64) *data.ImageSet {
	rng := rand.New(rand.NewPCG(seed, 13))
	mk := func(n int) *data.Images {
		im := &data.Images{N: n, Rows: 1, Cols: l, Channels: 1, Floats: make([]float32, n*l), Labels: make([]uint8, n), Norm: data.NoNorm}
		for i := range n {
			c := i % 4
			im.Labels[i] = uint8(c)
			for p := range l {
				id := rng.IntN(1000)
				if rng.IntN(3) > 0 {
					id = 250*c + rng.IntN(250)
				}
				im.Floats[i*l+p] = float32(id)
			}
		}
		return im
	}
	return &data.ImageSet{Train: mk(ntrain), Test: mk(ntest), Classes: 4, Format: "synthetic"}
}

// TestKerasModelsOnTwoPeers: the models of issue 29's "done when" train
// from their files on 2 replicas, which end with the same parameters and
// batch-normalization statistics: ResNet-20 in tf.keras 2's and Keras 3's
// forms (one architecture: the same bits) on 32×32×3 colour images, and
// the text classifiers (Keras 3's and TensorFlow.js's files) on token
// ids.
func TestKerasModelsOnTwoPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("ResNet-20 on two replicas: seconds of CPU")
	}
	ends := map[string]string{}
	for _, tc := range []struct {
		file  string
		set   *data.ImageSet
		batch int
	}{
		{"resnet20_tfkeras2.json", synthColour(64, 32, 1), 8},
		{"resnet20_keras3.json", synthColour(64, 32, 1), 8},
		{"text_classifier_keras3.json", synthTokens(256, 64, 64, 2), 16},
		{"text_classifier_tfjs_model.json", synthTokens(256, 64, 40, 2), 16},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m, err := keras.ReadFile(filepath.Join("..", "nn", "keras", "testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			job := testJob(t, "", tc.set, tc.batch, 1)
			job.NewModel, job.HashEvery = m.NewModel, 2
			sums, errs := runGroup(t, same(2, job))
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			a, b := sums[0].Run, sums[1].Run
			if a.ParamsSHA256 == "" || a.ParamsSHA256 != b.ParamsSHA256 || a.BuffersSHA256 != b.BuffersSHA256 {
				t.Fatalf("rank 1 ends with params %s buffers %s, rank 0 with %s and %s", b.ParamsSHA256, b.BuffersSHA256, a.ParamsSHA256, a.BuffersSHA256)
			}
			if want := tc.set.Train.N / (2 * tc.batch); a.Steps != want {
				t.Errorf("%d steps, want %d", a.Steps, want)
			}
			t.Logf("%s: %d parameters, %d steps, accuracy %.3f, params %.12s, buffers %.12s", tc.file, a.Params, a.Steps, a.FinalAccuracy, a.ParamsSHA256, a.BuffersSHA256)
			ends[tc.file] = a.ParamsSHA256 + " " + a.BuffersSHA256
		})
	}
	if k2, k3 := ends["resnet20_tfkeras2.json"], ends["resnet20_keras3.json"]; k2 == "" || k2 != k3 {
		t.Errorf("ResNet-20 in tf.keras 2's and Keras 3's forms ends at %q and %q: one architecture, the same bits", k2, k3)
	}
	if e := ends["resnet20_keras3.json"]; len(e) < 2*64+1 {
		t.Errorf("ResNet-20's hashes %q: want its parameters' and its batch-normalization statistics'", e)
	}
}
