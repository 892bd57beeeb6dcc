package p2p

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
	"strconv"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// identitySalt versions the derivation: changing it changes every ID.
const identitySalt = "meshtrain/identity/v1"

// DeriveIdentity returns rank's Ed25519 identity for a cluster secret:
//
//	seed = HKDF-SHA256(ikm = secret, salt = "meshtrain/identity/v1", info = "rank=<decimal rank>", 32 bytes)
//	key  = Ed25519 private key from seed (RFC 8032)
//
// Every member can derive every other member's public key (and private
// key): the secret is the cluster credential, and whoever holds it can join
// as any rank. Give /p2p/ multiaddrs and per-rank keys when that is too
// weak.
func DeriveIdentity(secret []byte, rank int) (crypto.PrivKey, error) {
	if len(secret) < 16 {
		return nil, fmt.Errorf("p2p: cluster secret of %d bytes is too short: use at least 16 random bytes", len(secret))
	}
	seed, err := hkdf.Key(sha256.New, secret, []byte(identitySalt), "rank="+strconv.Itoa(rank), ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("p2p: deriving rank %d identity: %w", rank, err)
	}
	return crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed))
}

// DerivePeerID is the peer ID of DeriveIdentity(secret, rank).
func DerivePeerID(secret []byte, rank int) (peer.ID, error) {
	k, err := DeriveIdentity(secret, rank)
	if err != nil {
		return "", err
	}
	return peer.IDFromPrivateKey(k)
}
