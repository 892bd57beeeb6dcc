package p2p

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// startEach runs New for every config at once and returns each rank's
// error and how long the slowest took.
func startEach(cfgs []Config) ([]error, time.Duration) {
	start := time.Now()
	errs := make([]error, len(cfgs))
	ts := make([]*Transport, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		wg.Go(func() { ts[i], errs[i] = New(context.Background(), cfg) })
	}
	wg.Wait()
	closeAll(ts)
	return errs, time.Since(start)
}

// TestStartupMistakes: configuration mistakes that used to end in a
// time-out are errors at once that name the mistake, on every rank.
func TestStartupMistakes(t *testing.T) {
	// otherSecretOn gives rank odd another secret than the others.
	otherSecretOn := func(odd int) func(peers []string, r int) Config {
		return func(peers []string, r int) Config {
			c := Config{Rank: r, Peers: peers[:2], ClusterSecret: testSecret}
			if r == odd {
				c.ClusterSecret = append(slices.Clone(testSecret), 'x')
			}
			return c
		}
	}
	const otherSecret = "identity does not match: was it started with a different cluster secret (MESHTRAIN_CLUSTER_SECRET)?"
	tests := []struct {
		name string
		sec  Security
		cfg  func(peers []string, r int) Config
		want string
	}{
		{"different cluster secret", SecurityTLS, otherSecretOn(1), otherSecret},
		{"different cluster secret over quic", SecurityQUIC, otherSecretOn(0), otherSecret},
		{"different cluster secret over plaintext", SecurityPlaintext, otherSecretOn(1), otherSecret},
		{"2 and 3 workers", SecurityNoise, func(peers []string, r int) Config {
			return Config{Rank: r, Peers: peers[:2+r], ClusterSecret: testSecret}
		}, "cluster list has 3 peers, this rank's has 2|cluster list has 2 peers, this rank's has 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			peers := freeAddrs(t, 3, tt.sec == SecurityQUIC)
			cfgs := make([]Config, 2)
			for r := range cfgs {
				cfgs[r] = tt.cfg(peers, r)
				cfgs[r].Security, cfgs[r].Timeout = tt.sec, 30*time.Second
			}
			errs, took := startEach(cfgs)
			for r, err := range errs {
				if err == nil || !matchesAny(err.Error(), tt.want) {
					t.Errorf("rank %d: got %v, want an error saying %q", r, err, tt.want)
				}
			}
			if took > 15*time.Second {
				t.Errorf("took %v: the mistake should be reported at once, not at the 30 s time-out", took)
			}
		})
	}
}

func matchesAny(s, alternatives string) bool {
	for _, a := range strings.Split(alternatives, "|") {
		if strings.Contains(s, a) {
			return true
		}
	}
	return false
}

// TestStartupSameRankTwice: a second process started as a running rank
// fails to listen, saying so (libp2p's SO_REUSEPORT used to let it share
// the port, and both timed out).
func TestStartupSameRankTwice(t *testing.T) {
	peers := freeAddrs(t, 2, false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := New(ctx, Config{Rank: 0, Peers: peers, ClusterSecret: testSecret, Timeout: 30 * time.Second})
		done <- err
	}()
	defer func() { cancel(); <-done }()
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	waitListening(t, wctx, peers[0])
	_, err := New(ctx, Config{Rank: 0, Peers: peers, ClusterSecret: testSecret, Timeout: 30 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "the address is in use; is another process already running as rank 0 (the same task index started twice)") {
		t.Fatalf("got %v, want an error naming the address in use", err)
	}
}

// TestStartupPSKHint: a different private-network key cannot be told
// apart from a slow peer, so the time-out says what to check.
func TestStartupPSKHint(t *testing.T) {
	peers := freeAddrs(t, 2, false)
	psk := func(b byte) []byte { return slices.Repeat([]byte{b}, 32) }
	cfgs := []Config{
		{Rank: 0, Peers: peers, ClusterSecret: testSecret, PSK: psk(1), Timeout: 2 * time.Second},
		{Rank: 1, Peers: peers, ClusterSecret: testSecret, PSK: psk(2), Timeout: 2 * time.Second},
	}
	errs, _ := startEach(cfgs)
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "a peer started with a different private-network key (MESHTRAIN_PSK)") {
			t.Errorf("rank %d: got %v", r, err)
		}
	}
}
