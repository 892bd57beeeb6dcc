package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestSweepPassedFlags: sweep reads --model-file (its compile settings
// too), --data, the link faults and the elastic flags, checks them
// against every point, and records those given in its settings; a
// recorded membership, which fits one cluster size, is not a sweep's.
func TestSweepPassedFlags(t *testing.T) {
	base := []string{"--out", t.TempDir(), "--workers", "1,2", "--batch", "50"}
	for _, tc := range []struct {
		args     []string
		settings map[string]string
		err      string
	}{
		{[]string{"--model-file", kerasFixture("compile_adam_tfjs_model.json"), "--data", "set.npz", "--link-delay", "1ms", "--link-rate", "100mbit",
			"--elastic", "--commit-every", "5", "--max-restarts", "2"},
			map[string]string{"model-file": kerasFixture("compile_adam_tfjs_model.json"), "data": "set.npz", "link-delay": "1ms", "link-rate": "100mbit",
				"elastic": "true", "commit-every": "5", "max-restarts": "2", "job": "keras adam 0.002 constant"}, ""},
		{nil, map[string]string{"job": "lenet sgd 0.05 step"}, ""},
		{[]string{"--max-restarts", "1"}, nil, "--max-restarts without --elastic"},
		{[]string{"--link-delay", "-1s"}, nil, "--link-delay -1s: want ≥ 0"},
		{[]string{"--link-rate", "fast"}, nil, "--link-rate: "},
		{[]string{"--elastic", "--min-workers", "2"}, nil, "--min-workers 2: want 1 to the cluster's 1 workers"},
		{[]string{"--elastic", "--strategies", "gossip", "--workers", "2"}, nil, "--elastic with --strategies gossip: the elastic mode is the ring's"},
		{[]string{"--model-file", kerasFixture("compile_rmsprop_mse_tfjs_model.json")}, nil, "mean_squared_error: meshtrain trains classifiers"},
		{[]string{"--membership-schedule", "run.json"}, nil, "-membership-schedule"}, // "not defined", or "unknown flag" once newApp set the typo hook
	} {
		i := slices.IndexFunc(commands, func(c *cli.Command) bool { return c.Name == "sweep" })
		cmd := *commands[i]
		var settings map[string]string
		cmd.Action = func(c *cli.Context) error {
			cfg, err := sweepFromFlags(c)
			settings = cfg.Settings
			if settings != nil {
				j := cfg.Job
				settings["job"] = fmt.Sprint(j.Model, " ", j.Optimizer, " ", j.LR, " ", j.Schedule)
			}
			return err
		}
		app := &cli.App{Commands: []*cli.Command{&cmd}, Writer: &strings.Builder{}, ErrWriter: &strings.Builder{}}
		err := app.Run(append(append([]string{"meshtrain", "sweep"}, base...), tc.args...))
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.err)
			continue
		}
		for k, v := range tc.settings {
			if settings[k] != v {
				t.Errorf("%q: setting %s %q, want %q", tc.args, k, settings[k], v)
			}
		}
		if tc.err == "" && len(tc.args) == 0 && (settings["model-file"] != "" || settings["elastic"] != "" || settings["link-delay"] != "") {
			t.Errorf("a sweep without them records %v", settings)
		}
	}
}
