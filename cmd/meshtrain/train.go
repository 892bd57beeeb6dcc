package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/nn"
)

func init() {
	d := mirrored.DefaultConfig()
	register(&cli.Command{
		Name:  "train",
		Usage: "train LeNet-5 or softmax regression on MNIST on one worker (no network)",
		Description: "With no flags this is the recipe that reaches ≥ 97.5% test accuracy after one epoch\n" +
			"and ≥ 99.0% within 10: LeNet-5, SGD momentum 0.9, batch 64, lr 0.05 halved every epoch\n" +
			"(in four steps per epoch) after a warm-up over the first tenth of an epoch.\n" +
			"Per epoch it prints the training loss, the test loss and accuracy on the full 10k test set,\n" +
			"and training examples/s (evaluation excluded).",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "model", Value: d.Model, Usage: "model: " + strings.Join(nn.ModelNames, " | ") + " | " + mirrored.SparseModel},
			&cli.IntFlag{Name: "epochs", Value: d.Epochs, Usage: "passes over the training set"},
			&cli.IntFlag{Name: "batch", Value: d.BatchSize, Usage: "examples per step"},
			&cli.Float64Flag{Name: "lr", Value: d.LR, Usage: "base learning rate"},
			&cli.StringFlag{Name: "optimizer", Value: d.Optimizer, Usage: "optimizer: " + strings.Join(nn.OptimizerNames, " | ") + " (sgd uses --momentum if > 0)"},
			&cli.Float64Flag{Name: "momentum", Value: d.Momentum, Usage: "momentum for sgd, momentum and nesterov"},
			&cli.Float64Flag{Name: "weight-decay", Value: d.WeightDecay, Usage: "L2 weight decay"},
			&cli.StringFlag{Name: "lr-schedule", Value: d.Schedule, Usage: "learning-rate schedule: " + strings.Join(nn.ScheduleNames, " | ")},
			&cli.Float64Flag{Name: "lr-gamma", Value: d.LRGamma, Usage: "step schedule: factor per decay"},
			&cli.Float64Flag{Name: "lr-decay-epochs", Value: d.LRDecayEpochs, Usage: "step schedule: epochs between decays"},
			&cli.Float64Flag{Name: "warmup-epochs", Value: d.WarmupEpochs, Usage: "linear learning-rate warm-up, in epochs"},
			&cli.Float64Flag{Name: "min-lr", Value: d.MinLR, Usage: "cosine schedule: final learning rate"},
			&cli.Int64Flag{Name: "seed", Value: d.Seed, Usage: "seed for initialisation and shuffling"},
			&cli.StringFlag{Name: "data-dir", Usage: "directory holding (or to fetch) the MNIST IDX files"},
			&cli.StringFlag{Name: "logdir", Usage: "write TensorBoard event files under this directory (one subdirectory per worker)"},
			&cli.StringFlag{Name: "summary", Usage: "write the run's figures as JSON to this file"},
			&cli.Float64Flag{Name: "target-accuracy", Usage: "stop after the first epoch with at least this test accuracy (fraction, e.g. 0.99)"},
			&cli.Float64Flag{Name: "target-loss", Usage: "stop after the first epoch with at most this mean training loss (e.g. 0.35)"},
			&cli.IntFlag{Name: "train-examples", Usage: "use only the first N training examples (0: all)"},
			&cli.IntFlag{Name: "test-examples", Usage: "evaluate on only the first N test examples (0: all)"},
		}, append(sparseFlags(), strategyFlags()...)...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("train takes no arguments, got %q", c.Args().Slice())
			}
			// One replica: ring and gossip are the same plain SGD, and
			// there is nobody to slow down or lose.
			if _, err := strategyFromFlags(c, 1); err != nil {
				return fmt.Errorf("train: %w", err)
			}
			for _, f := range []string{"slow-peer", "kill-rank", "kill-after"} {
				if c.IsSet(f) {
					return fmt.Errorf("train: --%s needs several replicas: use launch (or compare)", f)
				}
			}
			acc := c.Float64("target-accuracy")
			if acc > 1 && acc <= 100 {
				return fmt.Errorf("--target-accuracy %v: give a fraction (e.g. %v)", acc, acc/100)
			}
			cfg := mirrored.Config{
				Model: c.String("model"), Epochs: c.Int("epochs"), BatchSize: c.Int("batch"),
				Optimizer: c.String("optimizer"), LR: c.Float64("lr"), Momentum: c.Float64("momentum"),
				WeightDecay: c.Float64("weight-decay"), Schedule: c.String("lr-schedule"),
				LRGamma: c.Float64("lr-gamma"), LRDecayEpochs: c.Float64("lr-decay-epochs"),
				WarmupEpochs: c.Float64("warmup-epochs"), MinLR: c.Float64("min-lr"), Seed: c.Int64("seed"),
				TargetAccuracy: acc, TargetLoss: c.Float64("target-loss"),
				DataDir: c.String("data-dir"), LogDir: c.String("logdir"),
				TrainExamples: c.Int("train-examples"), TestExamples: c.Int("test-examples"),
				Progress: os.Stdout, Logger: logger(c, "train"),
			}
			sp, err := sparseFromFlags(c)
			if err != nil {
				return fmt.Errorf("train: %w", err)
			}
			var res *mirrored.Result
			if sp != nil {
				// One replica of the sparse job, which checks its own settings.
				var sum *mirrored.Summary
				sum, err = mirrored.RunSparseJob(c.Context, mirrored.SparseJob{Job: mirrored.Job{Config: cfg}, Sparse: *sp}, mirrored.LocalGroup{})
				if sum != nil {
					res = sum.Run
				}
			} else {
				if err := cfg.Validate(); err != nil {
					return fmt.Errorf("train: %w", err)
				}
				res, err = mirrored.Train(c.Context, cfg, mirrored.Local{})
			}
			if err != nil {
				return fmt.Errorf("train: %w", err)
			}
			fmt.Printf("done: %d epochs, %d steps, final test accuracy %.2f%%, %.1fs training, %.1fs wall, params sha256 %s\n",
				len(res.EpochResults), res.Steps, 100*res.FinalAccuracy, res.TrainSeconds, res.WallSeconds, res.ParamsSHA256)
			if path := c.String("summary"); path != "" {
				b, err := json.MarshalIndent(res, "", "  ")
				if err != nil {
					return fmt.Errorf("train: encoding the summary: %w", err)
				}
				if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
					return fmt.Errorf("train: writing the summary: %w", err)
				}
			}
			return nil
		},
	})
}
