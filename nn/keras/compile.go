package keras

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/meshtrain/meshtrain/nn"
)

// Training is what a file's recorded compile settings ask of training,
// as meshtrain can honour it: the optimizer, its learning rate and
// momentum, and the loss, checked against the model's output.
type Training struct {
	// Field is where the file records them: "compile_config" (Keras 3),
	// "training_config" (tf.keras 2, and tensorflowjs_converter's
	// modelTopology), "trainingConfig" (TF.js's model.save); "" when it
	// records none, and the rest is zero.
	Field string
	// Optimizer is nn's optimizer (nn.SGD, nn.Momentum, nn.Nesterov,
	// nn.Adam) for the file's, with LR and Momentum; "" when the file
	// records none, or one nothing in meshtrain stands in for.
	Optimizer    string
	LR, Momentum float64
	// Class is the file's optimizer as it names it ("Adam", "SGD",
	// TF.js's "Momentum"); Loss its loss in Keras's snake_case name
	// ("sparse_categorical_crossentropy"), "" when it records none.
	Class, Loss string
	// Notes say what of the file's settings is not followed, and what
	// is done instead.
	Notes []string
}

// Training reads the file's recorded compile settings (Model.Training
// is zero-valued when it records none). A loss meshtrain cannot honour
// (a regression loss; binary cross-entropy on several outputs, which is
// multi-label) is an error saying what to compile with; an optimizer
// meshtrain lacks is replaced by the nearest, said in Notes.
func (m *Model) Training() (Training, error) {
	var t Training
	var v any
	for _, f := range []struct {
		obj  map[string]any
		name string
	}{{m.top, "compile_config"}, {m.top, "training_config"}, {m.top, "trainingConfig"}, {m.topology, "training_config"}} {
		if x, ok := f.obj[f.name]; ok && x != nil {
			t.Field, v = f.name, x
			break
		}
	}
	if t.Field == "" {
		return t, nil
	}
	cfg, ok := v.(map[string]any)
	if !ok {
		return t, fmt.Errorf("%q is a %s, not an object", t.Field, kindOf(v))
	}
	opt := cfg["optimizer"] // Keras 3
	if t.Field != "compile_config" {
		opt = cfg["optimizer_config"]
	}
	if err := t.optimizer(opt); err != nil {
		return t, fmt.Errorf("%q: optimizer: %w", t.Field, err)
	}
	if err := t.loss(cfg["loss"], m); err != nil {
		return t, fmt.Errorf("%q: loss: %w", t.Field, err)
	}
	return t, nil
}

// kerasDefaultLR is the learning rate of an optimizer Keras builds from
// its name alone (compile(optimizer="adam")): SGD's 0.01, the others'
// 0.001 (keras/src/optimizers).
func kerasDefaultLR(class string) float64 {
	if class == "sgd" {
		return 0.01
	}
	return 0.001
}

// standIns are the adaptive optimizers meshtrain lacks: Adam, at the
// file's rate, is the nearest (per-parameter steps scaled by running
// gradient statistics, as each of them takes).
var standIns = []string{"rmsprop", "adagrad", "adadelta", "adamax", "nadam", "adamw", "ftrl", "lion", "adafactor"}

