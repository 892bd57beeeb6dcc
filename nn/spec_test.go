package nn

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestModelTensors checks the named tensors against PyTorch's modules
// (LeNet-5's conv1 … fc3, softmax regression's weight and bias) and that
// they tile the flat parameter vector in order.
func TestModelTensors(t *testing.T) {
	lenet := []string{
		"conv1.weight [6 1 5 5]", "conv1.bias [6]", "conv2.weight [16 6 5 5]", "conv2.bias [16]",
		"fc1.weight [120 400]", "fc1.bias [120]", "fc2.weight [84 120]", "fc2.bias [84]",
		"fc3.weight [%d 84]", "fc3.bias [%d]",
	}
	for _, tc := range []struct {
		model string
		spec  Spec
		want  []string
	}{
		{LeNet5, MNISTSpec, lenet},
		{LeNet5, Spec{Rows: 28, Cols: 28, Classes: 26}, lenet},
		{Softmax, MNISTSpec, []string{"weight [%d 784]", "bias [%d]"}},
		{Softmax, Spec{Rows: 10, Cols: 12, Classes: 3}, []string{"weight [%d 120]", "bias [%d]"}},
	} {
		t.Run(fmt.Sprintf("%s %v", tc.model, tc.spec), func(t *testing.T) {
			m, err := NewModelFor(tc.model, tc.spec, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			off := 0
			for _, p := range m.Tensors() {
				got = append(got, fmt.Sprintf("%s %v", p.Name, p.Shape))
				if p.Offset != off {
					t.Errorf("%s at offset %d, want %d", p.Name, p.Offset, off)
				}
				off += p.Size()
			}
			if off != len(m.Params()) {
				t.Errorf("tensors cover %d floats, the parameters are %d", off, len(m.Params()))
			}
			var want []string
			for _, w := range tc.want {
				if strings.Contains(w, "%d") {
					w = fmt.Sprintf(w, tc.spec.Classes)
				}
				want = append(want, w)
			}
			if !slices.Equal(got, want) {
				t.Errorf("tensors\n got %v\nwant %v", got, want)
			}
			if m.Classes() != tc.spec.Classes || m.InputDim() != tc.spec.Rows*tc.spec.Cols {
				t.Errorf("%d classes, %d inputs", m.Classes(), m.InputDim())
			}
		})
	}
}

// TestMNISTSpecUnchanged: NewModelFor with MNISTSpec is NewModelShards,
// bit for bit (the golden runs depend on it).
func TestMNISTSpecUnchanged(t *testing.T) {
	for _, name := range ModelNames {
		a, _ := NewModelShards(name, 3, 1)
		b, _ := NewModelFor(name, MNISTSpec, 3, 1)
		if !reflect.DeepEqual(a.Params(), b.Params()) {
			t.Errorf("%s: parameters differ", name)
		}
	}
}

func TestNewModelForErrors(t *testing.T) {
	for _, tc := range []struct {
		model string
		spec  Spec
		want  string
	}{
		{LeNet5, Spec{Rows: 32, Cols: 32, Classes: 10}, "use the softmax model"},
		{Softmax, Spec{Rows: 28, Cols: 28, Classes: 1}, "2 to 256 classes"},
		{Softmax, Spec{Rows: 0, Cols: 28, Classes: 10}, "at least 1×1"},
		{"resnet", MNISTSpec, "unknown model"},
	} {
		if _, err := NewModelFor(tc.model, tc.spec, 1, 1); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: err = %v, want it to mention %q", tc.model, tc.spec, err, tc.want)
		}
	}
}

// TestOtherClassCountsTrain: LeNet-5 with 3 and 26 classes and softmax on
// 10×12 images fit a fixed batch (the loss falls by half in 30 steps).
func TestOtherClassCountsTrain(t *testing.T) {
	for _, tc := range []struct {
		model string
		spec  Spec
	}{{LeNet5, Spec{Rows: 28, Cols: 28, Classes: 3}}, {LeNet5, Spec{Rows: 28, Cols: 28, Classes: 26}}, {Softmax, Spec{Rows: 10, Cols: 12, Classes: 3}}} {
		m, err := NewModelFor(tc.model, tc.spec, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		x, labels := testBatch(4, 32, m.InputDim(), tc.spec.Classes)
		opt, _ := NewOptimizer(Adam, OptimizerConfig{Params: len(m.Params()), LR: 0.01})
		first, last := 0.0, 0.0
		for i := range 30 {
			loss, err := m.ForwardBackward(x, labels, 32)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = loss
			}
			last = loss
			opt.Step(m.Params(), m.Grads())
		}
		if !(last < first/2) {
			t.Errorf("%s %v: loss %.4f → %.4f, want it halved", tc.model, tc.spec, first, last)
		}
	}
}

// TestStateParts: the named parts cover each optimizer's state exactly.
func TestStateParts(t *testing.T) {
	for _, name := range OptimizerNames {
		o, err := NewOptimizer(name, OptimizerConfig{Params: 7, LR: 0.1, Momentum: 0.9})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range o.StateParts() {
			n += p.Len
			if p.PerParam && p.Len != 7 {
				t.Errorf("%s: per-parameter part %s of %d floats", name, p.Name, p.Len)
			}
		}
		if n != len(o.State()) {
			t.Errorf("%s: parts cover %d floats, the state is %d", name, n, len(o.State()))
		}
	}
}
