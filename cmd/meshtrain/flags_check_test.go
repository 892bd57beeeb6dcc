package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestEveryCommandHasAnExample: every command's help starts with one.
func TestEveryCommandHasAnExample(t *testing.T) {
	forEachCommand(newApp().Commands, func(c *cli.Command) {
		if c.Name != "help" && !strings.HasPrefix(c.CustomHelpTemplate, "EXAMPLE:\n   ") {
			t.Errorf("%s: help does not start with an example", c.Name)
		}
	})
}

// TestIgnoredFlags: flags the model or strategy does not read are named,
// the others not.
func TestIgnoredFlags(t *testing.T) {
	for _, tc := range []struct {
		command string
		args    []string
		want    []string // the flags named, in order
	}{
		{"train", []string{"--model", "softmax", "--epochs", "2"}, nil},
		{"train", []string{"--model", "softmax", "--train-files", "x", "--l2", "1"}, []string{"--train-files", "--l2"}},
		{"launch", []string{"--model", "sparse-lr", "--train-files", "x", "--momentum", "0.5", "--data-dir", "d", "--lr", "0.1"}, []string{"--momentum", "--data-dir"}},
		{"worker", []string{"--gossip-every", "3"}, []string{"--gossip-every"}},
		{"launch", []string{"--tolerate-loss"}, []string{"--tolerate-loss"}}, // the ring stops at any loss
		{"launch", []string{"--strategy", "gossip", "--tolerate-loss"}, nil},
		{"worker", []string{"--strategy", "gossip", "--gossip-every", "3"}, nil},
		{"compare", []string{"--gossip-every", "3", "--out", "x"}, nil}, // compare runs gossip whatever --strategy
	} {
		var got []string
		i := slices.IndexFunc(commands, func(c *cli.Command) bool { return c.Name == tc.command })
		cmd := *commands[i] // a copy: the registered command keeps its action
		cmd.Action = func(c *cli.Context) error { got = ignoredFlags(c); return nil }
		app := &cli.App{Commands: []*cli.Command{&cmd}}
		if err := app.Run(append([]string{"meshtrain", tc.command}, tc.args...)); err != nil {
			t.Fatalf("%s %q: %v", tc.command, tc.args, err)
		}
		var named []string
		for _, w := range got {
			named = append(named, strings.Fields(w)[0])
		}
		if !slices.Equal(named, tc.want) {
			t.Errorf("%s %q: ignored %q, want %v", tc.command, tc.args, got, tc.want)
		}
	}
}

// TestOutputsCheckedBeforeWork: every command that writes a file or a
// directory refuses a path that cannot be written with a usage error
// (exit 2) naming the flag, before any work: each case also has a
// mistake the work would hit first (an unreadable input, a bad value).
func TestOutputsCheckedBeforeWork(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "out") // under a file: even root cannot write it
	missing := filepath.Join(t.TempDir(), "missing")
	t.Setenv("TF_CONFIG", `{"cluster": {"worker": ["127.0.0.1:1"], "evaluator": ["127.0.0.1:2"]}, "task": {"type": "evaluator", "index": 0}}`)
	for _, tc := range []struct {
		flag string
		args []string
	}{
		{"--out", []string{"model", "calibrate", "--out", bad, "--security", "bogus"}},
		{"--png", []string{"model", "extrapolate", "--png", bad, "--params", missing}},
		{"--out", []string{"data", "text-libsvm", "--out", bad, "--pos", missing, "--neg", missing}},
		{"--out", []string{"data", "gen-criteo", "--out", bad, "--files", "1"}},
		{"--cpuprofile", []string{"bench", "sparse", "--cpuprofile", bad, "--peers", "bogus"}},
		{"--logdir", []string{"worker", "--logdir", bad, "--checkpoint-dir", missing, "--evaluator-timeout", "1ms"}}, // the evaluator task
		{"--out", []string{"sweep", "--out", bad, "--workers", "1", "--batch", "50", "--data-dir", missing}},         // before MNIST is fetched
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			err := newApp().RunContext(context.Background(), append([]string{"meshtrain", "--log-level", "error"}, tc.args...))
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.flag+": ") || !strings.Contains(err.Error(), bad) {
				t.Fatalf("error %v, want a usage error (exit 2) naming %s %s", err, tc.flag, bad)
			}
		})
	}
}