// optimizer reads the optimizer: Keras 3's name or serialised object
// ({module, class_name, config}), tf.keras 2's and TF.js's
// {class_name, config} (snake_case or TF.js's camelCase keys).
func (t *Training) optimizer(v any) error {
	var cfg map[string]any
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		t.Class = v
	case map[string]any:
		t.Class, _ = v["class_name"].(string)
		if t.Class == "" {
			return fmt.Errorf("%s: no class_name", show(v))
		}
		if c, ok := v["config"].(map[string]any); ok {
			cfg = c
		} else if v["config"] != nil {
			return fmt.Errorf("%s: config is a %s, not an object", t.Class, kindOf(v["config"]))
		}
	default:
		return fmt.Errorf("a %s: want the optimizer's name or its serialised object", kindOf(v))
	}
	t.Class = strings.TrimPrefix(t.Class, "Custom>") // tf.keras 2.11+'s registered names
	class := strings.ToLower(strings.ReplaceAll(t.Class, "_", ""))
	num := func(keys ...string) (float64, bool, error) {
		for _, k := range keys {
			if x, ok := cfg[k]; ok && x != nil {
				f, err := floatOf(x)
				if err != nil {
					return 0, false, fmt.Errorf("%s %s: %w", t.Class, k, err)
				}
				return f, true, nil
			}
		}
		return 0, false, nil
	}
	t.LR = kerasDefaultLR(class)
	switch rate := firstOf(cfg, "learning_rate", "lr", "learningRate"); rate := rate.(type) {
	case nil:
	case map[string]any: // a LearningRateSchedule
		sched, _ := rate["class_name"].(string)
		sc, _ := rate["config"].(map[string]any)
		r, ok := sc["initial_learning_rate"]
		f, err := floatOf(r)
		if !ok || err != nil {
			return fmt.Errorf("%s learning_rate: schedule %s without a numeric initial_learning_rate: give --lr", t.Class, show(rate))
		}
		t.LR = f
		t.Notes = append(t.Notes, fmt.Sprintf("the file's learning-rate schedule %s is not followed: its initial rate, constant (--lr-schedule to choose one)", sched))
	default:
		f, err := floatOf(rate)
		if err != nil {
			return fmt.Errorf("%s learning_rate: %w", t.Class, err)
		}
		t.LR = f
	}
	t.LR = decimal32(t.LR)
	if !(t.LR > 0) {
		return fmt.Errorf("%s learning_rate %v: want > 0", t.Class, t.LR)
	}
	mom, _, err := num("momentum")
	if err != nil {
		return err
	}
	nesterov := cfg["nesterov"] == true || cfg["useNesterov"] == true
	switch {
	case class == "sgd" && mom == 0:
		t.Optimizer = nn.SGD
	case class == "sgd" || class == "momentum":
		t.Optimizer, t.Momentum = nn.Momentum, decimal32(mom)
		if nesterov {
			t.Optimizer = nn.Nesterov
		}
		if !(mom > 0 && mom < 1) {
			return fmt.Errorf("%s momentum %v: want a value in (0, 1)", t.Class, mom)
		}
	case class == "adam":
		t.Optimizer = nn.Adam
		if err := t.adamSettings(num); err != nil {
			return err
		}
	case slices.Contains(standIns, class):
		t.Optimizer = nn.Adam
		t.Notes = append(t.Notes, fmt.Sprintf("the file's optimizer %s is not one of meshtrain's (%s): adam at its learning rate instead (--optimizer to choose)",
			t.Class, strings.Join(nn.OptimizerNames, ", ")))
	default:
		t.Notes = append(t.Notes, fmt.Sprintf("the file's optimizer %s is not one meshtrain knows: the recipe's optimizer and learning rate instead (--optimizer and --lr to choose)", t.Class))
		t.LR = 0
		return nil
	}
	for _, k := range []string{"clipnorm", "clipvalue", "global_clipnorm", "weight_decay", "decay"} {
		if f, ok, err := num(k); err != nil {
			return err
		} else if ok && f != 0 {
			t.Notes = append(t.Notes, fmt.Sprintf("the file's %s %v is not applied (meshtrain has no gradient clipping, and --weight-decay is an L2 penalty, not decoupled decay)", k, f))
		}
	}
	for _, k := range []string{"use_ema", "amsgrad", "centered"} {
		if cfg[k] == true {
			t.Notes = append(t.Notes, fmt.Sprintf("the file's %s is not applied", k))
		}
	}
	return nil
}

// adamSettings notes Adam's settings that differ from nn's Adam (betas
// 0.9 and 0.999; epsilon 1e-8, where Keras's 1e-7 is as negligible).
func (t *Training) adamSettings(num func(...string) (float64, bool, error)) error {
	for _, s := range []struct {
		keys []string
		want float64
	}{{[]string{"beta_1", "beta1"}, 0.9}, {[]string{"beta_2", "beta2"}, 0.999}, {[]string{"epsilon"}, 1e-7}} {
		f, ok, err := num(s.keys...)
		if err != nil {
			return err
		}
		if ok && f != s.want && !(s.want == 1e-7 && f <= 1e-7) {
			t.Notes = append(t.Notes, fmt.Sprintf("the file's Adam %s %v is not applied: meshtrain's adam uses betas 0.9, 0.999 and epsilon 1e-8", s.keys[0], f))
		}
	}
	return nil
}

