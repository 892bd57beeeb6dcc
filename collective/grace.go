package collective

import (
	"context"
	"sync"
	"time"
)

// FrameGrace is how long a frame already under way (being written by
// Send, or landing in an executor's buffer) may take to finish once its
// collective's context ended, before the transport resets the link. A
// collective that fails for another rank's reason (a peer died) thus
// leaves its links to the healthy peers in step: the abort frame that
// follows reaches them and names the rank that failed, instead of a reset
// mid-frame that makes them blame this one. Bounded, so that a peer that
// stopped reading still fails the operation quickly.
const FrameGrace = 500 * time.Millisecond

// AfterGrace arranges for interrupt to run FrameGrace after ctx ends,
// unless the returned finish is called first. finish reports whether
// interrupt ran (or is running): the frame was then cut short. Like
// context.AfterFunc, but a frame that finishes within the grace is left
// whole.
func AfterGrace(ctx context.Context, interrupt func()) (finish func() (interrupted bool)) {
	var mu sync.Mutex
	var timer *time.Timer
	finished := false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			timer = time.AfterFunc(FrameGrace, interrupt)
		}
	})
	return func() bool {
		stop()
		mu.Lock()
		defer mu.Unlock()
		finished = true
		return timer != nil && !timer.Stop()
	}
}
