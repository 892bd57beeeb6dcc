package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/collective/p2p"
)

// TestPeerCountRefused: a cluster of 65,536 workers (a TF_CONFIG's
// worker, launch -n) or a compare whose peers' links exceed the open
// files this process may have (here 20,000, set through openFilesLimit)
// is refused with a usage error (exit 2) at once (0.8 s to read the
// 65,536 addresses), before any
// identity is derived: it was accepted and spent 1.3 GB and 57 s
// deriving identities before timing out.
func TestPeerCountRefused(t *testing.T) {
	orig := openFilesLimit
	openFilesLimit = func() int64 { return 20000 }
	t.Cleanup(func() { openFilesLimit = orig })
	workers := make([]string, 1<<16)
	for i := range workers {
		workers[i] = fmt.Sprintf("10.%d.%d.1:7000", i>>8, i&255)
	}
	b, err := json.Marshal(map[string]any{"cluster": map[string]any{"worker": workers}, "task": map[string]any{"type": "worker", "index": 0}})
	if err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(t.TempDir(), "tf_config.json")
	if err := os.WriteFile(tf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TF_CONFIG", "")
	t.Setenv("MESHTRAIN_CLUSTER_SECRET", strings.Repeat("ab", 32))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"worker of 65,536", []string{"worker", "--tf-config", tf, "--model", "softmax"}, "65536 workers: every peer holds a connection to every other, 65535 open files"},
		{"launch -n 65536", []string{"launch", "-n", "65536", "--model", "softmax"}, "65536 workers: every peer holds a connection to every other"},
		{"compare -n 200", []string{"compare", "-n", "200", "--model", "softmax", "--out", t.TempDir()}, "200 workers: compare runs every peer in this process, both ends of every connection, 39800 open files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := runWithin(t, append([]string{"meshtrain", "--log-level", "error"}, tc.args...))
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "limit of 20000 (ulimit -n)") {
				t.Fatalf("got %v, want a usage error saying %q", err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refused after %v, want within seconds", d)
			}
		})
	}
}

// TestPeerCountOverMaximum (issue 32 item 5): more workers than
// p2p.MaxPeers are refused with a usage error (exit 2) naming the maximum
// and why, however many open files the process may have, before any
// identity is derived; the maximum itself passes the check.
func TestPeerCountOverMaximum(t *testing.T) {
	orig := openFilesLimit
	t.Cleanup(func() { openFilesLimit = orig })
	want := fmt.Sprintf("more than the maximum of %d, whatever ulimit -n allows: every peer connects to every other and derives every peer's identity", p2p.MaxPeers)
	for _, tc := range []struct {
		name    string
		limit   int64 // ulimit -n; 0: unknown
		workers int
		refused bool
	}{
		{"65,536 under a high limit", 1 << 20, 1 << 16, true},
		{"65,536 with the limit unknown", 0, 1 << 16, true},
		{"one over the maximum", 1 << 20, p2p.MaxPeers + 1, true},
		{"the maximum", 1 << 20, p2p.MaxPeers, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			openFilesLimit = func() int64 { return tc.limit }
			err := checkPeerCount(&cli.Context{Command: &cli.Command{Name: "launch"}}, tc.workers)
			var ue usageError
			if refused := errors.As(err, &ue) && strings.Contains(err.Error(), want); refused != tc.refused || (!tc.refused && err != nil) {
				t.Fatalf("%d workers: %v, want refused %v saying %q", tc.workers, err, tc.refused, want)
			}
		})
	}
}
