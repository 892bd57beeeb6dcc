package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
)

// TestCallbackFlagsBad: a bad callback setting is a usage error (exit 2)
// naming its flag, before any data is loaded.
func TestCallbackFlagsBad(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--early-stop-patience", "-1"}, "--early-stop-patience -1"},
		{[]string{"train", "--early-stop-patience", "2", "--early-stop-min-delta", "-0.5"}, "--early-stop-min-delta -0.5"},
		{[]string{"train", "--early-stop-min-delta", "0.1"}, "--early-stop-min-delta is a setting of early stopping"},
		{[]string{"train", "--restore-best"}, "--restore-best"},
		{[]string{"train", "--reduce-lr-on-plateau", "--reduce-lr-factor", "1"}, "--reduce-lr-factor 1"},
		{[]string{"train", "--reduce-lr-on-plateau", "--reduce-lr-factor", "1.5"}, "--reduce-lr-factor 1.5"},
		{[]string{"train", "--reduce-lr-on-plateau", "--reduce-lr-patience", "-3"}, "--reduce-lr-patience -3"},
		{[]string{"train", "--reduce-lr-on-plateau", "--reduce-lr-cooldown", "-1"}, "--reduce-lr-cooldown -1"},
		{[]string{"train", "--reduce-lr-factor", "0.5"}, "--reduce-lr-factor is a setting of --reduce-lr-on-plateau"},
		{[]string{"train", "--early-stop-patience", "1", "--monitor", "val_loss"}, `--monitor "val_loss"`},
		{[]string{"train", "--monitor", "accuracy"}, "--monitor accuracy: no callback watches it"},
		{[]string{"train", "--save-best", filepath.Join(file, "best.safetensors")}, "--save-best: "},
		{[]string{"train", "--save-best", fifo}, "--save-best: " + fifo + " is a FIFO"},
		{[]string{"train", "--save-best", dir}, "--save-best: " + dir + " is a directory"},
		{[]string{"launch", "-n", "2", "--strategy", "gossip", "--early-stop-patience", "1"}, "--strategy gossip is not supported"},
		{[]string{"launch", "-n", "2", "--reduce-lr-on-plateau", "--reduce-lr-factor", "0"}, "--reduce-lr-factor 0"}, // jobFromFlags: worker's too
	} {
		err := newApp().Run(append([]string{"meshtrain", "--log-level", "error"}, tc.args...))
		var ue usageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v (usage error: %t), want a usage error mentioning %q", tc.args, err, errors.As(err, &ue), tc.want)
		}
	}
}

// TestCallbackFlagsRun trains through `meshtrain train` on a set whose
// test labels are each the next class, so that every epoch after the
// first is worse on the test set: each callback flag must act on it.
func TestCallbackFlagsRun(t *testing.T) {
	t.Setenv(data.EnvDataDir, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // no MNIST to fall back on
	set := bandSet(600, 120, 10, 12, 3)
	for i, l := range set.Test.Labels {
		set.Test.Labels[i] = (l + 1) % 3
	}
	dir := t.TempDir()
	if err := data.WriteMNIST(dir, set, false); err != nil {
		t.Fatal(err)
	}
	best := filepath.Join(t.TempDir(), "best.safetensors")
	for _, tc := range []struct {
		name   string
		flags  []string
		epochs int    // run
		event  string // the start of the last line the callbacks said
		check  func(*mirrored.Result) bool
	}{
		{"early stopping", []string{"--early-stop-patience", "1", "--restore-best"}, 2,
			"epoch 2: test loss did not improve for 1 epoch (best ",
			func(r *mirrored.Result) bool {
				return r.Callbacks.StoppedEpoch == 2 && r.Callbacks.RestoredEpoch == 1 && r.FinalAccuracy == r.EpochResults[0].TestAccuracy
			}},
		{"early stopping on accuracy", []string{"--early-stop-patience", "0", "--monitor", "accuracy"}, 2,
			"epoch 2: test accuracy did not improve for 1 epoch (best ",
			func(r *mirrored.Result) bool {
				return r.Callbacks.StoppedEpoch == 2 && r.Callbacks.Monitor == "accuracy"
			}},
		{"plateau", []string{"--reduce-lr-on-plateau", "--reduce-lr-patience", "1", "--reduce-lr-factor", "0.5", "--lr-schedule", "constant", "--warmup-epochs", "0"}, 3,
			"epoch 3: test loss did not improve for 2 epochs (best ",
			func(r *mirrored.Result) bool {
				return len(r.Callbacks.Reductions) == 2 && r.EpochResults[2].LR == r.LR*0.5 && r.EpochResults[1].LR == r.LR
			}},
		{"save best", []string{"--save-best", best}, 3,
			"epoch 1: test loss improved to ",
			func(r *mirrored.Result) bool {
				ck, err := checkpoint.Read(best)
				return err == nil && ck.Epoch == 2 && r.Callbacks.SavedEpoch == 1
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			summary := filepath.Join(t.TempDir(), "summary.json")
			args := append([]string{"meshtrain", "--log-level", "error", "train", "--model", "softmax", "--data-dir", dir, "--allow-unverified",
				"--epochs", "3", "--batch", "32", "--summary", summary}, tc.flags...)
			if err := newApp().Run(args); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(summary)
			if err != nil {
				t.Fatal(err)
			}
			var res mirrored.Result
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			if res.Callbacks == nil || len(res.EpochResults) != tc.epochs || len(res.Callbacks.Events) == 0 {
				t.Fatalf("%d epochs, callbacks %+v: want %d epochs and what the callbacks did", len(res.EpochResults), res.Callbacks, tc.epochs)
			}
			if ev := res.Callbacks.Events; !strings.HasPrefix(ev[len(ev)-1], tc.event) || !tc.check(&res) {
				t.Errorf("callbacks %+v, epochs %+v: want the last event to start %q", res.Callbacks, res.EpochResults, tc.event)
			}
		})
	}
}
