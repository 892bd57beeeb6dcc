package stats

import (
	"slices"
	"testing"
)

func TestMedianAndSpread(t *testing.T) {
	tests := []struct {
		v              []float64
		median, spread float64
	}{
		{nil, 0, 0},
		{[]float64{3}, 3, 0},
		{[]float64{4, 1, 2, 3}, 3, (4 - 2) / 3.0}, // the upper middle of an even count
		{[]float64{5, 1, 4, 2, 3}, 3, (4 - 2) / 3.0},
	}
	for _, tt := range tests {
		before := slices.Clone(tt.v)
		if got := Median(tt.v); got != tt.median {
			t.Errorf("Median(%v) = %v, want %v", tt.v, got, tt.median)
		}
		if got := Spread(tt.v); got != tt.spread {
			t.Errorf("Spread(%v) = %v, want %v", tt.v, got, tt.spread)
		}
		if !slices.Equal(tt.v, before) {
			t.Errorf("%v was reordered to %v", before, tt.v)
		}
	}
}
