package nn

import "fmt"

// Model is a classifier whose parameters all live in one flat float32
// buffer and whose gradients live in another with the same layout, so that
// an optimizer updates it with one call and a collective moves it in one
// message.
type Model interface {
	Name() string
	InputDim() int
	Classes() int
	// Params is the flat parameter buffer (a view; optimizers update it in place).
	Params() []float32
	// Grads is the flat gradient buffer, laid out like Params.
	Grads() []float32
	// ForwardBackward computes the mean loss over the batch and writes the
	// mean gradient into Grads(). x holds n×InputDim() floats and labels n
	// class ids in [0, Classes()). It is the training pass (dropout on,
	// batch statistics; a Stateful model's buffers updated at its end).
	ForwardBackward(x []float32, labels []int32, n int) (loss float64, err error)
	// Evaluate returns the summed loss and the number correct over n
	// examples, without touching Grads(). Like ForwardBackward, it fails on
	// a short batch or a label outside [0, Classes()). It is the inference
	// pass (dropout off, moving statistics), and changes no state.
	Evaluate(x []float32, labels []int32, n int) (lossSum float64, correct int, err error)
	// Tensors names the parameter tensors in Params, in order, with
	// PyTorch's conventional names and shapes (conv1.weight [6 1 5 5] …
	// fc3.bias for LeNet-5; weight and bias for softmax regression), so a
	// checkpoint can store one tensor per layer that load_state_dict takes.
	Tensors() []ParamTensor
}

// ParamTensor is one named tensor of a model's flat parameter vector: the
// Size() floats from Offset, row-major in Shape.
type ParamTensor struct {
	Name   string
	Shape  []int
	Offset int
}

