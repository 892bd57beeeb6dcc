package main

import "testing"

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
