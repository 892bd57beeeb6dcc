package p2p

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/meshtrain/meshtrain/collective"
)

// TestChallengeMACs: the two sides' MACs differ (no reflection) and
// depend on every input.
func TestChallengeMACs(t *testing.T) {
	k, _ := DeriveAuthKey(testSecret)
	d, _ := DerivePeerID(testSecret, 0)
	l, _ := DerivePeerID(testSecret, 1)
	nD, nL := make([]byte, authNonce), make([]byte, authNonce)
	nL[0] = 1
	base := string(authMAC(k, authListener, d, l, nD, nL))
	k2, _ := DeriveAuthKey(append([]byte("x"), testSecret...))
	for name, mac := range map[string][]byte{
		"dialer label": authMAC(k, authDialer, d, l, nD, nL),
		"swapped ids":  authMAC(k, authListener, l, d, nD, nL),
		"other key":    authMAC(k2, authListener, d, l, nD, nL),
		"other nonce":  authMAC(k, authListener, d, l, nL, nD),
	} {
		if string(mac) == base {
			t.Errorf("%s: same MAC", name)
		}
	}
}

// claimedKey is a key of its own that presents another peer's public key:
// all an impostor that knows a member's public key (not the secret) can
// build. Plaintext's handshake never asks it to sign anything.
type claimedKey struct {
	crypto.PrivKey
	pub crypto.PubKey
}

func (k claimedKey) GetPublic() crypto.PubKey { return k.pub }

// waitListening waits until something accepts TCP connections on addr.
func waitListening(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	for {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = c.Close()
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("nothing listens on %s: %v", addr, err)
		}
		<-time.After(dialRetry)
	}
}

// TestPlaintextImpostorRefused: over plaintext, a process claiming rank
// 1's peer ID (it knows the public key, not the cluster secret) and
// opening rank 1's collective stream before rank 1 does is refused, and
// the real rank 1 still joins.
func TestPlaintextImpostorRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	peers := freeAddrs(t, 2, false)
	core, logs := observer.New(zapcore.WarnLevel)
	cfg := func(r int, log *zap.Logger) Config {
		return Config{Rank: r, Peers: peers, Security: SecurityPlaintext, ClusterSecret: testSecret, Timeout: 20 * time.Second, Logger: log}
	}
	ts := make([]*Transport, 2)
	errs := make(chan error, 2)
	go func() {
		var err error
		ts[0], err = New(ctx, cfg(0, zap.New(core)))
		errs <- err
	}()
	waitListening(t, ctx, peers[0])

	member, _ := DeriveIdentity(testSecret, 1)
	own, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	muxer, err := muxerOption(Config{}, nil) // the impostor runs meshtrain's code
	if err != nil {
		t.Fatal(err)
	}
	impostor, err := libp2p.New(libp2p.Identity(claimedKey{own, member.GetPublic()}), libp2p.NoSecurity, muxer,
		libp2p.Transport(tcp.NewTCPTransport), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer impostor.Close()
	if want, _ := DerivePeerID(testSecret, 1); impostor.ID() != want {
		t.Fatalf("the impostor claims %s, not rank 1's %s", impostor.ID(), want)
	}
	// It connects (plaintext checks nothing) and opens a collective
	// stream as rank 1 would; rank 0 challenges it, and it cannot answer.
	rank0, _ := DerivePeerID(testSecret, 0)
	addr0, _ := hostPortAddr(peers[0], SecurityPlaintext)
	if err := impostor.Connect(ctx, peer.AddrInfo{ID: rank0, Addrs: []ma.Multiaddr{addr0}}); err != nil {
		t.Fatal(err)
	}
	s, err := impostor.NewStream(ctx, rank0, ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	nonce := make([]byte, authNonce)
	if _, err := s.Write(nonce); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s, make([]byte, authNonce+sha256.Size)); err != nil {
		t.Fatalf("rank 0 did not challenge the stream: %v", err) // before the challenge, it waited for frames
	}
	if _, err := s.Write(make([]byte, sha256.Size)); err != nil { // no key, no answer
		t.Fatal(err)
	}
	if _, err := s.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("rank 0 kept the impostor's stream: read %v", err)
	}

	go func() {
		var err error
		ts[1], err = New(ctx, cfg(1, zap.NewNop()))
		errs <- err
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	defer closeAll(ts)
	comms := make([]*collective.Comm, 2)
	for r, tr := range ts {
		if comms[r], err = collective.New(tr, collective.Options{Timeout: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	checkAllReduce(t, comms)
	if logs.FilterMessageSnippet("plaintext links: the data is not encrypted").Len() == 0 {
		t.Error("no start-up warning that plaintext links are not encrypted")
	}
	if logs.FilterMessageSnippet("refused a collective stream from a peer claiming a rank's peer ID").Len() != 1 {
		t.Errorf("the refusal was not logged once: %v", logs.All())
	}
}

// TestPlaintextNeedsAKey: plaintext with /p2p/ peer IDs and neither a
// cluster secret nor a private-network key could prove nothing.
func TestPlaintextNeedsAKey(t *testing.T) {
	peers := freeAddrs(t, 2, false)
	key, _ := DeriveIdentity(testSecret, 0)
	for r := range peers {
		id, _ := DerivePeerID(testSecret, r)
		a, _ := hostPortAddr(peers[r], SecurityPlaintext)
		peers[r] = a.String() + "/p2p/" + id.String()
	}
	_, err := New(context.Background(), Config{Rank: 0, Peers: peers, Security: SecurityPlaintext, Identity: key, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "prove nobody's identity") {
		t.Fatalf("got %v, want a refusal naming what plaintext cannot prove", err)
	}
}
