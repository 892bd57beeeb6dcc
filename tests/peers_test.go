package tests

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
)

// peerTimeout bounds each in-test peer's connection set-up and collectives.
const peerTimeout = 20 * time.Second

// onPeers runs body for every rank of n libp2p peers on 127.0.0.1 (TLS, a
// fresh cluster secret), each in a goroutine of this test process with its
// own logger and member (p2p.Join), and returns each rank's error
// (connecting, body's, or leaving: with a final barrier if together). It
// fails the test, naming what ran, when ctx ends before every peer is done.
func onPeers(t *testing.T, ctx context.Context, n int, what string, together bool,
	body func(r int, log *zap.Logger, m *collective.Member, tr *p2p.Transport) error) []error {
	t.Helper()
	addrs := freePorts(t, n)
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log := zaptest.NewLogger(t)
			m, tr, err := p2p.Join(ctx, p2p.Config{Rank: r, Peers: addrs, ClusterSecret: secret, Timeout: peerTimeout, Logger: log.Named("p2p")},
				collective.Options{Timeout: peerTimeout, Logger: log.Named("collective")})
			if err != nil {
				errs[r] = err
				return
			}
			errs[r] = m.Leave(ctx, body(r, log, m, tr), together)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("%s run hung: %v", what, ctx.Err())
	}
	return errs
}
