package nn

import (
	"errors"
	"fmt"
	"strings"
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
	}
	return fmt.Sprintf("Padding(%d)", int(p))
}

// A LayerSpec describes one layer of a Sequential: Conv2D,
// MaxPooling2D, AveragePooling2D, Flatten, Reshape, Dense, Dropout or
// Activation. It names no input size: a Sequential infers each layer's
// input shape from the layer before it.
type LayerSpec interface {
	// kind is the layer's name in errors and summaries, Keras's in snake
	// case ("conv2d", "max_pooling2d" …).
	kind() string
	// build returns the layer computing the spec on inputs of shape in,
	// and its output shape, or an error saying why it cannot.
	build(in Shape) (layer, Shape, error)
}

// named is a spec with parameters and an optional name for them.
type named interface{ name() string }

// Conv2D is a 2-D convolution: Filters output channels, each a Kernel×Kernel
// window over all input channels plus a bias, moved Strides cells at a
// time (0 means 1), with Valid or Same padding. Its tensors are weight
// [Filters InC Kernel Kernel] and bias [Filters], as PyTorch's Conv2d.
type Conv2D struct {
	Filters, Kernel, Strides int
	Padding                  Padding
	Init                     Init   // of the weights (He, the zero value, Glorot or Torch)
	Name                     string // the tensors' prefix; "" for the layer's index
	// KernelInit and BiasInit, if set, draw the weights and the biases
	// instead of Init's rule (Keras's kernel_initializer and
	// bias_initializer; see Initializer).
	KernelInit, BiasInit *Initializer
}

// MaxPooling2D takes the maximum of each Size×Size window, moved Strides
// cells at a time (0 means Size: windows side by side), with Valid or Same
// padding (padding cells are never a window's maximum).
type MaxPooling2D struct {
	Size, Strides int
	Padding       Padding
}

// AveragePooling2D averages each Size×Size window, as MaxPooling2D places
// them; with Same padding a window averages only its cells inside the
// input.
type AveragePooling2D struct {
	Size, Strides int
	Padding       Padding
}

// Flatten turns an image into a vector of its H·W·C floats, in the planar
// order described at Shape. It copies nothing.
type Flatten struct{}

// Reshape gives the input the shape To, of the same size; at most one of
// To's fields may be −1, standing for whatever makes the sizes agree. The
// floats keep their order (see Shape). It copies nothing.
type Reshape struct{ To Shape }

// Dense is a fully connected layer of Units outputs over a vector input
// (Flatten an image first): y = x·Wᵀ + b, with tensors weight [Units In]
// and bias [Units], as PyTorch's Linear.
type Dense struct {
	Units int
	Init  Init   // of the weights (He, the zero value, Glorot or Torch)
	Name  string // the tensors' prefix; "" for the layer's index
	// KernelInit and BiasInit are as Conv2D's.
	KernelInit, BiasInit *Initializer
}

// Dropout zeroes each input of a training pass with probability Rate (in
// [0, 1)) and scales the others by 1/(1−Rate); evaluation passes it
// through. Its masks depend only on the model's seed, the layer and where
// the pass is in a run (see Sequential.SetStep).
type Dropout struct{ Rate float64 }

// Activation applies Fn: "relu", "tanh", "sigmoid" or "linear" element by
// element, or "softmax" over a vector. As a Sequential's last layer,
// softmax and sigmoid choose its loss (see NewSequential).
type Activation struct{ Fn string }

func (Conv2D) kind() string           { return "conv2d" }
func (MaxPooling2D) kind() string     { return "max_pooling2d" }
func (AveragePooling2D) kind() string { return "average_pooling2d" }
func (Flatten) kind() string          { return "flatten" }
func (Reshape) kind() string          { return "reshape" }
func (Dense) kind() string            { return "dense" }
func (Dropout) kind() string          { return "dropout" }
func (a Activation) kind() string     { return "activation " + a.Fn }

func (c Conv2D) name() string { return c.Name }
func (d Dense) name() string  { return d.Name }

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

func (c Conv2D) build(in Shape) (layer, Shape, error) {
	if in.vector() {
		return nil, Shape{}, errVector
	}
	if c.Filters < 1 || c.Kernel < 1 || c.Strides < 0 {
		return nil, Shape{}, fmt.Errorf("%d filters of %d×%d with stride %d: want at least 1 filter of 1×1 and a stride ≥ 0 (0 for 1)", c.Filters, c.Kernel, c.Kernel, c.Strides)
	}
	s := max(c.Strides, 1)
	oh, pt, pb, err := window(in.H, c.Kernel, s, c.Padding)
	if err != nil {
		return nil, Shape{}, fmt.Errorf("kernel %d×%d over %v: %w", c.Kernel, c.Kernel, in, err)
	}
	ow, pl, pr, err := window(in.W, c.Kernel, s, c.Padding)
	if err != nil {
		return nil, Shape{}, fmt.Errorf("kernel %d×%d over %v: %w", c.Kernel, c.Kernel, in, err)
	}
	if err := checkInits(c.KernelInit, c.BiasInit); err != nil {
		return nil, Shape{}, err
	}
	l := newConv(in.C, in.H, in.W, c.Filters, c.Kernel, s, [4]int{pt, pb, pl, pr})
	l.WeightInit, l.KernelInit, l.BiasInit = c.Init, c.KernelInit, c.BiasInit
	if l.OutH != oh || l.OutW != ow {
		panic("nn: conv2D's output size disagrees with its spec's")
	}
	return l, Shape{H: oh, W: ow, C: c.Filters}, nil
}

