package collective

import (
	"syscall"
	"time"
)

// sleepPrecise blocks the calling thread for d with nanosleep(2), which
// wakes within tens of microseconds where Go's timers may take up to a
// millisecond (the runtime's poller waits in whole milliseconds).
func sleepPrecise(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}
