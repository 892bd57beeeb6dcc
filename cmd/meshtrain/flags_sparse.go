package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/data/criteo"
	"github.com/meshtrain/meshtrain/internal/inputfile"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/sparse"
)

// sparseFlags are the flags of --model sparse-lr (sparse logistic
// regression over TFRecord or libsvm files), for train, worker and launch.
// The shared flags --epochs, --batch, --lr, --seed, --hash-every,
// --measure-wait and --target-accuracy apply too.
func sparseFlags() []cli.Flag {
	return inCategory(catSparse,
		&cli.IntFlag{Name: "features", Value: criteo.Features, Usage: "sparse-lr: number of features D (indices must be in [0, D))"},
		&cli.StringFlag{Name: "train-files", Usage: "sparse-lr: training files, comma-separated; glob patterns are expanded"},
		&cli.StringFlag{Name: "test-files", Usage: "sparse-lr: held-out files evaluated after every epoch (accuracy, log-loss, AUC)"},
		&cli.StringFlag{Name: "input-format", Usage: "sparse-lr: tfrecord | libsvm (default: by extension, .libsvm/.svm/.svmlight/.txt are libsvm)"},
		&cli.BoolFlag{Name: "zero-based", Usage: "sparse-lr: libsvm indices start at 0 (default 1)"},
		&cli.BoolFlag{Name: "skip-corrupt", Usage: "sparse-lr: skip and log corrupt records instead of failing; --data image folders: skip files that do not decode, with a warning (every peer then decodes every file, to agree on which are skipped)"},
		&cli.StringFlag{Name: "exchange", Value: "auto", Usage: "sparse-lr: gradient exchange: sparse (all-gather of touched features) | dense (all-reduce of all D) | auto (per step, fewer bytes)"},
		&cli.StringFlag{Name: "sparse-gather", Value: mirrored.GatherDirect, Usage: "sparse-lr: sparse all-gather: direct (one round) | ring"},
		&cli.StringFlag{Name: "sparse-optimizer", Value: "adagrad", Usage: "sparse-lr: sgd (lazy L2) | adagrad | ftrl (FTRL-Proximal; --lr is its alpha)"},
		&cli.Float64Flag{Name: "l1", Usage: "sparse-lr: L1 regularisation (ftrl)"},
		&cli.Float64Flag{Name: "l2", Usage: "sparse-lr: L2 regularisation (sgd, ftrl)"},
		&cli.Float64Flag{Name: "ftrl-beta", Value: 1, Usage: "sparse-lr: FTRL beta"},
		&cli.IntFlag{Name: "shuffle-buffer", Value: mirrored.DefaultSparseShuffle, Usage: "sparse-lr: shuffle buffer in examples"},
		&cli.IntFlag{Name: "max-steps", Usage: "sparse-lr: stop after this many steps (0: run all epochs)"},
	)
}

// sparseFromFlags returns the sparse settings when --model is sparse-lr,
// and nil otherwise (the other sparse flags are then ignored).
func sparseFromFlags(c *cli.Context) (*mirrored.SparseConfig, error) {
	if c.String("model") != mirrored.SparseModel {
		return nil, nil
	}
	exch, err := sparse.ParseExchange(c.String("exchange"))
	if err != nil {
		return nil, err
	}
	train, err := expandFiles("--train-files", c.String("train-files"))
	if err != nil {
		return nil, err
	}
	if len(train) == 0 {
		return nil, fmt.Errorf("--model %s needs --train-files (TFRecord or libsvm files, e.g. from meshtrain data gen-criteo)", mirrored.SparseModel)
	}
	test, err := expandFiles("--test-files", c.String("test-files"))
	if err != nil {
		return nil, err
	}
	return &mirrored.SparseConfig{
		Features: c.Int("features"), TrainFiles: train, TestFiles: test,
		Format: c.String("input-format"), ZeroBased: c.Bool("zero-based"), SkipCorrupt: c.Bool("skip-corrupt"),
		Exchange: exch, Gather: c.String("sparse-gather"), Optimizer: c.String("sparse-optimizer"),
		L1: c.Float64("l1"), L2: c.Float64("l2"), Beta: c.Float64("ftrl-beta"),
		ShuffleBuffer: c.Int("shuffle-buffer"), MaxSteps: c.Int("max-steps"),
	}, nil
}

// expandFiles expands glob patterns (a plain name is kept as it is, so a
// missing file is reported by whoever opens it, with its name) and fails
// on a pattern that matches nothing.
func expandFiles(flag string, list string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if !strings.ContainsAny(a, "*?[") {
			// A pipe (<(zcat shard.gz)) or FIFO is refused here, before
			// any work, naming it: the run reads its files more than once.
			if err := inputfile.Check(a); err != nil {
				return nil, fmt.Errorf("%s: %w", flag, err)
			}
			out = append(out, a)
			continue
		}
		m, err := filepath.Glob(a)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", flag, a, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("%s %q matches no file", flag, a)
		}
		out = append(out, m...)
	}
	for _, f := range out {
		// Missing or gzip-compressed: a usage error now, not a failure
		// once the run has started.
		if err := data.CheckSparseFile(f); err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
	}
	return out, nil
}