// Size is the number of floats in the tensor.
func (p ParamTensor) Size() int {
	n := 1
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// Spec is the data a model is built for: Rows×Cols images of Channels
// channels (0 means 1, greyscale) in Classes classes. A table's rows or
// a token sequence of L values is 1×L.
type Spec struct {
	Rows, Cols, Classes int
	Channels            int
}

// C is the channel count: Channels, or 1 when that is 0.
func (s Spec) C() int { return max(1, s.Channels) }

// InputDim is the number of inputs of one example, Rows·Cols·C.
func (s Spec) InputDim() int { return s.Rows * s.Cols * s.C() }

// MNISTSpec is MNIST's: 28×28 images, 10 classes. NewModel and
// NewModelShards build models for it.
var MNISTSpec = Spec{Rows: 28, Cols: 28, Classes: 10}

// Model names accepted by NewModel.
const (
	LeNet5  = "lenet"
	Softmax = "softmax"
)

// ModelNames lists the names NewModel accepts.
var ModelNames = []string{LeNet5, Softmax}

// DefaultShards is how many parts a batch is split into. Each part runs on
// its own goroutine when GOMAXPROCS > 1 and in turn otherwise; the partial
// gradients are summed in part order, so a seed gives the same bits
// whatever GOMAXPROCS is.
const DefaultShards = 2

// NewModel returns a freshly initialised model ("lenet" or "softmax"); the
// same seed gives the same parameters, bit for bit.
func NewModel(name string, seed int64) (Model, error) {
	return NewModelShards(name, seed, DefaultShards)
}

// NewModelShards is NewModel with the number of batch parts set (≥ 1); see
// DefaultShards. Different part counts sum in different orders, so they
// agree only to rounding.
func NewModelShards(name string, seed int64, shards int) (Model, error) {
	return NewModelFor(name, MNISTSpec, seed, shards)
}

// NewModelFor is NewModelShards for a data set of another shape: LeNet-5
// takes 28×28 images only, softmax regression any size; both take any
// number of classes from 2 to 256 (a uint8 label).
func NewModelFor(name string, spec Spec, seed int64, shards int) (Model, error) {
	if shards < 1 {
		return nil, fmt.Errorf("nn: %d batch shards: want at least 1", shards)
	}
	if spec.Rows < 1 || spec.Cols < 1 || spec.Classes < 2 || spec.Classes > 256 {
		return nil, fmt.Errorf("nn: %s for %d×%d images in %d classes: want images of at least 1×1 and 2 to 256 classes", name, spec.Rows, spec.Cols, spec.Classes)
	}
	switch name {
	case LeNet5:
		if spec.Rows != 28 || spec.Cols != 28 || spec.C() != 1 {
			return nil, fmt.Errorf("nn: lenet takes 28×28 greyscale images, these are %d×%d×%d: resize them, or use the softmax model, which takes any size, or a Keras model file", spec.Rows, spec.Cols, spec.C())
		}
		return newSequential(name, Shape{H: 28, W: 28, C: 1}, seed, shards, seqOptions{}, lenetLayers(spec.Classes))
	case Softmax:
		return newSequential(name, Shape{H: spec.Rows, W: spec.Cols, C: spec.C()}, seed, shards, seqOptions{bare: true}, softmaxLayers(spec.Classes))
	}
	return nil, fmt.Errorf("nn: unknown model %q: want one of %v", name, ModelNames)
}

// lenetLayers is LeNet-5 for 28×28 inputs: conv 5×5×6 pad 2 → max-pool 2
// → ReLU → conv 5×5×16 → max-pool 2 → ReLU → dense 120 → ReLU → dense 84
// → ReLU → dense classes; 61,706 parameters for 10 classes, named as
// PyTorch's LeNet module names them (conv1 … fc3). ReLU and max-pooling
// commute (both are monotone, and the gradient reaches the same input in
// either order), so the ReLUs run after the pools, on a quarter of the
// values; each conv → pool → ReLU stage runs as one fused layer.
func lenetLayers(classes int) []LayerSpec {
	return []LayerSpec{
		Conv2D{Filters: 6, Kernel: 5, Padding: Same, Init: lenetInit, Name: "conv1"},
		MaxPooling2D{Size: 2},
		Activation{"relu"},
		Conv2D{Filters: 16, Kernel: 5, Init: lenetInit, Name: "conv2"},
		MaxPooling2D{Size: 2},
		Activation{"relu"},
		Flatten{},
		Dense{Units: 120, Init: lenetInit, Name: "fc1"},
		Activation{"relu"},
		Dense{Units: 84, Init: lenetInit, Name: "fc2"},
		Activation{"relu"},
		Dense{Units: classes, Init: lenetInit, Name: "fc3"},
	}
}

// lenetInit is LeNet's initialisation: the He variant PyTorch uses by
// default, which the anchors' recipe was tuned with. After one epoch of
// the anchors' recipe it scored above plain He uniform and Glorot
// (BENCHMARKS.md, "Figures behind the code": LeNet's initialisation).
const lenetInit = Torch

// softmaxLayers is multinomial logistic regression over the flattened
// image; 7,850 parameters for MNIST. Its tensors are weight and bias, as
// a bare PyTorch Linear's.
func softmaxLayers(classes int) []LayerSpec {
	return []LayerSpec{Flatten{}, Dense{Units: classes, Init: Glorot}}
}

// GradNotifier is a Model whose ForwardBackward says, as its backward pass
// goes, which part of Grads() is already final, so that a data-parallel
// trainer can start exchanging it while the rest is computed (as DDP's
// gradient buckets do). NotifyGrads(ready) makes every later training pass
// call ready(lo) when Grads()[lo:] holds the batch's final gradient and
// will not be written again in that pass; the calls come from
// ForwardBackward's goroutine, lo decreasing, at GradPoints's offsets
// (whatever is not announced is final when ForwardBackward returns).
// NotifyGrads(nil) stops them. GradPoints lets every replica cut its
// exchange alike even in a step it has no batch for (so no pass).
// Sequential implements it; the gradient's bits are the same either way.
type GradNotifier interface {
	NotifyGrads(ready func(lo int))
	// GradPoints are the lo of a training pass's calls, in order.
	GradPoints() []int
}
