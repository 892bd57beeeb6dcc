package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
)

func TestNewLoggerRejectsBadInput(t *testing.T) {
	cases := []struct{ format, level string }{{"xml", "info"}, {"console", "loud"}}
	for _, tc := range cases {
		if _, err := newLogger(tc.format, tc.level); err == nil {
			t.Errorf("newLogger(%q, %q): want error", tc.format, tc.level)
		}
	}
	for _, f := range []string{"console", "json"} {
		if _, err := newLogger(f, "debug"); err != nil {
			t.Errorf("newLogger(%q): %v", f, err)
		}
	}
}

func TestHoistGlobalFlags(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"m", "train", "--epochs", "2"}, []string{"m", "train", "--epochs", "2"}},
		{[]string{"m", "train", "--log-format", "json", "--epochs", "2"}, []string{"m", "--log-format", "json", "train", "--epochs", "2"}},
		{[]string{"m", "train", "--log-level=debug"}, []string{"m", "--log-level=debug", "train"}},
		{[]string{"m", "--log-level", "warn", "bench", "link", "-log-format", "json"}, []string{"m", "-log-format", "json", "--log-level", "warn", "bench", "link"}},
		{[]string{"m", "worker", "--", "--log-format", "json"}, []string{"m", "worker", "--", "--log-format", "json"}},
	} {
		if got := hoistGlobalFlags(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("hoistGlobalFlags(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestEvalExampleNamesACheckpoint: eval's help names a checkpoint file as
// meshtrain writes them.
func TestEvalExampleNamesACheckpoint(t *testing.T) {
	for _, c := range newApp().Commands {
		if c.Name == "eval" && !strings.Contains(c.CustomHelpTemplate, checkpoint.FileName(936)) {
			t.Errorf("eval's example does not name a checkpoint as written (%s):\n%s", checkpoint.FileName(936), c.CustomHelpTemplate)
		}
	}
}
