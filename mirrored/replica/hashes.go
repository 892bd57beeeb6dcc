package replica

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/meshtrain/meshtrain/mirrored/settings"
)

// CompareHashes all-gathers the SHA-256 of every replica's parameters
// (sum: this replica's, paramhash.Sum) and fails, naming the ranks, if
// they differ: what checks that the replicas stay bitwise identical.
func CompareHashes(ctx context.Context, g Group, sum [32]byte, what string) error {
	all, err := g.AllGather(ctx, sum[:])
	if err != nil {
		return fmt.Errorf("comparing parameter hashes at %s: %w", what, err)
	}
	var order []string
	ranks := map[string][]string{}
	for r, h := range all {
		k := hex.EncodeToString(h)
		if _, ok := ranks[k]; !ok {
			order = append(order, k)
		}
		ranks[k] = append(ranks[k], fmt.Sprintf("rank %d", r))
	}
	if len(order) == 1 {
		return nil
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%s %s sha256 %.16s…", settings.JoinParties(ranks[k]), haveHas(len(ranks[k])), k)
	}
	return fmt.Errorf("replicas diverged at %s: %s: their parameters should be bitwise identical (a bug, or memory corruption on a peer)", what, strings.Join(parts, ", "))
}

func haveHas(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}
