// Package stats is the little statistics meshtrain's measurements share:
// the median of timed repetitions and how far apart they lie. It imports
// nothing of meshtrain's, so the emulated-host harness (tests/netns) and
// the benchmarks (mirrored/measure/bench) both use it without either
// depending on the other.
package stats

import "slices"

// Median is the middle of v once sorted (the upper one of an even count),
// 0 for none; v is left as it is.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := sorted(v)
	return s[len(s)/2]
}

// Spread is how far apart the middle half of v lies: the interquartile
// range over the median (0.2: the middle half spans a fifth of the
// median), 0 for none; v is left as it is.
func Spread(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := sorted(v)
	return (s[len(s)*3/4] - s[len(s)/4]) / s[len(s)/2]
}

// sorted is a sorted copy of v.
func sorted(v []float64) []float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s
}
