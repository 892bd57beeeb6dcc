package replica

import (
	"context"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/collective/half"
	"github.com/meshtrain/meshtrain/mirrored/settings"
)

// TestWireSettings: the default wire leaves checkpoints and their
// fingerprint as they were before it existed; a 16-bit one is recorded.
func TestWireSettings(t *testing.T) {
	for _, tc := range []struct {
		c        Combiner
		json     string
		sameAsV0 bool // fingerprint of a run from before the wire setting
	}{
		{Mean{}, `{}`, true},
		{Half{Format: half.BF16}, `{"wire":"bf16"}`, false},
		{Half{Format: half.FP16}, `{"wire":"fp16"}`, false},
	} {
		s := CombinerSettings(tc.c)
		if len(s) == 0 || s[0].Name != "wire" {
			t.Fatalf("%s: settings %v, want the wire first", tc.c.Name(), s)
		}
		if got := settings.JSON(s); got != tc.json {
			t.Errorf("%s: checkpoint JSON %s, want %s", tc.c.Name(), got, tc.json)
		}
		if same := settings.Fingerprint(s) == settings.Fingerprint(nil); same != tc.sameAsV0 {
			t.Errorf("%s: fingerprint unchanged %v, want %v", tc.c.Name(), same, tc.sameAsV0)
		}
	}
}

// TestHalfCombinerAlone: one replica rounds its range as the wire would
// and scales nothing; a format that is not 16 bits is refused.
func TestHalfCombinerAlone(t *testing.T) {
	grad := []float32{1 + 1.0/512, 3, 1e-9, 7}
	if err := (Half{Format: half.BF16}).CombineRange(context.Background(), LocalGroup{}, grad, 0, 3); err != nil {
		t.Fatal(err)
	}
	// 1+2^-9 is below half of bf16's step at 1 (2^-8); element 3 lies
	// outside the range.
	want := []float32{1, 3, half.BF16ToFloat32(half.BF16FromFloat32(1e-9)), 7}
	for i := range grad {
		if grad[i] != want[i] {
			t.Errorf("element %d: %g, want %g", i, grad[i], want[i])
		}
	}
	err := (Half{Format: half.FP32}).CombineRange(context.Background(), LocalGroup{}, grad, 0, 1)
	if err == nil || !strings.Contains(err.Error(), "fp32 is Mean") {
		t.Errorf("fp32 Half: %v", err)
	}
}
