package report

import (
	"strings"
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

// TestTopologyShown: the hosts and the all-reduce chosen appear in the
// table's verdict line and in the verdict's JSON, and on a line of their
// own when there is no verdict (no peer took a step).
func TestTopologyShown(t *testing.T) {
	const topo = "topology: 2 hosts × 2 peers; all-reduce: hierarchical (reduce in host, ring over 2 leaders)"
	for _, steps := range []int{100, 0} {
		var peers []Peer
		for r := range 4 {
			s := &mirrored.Summary{Run: &mirrored.Result{ParamsSHA256: "a", Topology: topo}, Peer: *stats(0.010, 0.030, 0, 0, 1e6, 1)}
			s.Peer.Steps = steps
			peers = append(peers, Peer{Rank: r, Summary: s})
		}
		rep := &Report{Peers: peers, Identical: true}
		var b strings.Builder
		WriteTable(&b, rep)
		v, ok := rep.Verdict()
		line := topo
		if steps > 0 {
			if !ok || v.Topology != topo {
				t.Fatalf("%d steps: verdict %+v (ok %v) without the topology", steps, v, ok)
			}
			line = v.String()
			if !strings.Contains(line, "; "+topo) {
				t.Fatalf("verdict line %q does not name the topology", line)
			}
		}
		if !strings.Contains(b.String(), line+"\n") || strings.Count(b.String(), topo) != 1 {
			t.Fatalf("%d steps: the table shows the topology other than once on the line %q:\n%s", steps, line, b.String())
		}
	}
}