// The losses meshtrain honours, by their snake_case names.
const (
	lossCategorical = "categorical_crossentropy"
	lossSparse      = "sparse_categorical_crossentropy"
	lossBinary      = "binary_crossentropy"
)

// loss reads the loss (a name; a serialised loss object or function; a
// list or dict of one, for a model's one output) and checks it against
// the model's output: meshtrain's loss follows the last activation.
func (t *Training) loss(v any, m *Model) error {
	fromLogits := false
	switch x := v.(type) {
	case nil:
		return nil
	case []any, map[string]any:
		if obj, ok := x.(map[string]any); ok && obj["class_name"] != nil {
			name, _ := obj["class_name"].(string)
			cfg, _ := obj["config"].(map[string]any)
			if s, ok := obj["config"].(string); ok && name == "function" { // Keras 3's serialised function
				name = s
			}
			t.Loss = snake(strings.TrimPrefix(name, "Custom>"))
			fromLogits = cfg["from_logits"] == true
			if f, err := floatOf(cfg["label_smoothing"]); err == nil && f != 0 {
				t.Notes = append(t.Notes, fmt.Sprintf("the file's label_smoothing %v is not applied", f))
			}
			break
		}
		var one []any
		if l, ok := x.([]any); ok {
			one = l
		} else {
			for _, e := range x.(map[string]any) {
				one = append(one, e)
			}
		}
		if len(one) != 1 {
			return fmt.Errorf("%d losses: the model has one output, which takes one", len(one))
		}
		return t.loss(one[0], m)
	case string:
		t.Loss = snake(x)
	default:
		return fmt.Errorf("a %s: want the loss's name or its serialised object", kindOf(v))
	}
	switch t.Loss {
	case lossCategorical, lossSparse, lossBinary:
	default:
		return fmt.Errorf("%s: meshtrain trains classifiers with cross-entropy, which follows the last activation (softmax or none: categorical; a sigmoid after one output: binary); "+
			"compile the model with %s, %s or %s, or delete %q from the file", t.Loss, lossCategorical, lossSparse, lossBinary, t.Field)
	}
	head := "logits" // no final activation
	if a, ok := m.Arch.Layers[len(m.Arch.Layers)-1].(nn.Activation); ok {
		head = a.Fn
	}
	binary := t.Loss == lossBinary
	switch {
	case head == "sigmoid" && !binary:
		return fmt.Errorf("%s on one sigmoid output: a single output takes binary cross-entropy; compile with %s, or end with softmax over 2 outputs", t.Loss, lossBinary)
	case head != "sigmoid" && binary && m.Classes != 2:
		return fmt.Errorf("%s on %d outputs is multi-label, which meshtrain does not train (one class per example: categorical cross-entropy); compile with %s or %s",
			t.Loss, m.Classes, lossCategorical, lossSparse)
	case head == "logits" && !fromLogits:
		t.Notes = append(t.Notes, fmt.Sprintf("the file's %s takes probabilities (from_logits false) but the model ends without softmax: meshtrain takes its outputs as logits", t.Loss))
	case head != "logits" && fromLogits:
		t.Notes = append(t.Notes, fmt.Sprintf("the file's %s has from_logits true after a %s (Keras would apply it twice): meshtrain takes the %s's outputs as probabilities", t.Loss, head, head))
	}
	return nil
}

// snake is a loss's name in Keras's snake_case: "CategoricalCrossentropy"
// and TF.js's "categoricalCrossentropy" are "categorical_crossentropy".
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// decimal32 is f, a float32 Keras wrote out as a float64
// (0.0010000000474974513), as the shortest decimal that float32 is
// (0.001): the value the user gave Keras. Any other f is itself.
func decimal32(f float64) float64 {
	if float64(float32(f)) != f {
		return f
	}
	d, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', -1, 32), 64)
	return d
}

// firstOf is the first of keys that obj holds, non-null.
func firstOf(obj map[string]any, keys ...string) any {
	for _, k := range keys {
		if v, ok := obj[k]; ok && v != nil {
			return v
		}
	}
	return nil
}
