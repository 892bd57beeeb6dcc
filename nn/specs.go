package nn

import (
	"errors"
	"fmt"
)

// Shape is the shape of one example: an H×W×C image (written channels
// last, as Keras writes it), or a vector of C floats when H and W are 0.
//
// In memory an image is planar, C×H×W row-major (PyTorch's NCHW without
// the N): channel by channel, each channel row by row. For one channel
// (MNIST) that is the same bytes as H×W×C. Flatten and Reshape keep that
// order, so a Dense after a Flatten sees its input channel by channel, as
// PyTorch's nn.Flatten does (weights from Keras, which flattens H×W×C,
// would need their input rows permuted).
type Shape struct{ H, W, C int }

// Size is the number of floats in an example.
func (s Shape) Size() int {
	if s.vector() {
		return s.C
	}
	return s.H * s.W * s.C
}

func (s Shape) vector() bool { return s.H == 0 && s.W == 0 }

// String is "28×28×1" for an image and "120" for a vector.
func (s Shape) String() string {
	if s.vector() {
		return fmt.Sprint(s.C)
	}
	return fmt.Sprintf("%d×%d×%d", s.H, s.W, s.C)
}

// valid reports whether s is a shape of at least one float.
func (s Shape) valid() bool {
	if s.vector() {
		return s.C >= 1
	}
	return s.H >= 1 && s.W >= 1 && s.C >= 1
}

// Padding is how a convolution or pooling treats the input's edges.
type Padding int

const (
	// Valid uses only windows inside the input: the output has
	// (in − window)/stride + 1 rows and columns (rounded down).
	Valid Padding = iota
	// Same pads the input so that the output has ⌈in/stride⌉ rows and
	// columns, half the padding before and the rest (one more, when odd)
	// after, as Keras and TensorFlow do.
	Same
)

func (p Padding) String() string {
	switch p {
	case Valid:
		return "valid"
	case Same:
		return "same"
	case Causal:
		return "causal"
	}
	return fmt.Sprintf("Padding(%d)", int(p))
}

// named is a spec with parameters and an optional name for them.
type named interface{ name() string }

var errVector = errors.New("it takes an H×W×C image: Reshape the vector first")

// window returns the output size and the padding before and after of a
// window of size k moved s at a time over in cells.
func window(in, k, s int, p Padding) (out, before, after int, err error) {
	switch p {
	case Valid:
		if k > in {
			return 0, 0, 0, fmt.Errorf("a window of %d does not fit in %d cells with valid padding", k, in)
		}
		return (in-k)/s + 1, 0, 0, nil
	case Same:
		out = (in + s - 1) / s
		total := max((out-1)*s+k-in, 0)
		return out, total / 2, total - total/2, nil
	}
	return 0, 0, 0, fmt.Errorf("padding %v: want Valid or Same", p)
}

// checkInits checks a layer's initializers.
func checkInits(kernel, bias *Initializer) error {
	for _, i := range []struct {
		init *Initializer
		what string
	}{{kernel, "kernel"}, {bias, "bias"}} {
		if i.init == nil {
			continue
		}
		if err := i.init.Check(); err != nil {
			return fmt.Errorf("%s: %w", i.what, err)
		}
	}
	return nil
}

// kernel2D is a convolution's window: its rows and columns, its stride
// and its dilation (the gap between taps, 1 for adjacent) along the
// height and the width.
type kernel2D struct{ kh, kw, sh, sw, dh, dw int }

// reach is the rows and columns a dilated kernel spans, (k−1)·d+1.
func (k kernel2D) reach() (int, int) { return (k.kh-1)*k.dh + 1, (k.kw-1)*k.dw + 1 }

// square reports whether k is one number for both axes and undilated:
// the windows the fused and channels-last kernels take.
func (k kernel2D) square() bool { return k.kh == k.kw && k.sh == k.sw && k.dh == 1 && k.dw == 1 }

func (k kernel2D) String() string {
	s := fmt.Sprintf("%d×%d", k.kh, k.kw)
	if k.sh != 1 || k.sw != 1 {
		s += fmt.Sprintf(" stride %d×%d", k.sh, k.sw)
	}
	if k.dh != 1 || k.dw != 1 {
		s += fmt.Sprintf(" dilation %d×%d", k.dh, k.dw)
	}
	return s
}

// check refuses a size, stride or dilation below 1 or past maxExample.
func (k kernel2D) check() error {
	for _, v := range []int{k.kh, k.kw, k.sh, k.sw, k.dh, k.dw} {
		if v < 1 || v > maxExample {
			return fmt.Errorf("kernel %v: want sizes, strides and dilations of 1 … %d", k, maxExample)
		}
	}
	return nil
}

// place returns the output rows and columns of k over in and the padding
// above, below, left and right: with Same padding TensorFlow's, over the
// dilated kernel's reach (the odd cell after).
func (k kernel2D) place(in Shape, p Padding) (oh, ow int, pad [4]int, err error) {
	rh, rw := k.reach()
	if oh, pad[0], pad[1], err = window(in.H, rh, k.sh, p); err == nil {
		ow, pad[2], pad[3], err = window(in.W, rw, k.sw, p)
	}
	if err != nil {
		return 0, 0, pad, fmt.Errorf("kernel %v over %v: %w", k, in, err)
	}
	return oh, ow, pad, nil
}

// or is v, or def when v is 0: the spelling of an option whose zero
// value stands for another's.
func or(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
