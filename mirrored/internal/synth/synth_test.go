package synth

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestMNISTBandsAndDeterminism(t *testing.T) {
	a := MNIST(50, 20, rand.New(rand.NewPCG(1, 2)))
	b := MNIST(50, 20, rand.New(rand.NewPCG(1, 2)))
	if !bytes.Equal(a.Train.Pixels, b.Train.Pixels) || !bytes.Equal(a.Test.Labels, b.Test.Labels) {
		t.Fatal("the same seed gave different images")
	}
	for _, im := range []struct {
		name string
		n    int
		px   []uint8
		lab  []uint8
	}{{"train", a.Train.N, a.Train.Pixels, a.Train.Labels}, {"test", a.Test.N, a.Test.Pixels, a.Test.Labels}} {
		if len(im.px) != im.n*784 || len(im.lab) != im.n {
			t.Fatalf("%s: %d pixels and %d labels for %d images", im.name, len(im.px), len(im.lab), im.n)
		}
		for i := range im.n {
			c := int(im.lab[i])
			if c > 9 {
				t.Fatalf("%s image %d: label %d", im.name, i, c)
			}
			for j, v := range im.px[i*784 : (i+1)*784] {
				if inBand := j >= c*70 && j < c*70+70; inBand != (v >= 150) {
					t.Fatalf("%s image %d (class %d): pixel %d is %d", im.name, i, c, j, v)
				}
			}
		}
	}
}
