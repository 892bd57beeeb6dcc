package report

import (
	"testing"

	"github.com/meshtrain/meshtrain/mirrored"
)

// TestIdenticalSkipsPeersThatLeft: an elastic peer that left the run
// (the membership schedule, SIGTERM) has no final parameters to compare.
func TestIdenticalSkipsPeersThatLeft(t *testing.T) {
	sum := func(hash, left string) *mirrored.Summary {
		return &mirrored.Summary{Run: &mirrored.Result{ParamsSHA256: hash}, Peer: mirrored.PeerStats{Left: left}}
	}
	for _, tc := range []struct {
		peers []Peer
		want  bool
	}{
		{[]Peer{{Summary: sum("a", "")}, {Summary: sum("", "left at step 6")}, {Summary: sum("a", "")}}, true},
		{[]Peer{{Summary: sum("", "left at step 6")}, {Summary: sum("a", "")}, {Summary: sum("b", "")}}, false},
		{[]Peer{{Summary: sum("a", "")}, {}, {Summary: sum("a", "")}}, true},
	} {
		if got := Identical(tc.peers); got != tc.want {
			t.Errorf("%+v: identical %v, want %v", tc.peers, got, tc.want)
		}
	}
}
