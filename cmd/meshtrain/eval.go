package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/meshtrain/meshtrain/mirrored/evaluate"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/kerasio"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:               "eval",
		Usage:              "report the test accuracy and loss of a saved checkpoint",
		ArgsUsage:          " ",
		CustomHelpTemplate: withExample("meshtrain eval --checkpoint ckpt/ckpt-000000936.safetensors\n   meshtrain eval --model-file model.json --predictions preds.npy"),
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "checkpoint", Usage: "checkpoint file (ckpt-*.safetensors) written by meshtrain worker/launch (required)"},
			&cli.StringFlag{Name: "data-dir", Usage: "directory holding (or to fetch) the MNIST IDX files"},
			allowUnverifiedFlag(),
		}, append(dataFlags(), []cli.Flag{
			&cli.IntFlag{Name: "test-examples", Usage: "evaluate on only the first N test examples (0: all)"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
			&cli.StringFlag{Name: "predictions", Usage: "write every test example's outputs (N × outputs, float32; class probabilities after a final softmax, as Keras's model.predict returns them) to this .npy file"},
			modelFileFlag(true),
		}...)...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError{fmt.Errorf("eval takes no arguments, got %q", c.Args().Slice())}
			}
			cfg := evaluate.Config{
				Checkpoint: c.String("checkpoint"), DataDir: c.String("data-dir"), AllowUnverified: c.Bool("allow-unverified"),
				TestExamples: c.Int("test-examples"), Predictions: c.String("predictions"), Logger: logger(c, "eval"),
			}
			var err error
			if cfg.Data, cfg.DataFormat, cfg.DataRead, err = dataFromFlags(c); err != nil {
				return usageError{fmt.Errorf("eval: %w", err)}
			}
			m, err := readModelFile(c)
			if err != nil {
				return fmt.Errorf("eval: %w", err)
			}
			if m != nil {
				cfg.Architecture = &m.Arch
			}
			if cfg.Checkpoint == "" {
				var w [][]kerasio.Weight
				if m != nil {
					if w, err = modelWeights(c.String("model-file"), m, false); err != nil {
						return fmt.Errorf("eval: %w", err)
					}
				}
				if w != nil && !cfg.AllowUnverified && cfg.Data == "" { // with --data, checked against the data when read
					if err := m.CheckData(nn.MNISTSpec); err != nil {
						return usageError{fmt.Errorf("eval: --model-file %s: %w (MNIST)", c.String("model-file"), err)}
					}
				}
				if w == nil {
					return usageError{errors.New("eval needs --checkpoint FILE (a ckpt-*.safetensors written by meshtrain worker or launch --checkpoint-dir), " +
						"or --model-file model.json with weights (a TF.js layers model whose weightsManifest lists weight files)")}
				}
				cfg.Weights = func(model nn.Model) error { return kerasio.Import(m.Arch, model, w) }
			}
			res, err := evaluate.Checkpoint(c.Context, cfg)
			if err != nil {
				return fmt.Errorf("eval: %w", err)
			}
			if c.Bool("json") {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			if res.Warning != "" {
				fmt.Printf("warning: %s\n", res.Warning)
			}
			if cfg.Checkpoint == "" {
				fmt.Printf("%s: %s with its weights: test accuracy %.2f%% (%d/%d), test loss %.4f\n",
					c.String("model-file"), res.Model, 100*res.Accuracy, res.Correct, res.Examples, res.Loss)
			} else {
				fmt.Printf("%s: %s after %d steps (%d epochs): test accuracy %.2f%% (%d/%d), test loss %.4f\n",
					res.Checkpoint, res.Model, res.Step, res.Epoch, 100*res.Accuracy, res.Correct, res.Examples, res.Loss)
			}
			if cfg.Predictions != "" {
				fmt.Printf("predictions of the %d test examples written to %s\n", res.Examples, cfg.Predictions)
			}
			return nil
		},
	})
}
