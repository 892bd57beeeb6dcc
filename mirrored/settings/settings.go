// Package settings is how replicas agree on a run's configuration: the
// settings each states, the fingerprint of those that shape the
// arithmetic (which a checkpoint records, so that a run cannot silently
// resume into another), and the comparison that names every difference
// and who holds which value. It is pure: mirrored's handshake gathers the
// settings, this package judges them.
package settings

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Setting is one configuration value that every replica must share. The
// replicas compare their settings at start-up (see mirrored.Job), and a checkpoint
// records the ones that shape the arithmetic (Resume), so that a run
// cannot silently resume into a different one.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Resume marks settings that must also match a checkpoint being
	// resumed from (those that change the training arithmetic).
	Resume bool `json:"-"`
}

// Fingerprint is the SHA-256 (hex) of the settings with Resume set: equal
// fingerprints mean a checkpoint can resume the run.
func Fingerprint(settings []Setting) string {
	h := sha256.New()
	for _, s := range settings {
		if s.Resume {
			fmt.Fprintf(h, "%s=%s\n", s.Name, s.Value)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// JSON is the Resume settings as a JSON object, for checkpoints.
func JSON(settings []Setting) string {
	m := map[string]string{}
	for _, s := range settings {
		if s.Resume {
			m[s.Name] = s.Value
		}
	}
	b, _ := json.Marshal(m) // a map of strings always encodes
	return string(b)
}

// Compare checks that every party has the same value for each
// setting; who names the parties ("rank 0", "the checkpoint"). The error
// names every differing setting and which parties hold which value.
func Compare(who []string, all [][]Setting) error {
	var diffs []string
	names := []string{}
	values := make([]map[string]string, len(all))
	for i, ss := range all {
		values[i] = map[string]string{}
		for _, s := range ss {
			values[i][s.Name] = s.Value
			if !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	for _, name := range names {
		var order []string
		holders := map[string][]string{}
		for i := range all {
			v, ok := values[i][name]
			if !ok {
				v = "(not set)"
			}
			if _, seen := holders[v]; !seen {
				order = append(order, v)
			}
			holders[v] = append(holders[v], who[i])
		}
		if len(order) == 1 {
			continue
		}
		parts := make([]string, len(order))
		for k, v := range order {
			parts[k] = fmt.Sprintf("%s on %s", quoteIfEmpty(v), JoinParties(holders[v]))
		}
		diffs = append(diffs, fmt.Sprintf("%s is %s", name, strings.Join(parts, " but ")))
	}
	if len(diffs) == 0 {
		return nil
	}
	return &MismatchError{Diffs: diffs}
}

// MismatchError says which settings differ between replicas (or between a
// run and its checkpoint).
type MismatchError struct{ Diffs []string }

func (e *MismatchError) Error() string { return strings.Join(e.Diffs, "; ") }

func quoteIfEmpty(v string) string {
	if v == "" {
		return `""`
	}
	return v
}

// JoinParties turns ["rank 0", "rank 2"] into "ranks 0, 2".
func JoinParties(ps []string) string {
	var ranks []string
	var other []string
	for _, p := range ps {
		if r, ok := strings.CutPrefix(p, "rank "); ok {
			ranks = append(ranks, r)
		} else {
			other = append(other, p)
		}
	}
	var out []string
	switch len(ranks) {
	case 0:
	case 1:
		out = append(out, "rank "+ranks[0])
	default:
		out = append(out, "ranks "+strings.Join(ranks, ", "))
	}
	return strings.Join(append(out, other...), " and ")
}
