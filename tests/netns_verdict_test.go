package tests

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/internal/longtest"

	"github.com/meshtrain/meshtrain/mirrored/report"
	"github.com/meshtrain/meshtrain/tests/netns"
)

// The verdict across emulated hosts: links slower than the cores make the
// network the bottleneck, and a slowed host is named.

// lenetRun is a short LeNet-5 run whose 247 KB gradient is exchanged
// every step.
var lenetRun = []string{"--model", "lenet", "--epochs", "1", "--batch", "64", "--train-examples", "3200", "--test-examples", "500",
	"--collective-timeout", "30s", "--measure-wait"}

func hostsVerdict(t *testing.T, n int, rate netns.Rate, args ...string) report.Verdict {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := emulatedHosts(t, ctx, n, rate)
	dir := t.TempDir()
	sum := filepath.Join(dir, "summary.json")
	res, err := runWorkers(t, ctx, h, dir, noDelay, append([]string{"--summary", sum}, args...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, res[0])
	}
	s := readSummary(t, sum)
	if s.Verdict == nil {
		t.Fatalf("no verdict in the summary")
	}
	t.Logf("%s", res[0].Stdout[strings.LastIndex(res[0].Stdout, "bottleneck:"):])
	return *s.Verdict
}

// TestLongEmulatedHostsVerdictBandwidth: LeNet-5's dense gradient over
// 100 Mbit links, at batch 16 (a quarter of the computing per byte sent),
// is network bandwidth.
func TestLongEmulatedHostsVerdictBandwidth(t *testing.T) {
	longtest.Require(t, "a verdict that depends on timing on emulated hosts")
	if v := hostsVerdict(t, 2, 100*netns.Mbit, append(lenetRun, "--batch", "16", "--train-examples", "1600")...); v.Resource != report.Bandwidth {
		t.Fatalf("100 Mbit links: %s, want %s", v, report.Bandwidth)
	}
}

// TestLongEmulatedHostsVerdictSlowPeer: on 1 Gbit links, rank 2 of 3 slowed
// 4× is the straggler.
func TestLongEmulatedHostsVerdictSlowPeer(t *testing.T) {
	longtest.Require(t, "a verdict that depends on timing on emulated hosts")
	if v := hostsVerdict(t, 3, netns.Gbit, append(lenetRun, "--slow-peer", "2:4")...); v.Resource != report.Straggler || v.Rank != 2 {
		t.Fatalf("rank 2 slowed: %s, want a straggler at rank 2", v)
	}
}
