package sweep

import (
	"encoding/json"
	"slices"
	"testing"
)

// FuzzParseResults: whatever a results file holds (--resume reads one
// from the output directory), Parse returns an error or results that
// hold no null point and write back to JSON that parses again alike.
func FuzzParseResults(f *testing.F) {
	good, err := json.Marshal(&Results{Format: Format, Title: "t", Model: "softmax", Target: 0.9, Settings: map[string]string{"epochs": "1"},
		Grid:  Grid{Workers: []int{1, 2}, Batches: []int{50}, Strategies: []string{"ring"}, Stragglers: []Straggler{{}, {Rank: 1, Factor: 3}}},
		Total: 2, Points: []*Result{{Point: Point{Workers: 1, Batch: 50, Strategy: "ring"}}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"format":"` + Format + `","points":[null]}`))
	f.Add([]byte(`{"n": 3, "runs": []}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			return
		}
		if slices.Contains(r.Points, nil) {
			t.Fatalf("a null point accepted: %s", b)
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("accepted results do not write back: %v", err)
		}
		r2, err := Parse(again)
		if err != nil || len(r2.Points) != len(r.Points) || r2.Total != r.Total {
			t.Fatalf("written back, they read %v, %v", r2, err)
		}
	})
}

// FuzzParseLists: the grid's flags either fail or give lists that write
// back (join) and parse again to the same values.
func FuzzParseLists(f *testing.F) {
	for _, s := range []string{"1,2,4", " 8 ,", "ring,gossip", "none,1:3", "0:2.5", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseInts("workers", s); err == nil {
			if w, err := ParseInts("workers", join(v)); err != nil || !slices.Equal(v, w) {
				t.Fatalf("%q: %v, then %v, %v", s, v, w, err)
			}
		}
		if v, err := ParseStrategies(s); err == nil {
			if w, err := ParseStrategies(join(v)); err != nil || !slices.Equal(v, w) {
				t.Fatalf("%q: %v, then %v, %v", s, v, w, err)
			}
		}
		if v, err := ParseStragglers(s); err == nil && len(v) == 0 {
			t.Fatalf("%q: no straggler scenario and no error", s)
		}
	})
}
