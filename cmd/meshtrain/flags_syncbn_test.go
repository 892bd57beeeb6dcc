package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestSyncBatchNormFlag: --sync-batchnorm sets the job's SyncBatchNorm on
// worker and launch for a model file with batch normalization, and is
// refused, naming why, for gossip, sparse-lr, the built-in models and a
// model file without it; train refuses the same with exit code 2 before
// any work; compare and sweep do not take it.
func TestSyncBatchNormFlag(t *testing.T) {
	resnet := filepath.Join("..", "..", "nn", "keras", "testdata", "resnet20_keras3.json")
	cnn := filepath.Join("..", "..", "nn", "keras", "testdata", "mnist_cnn_keras3.json")
	sparseFile := filepath.Join(t.TempDir(), "train.libsvm")
	if err := os.WriteFile(sparseFile, []byte("1 3:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd  string
		args []string
		want bool
		err  string
	}{
		{"worker", []string{"--model-file", resnet}, false, ""},
		{"worker", []string{"--model-file", resnet, "--sync-batchnorm"}, true, ""},
		{"launch", []string{"--model-file", resnet, "--sync-batchnorm"}, true, ""},
		{"worker", []string{"--model-file", resnet, "--sync-batchnorm", "--strategy", "gossip"}, false, "gossip's replicas step apart"},
		{"worker", []string{"--model", "lenet", "--sync-batchnorm"}, false, "built-in models have no BatchNormalization"},
		{"worker", []string{"--model-file", cnn, "--sync-batchnorm"}, false, "has no BatchNormalization layer"},
		{"worker", []string{"--model", "sparse-lr", "--train-files", sparseFile, "--sync-batchnorm"}, false, "with sparse-lr: the model has no batch normalization"},
	} {
		i := slices.IndexFunc(commands, func(c *cli.Command) bool { return c.Name == tc.cmd })
		cmd := *commands[i]
		got := false
		cmd.Action = func(c *cli.Context) error {
			job, _, err := jobFromFlags(c, 2)
			got = job.SyncBatchNorm
			return err
		}
		app := &cli.App{Commands: []*cli.Command{&cmd}}
		err := app.Run(append([]string{"meshtrain", tc.cmd, "--allow-unverified"}, tc.args...))
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) || got != tc.want {
			t.Errorf("%s %q: %v, sync %v; want %q, %v", tc.cmd, tc.args, err, got, tc.err, tc.want)
		}
	}
	for _, args := range [][]string{{"--model", "lenet"}, {"--model-file", cnn, "--allow-unverified"}} {
		err := newApp().RunContext(context.Background(), append([]string{"meshtrain", "train", "--sync-batchnorm"}, args...))
		if code := exitCode(context.Background(), err); code != exitUsage || !strings.Contains(err.Error(), "BatchNormalization") {
			t.Errorf("train --sync-batchnorm %q: exit %d, %v; want %d naming BatchNormalization", args, code, err, exitUsage)
		}
	}
	for _, name := range []string{"compare", "sweep"} {
		i := slices.IndexFunc(commands, func(c *cli.Command) bool { return c.Name == name })
		if slices.ContainsFunc(commands[i].Flags, func(f cli.Flag) bool { return f.Names()[0] == "sync-batchnorm" }) {
			t.Errorf("%s takes --sync-batchnorm, which its gossip runs could not use", name)
		}
	}
}
