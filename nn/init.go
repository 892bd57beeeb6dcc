package nn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// Initializer draws a tensor's initial values as one of Keras's
// initializers does (keras.initializers, whose config keys its fields
// are named after). Conv2D's and Dense's KernelInit and BiasInit take
// one, overriding their Init; the Keras reader (package nn/keras) maps
// every Keras initializer it accepts onto one:
//
//	Zeros, Ones, Constant(value)      constant
//	RandomUniform(minval, maxval)     random_uniform
//	RandomNormal(mean, stddev)        random_normal
//	TruncatedNormal(mean, stddev)     truncated_normal
//	GlorotUniform                     variance_scaling 1, fan_avg, uniform
//	GlorotNormal                      variance_scaling 1, fan_avg, truncated_normal
//	HeUniform                         variance_scaling 2, fan_in, uniform
//	HeNormal                          variance_scaling 2, fan_in, truncated_normal
//	LecunUniform                      variance_scaling 1, fan_in, uniform
//	LecunNormal                       variance_scaling 1, fan_in, truncated_normal
//	VarianceScaling(scale, mode, distribution)
//
// The fans are a layer's: a Dense's inputs and units; a convolution's
// input and output channels, each times the kernel's K·K taps. The draws
// come from the model's seeded generator, so they are not Keras's
// numbers, only its distributions.
type Initializer struct {
	// Kind is InitConstant (the zero value ""), InitRandomUniform,
	// InitRandomNormal, InitTruncatedNormal or InitVarianceScaling.
	Kind string
	// Value is a constant's value.
	Value float64
	// Min and Max bound a uniform draw, [Min, Max).
	Min, Max float64
	// Mean and Stddev are a normal draw's; a truncated one redraws values
	// more than two standard deviations from the mean, as Keras does.
	Mean, Stddev float64
	// Scale, Mode and Distribution are variance scaling's: values of
	// variance Scale/n, n the fan in, the fan out or their mean (Mode
	// "fan_in", "fan_out", "fan_avg"), drawn from Distribution "uniform"
	// (±√(3·Scale/n)), "truncated_normal" (standard deviation
	// √(Scale/n)/0.8796…, truncated at two, as Keras's), or
	// "untruncated_normal" (√(Scale/n)).
	Scale        float64
	Mode         string
	Distribution string
}

// The kinds of Initializer.
const (
	InitConstant        = "constant"
	InitRandomUniform   = "random_uniform"
	InitRandomNormal    = "random_normal"
	InitTruncatedNormal = "truncated_normal"
	InitVarianceScaling = "variance_scaling"
)

// truncatedStddev is the standard deviation of a standard normal
// truncated to (−2, 2): Keras divides variance scaling's standard
// deviation by it so that the truncated draw keeps the variance asked for.
const truncatedStddev = .87962566103423978

// kind is i's kind, the zero value's spelled out.
func (i Initializer) kind() string {
	if i.Kind == "" {
		return InitConstant
	}
	return i.Kind
}

