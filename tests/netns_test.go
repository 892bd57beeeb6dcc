package tests

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/internal/longtest"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/tests/netns"
)

// These tests run meshtrain across emulated hosts (package netns): one
// network namespace per host, each link shaped by tc tbf in both
// directions. They need root, ip and tc, and skip saying so without them;
// MESHTRAIN_NETNS=off skips them too.

// removeStale runs once per test binary: clusters left by a killed run.
var removeStale sync.Once

// emulatedHosts brings up n hosts at rate for the test, removed when it
// ends however it ends, or skips the test saying why it cannot.
func emulatedHosts(t *testing.T, ctx context.Context, n int, rate netns.Rate) *netns.Hosts {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Skipf("no emulated hosts here: %v", err)
	}
	removeStale.Do(func() {
		if err := netns.RemoveStale(); err != nil {
			t.Logf("removing clusters left by killed runs: %v", err)
		}
	})
	h, err := netns.Up(ctx, netns.TagForProcess(), n, rate)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Down(); err != nil {
			t.Errorf("removing the emulated hosts: %v", err)
		}
		if left, _ := netns.Namespaces(); strings.Contains(strings.Join(left, " "), netns.Prefix+h.Tag+"-") {
			t.Errorf("namespaces left after Down: %q", left)
		}
	})
	return h
}

var (
	netbenchOnce sync.Once
	netbench     string
	netbenchErr  error
)

// netbenchBinary builds the measuring program once, beside meshtrain's
// binary (removed by TestMain).
func netbenchBinary(t *testing.T, ctx context.Context) string {
	t.Helper()
	netbenchOnce.Do(func() { netbench, netbenchErr = netns.Build(ctx, filepath.Dir(binary), netns.NetbenchPackage) })
	if netbenchErr != nil {
		t.Fatal(netbenchErr)
	}
	return netbench
}

// runWorkers runs one `meshtrain worker` per host, each from its own
// TF_CONFIG file and writing its report into dir, host i starting delay(i)
// late.
func runWorkers(t *testing.T, ctx context.Context, h *netns.Hosts, dir string, delay func(i int) time.Duration, args ...string) ([]netns.Result, error) {
	t.Helper()
	return runOnHosts(t, ctx, h, dir, delay, func(i int, spec string) []string {
		return append([]string{"worker", "--tf-config", spec, "--report", filepath.Join(dir, fmt.Sprintf("report%d.json", i))}, args...)
	})
}

// runOnHosts runs meshtrain with args(i, its TF_CONFIG file) on every host
// i, as a peer of one cluster across the hosts (port 7000 on each), host i
// starting delay(i) late.
func runOnHosts(t *testing.T, ctx context.Context, h *netns.Hosts, dir string, delay func(i int) time.Duration, args func(i int, spec string) []string) ([]netns.Result, error) {
	t.Helper()
	peers := make([]string, h.N)
	for i := range peers {
		peers[i] = net.JoinHostPort(h.IP(i), "7000")
	}
	secret := "MESHTRAIN_CLUSTER_SECRET=" + hex.EncodeToString([]byte("emulated hosts' secret, 32 bytes"))
	return h.RunOnAll(ctx, func(i int) netns.Proc {
		spec := filepath.Join(dir, fmt.Sprintf("tf_config%d.json", i))
		if err := os.WriteFile(spec, []byte(tfConfig(peers, i)), 0o644); err != nil {
			t.Error(err)
		}
		return netns.Proc{Delay: delay(i), Env: []string{secret, "TF_CONFIG="}, Args: append([]string{binary}, args(i, spec)...)}
	})
}

// checkReports reads the hosts' reports from dir and checks that every
// host ran every step and ended with the same parameters.
func checkReports(t *testing.T, dir string, res []netns.Result) []mirrored.Summary {
	t.Helper()
	reports := make([]mirrored.Summary, len(res))
	for i := range reports {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("report%d.json", i)))
		if err == nil {
			err = json.Unmarshal(b, &reports[i])
		}
		if err != nil || reports[i].Run == nil {
			t.Fatalf("host %d's report: %v\n%s", i, err, res[i])
		}
		p, want := reports[i].Peer, reports[0].Peer.ParamsSHA256
		t.Logf("host %d: rank %d, %d steps, accuracy %.4f, %d bytes sent, params %.12s…, %v", i, p.Rank, p.Steps, p.TestAccuracy, p.BytesSent, p.ParamsSHA256, res[i].Elapsed.Round(time.Millisecond))
		if p.Rank != i || p.Steps != reports[i].Run.Steps || p.Steps == 0 || len(p.ParamsSHA256) != 64 || p.ParamsSHA256 != want {
			t.Errorf("host %d: rank %d, %d of %d steps, params %q; host 0's params %q", i, p.Rank, p.Steps, reports[i].Run.Steps, p.ParamsSHA256, want)
		}
	}
	return reports
}