// pool builds a pooling layer for MaxPooling2D and AveragePooling2D.
func pool(in Shape, size, strides int, p Padding, avg bool) (layer, Shape, error) {
	if in.vector() {
		return nil, Shape{}, errVector
	}
	if size < 1 || strides < 0 {
		return nil, Shape{}, fmt.Errorf("pool size %d, stride %d: want a size ≥ 1 and a stride ≥ 0 (0 for the size)", size, strides)
	}
	s := strides
	if s == 0 {
		s = size
	}
	oh, pt, _, err := window(in.H, size, s, p)
	if err != nil {
		return nil, Shape{}, fmt.Errorf("pool %d×%d over %v: %w", size, size, in, err)
	}
	ow, pl, _, err := window(in.W, size, s, p)
	if err != nil {
		return nil, Shape{}, fmt.Errorf("pool %d×%d over %v: %w", size, size, in, err)
	}
	return newPool(in.C, in.H, in.W, size, s, pt, pl, oh, ow, avg), Shape{H: oh, W: ow, C: in.C}, nil
}

func (m MaxPooling2D) build(in Shape) (layer, Shape, error) {
	return pool(in, m.Size, m.Strides, m.Padding, false)
}

func (a AveragePooling2D) build(in Shape) (layer, Shape, error) {
	return pool(in, a.Size, a.Strides, a.Padding, true)
}

func (Flatten) build(in Shape) (layer, Shape, error) {
	return &reshape{Size: in.Size()}, Shape{C: in.Size()}, nil
}

func (r Reshape) build(in Shape) (layer, Shape, error) {
	to := r.To
	dims := []*int{&to.H, &to.W, &to.C}
	if to.vector() {
		dims = dims[2:]
	}
	known, free := 1, 0
	for _, d := range dims {
		switch {
		case *d == -1:
			free++
		case *d >= 1:
			known *= *d
		default:
			return nil, Shape{}, fmt.Errorf("target %v: want sizes ≥ 1 (one may be −1)", r.To)
		}
	}
	if free > 1 {
		return nil, Shape{}, fmt.Errorf("target %v: at most one size may be −1", r.To)
	}
	if free == 1 {
		if in.Size()%known != 0 {
			return nil, Shape{}, fmt.Errorf("%v (%d floats) does not divide into %v", in, in.Size(), r.To)
		}
		for _, d := range dims {
			if *d == -1 {
				*d = in.Size() / known
			}
		}
	}
	if to.Size() != in.Size() {
		return nil, Shape{}, fmt.Errorf("%v (%d floats) cannot become %v (%d)", in, in.Size(), to, to.Size())
	}
	return &reshape{Size: in.Size()}, to, nil
}

func (d Dense) build(in Shape) (layer, Shape, error) {
	if !in.vector() {
		return nil, Shape{}, fmt.Errorf("the input is an image, %v: put a Flatten before it", in)
	}
	if d.Units < 1 {
		return nil, Shape{}, fmt.Errorf("%d units: want at least 1", d.Units)
	}
	if err := checkInits(d.KernelInit, d.BiasInit); err != nil {
		return nil, Shape{}, err
	}
	l := newDense(in.C, d.Units)
	l.WeightInit, l.KernelInit, l.BiasInit = d.Init, d.KernelInit, d.BiasInit
	return l, Shape{C: d.Units}, nil
}

func (d Dropout) build(in Shape) (layer, Shape, error) {
	if !(d.Rate >= 0 && d.Rate < 1) {
		return nil, Shape{}, fmt.Errorf("rate %v: want one in [0, 1)", d.Rate)
	}
	return newDropout(in.Size(), d.Rate), in, nil
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

// activations are the functions Activation takes.
var activations = []string{"relu", "tanh", "sigmoid", "softmax", "linear"}

func (a Activation) build(in Shape) (layer, Shape, error) {
	switch a.Fn {
	case "relu", "tanh", "sigmoid":
	case "softmax":
		if !in.vector() {
			return nil, Shape{}, fmt.Errorf("softmax takes a vector, the input is %v: Flatten it first", in)
		}
	case "linear":
		return &reshape{Size: in.Size()}, in, nil
	default:
		return nil, Shape{}, fmt.Errorf("unknown function %q: want one of %s", a.Fn, strings.Join(activations, ", "))
	}
	return &activation{Size: in.Size(), Fn: a.Fn}, in, nil
}
