// Package synth makes a learnable stand-in for MNIST for the tests of
// mirrored and its subpackages, so they run without the download.
//
// MNIST's images are 28×28: dim noise (0..59) everywhere, and for class c
// a bright band (150..249) over pixels c*70 .. c*70+69. Set makes the same
// kind of images of any size and class count. The images depend only on
// the random source given.
package synth

import (
	"math/rand/v2"

	"github.com/meshtrain/meshtrain/data"
)

// MNIST returns ntrain training and ntest test images drawn from rng.
func MNIST(ntrain, ntest int, rng *rand.Rand) *data.MNIST {
	return set(ntrain, ntest, 28, 28, 10, 70, rng)
}

// Set returns ntrain training and ntest test images of rows×cols pixels
// in classes classes, class c lighting up the c-th of classes equal bands.
func Set(ntrain, ntest, rows, cols, classes int, rng *rand.Rand) *data.MNIST {
	return set(ntrain, ntest, rows, cols, classes, rows*cols/classes, rng)
}

func set(ntrain, ntest, rows, cols, classes, band int, rng *rand.Rand) *data.MNIST {
	dim := rows * cols
	gen := func(n int) *data.Images {
		im := &data.Images{N: n, Rows: rows, Cols: cols, Pixels: make([]uint8, n*dim), Labels: make([]uint8, n)}
		for i := range n {
			c := rng.IntN(classes)
			im.Labels[i] = uint8(c)
			px := im.Pixels[i*dim : (i+1)*dim]
			for j := range px {
				px[j] = uint8(rng.IntN(60))
			}
			for j := c * band; j < c*band+band; j++ {
				px[j] = uint8(150 + rng.IntN(100))
			}
		}
		return im
	}
	return &data.MNIST{Train: gen(ntrain), Test: gen(ntest), Classes: classes}
}
