package keras

import (
	"fmt"
	"strings"

	"github.com/meshtrain/meshtrain/nn"
)

// initializerNames are the Keras initializers read, in the order errors
// list them.
var initializerNames = []string{"Zeros", "Ones", "Constant", "RandomNormal", "RandomUniform", "TruncatedNormal", "VarianceScaling",
	"GlorotUniform", "GlorotNormal", "HeUniform", "HeNormal", "LecunUniform", "LecunNormal"}

// varianceScaling are the initializers that are variance scaling with
// fixed settings (keras.initializers: GlorotUniform is
// VarianceScaling(scale=1.0, mode="fan_avg", distribution="uniform") …).
var varianceScaling = map[string]nn.Initializer{
	"glorotuniform": {Kind: nn.InitVarianceScaling, Scale: 1, Mode: "fan_avg", Distribution: "uniform"},
	"glorotnormal":  {Kind: nn.InitVarianceScaling, Scale: 1, Mode: "fan_avg", Distribution: "truncated_normal"},
	"heuniform":     {Kind: nn.InitVarianceScaling, Scale: 2, Mode: "fan_in", Distribution: "uniform"},
	"henormal":      {Kind: nn.InitVarianceScaling, Scale: 2, Mode: "fan_in", Distribution: "truncated_normal"},
	"lecununiform":  {Kind: nn.InitVarianceScaling, Scale: 1, Mode: "fan_in", Distribution: "uniform"},
	"lecunnormal":   {Kind: nn.InitVarianceScaling, Scale: 1, Mode: "fan_in", Distribution: "truncated_normal"},
}

// initializer reads a kernel_initializer or bias_initializer: Keras's
// serialised object ({"class_name": "HeNormal", "config": {"seed":
// null}}, with "module" and "registered_name" in Keras 3) or a name
// ("he_normal"); null is def. A seed is ignored: the run's --seed draws
// every initial value.
func initializer(v any, def string) (*nn.Initializer, error) {
	name := def
	cfg := map[string]any{}
	switch v := v.(type) {
	case nil:
	case string:
		name = v
	case map[string]any:
		c, ok := v["class_name"].(string)
		if !ok {
			return nil, fmt.Errorf("%s: want a Keras initializer (class_name and config)", show(v))
		}
		name = c
		if m, ok := v["config"].(map[string]any); ok {
			cfg = m
		} else if v["config"] != nil {
			return nil, fmt.Errorf("%s: config is a %s, not an object", c, kindOf(v["config"]))
		}
	default:
		return nil, fmt.Errorf("%s: want a Keras initializer", show(v))
	}
	o := &options{cfg: cfg, used: map[string]bool{}}
	o.take("seed")
	if v, _ := o.take("dtype"); dtype(v) != "" && dtype(v) != "float32" {
		return nil, fmt.Errorf("%s: dtype %s is not supported: meshtrain computes in float32", name, dtype(v))
	}
	num := func(key string, def float64) (float64, error) {
		v, _ := o.take(key)
		if v == nil {
			return def, nil
		}
		f, err := floatOf(v)
		if err != nil {
			return 0, fmt.Errorf("%s: %s: %w", name, key, err)
		}
		return f, nil
	}
	str := func(key, def string) (string, error) {
		v, _ := o.take(key)
		if v == nil {
			return def, nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s: %s %s: want a string", name, key, show(v))
		}
		return strings.ToLower(s), nil
	}
	var out nn.Initializer
	var err error
	key := strings.ReplaceAll(strings.ToLower(name), "_", "")
	switch key {
	case "zeros", "zero":
		out = nn.Initializer{Kind: nn.InitConstant}
	case "ones", "one":
		out = nn.Initializer{Kind: nn.InitConstant, Value: 1}
	case "constant":
		out.Kind = nn.InitConstant
		out.Value, err = num("value", 0)
	case "randomnormal", "normal":
		out.Kind = nn.InitRandomNormal
		if out.Mean, err = num("mean", 0); err == nil {
			out.Stddev, err = num("stddev", 0.05)
		}
	case "truncatednormal":
		out.Kind = nn.InitTruncatedNormal
		if out.Mean, err = num("mean", 0); err == nil {
			out.Stddev, err = num("stddev", 0.05)
		}
	case "randomuniform", "uniform":
		out.Kind = nn.InitRandomUniform
		if out.Min, err = num("minval", -0.05); err == nil {
			out.Max, err = num("maxval", 0.05)
		}
	case "variancescaling":
		out.Kind = nn.InitVarianceScaling
		if out.Scale, err = num("scale", 1); err != nil {
			break
		}
		if out.Mode, err = str("mode", "fan_in"); err != nil {
			break
		}
		if out.Distribution, err = str("distribution", "truncated_normal"); err == nil && out.Distribution == "normal" {
			// Keras 2 and TensorFlow.js: "normal" is the truncated normal.
			out.Distribution = "truncated_normal"
		}
	default:
		vs, ok := varianceScaling[key]
		if !ok {
			return nil, fmt.Errorf("%s is not supported: meshtrain has %s", name, andList(initializerNames))
		}
		out = vs
	}
	if err != nil {
		return nil, err
	}
	if err := o.rest(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := out.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &out, nil
}
