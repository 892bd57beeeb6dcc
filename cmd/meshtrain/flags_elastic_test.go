package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/mirrored/membership"
)

// TestElasticFlags: the elastic flags are read, checked against the
// cluster's size and the strategy, and refused without --elastic, each
// with the flag named.
func TestElasticFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"run":{"membership":[{"step":10,"members":[0,2]},{"step":40,"members":[0,2,1]}]}}`)
	far := write("far.json", `[{"step":10,"members":[0,5]}]`)
	huge := write("huge.json", "[")
	if err := os.Truncate(huge, membership.MaxScheduleBytes+1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args    []string
		changes int
		err     string
	}{
		{[]string{"--elastic"}, 0, ""},
		{[]string{"--elastic", "--min-workers", "2", "--commit-every", "3", "--membership-schedule", good}, 2, ""},
		{[]string{"--min-workers", "2"}, 0, "--min-workers without --elastic"},
		{[]string{"--membership-schedule", good}, 0, "--membership-schedule without --elastic"},
		{[]string{"--elastic", "--min-workers", "4"}, 0, "--min-workers 4: want 1 to the cluster's 3"},
		{[]string{"--elastic", "--commit-every", "0"}, 0, "--commit-every 0"},
		{[]string{"--elastic", "--membership-schedule", far}, 0, "names peer 5, outside the cluster's 3"},
		{[]string{"--elastic", "--membership-schedule", filepath.Join(dir, "missing.json")}, 0, "no such file"},
		{[]string{"--elastic", "--strategy", "gossip"}, 0, "--elastic with --strategy gossip"},
		// Nothing to replay, which was accepted in silence (exit 0).
		{[]string{"--elastic", "--membership-schedule", write("null.json", "null")}, 0, "no membership changes to replay"},
		{[]string{"--elastic", "--membership-schedule", write("empty.json", "[]")}, 0, "no membership changes to replay"},
		{[]string{"--elastic", "--membership-schedule", write("run.json", `{"run": {}}`)}, 0, "no membership changes to replay"},
		{[]string{"--elastic", "--membership-schedule", write("other.json", `{"model": "lenet"}`)}, 0, "no membership changes to replay"},
		{[]string{"--elastic", "--membership-schedule", huge}, 0, "over the size cap"},
	} {
		i := slices.IndexFunc(commands, func(c *cli.Command) bool { return c.Name == "worker" })
		cmd := *commands[i]
		var changes int
		cmd.Action = func(c *cli.Context) error {
			job, _, err := jobFromFlags(c, 3)
			if el := mirrored.ElasticOf(job.Strategy); el != nil {
				changes = len(el.Schedule)
			}
			return err
		}
		app := &cli.App{Commands: []*cli.Command{&cmd}}
		err := app.Run(append([]string{"meshtrain", "worker", "--model", "softmax"}, tc.args...))
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) || changes != tc.changes {
			t.Errorf("%q: %v with %d changes; want %q, %d", tc.args, err, changes, tc.err, tc.changes)
		}
	}
}
