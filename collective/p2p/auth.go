package p2p

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/core/sec"
	tptu "github.com/libp2p/go-libp2p/p2p/net/upgrader"
	"github.com/libp2p/go-libp2p/p2p/security/insecure"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	"go.uber.org/zap"
)

// Plaintext links prove nothing about a peer ID (the peer only claims its
// public key), so over plaintext every connection proves membership in its
// security handshake, before libp2p sets anything else up: after
// libp2p's plaintext exchange of peer IDs (core/sec/insecure), both sides
// run a mutual challenge keyed by the cluster secret. A peer that cannot
// answer does not hold the secret: its connection fails in the handshake,
// so it gets no multiplexer, no stream of any protocol (the cluster view
// included), no resource-manager scope of the peer it claims to be, and
// can make this rank allocate nothing beyond the handshake's few hundred
// bytes. It costs one round trip per connection and nothing per byte (a
// private-network key encrypts every byte: BENCHMARKS.md, "Proving
// membership over plaintext").
//
// The dialer D (rank d) and the listener L (rank l), on the connection,
// each sending before it reads:
//
//	D → L: nD                                 L → D: nL      (32 random bytes each)
//	D → L: HMAC(k, "dialer", D, L, nD, nL)    L → D: HMAC(k, "listener", D, L, nD, nL)
//
// with k = DeriveAuthKey(secret) and the peer IDs and nonces length-
// prefixed. Fresh nonces on both sides defeat replay, and the labels
// reflection. The frames that follow carry no MAC: an attacker on the
// network path can still alter them (or relay a whole handshake), which
// only TLS or Noise prevent.
const (
	authInfo     = "plaintext-challenge"
	authNonce    = 32
	authTimeout  = 10 * time.Second
	authListener = "meshtrain/plaintext-challenge/v2 listener"
	authDialer   = "meshtrain/plaintext-challenge/v2 dialer"
	// PlaintextID is the security protocol of plaintext links with the
	// challenge: libp2p's plaintext exchange, then the challenge. Peers
	// speaking libp2p's own plaintext (/plaintext/2.0.0) cannot connect.
	PlaintextID protocol.ID = "/meshtrain/plaintext/1.0.0"
)

// errNoProof is a peer's failure to answer the challenge.
var errNoProof = errors.New("it did not prove it holds the cluster secret (a process claiming a member's peer ID, or a peer started with another secret)")

// DeriveAuthKey returns the key of the plaintext challenge:
//
//	k = HKDF-SHA256(ikm = secret, salt = "meshtrain/identity/v1", info = "plaintext-challenge", 32 bytes)
func DeriveAuthKey(secret []byte) ([]byte, error) { return deriveKey(secret, authInfo) }

// deriveKey is HKDF-SHA256 of the secret with the identity salt and info:
// one key per use of the secret.
func deriveKey(secret []byte, info string) ([]byte, error) {
	if len(secret) < 16 {
		return nil, fmt.Errorf("p2p: cluster secret of %d bytes is too short: use at least 16 random bytes", len(secret))
	}
	k, err := hkdf.Key(sha256.New, secret, []byte(identitySalt), info, 32)
	if err != nil {
		return nil, fmt.Errorf("p2p: deriving the %s key: %w", info, err)
	}
	return k, nil
}

func authMAC(key []byte, label string, dialer, listener peer.ID, nD, nL []byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, part := range [][]byte{[]byte(label), []byte(dialer), []byte(listener), nD, nL} {
		_ = binary.Write(m, binary.BigEndian, uint16(len(part))) // a hash never fails to write
		m.Write(part)
	}
	return m.Sum(nil)
}

// challenge runs this side of the challenge on c, whose peer IDs libp2p's
// plaintext exchange just gave, within ctx and authTimeout.
func challenge(ctx context.Context, c sec.SecureConn, key []byte, dialer bool) error {
	d, l := c.LocalPeer(), c.RemotePeer()
	if !dialer {
		d, l = l, d
	}
	return mutualChallenge(ctx, c, key, d, l, [2]string{authDialer, authListener}, dialer)
}

// mutualChallenge runs this side of the challenge between dialer d and
// listener l on c, with labels (the dialer's, the listener's), within ctx
// and authTimeout: the plaintext handshake's, and the same-host link's
// (samehost.go) with labels of its own.
func mutualChallenge(ctx context.Context, c net.Conn, key []byte, d, l peer.ID, labels [2]string, dialer bool) error {
	deadline := time.Now().Add(authTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = c.SetDeadline(deadline)
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	mine, theirs := labels[0], labels[1]
	if !dialer {
		mine, theirs = theirs, mine
	}
	own := make([]byte, authNonce)
	_, _ = rand.Read(own) // never fails (crypto/rand)
	if _, err := c.Write(own); err != nil {
		return fmt.Errorf("sending the challenge: %w", err)
	}
	other := make([]byte, authNonce)
	if _, err := io.ReadFull(c, other); err != nil {
		return fmt.Errorf("it answered no challenge: %w", err)
	}
	nD, nL := own, other
	if !dialer {
		nD, nL = other, own
	}
	if _, err := c.Write(authMAC(key, mine, d, l, nD, nL)); err != nil {
		return fmt.Errorf("answering the challenge: %w", err)
	}
	mac := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, mac); err != nil {
		return fmt.Errorf("it answered no challenge: %w", err)
	}
	if !hmac.Equal(mac, authMAC(key, theirs, d, l, nD, nL)) {
		return errNoProof
	}
	return nil
}

