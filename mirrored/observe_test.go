package mirrored

import (
	"errors"
	"testing"
)

// closeCounter is an observer that counts its closes.
type closeCounter struct{ closes int }

func (c *closeCounter) Observe(Event) error { return nil }
func (c *closeCounter) Close() error        { c.closes++; return nil }

// TestObserversCloseOnce: the done event closes the observers (the
// TensorBoard file), and the close deferred for failures does not close
// them a second time; an observer's error reaches the run.
func TestObserversCloseOnce(t *testing.T) {
	cc := &closeCounter{}
	boom := errors.New("disk full")
	o := &observers{obs: []Observer{cc, ObserverFunc(func(e Event) error {
		if e.Kind == EventEpoch {
			return boom
		}
		return nil
	})}}
	if err := o.emit(Event{Kind: EventEpoch}); !errors.Is(err, boom) {
		t.Fatalf("epoch: %v, want the observer's error", err)
	}
	if err := o.emit(Event{Kind: EventDone}); err != nil {
		t.Fatal(err)
	}
	if err := o.close(); err != nil || cc.closes != 1 {
		t.Fatalf("closed %d times (%v), want once", cc.closes, err)
	}
}
