package calibrate

import (
	"testing"
	"time"
)

// TestMeasurePairs: coding a pair takes some nanoseconds on any machine
// this runs on, and one pass happens even with no time to spend. The
// bound is loose on purpose: it catches a unit gone wrong (seconds for
// nanoseconds), not a slow machine; on a busy 2-core machine under the
// race detector a pair took 1.08 µs.
func TestMeasurePairs(t *testing.T) {
	for _, d := range []time.Duration{0, 20 * time.Millisecond} {
		if s := MeasurePairs(d); !(s > 0.1e-9 && s < 100e-6) {
			t.Errorf("MeasurePairs(%v) = %g s a pair, want 0.1 ns to 100 µs", d, s)
		}
	}
}
