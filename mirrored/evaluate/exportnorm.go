package evaluate

import (
	"encoding/json"
	"fmt"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/nn"
)

// WithInputNorm returns the model a checkpoint holds with the
// normalisation its inputs had in training as its first layer, so that an
// exported model takes what the user's data holds (pixels as stored, a
// table's numbers as read) and predicts what eval predicts: a Rescaling
// for an image set's (x/scale − mean)/std, a Normalization of each input
// for a table's standardised columns (a one-hot column's inputs pass
// unchanged: the strings' encoding stays the caller's). The layer has no
// parameters, so the model's parameters and buffers are copied as they
// are. A model trained on raw values (its first layer a Rescaling or
// Normalization already) is returned unchanged, as is one whose inputs
// were fed as stored; how says what was added ("" for nothing).
func WithInputNorm(path string, arch nn.Architecture, model nn.Model) (nn.Architecture, nn.Model, string, error) {
	ck, err := checkpoint.Read(path)
	if err != nil {
		return arch, model, "", err
	}
	var first nn.LayerSpec
	switch {
	case ck.Features != "":
		var f data.Features
		if err := json.Unmarshal([]byte(ck.Features), &f); err != nil {
			return arch, model, "", fmt.Errorf("checkpoint %s: its table's columns: %w", path, err)
		}
		var mean, variance []float64
		for _, c := range f.Columns {
			if len(c.Values) > 0 { // one-hot inputs as they are
				for range c.Values {
					mean, variance = append(mean, 0), append(variance, 1)
				}
				continue
			}
			mean, variance = append(mean, c.Mean), append(variance, c.Std*c.Std)
		}
		first = nn.Normalization{Mean: mean, Variance: variance}
	default:
		norm := data.MNISTNorm
		if ck.InputStd > 0 {
			norm = data.Normalization{Scale: ck.InputScale, Mean: ck.InputMean, Std: ck.InputStd}
		}
		if norm == data.NoNorm || norm == (data.Normalization{Scale: 1, Std: 1}) {
			return arch, model, "", nil
		}
		// (x/s − m)/d = x·1/(s·d) − m/d: Keras's Rescaling(scale, offset).
		first = nn.Rescaling{Scale: 1 / (norm.Scale * norm.Std), Offset: -norm.Mean / norm.Std}
	}
	if len(arch.Layers) > 0 {
		if k := nn.Kind(arch.Layers[0]); k == "rescaling" || k == "normalization" {
			return arch, model, "", nil
		}
	}
	out := nn.Architecture{Name: arch.Name, Input: arch.Input, Layers: append([]nn.LayerSpec{first}, arch.Layers...)}
	if arch.Inputs != nil {
		out.Inputs = [][]int{{-1}}
		for _, ins := range arch.Inputs {
			shifted := make([]int, len(ins))
			for k, j := range ins {
				shifted[k] = j + 1 // −1, the input, becomes node 0, the normalisation
			}
			out.Inputs = append(out.Inputs, shifted)
		}
	}
	m, err := out.Build(1, 1)
	if err != nil {
		return arch, model, "", fmt.Errorf("checkpoint %s: the model with its input normalisation: %w", path, err)
	}
	if len(m.Params()) != len(model.Params()) {
		return arch, model, "", fmt.Errorf("checkpoint %s: the model with its input normalisation has %d parameters, the model %d", path, len(m.Params()), len(model.Params()))
	}
	copy(m.Params(), model.Params())
	if s, ok := model.(nn.Stateful); ok {
		d, ok := m.(nn.Stateful)
		if !ok || len(d.Buffers()) != len(s.Buffers()) {
			return arch, model, "", fmt.Errorf("checkpoint %s: the model with its input normalisation lost its buffers", path)
		}
		copy(d.Buffers(), s.Buffers())
	}
	return out, m, nn.Kind(first), nil
}
