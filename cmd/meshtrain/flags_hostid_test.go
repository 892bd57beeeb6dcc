package main

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestHostIDChecked: a --host-id that cannot name a host is a usage error
// naming the flag, before the worker connects to anyone.
func TestHostIDChecked(t *testing.T) {
	t.Setenv("TF_CONFIG", `{"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker", "index": 0}}`)
	for _, bad := range []string{"", " rack1", strings.Repeat("h", 257)} {
		err := newApp().RunContext(context.Background(), []string{"meshtrain", "--log-level", "error", "worker", "--host-id", bad, "--epochs", "1"})
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--host-id") {
			t.Errorf("--host-id %q: %v, want a usage error naming --host-id", bad, err)
		}
	}
}
