package p2p

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPeerCountBounded (issue 32 item 5): a cluster of more than MaxPeers
// ranks is refused at once, naming the maximum, before any identity is
// derived (65,536 spent 1.3 GB and 57 s setting up before they timed out);
// MaxPeers itself is allowed.
func TestPeerCountBounded(t *testing.T) {
	for _, tc := range []struct {
		n       int
		refused bool
	}{{2, false}, {MaxPeers, false}, {MaxPeers + 1, true}, {1 << 16, true}} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			if err := CheckPeerCount(tc.n); (err != nil) != tc.refused {
				t.Fatalf("CheckPeerCount(%d) = %v, want refused %v", tc.n, err, tc.refused)
			}
			if !tc.refused {
				return
			}
			peers := make([]string, tc.n)
			for i := range peers {
				peers[i] = fmt.Sprintf("10.%d.%d.1:7000", i>>8, i&255)
			}
			start := time.Now()
			_, err := New(context.Background(), Config{Rank: 0, Peers: peers, ClusterSecret: testSecret})
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than the %d a cluster may have", MaxPeers)) {
				t.Fatalf("New with %d peers: %v, want refused naming the maximum", tc.n, err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("refused after %v: identities were derived first", d)
			}
		})
	}
}
