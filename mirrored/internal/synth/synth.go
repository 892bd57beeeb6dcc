// Package synth makes a learnable stand-in for MNIST for the tests of
// mirrored and its subpackages, so they run without the download.
//
// Every image is 28×28: dim noise (0..59) everywhere, and for class c a
// bright band (150..249) over pixels c*70 .. c*70+69. The images depend
// only on the random source given.
package synth

import (
	"math/rand/v2"

	"github.com/meshtrain/meshtrain/data"
)

// MNIST returns ntrain training and ntest test images drawn from rng.
func MNIST(ntrain, ntest int, rng *rand.Rand) *data.MNIST {
	gen := func(n int) *data.Images {
		im := &data.Images{N: n, Rows: 28, Cols: 28, Pixels: make([]uint8, n*784), Labels: make([]uint8, n)}
		for i := range n {
			c := rng.IntN(10)
			im.Labels[i] = uint8(c)
			px := im.Pixels[i*784 : (i+1)*784]
			for j := range px {
				px[j] = uint8(rng.IntN(60))
			}
			for j := c * 70; j < c*70+70; j++ {
				px[j] = uint8(150 + rng.IntN(100))
			}
		}
		return im
	}
	return &data.MNIST{Train: gen(ntrain), Test: gen(ntest)}
}
