package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/data/criteo"
)

func init() {
	registerSub("data", &cli.Command{
		Name:  "gen-criteo",
		Usage: "generate a Criteo-like sparse click data set with known Bayes-optimal figures",
		Description: fmt.Sprintf("Writes --files files (the last one the held-out test set) of one-hot examples over\n"+
			"%d features: a bias plus the 26 categorical fields of the Criteo Kaggle data with their real\n"+
			"cardinalities, Zipf-distributed values, labels drawn from a logistic model with hashed weights and\n"+
			"a bias calibrated to %.1f%% clicks. %s next to the data records the Bayes-optimal accuracy,\n"+
			"log-loss and AUC on the test file, and is printed on stdout. Same seed, same bytes.",
			criteo.Features, 100*criteo.PositiveRate, criteo.InfoFile),
		CustomHelpTemplate: withExample("meshtrain data gen-criteo --examples 110000 --files 11 --out criteo/"),
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "examples", Value: 1_100_000, Usage: "examples over all files"},
			&cli.IntFlag{Name: "files", Value: 11, Usage: "number of files, at least 2; the last is the test set"},
			&cli.StringFlag{Name: "out", Required: true, Usage: "output directory (created if missing)"},
			&cli.StringFlag{Name: "format", Value: "tfrecord", Usage: "tfrecord (tf.train.Example with label/index/value) | libsvm (1-based)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed; everything generated is a function of it"},
			&cli.Float64Flag{Name: "zipf", Value: criteo.DefaultZipf, Usage: "Zipf exponent of the per-field value frequencies (> 1)"},
			&cli.Float64Flag{Name: "weight-std", Value: criteo.DefaultWeightStd, Usage: "spread of the ground-truth weights (larger: an easier problem)"},
			&cli.IntFlag{Name: "workers", Usage: "files generated at once (0: one per core)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("gen-criteo takes no arguments, got %q", c.Args().Slice())
			}
			if err := checkOutputs(c, output{name: "out", dir: true}); err != nil {
				return fmt.Errorf("gen-criteo: %w", err)
			}
			info, err := criteo.Generate(c.Context, criteo.Config{
				Out: c.String("out"), Examples: c.Int("examples"), Files: c.Int("files"), Format: c.String("format"),
				Seed: c.Uint64("seed"), Zipf: c.Float64("zipf"), WeightStd: c.Float64("weight-std"),
				Workers: c.Int("workers"), Logger: logger(c, "gen-criteo"),
			})
			if err != nil {
				return err
			}
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(info)
		},
	})
}