// securityOption is the host's security transport for cfg.Security: TLS,
// Noise or plaintext with the challenge, each of which logs the inbound
// connections it refuses. Plaintext with a private-network key is
// libp2p's own plaintext (the key proves membership); QUIC has its own
// TLS, which cannot be wrapped (its refusals are not logged).
func (t *Transport) securityOption() libp2p.Option {
	switch t.cfg.Security {
	case SecurityTLS:
		return libp2p.Security(libp2ptls.ID, func(id protocol.ID, key crypto.PrivKey, muxers []tptu.StreamMuxer) (*guarded, error) {
			inner, err := libp2ptls.New(id, key, muxers)
			return &guarded{SecureTransport: inner, t: t}, err
		})
	case SecurityNoise:
		return libp2p.Security(noise.ID, func(id protocol.ID, key crypto.PrivKey, muxers []tptu.StreamMuxer) (*guarded, error) {
			inner, err := noise.New(id, key, muxers)
			return &guarded{SecureTransport: inner, t: t}, err
		})
	case SecurityPlaintext:
		if t.auth == nil {
			return libp2p.NoSecurity
		}
		return libp2p.Security(string(PlaintextID), func(id protocol.ID, key crypto.PrivKey) (*guarded, error) {
			self, err := peer.IDFromPrivateKey(key)
			return &guarded{SecureTransport: insecure.NewWithIdentity(id, self, key), t: t, key: t.auth}, err
		})
	}
	return nil
}

// guarded is a security transport that logs the inbound handshakes it
// fails (with the reason, the address and, when known, the peer ID and
// rank claimed) and, given a key, runs the plaintext challenge after the
// inner handshake.
type guarded struct {
	sec.SecureTransport
	t   *Transport
	key []byte // the plaintext challenge's; nil: none
}

func (g *guarded) SecureInbound(ctx context.Context, conn net.Conn, p peer.ID) (sec.SecureConn, error) {
	sc, err := g.secure(ctx, conn, p, false)
	if err != nil {
		g.refused(conn, sc, err)
	}
	return sc, err
}

func (g *guarded) SecureOutbound(ctx context.Context, conn net.Conn, p peer.ID) (sec.SecureConn, error) {
	sc, err := g.secure(ctx, conn, p, true)
	if err != nil {
		// The dial fails and is retried; its error ends up in New's
		// if the peer never answers.
		g.t.log.Debug("a connection to a cluster peer failed its handshake", zap.Stringer("peer", p), zap.Stringer("addr", conn.RemoteAddr()), zap.Error(err))
	}
	return sc, err
}

// secure runs the inner handshake, then the challenge if there is a key.
// On a failed challenge it returns the connection as well (closed), for
// the peer ID it claimed.
func (g *guarded) secure(ctx context.Context, conn net.Conn, p peer.ID, dialer bool) (sec.SecureConn, error) {
	var sc sec.SecureConn
	var err error
	if dialer {
		sc, err = g.SecureTransport.SecureOutbound(ctx, conn, p)
	} else {
		sc, err = g.SecureTransport.SecureInbound(ctx, conn, p)
	}
	if err != nil {
		return nil, err // some return a half-made connection: not ours to read
	}
	if g.key == nil {
		return sc, nil
	}
	if err := challenge(ctx, sc, g.key, dialer); err != nil {
		_ = sc.Close()
		return sc, err
	}
	return sc, nil
}

// refused logs an inbound connection that failed its handshake: at Warn
// when the peer spoke the protocol and failed (an identity it could not
// prove, a wrong secret), at Debug when it only hung up.
func (g *guarded) refused(conn net.Conn, sc sec.SecureConn, err error) {
	fields := []zap.Field{zap.Stringer("addr", conn.RemoteAddr()), zap.Error(err)}
	if sc != nil {
		claimed := sc.RemotePeer()
		fields = append(fields, zap.Stringer("peer", claimed))
		if r, ok := g.t.ranks[claimed]; ok {
			fields = append(fields, zap.Int("claimed_rank", r))
		}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) {
		g.t.log.Debug("an inbound connection hung up in its handshake", fields...)
		return
	}
	what := "refused a connection: its security handshake failed"
	if errors.Is(err, errNoProof) {
		what = "refused a connection: it did not prove it holds the cluster secret"
	}
	g.t.log.Warn(what, fields...)
}
