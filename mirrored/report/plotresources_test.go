package report

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot/vg"

	"github.com/meshtrain/meshtrain/mirrored"
)

// samplesOf is a peer's history: one sample a second, cpu cores busy,
// steps advancing 10 a second.
func samplesOf(rank, n int, cpu float64) mirrored.PeerStats {
	p := mirrored.PeerStats{Rank: rank, Cores: 2}
	for i := 1; i <= n; i++ {
		p.Resources = append(p.Resources, mirrored.ResourceSample{Seconds: float64(i), Interval: 1, Step: 10 * i, CPUUser: cpu, RSSBytes: int64(i) << 20, Sent: 1e6 * float64(rank+1)})
	}
	return p
}

// TestResourceFigureComparesRanks: every rank's panel of a kind has the
// same axes (the CPU axis reaching at least the host's cores, time the
// longest run's), each panel marks the epochs' ends, and the figure has
// the band naming the run above its rows.
func TestResourceFigureComparesRanks(t *testing.T) {
	peers := []mirrored.PeerStats{samplesOf(0, 10, 0.7), samplesOf(1, 6, 1.4), {Rank: 2}}
	ax := sharedAxes(peers)
	if ax.seconds != 10 || ax.cores != 2 || ax.top[0] != 2 || ax.top[1] != 10 || ax.top[2] != 2 {
		t.Fatalf("shared axes %+v: want 10 s, 2 cores, CPU up to the cores, 10 MiB, 2 MB/s", ax)
	}
	var rows [][3]float64
	for _, p := range peers {
		row, err := resourceRow(p, ax, 25)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, [3]float64{row[0].Y.Max, row[0].X.Max, row[2].Y.Max})
	}
	for r := range rows {
		if rows[r] != rows[0] {
			t.Errorf("rank %d's axes %v, rank 0's %v: want the same", r, rows[r], rows[0])
		}
	}
	// Epochs of 25 steps, 10 steps a second: rank 0 (100 steps) ends 4,
	// at the samples that first reach 25, 50, 75 and 100 steps.
	if got := epochEnds(peers[0].Resources, 25); fmt.Sprint(got) != "[3 5 8 10]" {
		t.Errorf("rank 0's epoch ends at %v s, want [3 5 8 10]", got)
	}
	if got := epochEnds(peers[1].Resources, 0); got != nil {
		t.Errorf("no epoch length: ends %v", got)
	}
	path := filepath.Join(t.TempDir(), "r.png")
	if err := PlotResources(path, peers, ResourcePlot{Label: "lenet, 3 peers", StepsPerEpoch: 25}); err != nil {
		t.Fatal(err)
	}
	w, h := pngSize(t, path)
	px := func(l vg.Length) int { return int(math.Round(l.Dots(DPI))) }
	if want := px(3*resourceHeight + resourceHeader); w != px(3*resourceWidth) || h != want {
		t.Errorf("%d × %d pixels, want 3 panels wide and 3 rows plus the header (%d) high", w, h, want)
	}
}
