package main

import (
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
