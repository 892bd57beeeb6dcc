// Package rusage reads this process's resource usage (getrusage of
// RUSAGE_SELF): the CPU time that benchmarks and the training summary
// report next to wall time, because the machines they run on are shared and
// wall time then counts time other processes held the cores, and the peak
// resident set size; and the memory it may use at most (MemoryLimit), for
// checking a run's needs before it starts.
//
// It imports only the standard library, so every package of the module
// (collective/bench, mirrored, mirrored/sparsebench, the benchmarks of nn
// and data) can use it without an import cycle. Where a figure is not
// measured it is 0, never an error: a summary then shows zeros.
package rusage
