package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/sparse"
)

// parseSparse runs sparseFromFlags over args through a throwaway command
// holding the sparse flags and --model.
func parseSparse(t *testing.T, args ...string) (*mirrored.SparseConfig, error) {
	t.Helper()
	var got *mirrored.SparseConfig
	var gotErr error
	app := &cli.App{Name: "t", Commands: []*cli.Command{{
		Name:  "x",
		Flags: append(sparseFlags(), &cli.StringFlag{Name: "model", Value: "lenet"}),
		Action: func(c *cli.Context) error {
			got, gotErr = sparseFromFlags(c)
			return nil
		},
	}}}
	if err := app.Run(append([]string{"t", "x"}, args...)); err != nil {
		t.Fatal(err)
	}
	return got, gotErr
}

func TestSparseFlags(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"train-00000.tfrecord", "train-00001.tfrecord", "test.libsvm"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if cfg, err := parseSparse(t, "--train-files", "x"); cfg != nil || err != nil {
		t.Fatalf("without --model sparse-lr: %v, %v; want nil, nil", cfg, err)
	}
	cfg, err := parseSparse(t, "--model", "sparse-lr", "--train-files", filepath.Join(dir, "train-*.tfrecord"),
		"--test-files", filepath.Join(dir, "test.libsvm"), "--features", "1000", "--exchange", "dense",
		"--sparse-optimizer", "ftrl", "--l1", "0.5", "--l2", "0.25", "--max-steps", "7")
	if err != nil {
		t.Fatal(err)
	}
	wantTrain := []string{filepath.Join(dir, "train-00000.tfrecord"), filepath.Join(dir, "train-00001.tfrecord")}
	if !slices.Equal(cfg.TrainFiles, wantTrain) || len(cfg.TestFiles) != 1 || cfg.Features != 1000 || cfg.Exchange != sparse.ExchangeDense ||
		cfg.Optimizer != "ftrl" || cfg.L1 != 0.5 || cfg.L2 != 0.25 || cfg.MaxSteps != 7 || cfg.Gather != mirrored.GatherDirect {
		t.Fatalf("parsed %+v", cfg)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "sparse-lr"}, "needs --train-files"},
		{[]string{"--model", "sparse-lr", "--train-files", "a", "--exchange", "both"}, `--exchange "both"`},
		{[]string{"--model", "sparse-lr", "--train-files", filepath.Join(dir, "nothing-*")}, "matches no file"},
	} {
		if _, err := parseSparse(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one mentioning %q", tc.args, err, tc.want)
		}
	}
}
