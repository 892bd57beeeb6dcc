package keras

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/meshtrain/meshtrain/nn"
)

// readMerge reads a merge layer without options of its own (Add,
// Subtract, Multiply, Average, Maximum, Minimum): a Functional model's
// join of several tensors, which nn checks for count and shape.
func readMerge(spec nn.LayerSpec) func(*options) ([]nn.LayerSpec, error) {
	return func(*options) ([]nn.LayerSpec, error) { return []nn.LayerSpec{spec}, nil }
}

// readConcatenate reads Concatenate's axis, numbered as Keras numbers a
// channels-last batch (nn.Concatenate's Axis); the batch's axis, 0, is
// refused. The axis of tensors without a channel axis is rewritten by
// rowsAxes first.
func readConcatenate(o *options) ([]nn.LayerSpec, error) {
	v, _ := o.take("axis")
	a := -1
	if v != nil {
		var err error
		if a, err = intOf(v); err != nil {
			return nil, fmt.Errorf("axis: %w", err)
		}
	}
	switch {
	case a == 0:
		return nil, errors.New("axis 0 is the batch's: meshtrain joins the examples' own axes (-1 channels, 1 rows, 2 columns)")
	case a < -3 || a > 3:
		return nil, fmt.Errorf("axis %d: meshtrain joins vectors (-1) and H×W×C images (-1 or 3 channels, 1 rows, 2 columns)", a)
	}
	return []nn.LayerSpec{nn.Concatenate{Axis: a}}, nil
}

// keepsShape are the classes whose output has their input's shape: a
// tensor without a channel axis stays one through them.
var keepsShape = map[string]bool{
	"Activation": true, "Dropout": true, "ReLU": true, "Softmax": true, "BatchNormalization": true,
	"LeakyReLU": true, "ELU": true, "PReLU": true, "LayerNormalization": true, "Rescaling": true, "Normalization": true,
	"Add": true, "Subtract": true, "Multiply": true, "Average": true, "Maximum": true, "Minimum": true, "Concatenate": true,
}

// rowsAxes rewrites the axis of each Concatenate of tensors that Keras
// holds as rows × columns, without a channel axis (from an Input of
// shape (H, W) or a Reshape to (H, W)): nn holds them as H×W×1 images,
// so Keras's axis −1 or 2 (the columns) is nn's 2, and 1 or −2 (the
// rows) nn's 1. A merge of such tensors and others is refused: Keras
// broadcasts them by rank, nn by its channels-last shapes. from are each
// layer's inputs, as functional reads them.
func rowsAxes(es []entry, from [][]int) error {
	flat := make([]bool, len(es)) // the layer's output has no channel axis
	for i, e := range es {
		switch {
		case e.class == "InputLayer":
			flat[i] = inputRank(e.cfg) == 2
		case e.class == "Reshape":
			l, err := listOf(e.cfg["target_shape"])
			flat[i] = err == nil && len(l) == 2
		case keepsShape[e.class]:
			for _, j := range from[i] {
				flat[i] = flat[i] || flat[j]
			}
		}
		if mixed := slices.ContainsFunc(from[i], func(j int) bool { return flat[j] }) &&
			slices.ContainsFunc(from[i], func(j int) bool { return !flat[j] }); mixed && keepsShape[e.class] && len(from[i]) > 1 {
			// Keras broadcasts by rank, (N, W) against (N, H, W), which
			// nn's H×W×1 would not do alike.
			return &LayerError{Index: e.index, Class: e.class, Name: e.name, Err: errors.New(
				"a merge of tensors of rows × columns without a channel axis and of others is not supported: Reshape them to (H, W, 1) first")}
		}
		if e.class != "Concatenate" || !flat[i] {
			continue
		}
		a := -1
		if v := e.cfg["axis"]; v != nil {
			a, _ = intOf(v) // readConcatenate says what is wrong with it
		}
		switch a {
		case -1, 2:
			a = 2
		case 1, -2:
			a = 1
		default:
			return &LayerError{Index: e.index, Class: e.class, Name: e.name, Err: fmt.Errorf(
				"axis %s of tensors of rows × columns (no channel axis): want -1 or 2 (columns), 1 or -2 (rows)", show(e.cfg["axis"]))}
		}
		cfg := maps.Clone(e.cfg)
		cfg["axis"] = json.Number(strconv.Itoa(a))
		es[i].cfg = cfg
	}
	return nil
}

// inputRank is the number of an InputLayer's dimensions besides the
// batch's, 0 if it has no shape (inputLayer says why).
func inputRank(cfg map[string]any) int {
	for _, key := range []string{"batch_shape", "batch_input_shape"} {
		if l, err := listOf(cfg[key]); err == nil && len(l) > 0 {
			return len(l) - 1
		}
	}
	if l, err := listOf(cfg["input_shape"]); err == nil {
		return len(l)
	}
	return 0
}
