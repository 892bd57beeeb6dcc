package sweep

import (
	"slices"
	"testing"

	"github.com/meshtrain/meshtrain/mirrored"
)

// TestPointArgs: every point's workers take WorkerArgs, a gossip point
// GossipArgs and a ring point RingArgs (the elastic flags) too, then the
// point's own.
func TestPointArgs(t *testing.T) {
	r := &Processes{WorkerArgs: []string{"--model-file=/m.json", "--link-delay=2ms"}, GossipArgs: []string{"--gossip-every=2"},
		RingArgs: []string{"--elastic=true", "--min-workers=1"}}
	for _, tc := range []struct {
		p      Point
		logdir string
		want   []string
	}{
		{Point{Workers: 2, Batch: 50, Strategy: mirrored.StrategyRing}, "", []string{"--batch=50", "--strategy=ring", "--elastic=true", "--min-workers=1"}},
		{Point{Workers: 3, Batch: 20, Strategy: mirrored.StrategyGossip, Straggler: Straggler{Rank: 1, Factor: 3}}, "/tb",
			[]string{"--batch=20", "--strategy=gossip", "--gossip-every=2", "--slow-peer=1:3", "--logdir=/tb"}},
	} {
		if got := r.PointArgs(tc.p, tc.logdir); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.p, got, tc.want)
		}
	}
}

// TestPassedText: the report says what every point's workers were given
// beyond the grid, from the settings of those flags, and nothing when
// none was.
func TestPassedText(t *testing.T) {
	for _, tc := range []struct {
		settings map[string]string
		want     string
	}{
		{map[string]string{"allreduce-algo": "auto"}, ""},
		{map[string]string{"model-file": "cnn.json", "architecture": "2db11d06c14fc3fb", "data": "/d/set.npz", "link-delay": "2ms", "link-rate": "100mbit",
			"elastic": "true", "min-workers": "2"},
			"Every point trains the model of `cnn.json` (architecture 2db11d06c14fc3fb); the data set `/d/set.npz`; " +
				"over links with injected faults (--link-delay 2ms, --link-rate 100mbit: each peer's outgoing frames); the ring's points elastic (--min-workers 2). "},
		{map[string]string{"data": "imgs", "image-size": "32x32", "elastic": "true"}, "Every point trains the data set `imgs` (--image-size 32x32); the ring's points elastic. "},
	} {
		if got := passedText(tc.settings); got != tc.want {
			t.Errorf("%v:\n%q\nwant\n%q", tc.settings, got, tc.want)
		}
	}
}
