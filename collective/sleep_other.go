//go:build !linux

package collective

import "time"

// sleepPrecise sleeps for d (only Linux has the finer nanosleep path).
func sleepPrecise(d time.Duration) { time.Sleep(d) }
