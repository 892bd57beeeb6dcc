package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/keras"
)

// compileFlags are the flags that override a model file's recorded
// compile settings, each for its own setting.
var compileFlags = []string{"optimizer", "lr", "momentum", "lr-schedule", "warmup-epochs"}

// applyCompile sets cfg's optimizer, learning rate and schedule from the
// model file's recorded compile settings (Keras's compile(optimizer,
// loss)), except those the flags give: a Keras user's file trains as
// model.fit would, at its constant rate, unless told otherwise. It
// returns the line that says what was chosen and why, and a line per
// setting of the file not followed. A loss meshtrain cannot honour is a
// usage error.
func applyCompile(c *cli.Context, cfg *mirrored.Config, m *keras.Model) (line string, notes []string, err error) {
	tr, err := m.Training()
	if err != nil {
		return "", nil, usageError{fmt.Errorf("--model-file %s: its compile settings: %w", c.String("model-file"), err)}
	}
	for _, n := range tr.Notes {
		notes = append(notes, "model file: "+n)
	}
	var given []string
	for _, name := range compileFlags {
		if c.IsSet(name) {
			given = append(given, "--"+name)
		}
	}
	recipe := "lenet's recipe"
	if len(given) > 0 {
		recipe += " with " + strings.Join(given, ", ")
	}
	var source string
	switch {
	case tr.Field == "":
		source = recipe + ": the model file records no compile settings"
	case tr.Optimizer == "":
		source = recipe + ": the model file's optimizer " + tr.Class + " is not one meshtrain knows"
	default:
		if !c.IsSet("optimizer") {
			cfg.Optimizer = tr.Optimizer
			if !c.IsSet("momentum") {
				cfg.Momentum = tr.Momentum
			}
		}
		if !c.IsSet("lr") {
			cfg.LR = tr.LR
		}
		if !c.IsSet("lr-schedule") {
			cfg.Schedule = nn.ScheduleConstant
		}
		if !c.IsSet("warmup-epochs") {
			cfg.WarmupEpochs = 0
		}
		file := fmt.Sprintf("the model file's compile settings (%s): %s lr %g", tr.Field, tr.Class, tr.LR)
		if len(given) == 0 {
			source = file + "; --optimizer, --lr, --momentum and --lr-schedule override"
		} else {
			source = strings.Join(given, ", ") + " given; the rest from " + file
		}
	}
	line = "optimizer: " + cfg.Optimizer
	if cfg.Optimizer != nn.Adam && cfg.Momentum > 0 {
		line += fmt.Sprintf(" momentum %g", cfg.Momentum)
	}
	line += fmt.Sprintf(" lr %g, %s schedule", cfg.LR, cfg.Schedule)
	if cfg.WarmupEpochs > 0 {
		line += fmt.Sprintf(" after %g epochs of warm-up", cfg.WarmupEpochs)
	}
	if c.Bool("scale-lr") {
		line += " (lr × workers: --scale-lr)"
	}
	if tr.Loss != "" {
		line += "; loss " + tr.Loss
	}
	return line + " (" + source + ")", notes, nil
}