// softmaxRun is a short training run: 62 steps of 32 examples per host.
var softmaxRun = []string{"--model", "softmax", "--epochs", "1", "--batch", "32", "--lr", "0.02",
	"--train-examples", "6000", "--test-examples", "1000", "--hash-every", "20", "--collective-timeout", "20s"}

// TestEmulatedHostsTrain trains across 3 hosts on 1 Gbit links: every host
// ends with bitwise-identical parameters.
func TestEmulatedHostsTrain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := emulatedHosts(t, ctx, 3, netns.Gbit)
	dir := t.TempDir()
	res, err := runWorkers(t, ctx, h, dir, func(int) time.Duration { return 0 }, softmaxRun...)
	if err != nil {
		t.Fatal(err)
	}
	reports := checkReports(t, dir, res)
	if acc := reports[0].Peer.TestAccuracy; acc < 0.8 {
		t.Errorf("test accuracy %.4f, want ≥ 0.8", acc)
	}
}

// TestLongEmulatedHostsLateWorker starts one of 3 workers 12 s after the
// others, past libp2p's 10 s protocol negotiation timeout: the two early
// ones connect at once and open their streams, which sit idle until the
// late one joins. It must still join and the run end as usual.
func TestLongEmulatedHostsLateWorker(t *testing.T) {
	longtest.Require(t, "a late worker on emulated hosts")
	const late = 12 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := emulatedHosts(t, ctx, 3, netns.Gbit)
	dir := t.TempDir()
	res, err := runWorkers(t, ctx, h, dir, func(i int) time.Duration {
		if i == 2 {
			return late
		}
		return 0
	}, softmaxRun...)
	if err != nil {
		t.Fatal(err)
	}
	checkReports(t, dir, res)
}

// TestLongEmulatedHostsAllReduceRate: a TLS all-reduce of 32 MiB between two
// hosts on 1 Gbit links runs at ≥ 0.8× the raw TCP rate of the same links
// (measured in the same pattern: both directions at once).
func TestLongEmulatedHostsAllReduceRate(t *testing.T) {
	longtest.Require(t, "the all-reduce rate against raw TCP on emulated hosts")
	const size, want = 32 << 20, 0.8
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := emulatedHosts(t, ctx, 2, netns.Gbit)
	bin := netbenchBinary(t, ctx)
	tcp, err := netns.MeasureTCP(ctx, h, bin, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	raw := netns.MeanRate(tcp)
	// The same over crypto/tls alone (hosts bench -raw-tls).
	tlsOnly, err := netns.MeasureTCP(ctx, h, bin, time.Second, "-tls")
	if err != nil {
		t.Fatal(err)
	}
	rawTLS := netns.MeanRate(tlsOnly)
	ar, err := netns.MeasureAllReduce(ctx, h, bin, "tls", []int64{size}, 3)
	if err != nil {
		t.Fatal(err)
	}
	got := ar[0].Median()
	t.Logf("raw TCP %.1f MB/s (%+v), raw TLS %.1f MB/s; TLS all-reduce of %d MiB: busbw %.1f MB/s (reps %.0f), %.2f× raw; load %s",
		raw/1e6, tcp, rawTLS/1e6, size>>20, got/1e6, ar[0].BusBW, got/raw, netns.LoadAverage())
	limit := h.Rate.BytesPerSecond()
	if raw < 0.5*limit || raw > 1.05*limit {
		t.Errorf("raw TCP %.1f MB/s on a %s link (%.1f MB/s): the shaping is off", raw/1e6, h.Rate, limit/1e6)
	}
	if rawTLS < 0.5*limit || rawTLS > 1.05*limit {
		t.Errorf("raw TLS %.1f MB/s on a %s link (%.1f MB/s): want between 0.5× and the link's rate", rawTLS/1e6, h.Rate, limit/1e6)
	}
	if got < want*raw {
		t.Errorf("TLS all-reduce busbw %.1f MB/s is %.2f× raw TCP %.1f MB/s, want ≥ %.1f×", got/1e6, got/raw, raw/1e6, want)
	}
}

// timingAttempts bounds how often a timing goal is measured again: the
// default test run shares the 2 cores with other packages' tests, and one
// busy moment can move a median by a fifth (a 256 KiB all-reduce measured
// 18.8 ms against its 15.9, a delay 1.77 ms against 1.0 in CI), while a
// broken feature misses on every attempt.
const timingAttempts = 3

// meetsTiming runs measure until it reports no miss, at most
// timingAttempts times, logging each miss, and fails t with the last one.
func meetsTiming(t *testing.T, measure func() (miss string)) {
	t.Helper()
	var miss string
	for i := range timingAttempts {
		if miss = measure(); miss == "" {
			return
		}
		t.Logf("attempt %d of %d: %s; load %s", i+1, timingAttempts, miss, netns.LoadAverage())
	}
	t.Error(miss)
}
