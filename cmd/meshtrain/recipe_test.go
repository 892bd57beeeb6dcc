package main

import (
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/mirrored"
)

// parseConfig runs configFromFlags over args through a throwaway command
// holding the training flags.
func parseConfig(t *testing.T, args ...string) mirrored.Config {
	t.Helper()
	var got mirrored.Config
	app := &cli.App{Name: "t", Commands: []*cli.Command{{
		Name:  "x",
		Flags: trainingFlags("batch"),
		Action: func(c *cli.Context) (err error) {
			got, err = configFromFlags(c)
			return err
		},
	}}}
	if err := app.Run(append([]string{"t", "x"}, args...)); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestRecipeFlags: the recipe flags default to the chosen model's recipe,
// and a flag given on the command line wins over it.
func TestRecipeFlags(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		lr          float64
		batch       int
		schedule    string
		sameAsModel bool // otherwise only the fields checked
	}{
		{nil, 0.05, 64, "step", true},
		{[]string{"--model", "lenet"}, 0.05, 64, "step", true},
		{[]string{"--model", "softmax"}, 0.02, 64, "step", true},
		{[]string{"--model", "sparse-lr"}, 0.2, 64, "constant", true},
		{[]string{"--model", "sparse-lr", "--lr", "0.05"}, 0.05, 64, "constant", false},
		{[]string{"--model", "softmax", "--lr", "0.5", "--batch", "16", "--lr-schedule", "cosine"}, 0.5, 16, "cosine", false},
		{[]string{"--lr", "0.3", "--model", "lenet"}, 0.3, 64, "step", false},
	} {
		got := parseConfig(t, tc.args...)
		if got.LR != tc.lr || got.BatchSize != tc.batch || got.Schedule != tc.schedule {
			t.Errorf("%v: lr %v batch %d schedule %s, want %v %d %s", tc.args, got.LR, got.BatchSize, got.Schedule, tc.lr, tc.batch, tc.schedule)
		}
		if want := mirrored.DefaultConfigFor(got.Model); tc.sameAsModel && got != want {
			t.Errorf("%v: %+v, want the %s recipe %+v", tc.args, got, got.Model, want)
		}
	}
}

func TestPerModelHelp(t *testing.T) {
	if got, want := perModel(func(c mirrored.Config) any { return c.LR }), "per --model: lenet 0.05, softmax 0.02, sparse-lr 0.2"; got != want {
		t.Errorf("--lr's default: %q, want %q", got, want)
	}
	if got := perModel(func(c mirrored.Config) any { return c.Epochs }); got != "10" {
		t.Errorf("--epochs' default: %q, want 10", got)
	}
}
