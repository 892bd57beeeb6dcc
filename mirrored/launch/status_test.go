package launch

import (
	"testing"

	"github.com/meshtrain/meshtrain/mirrored"
)

// TestStatusCallbackLine: a callback's line is printed once, the chief's
// (every replica of the ring decided the same at the same epoch).
func TestStatusCallbackLine(t *testing.T) {
	s := newStatus(2, false)
	const line = "epoch 4: test loss did not improve for 1 epoch (best 3.885 at epoch 3): stopping"
	for rank, want := range []string{"[launch] " + line, ""} {
		if got := s.update(Message{Event: mirrored.Event{Kind: mirrored.EventCallback, Rank: rank, Info: line}}); got != want {
			t.Errorf("rank %d: %q, want %q", rank, got, want)
		}
	}
}
