package p2p

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Plaintext links prove nothing about a peer ID (the peer only claims its
// public key), so over plaintext each collective stream starts with a
// mutual challenge keyed by the cluster secret: a peer that cannot answer
// does not hold the secret, and its stream is refused before it can take
// a rank's place. It costs one round trip per stream, nothing per byte
// (a private-network key would encrypt every byte, and made plaintext
// slower than TLS).
//
// The dialer D (rank d) and the listener L (rank l), on a fresh stream:
//
//	D → L: nD                                 (32 random bytes)
//	L → D: nL, HMAC(k, "listener", D, L, nD, nL)
//	D → L: HMAC(k, "dialer", D, L, nD, nL)
//
// with k = DeriveAuthKey(secret) and the peer IDs and nonces length-
// prefixed. Fresh nonces on both sides defeat replay, and the labels
// reflection. The frames that follow carry no MAC: an attacker on the
// network path can still alter them, which only TLS or Noise prevent.
const (
	authInfo     = "plaintext-challenge"
	authNonce    = 32
	authTimeout  = 10 * time.Second
	authListener = "meshtrain/plaintext-challenge/v1 listener"
	authDialer   = "meshtrain/plaintext-challenge/v1 dialer"
)

// errNoProof is a peer's failure to answer the challenge.
var errNoProof = errors.New("it did not prove it holds the cluster secret (a process claiming its peer ID, or a peer started with another secret)")

// DeriveAuthKey returns the key of the plaintext challenge:
//
//	k = HKDF-SHA256(ikm = secret, salt = "meshtrain/identity/v1", info = "plaintext-challenge", 32 bytes)
func DeriveAuthKey(secret []byte) ([]byte, error) {
	if len(secret) < 16 {
		return nil, fmt.Errorf("p2p: cluster secret of %d bytes is too short: use at least 16 random bytes", len(secret))
	}
	k, err := hkdf.Key(sha256.New, secret, []byte(identitySalt), authInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("p2p: deriving the plaintext challenge key: %w", err)
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

// proveDialer runs the dialer's side of the challenge on s, to rank r.
func (t *Transport) proveDialer(s network.Stream, r int) error {
	_ = s.SetDeadline(time.Now().Add(authTimeout))
	defer func() { _ = s.SetDeadline(time.Time{}) }()
	nD := make([]byte, authNonce)
	_, _ = rand.Read(nD) // never fails (crypto/rand)
	if _, err := s.Write(nD); err != nil {
		return err
	}
	reply := make([]byte, authNonce+sha256.Size)
	if _, err := io.ReadFull(s, reply); err != nil {
		return fmt.Errorf("rank %d answered no challenge: %w", r, err)
	}
	nL, mac := reply[:authNonce], reply[authNonce:]
	self, them := t.host.ID(), t.ids[r]
	if !hmac.Equal(mac, authMAC(t.auth, authListener, self, them, nD, nL)) {
		return fmt.Errorf("the peer at rank %d's address: %w", r, errNoProof)
	}
	_, err := s.Write(authMAC(t.auth, authDialer, self, them, nD, nL))
	return err
}

// proveListener runs the listener's side of the challenge on s, from rank
// r.
func (t *Transport) proveListener(s network.Stream, r int) error {
	_ = s.SetDeadline(time.Now().Add(authTimeout))
	defer func() { _ = s.SetDeadline(time.Time{}) }()
	nD := make([]byte, authNonce)
	if _, err := io.ReadFull(s, nD); err != nil {
		return err
	}
	nL := make([]byte, authNonce)
	_, _ = rand.Read(nL)
	them, self := t.ids[r], t.host.ID()
	if _, err := s.Write(append(nL, authMAC(t.auth, authListener, them, self, nD, nL)...)); err != nil {
		return err
	}
	mac := make([]byte, sha256.Size)
	if _, err := io.ReadFull(s, mac); err != nil {
		return err
	}
	if !hmac.Equal(mac, authMAC(t.auth, authDialer, them, self, nD, nL)) {
		return errNoProof
	}
	return nil
}
