package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSpreadNarrowGrid: the fused pooling's backward kernel writes each
// pooled row's windows in groups of 8 (16 grid columns); a grid row
// narrower than the groups (the Keras CNN's conv2: 24 columns used of 26,
// two groups of 16) must not have the last group's empty lanes spill over
// the next grid row, which the first group already wrote. Before the
// masked stores, an AVX2 CPU without AVX-512 trained that layer on a
// wrong input gradient.
func TestSpreadNarrowGrid(t *testing.T) {
	if !useAsm {
		t.Skip("no assembly kernels on this CPU")
	}
	const n = 3
	rng := rand.New(rand.NewPCG(7, 5))
	c := newConv2D(32, 26, 26, 64, 3, 0)
	c.setTrain(true)
	l := newConvPoolReLU(c)
	params := randSlice(rng, l.NumParams())
	l.Bind(params, make([]float32, len(params)))
	x := randSlice(rng, n*l.InSize())
	dy := randSlice(rng, n*l.OutSize())
	y := make([]float32, n*l.OutSize())
	l.Forward(y, x, n)
	yA := append([]float32(nil), y...)
	hA := append([]int32(nil), l.hot...)
	withGo(func() { l.Forward(y, x, n) })
	for i := range y {
		if y[i] != yA[i] && math.Abs(float64(y[i]-yA[i])) > 1e-4 {
			t.Fatalf("y %d: %v %v", i, y[i], yA[i])
		}
	}
	for i := range hA {
		if hA[i] != l.hot[i] {
			t.Fatalf("window code %d: asm %d, Go %d", i, hA[i], l.hot[i])
		}
	}
	out := l.OutSize()
	l.backwardStart(x, n, true)
	l.spread(dy[:out], l.hot[:out], false)
	a := append([]float32(nil), l.dyg...)
	clear(l.dyg)
	withGo(func() { l.spread(dy[:out], l.hot[:out], false) })
	for i := range a {
		if a[i] != l.dyg[i] {
			t.Fatalf("dyg %d (c %d, pos %d, row %d col %d): asm %v go %v", i, i/l.np, i%l.np, (i%l.np)/l.gw, (i%l.np)%l.gw, a[i], l.dyg[i])
		}
	}
}
