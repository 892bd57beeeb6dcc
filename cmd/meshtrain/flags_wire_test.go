package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/collective/half"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/replica"
)

// TestWireFlag: --wire picks the Combiner on the commands that train
// (worker, launch, train), is refused where nothing would use it, and
// compare and sweep do not take it.
func TestWireFlag(t *testing.T) {
	for _, tc := range []struct {
		cmd    string
		args   []string
		sparse bool // train: a sparse-lr job
		want   half.Format
		err    string
	}{
		{"worker", nil, false, half.FP32, ""},
		{"worker", []string{"--wire", "fp32"}, false, half.FP32, ""},
		{"worker", []string{"--wire", "bf16"}, false, half.BF16, ""},
		{"launch", []string{"--wire", "fp16"}, false, half.FP16, ""},
		{"train", []string{"--wire", "bf16"}, false, half.BF16, ""},
		{"worker", []string{"--wire", "int8"}, false, half.FP32, `wire format "int8": want fp32`},
		{"worker", []string{"--wire", "bf16", "--strategy", "gossip"}, false, half.FP32, "gossip averages parameters in float32"},
		{"train", []string{"--wire", "fp16"}, true, half.FP16, ""},
	} {
		i := slices.IndexFunc(commands, func(c *cli.Command) bool { return c.Name == tc.cmd })
		cmd := *commands[i]
		got := half.FP32
		cmd.Action = func(c *cli.Context) error {
			if tc.cmd == "train" { // train builds its job itself, then calls wireFromFlags
				job := mirrored.Job{}
				if tc.sparse {
					job.Sparse = &mirrored.SparseConfig{}
				}
				err := wireFromFlags(c, &job)
				if h, ok := job.Combiner.(replica.Half); ok {
					got = h.Format
				}
				if tc.sparse {
					got = job.Sparse.Wire
				}
				return err
			}
			job, _, err := jobFromFlags(c, 3)
			if h, ok := job.Combiner.(replica.Half); ok {
				got = h.Format
			} else if job.Combiner != nil {
				t.Errorf("%s %q: combiner %s", tc.cmd, tc.args, job.Combiner.Name())
			}
			return err
		}
		app := &cli.App{Commands: []*cli.Command{&cmd}}
		args := append([]string{"meshtrain", tc.cmd, "--model", "softmax"}, tc.args...)
		err := app.Run(args)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) || got != tc.want {
			t.Errorf("%s %q: %v with %s; want %q, %s", tc.cmd, tc.args, err, got, tc.err, tc.want)
		}
	}
	for _, name := range []string{"compare", "sweep"} {
		i := slices.IndexFunc(commands, func(c *cli.Command) bool { return c.Name == name })
		if slices.ContainsFunc(commands[i].Flags, func(f cli.Flag) bool { return f.Names()[0] == "wire" }) {
			t.Errorf("%s takes --wire, which its gossip runs could not use", name)
		}
	}
}