// Check reports why i cannot draw values, if it cannot.
func (i Initializer) Check() error {
	finite := func(name string, v float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s initializer: %s %v: want a finite number", i.kind(), name, v)
		}
		return nil
	}
	// reach is the largest magnitude a draw can take, past float32's
	// range an overflow: the weights would start infinite, and the run
	// diverge at its first step with advice about the learning rate.
	reach := func(what string, v float64) error {
		if !math.IsInf(v, 0) && math.Abs(v) > math.MaxFloat32 {
			return fmt.Errorf("%s initializer: %s: draws reach %.3g, which overflows float32 (%.3g at most): the initial weights would be infinite", i.kind(), what, v, math.MaxFloat32)
		}
		return nil
	}
	switch i.kind() {
	case InitConstant:
		return errors.Join(finite("value", i.Value), reach(fmt.Sprintf("value %v", i.Value), i.Value))
	case InitRandomUniform:
		if err := errors.Join(finite("minval", i.Min), finite("maxval", i.Max)); err != nil {
			return err
		}
		if i.Max < i.Min {
			return fmt.Errorf("random_uniform initializer: maxval %v below minval %v", i.Max, i.Min)
		}
		return errors.Join(reach(fmt.Sprintf("minval %v", i.Min), i.Min), reach(fmt.Sprintf("maxval %v", i.Max), i.Max))
	case InitRandomNormal, InitTruncatedNormal:
		if err := errors.Join(finite("mean", i.Mean), finite("stddev", i.Stddev)); err != nil {
			return err
		}
		if i.Stddev < 0 {
			return fmt.Errorf("%s initializer: stddev %v: want ≥ 0", i.Kind, i.Stddev)
		}
		// A normal draw beyond 6 standard deviations has odds of 1e-9;
		// a truncated one never passes 2.
		sds := 6.0
		if i.Kind == InitTruncatedNormal {
			sds = 2
		}
		return reach(fmt.Sprintf("mean %v, stddev %v", i.Mean, i.Stddev), math.Abs(i.Mean)+sds*i.Stddev)
	case InitVarianceScaling:
		if !(i.Scale > 0) || math.IsInf(i.Scale, 0) {
			return fmt.Errorf("variance_scaling initializer: scale %v: want a finite number > 0", i.Scale)
		}
		if err := reach(fmt.Sprintf("scale %v", i.Scale), 6*math.Sqrt(3*i.Scale)); err != nil { // at a fan of 1
			return err
		}
		switch i.Mode {
		case "fan_in", "fan_out", "fan_avg":
		default:
			return fmt.Errorf("variance_scaling initializer: mode %q: want fan_in, fan_out or fan_avg", i.Mode)
		}
		switch i.Distribution {
		case "uniform", "truncated_normal", "untruncated_normal":
		default:
			return fmt.Errorf("variance_scaling initializer: distribution %q: want uniform, truncated_normal or untruncated_normal", i.Distribution)
		}
	default:
		return fmt.Errorf("initializer kind %q: want %s, %s, %s, %s or %s", i.Kind,
			InitConstant, InitRandomUniform, InitRandomNormal, InitTruncatedNormal, InitVarianceScaling)
	}
	return nil
}

// fill draws v's values for a layer of the given fans.
func (i Initializer) fill(rng *rand.Rand, v []float32, fanIn, fanOut int) {
	truncated := func(mean, sd float64) float64 {
		for {
			if z := rng.NormFloat64(); math.Abs(z) <= 2 {
				return mean + sd*z
			}
		}
	}
	switch i.kind() {
	case InitConstant:
		for k := range v {
			v[k] = float32(i.Value)
		}
	case InitRandomUniform:
		for k := range v {
			v[k] = float32(i.Min + (i.Max-i.Min)*rng.Float64())
		}
	case InitRandomNormal:
		for k := range v {
			v[k] = float32(i.Mean + i.Stddev*rng.NormFloat64())
		}
	case InitTruncatedNormal:
		for k := range v {
			v[k] = float32(truncated(i.Mean, i.Stddev))
		}
	case InitVarianceScaling:
		n := float64(fanIn)
		switch i.Mode {
		case "fan_out":
			n = float64(fanOut)
		case "fan_avg":
			n = float64(fanIn+fanOut) / 2
		}
		n = max(n, 1)
		switch i.Distribution {
		case "uniform":
			limit := math.Sqrt(3 * i.Scale / n)
			for k := range v {
				v[k] = float32((2*rng.Float64() - 1) * limit)
			}
		case "truncated_normal":
			sd := math.Sqrt(i.Scale/n) / truncatedStddev
			for k := range v {
				v[k] = float32(truncated(0, sd))
			}
		default: // untruncated_normal
			sd := math.Sqrt(i.Scale / n)
			for k := range v {
				v[k] = float32(sd * rng.NormFloat64())
			}
		}
	}
}

// initParams fills a layer's weights w and biases b: each from its
// Initializer if it has one, else by kind (see initLayer); the weights
// are drawn first.
func initParams(rng *rand.Rand, w, b []float32, kind Init, kernel, bias *Initializer, fanIn, fanOut int) {
	if kernel == nil && bias == nil {
		initLayer(rng, w, b, kind, fanIn, fanOut)
		return
	}
	if kernel != nil {
		kernel.fill(rng, w, fanIn, fanOut)
	} else {
		initLayer(rng, w, nil, kind, fanIn, fanOut)
	}
	if bias != nil {
		bias.fill(rng, b, fanIn, fanOut)
	} else {
		initLayer(rng, nil, b, kind, fanIn, fanOut)
	}
}
