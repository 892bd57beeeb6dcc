package mirrored

import (
	"encoding/json"
	"testing"
)

// TestEpochJSON: an epoch is written with names that say what is
// cumulative and what is global, and read back from them and from the
// names before summary format 2 (a checkpoint's history from an earlier
// version).
func TestEpochJSON(t *testing.T) {
	ep := Epoch{Epoch: 2, Loss: 0.5, ExamplesPerSec: 1000, EpochSeconds: 1.5, TrainSeconds: 3.25}
	b, err := json.Marshal(ep)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{"epoch_seconds": 1.5, "elapsed_seconds": 3.25, "global_examples_per_sec": 1000} {
		if fields[name] != want {
			t.Errorf("%s = %v, want %v in %s", name, fields[name], want, b)
		}
	}
	for _, tc := range []string{string(b), `{"epoch":2,"loss":0.5,"examples_per_sec":1000,"epoch_seconds":1.5,"train_seconds":3.25}`} {
		var got Epoch
		if err := json.Unmarshal([]byte(tc), &got); err != nil || got != ep {
			t.Errorf("%s read as %+v, %v; want %+v", tc, got, err, ep)
		}
	}
}
