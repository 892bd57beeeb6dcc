package p2p

import (
	"context"
	"fmt"

	"github.com/meshtrain/meshtrain/collective"
)

// Join connects rank cfg.Rank to its cluster (New) and makes it a member
// with a Comm of opts (collective.Join), whose Leave closes the transport.
// The Transport is returned for its host (diagnostics, fault injection).
// Errors name the rank.
func Join(ctx context.Context, cfg Config, opts collective.Options) (*collective.Member, *Transport, error) {
	t, err := New(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("rank %d: connecting to the cluster: %w", cfg.Rank, err)
	}
	m, err := collective.Join(t, opts)
	if err != nil {
		return nil, nil, err
	}
	return m, t, nil
}
