package rusage

import "time"

// The machine's busy CPU time and the clock when this process started
// (as near as a package's initialisation gets), so that what the whole
// machine spent over the process's life can be set beside what the
// process spent (CPUTime): the difference is other processes' load.
var (
	startWall = time.Now()
	startHost = HostCPU()
)

// HostCPUSinceStart is the machine's busy CPU time since this process
// started, every process's, and the wall time since then; busy is 0 where
// the machine's figures cannot be read.
func HostCPUSinceStart() (busy, wall time.Duration) {
	wall = time.Since(startWall)
	if startHost == 0 {
		return 0, wall
	}
	return max(0, HostCPU()-startHost), wall
}
