package nn

import (
	"math"
	"math/rand/v2"
)

// layer is one stage of a feed-forward network, applied to a batch of n
// examples stored back to back (InSize or OutSize floats each, row-major
// C×H×W for images). Layers own no activations: the caller passes every
// input and output buffer. A layer with parameters holds views into the
// model's flat parameter and gradient buffers, set by Bind. The layer
// specs (Conv2D, Dense …) build them for a Sequential.
type layer interface {
	InSize() int    // floats per example in
	OutSize() int   // floats per example out
	NumParams() int // parameters, weights first then biases
	// Bind points the layer's weights at params and their gradients at
	// grads, both of length NumParams().
	Bind(params, grads []float32)
	// Init fills the bound parameters from rng (see the Init kinds), so a
	// seed fixes the whole model.
	Init(rng *rand.Rand)
	// Forward writes y (n×OutSize) from x (n×InSize).
	Forward(y, x []float32, n int)
	// Backward adds the parameter gradients of Σ dy·y(x) over the batch to
	// the bound gradient buffer and, unless dx is nil, overwrites dx
	// (n×InSize) with the gradient with respect to x. x and y are the
	// buffers of the matching Forward call.
	Backward(dx, dy, x, y []float32, n int)
}

// Init selects a weight initialisation.
type Init int

const (
	// He draws U(±√(6/fan_in)), for weights followed by a ReLU.
	He Init = iota
	// Glorot draws U(±√(6/(fan_in+fan_out))), for the output layer.
	Glorot
	// Torch draws weights and biases from U(±1/√fan_in): He (Kaiming)
	// uniform with negative slope √5, PyTorch's default for Conv2d and
	// Linear, which the anchors' recipe was tuned with.
	Torch
)

// initLayer fills a layer's weights and biases.
func initLayer(rng *rand.Rand, w, b []float32, kind Init, fanIn, fanOut int) {
	var bound float64
	switch kind {
	case He:
		bound = math.Sqrt(6 / float64(fanIn))
	case Glorot:
		bound = math.Sqrt(6 / float64(fanIn+fanOut))
	case Torch:
		bound = 1 / math.Sqrt(float64(fanIn))
	}
	for i := range w {
		w[i] = float32((2*rng.Float64() - 1) * bound)
	}
	for i := range b {
		if kind == Torch {
			b[i] = float32((2*rng.Float64() - 1) * bound)
		} else {
			b[i] = 0
		}
	}
}

// grow returns buf if it holds n floats, else a new slice of n floats.
// Scratch that depends on the batch size grows once, during warm-up.
func grow(buf []float32, n int) []float32 {
	if cap(buf) >= n {
		return buf[:n]
	}
	return make([]float32, n)
}

// chunker is a layer whose passes may each cover a chunk of the batch:
// before each Forward and Backward over examples first … first+n−1 of a
// batch of batch, the model calls chunk(first, batch), and the layer keeps
// what Backward needs for the whole batch. A model runs the layers it
// can chunk one chunk at a time, so that a chunk's activations are still in
// cache when the next layer reads them. Without calls, each pass is a
// whole batch.
type chunker interface{ chunk(first, batch int) }
