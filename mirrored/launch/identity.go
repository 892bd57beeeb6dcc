package launch

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// NewIdentityFile writes a fresh Ed25519 libp2p key to path (mode 0600,
// refusing to overwrite) and returns its peer ID, for a TF_CONFIG whose
// entries are multiaddrs ending in /p2p/<peer-id>.
func NewIdentityFile(path string) (peer.ID, error) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return "", err
	}
	b, err := crypto.MarshalPrivateKey(key)
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("identity file %s exists: not overwriting a key (delete it first)", path)
		}
		return "", fmt.Errorf("writing identity: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", fmt.Errorf("writing identity %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("writing identity %s: %w", path, err)
	}
	return peer.IDFromPrivateKey(key)
}

// ReadIdentityFile reads a key written by NewIdentityFile (a libp2p
// protobuf-encoded private key).
func ReadIdentityFile(path string) (crypto.PrivKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading identity: %w", err)
	}
	key, err := crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("identity %s: not a libp2p private key (create one with meshtrain worker --new-identity FILE): %w", path, err)
	}
	return key, nil
}
