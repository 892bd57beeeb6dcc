package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/internal/writable"
	"github.com/meshtrain/meshtrain/mirrored/callbacks"
)

// catCallbacks groups Keras's callbacks in the help.
const catCallbacks = "callbacks (Keras's)"

// plateauFlags are ReduceLROnPlateau's settings, read only with
// --reduce-lr-on-plateau.
var plateauFlags = []string{"reduce-lr-factor", "reduce-lr-patience", "reduce-lr-min-delta", "reduce-lr-cooldown", "reduce-lr-min-lr"}

// callbackFlags are Keras's EarlyStopping, ReduceLROnPlateau and
// ModelCheckpoint(save_best_only) as flags, with Keras's defaults, on
// train, launch and worker (the ring's runs).
func callbackFlags() []cli.Flag {
	d := callbacks.Defaults()
	return inCategory(catCallbacks,
		&cli.StringFlag{Name: "monitor", Value: d.Monitor, Usage: "the test metric the callbacks watch, evaluated every epoch: loss (minimised; Keras's val_loss) or accuracy (maximised; val_accuracy)"},
		&cli.IntFlag{Name: "early-stop-patience", Usage: "stop once --monitor has not improved for N epochs (Keras's EarlyStopping(patience=N); 0 stops at the first epoch that does not improve)", DefaultText: "off"},
		&cli.Float64Flag{Name: "early-stop-min-delta", Value: d.MinDelta, Usage: "early stopping: a smaller change is no improvement (EarlyStopping's min_delta)"},
		&cli.BoolFlag{Name: "restore-best", Usage: "early stopping: end with the best epoch's parameters, stopped early or not (EarlyStopping's restore_best_weights, off as in Keras)"},
		&cli.BoolFlag{Name: "reduce-lr-on-plateau", Usage: "multiply the learning rate by --reduce-lr-factor once --monitor has not improved for --reduce-lr-patience epochs (Keras's ReduceLROnPlateau; it scales the --lr-schedule's rate)"},
		&cli.Float64Flag{Name: "reduce-lr-factor", Value: d.Factor, Usage: "plateau: the factor, in (0, 1)"},
		&cli.IntFlag{Name: "reduce-lr-patience", Value: d.LRPatience, Usage: "plateau: epochs without improvement before a cut"},
		&cli.Float64Flag{Name: "reduce-lr-min-delta", Value: d.LRMinDelta, Usage: "plateau: a smaller change is no improvement"},
		&cli.IntFlag{Name: "reduce-lr-cooldown", Value: d.Cooldown, Usage: "plateau: epochs after a cut before counting again"},
		&cli.Float64Flag{Name: "reduce-lr-min-lr", Value: d.MinLR, Usage: "plateau: the rate is never cut below this"},
		&cli.StringFlag{Name: "save-best", Usage: "the chief writes a checkpoint to this file (atomically) after every epoch whose --monitor beats all earlier ones (Keras's ModelCheckpoint(save_best_only=True)); meshtrain eval and --restore read it"},
	)
}

// callbacksFromFlags reads callbackFlags (a command without them has no
// callbacks); a bad value is an error naming its flag.
func callbacksFromFlags(c *cli.Context) (callbacks.Config, error) {
	cb := callbacks.Defaults()
	given(c, "monitor", &cb.Monitor, c.String)
	cb.EarlyStop = c.IsSet("early-stop-patience")
	given(c, "early-stop-patience", &cb.Patience, c.Int)
	given(c, "early-stop-min-delta", &cb.MinDelta, c.Float64)
	cb.RestoreBest = c.Bool("restore-best")
	cb.ReduceLR = c.Bool("reduce-lr-on-plateau")
	given(c, "reduce-lr-factor", &cb.Factor, c.Float64)
	given(c, "reduce-lr-patience", &cb.LRPatience, c.Int)
	given(c, "reduce-lr-min-delta", &cb.LRMinDelta, c.Float64)
	given(c, "reduce-lr-cooldown", &cb.Cooldown, c.Int)
	given(c, "reduce-lr-min-lr", &cb.MinLR, c.Float64)
	cb.SaveBest = c.String("save-best")
	for _, f := range plateauFlags {
		if c.IsSet(f) && !cb.ReduceLR {
			return cb, fmt.Errorf("--%s is a setting of --reduce-lr-on-plateau: give that flag too", f)
		}
	}
	if c.IsSet("early-stop-min-delta") && !cb.EarlyStop {
		return cb, fmt.Errorf("--early-stop-min-delta is a setting of early stopping: give --early-stop-patience too")
	}
	if c.IsSet("monitor") && !cb.Enabled() {
		return cb, fmt.Errorf("--monitor %s: no callback watches it: give --early-stop-patience, --reduce-lr-on-plateau or --save-best", cb.Monitor)
	}
	if err := cb.Validate(); err != nil {
		return cb, err
	}
	if cb.SaveBest != "" {
		// Rewritten whenever the metric improves: only a regular file is
		// replaced so (a FIFO or a device would take the bytes once).
		if kind, err := atomicfile.Classify(cb.SaveBest); err != nil || kind != atomicfile.Replace {
			if err == nil {
				err = fmt.Errorf("%s is a FIFO or a device: the best checkpoint is replaced at every improvement, so give a regular file's path", cb.SaveBest)
			}
			return cb, fmt.Errorf("--save-best: %w", err)
		}
		if err := writable.File(cb.SaveBest); err != nil {
			return cb, fmt.Errorf("--save-best: %w", err)
		}
	}
	return cb, nil
}
