package p2p

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"
)

// MaxPeers is the most ranks a cluster may list (issue 32 item 5). Every
// rank connects to every other, so each holds MaxPeers-1 connections, each
// with its collective stream's window (64 MiB by default) and its frame
// queues, and derives every peer's identity before it dials: 4,096 take
// 0.3 s and 6 MiB to derive (measured on a 2-core machine), while 65,536
// were accepted and spent 1.3 GB and 57 s setting up before they timed
// out. It is also 4 times the 1,000 ranks the cost model's extrapolation
// reaches; a ring's 2(n-1) steps make an all-reduce among more peers
// latency-bound long before this.
const MaxPeers = 4096

// CheckPeerCount refuses a cluster of more than MaxPeers ranks, naming
// the maximum and why, before any identity is derived.
func CheckPeerCount(n int) error {
	if n > MaxPeers {
		return fmt.Errorf("p2p: %d peers: more than the %d a cluster may have (every peer connects to every other and derives every peer's identity up front)", n, MaxPeers)
	}
	return nil
}

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

// LoadIdentity reads a private key written by WriteIdentity (libp2p's
// protobuf encoding, as IPFS keeps it), for clusters that list /p2p/ peer IDs
// instead of sharing a secret.
func LoadIdentity(path string) (crypto.PrivKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("p2p: reading identity: %w", err)
	}
	k, err := crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("p2p: identity file %s is not a libp2p private key (WriteIdentity writes one): %w", path, err)
	}
	return k, nil
}

// WriteIdentity writes a fresh Ed25519 key to path (mode 0600, refusing to
// overwrite: a key is an identity that peers may already list) and returns
// its peer ID. A write that fails part-way removes the file.
func WriteIdentity(path string) (peer.ID, error) {
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return "", fmt.Errorf("p2p: generating an identity: %w", err)
	}
	b, err := crypto.MarshalPrivateKey(k)
	if err != nil {
		return "", fmt.Errorf("p2p: encoding an identity: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("p2p: identity file %s exists: not overwriting a key (delete it first)", path)
	}
	if err != nil {
		return "", fmt.Errorf("p2p: writing identity: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path) // created above (O_EXCL): a torn key of ours
		return "", fmt.Errorf("p2p: writing identity %s: %w", path, err)
	}
	return peer.IDFromPrivateKey(k)
}

// LoadPSK reads a private-network key in the standard libp2p format
// ("/key/swarm/psk/1.0.0/", "/base16/", 64 hex digits), as go-ipfs and
// ipfs-swarm-key-gen write it.
func LoadPSK(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("p2p: reading private-network key: %w", err)
	}
	defer f.Close()
	psk, err := pnet.DecodeV1PSK(f)
	if err != nil {
		return nil, fmt.Errorf("p2p: %s is not a libp2p swarm key (/key/swarm/psk/1.0.0/): %w", path, err)
	}
	return psk, nil
}
