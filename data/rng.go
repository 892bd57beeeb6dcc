package data

import (
	"math/bits"
	"math/rand/v2"
)

// rng is the pipeline's random source: PCG, whose output for a seed is
// fixed by its specification, with our own bounded draw so that shuffle
// orders do not depend on how a Go release implements rand.IntN.
type rng struct{ pcg *rand.PCG }

// newRNG returns the generator for one (seed, stream, epoch, rank): each
// epoch and rank gets an independent, reproducible sequence.
func newRNG(seed uint64, stream uint64, epoch, rank int) rng {
	return rng{rand.NewPCG(splitmix(seed^stream), splitmix(splitmix(uint64(epoch))+uint64(rank)))}
}

// Streams of newRNG, so that the file order and the example order of one
// epoch are independent.
const (
	streamExamples uint64 = 0x6578616d706c6573 // "examples"
	streamFiles    uint64 = 0x66696c6573000000 // "files"
)

// splitmix is SplitMix64's finaliser: it spreads nearby seeds (0, 1, 2...)
// over the whole state space.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// intn returns a uniform integer in [0, n) by Lemire's multiply-shift with
// rejection (unbiased, usually one 64-bit draw).
func (r rng) intn(n int) int {
	un := uint64(n)
	hi, lo := bits.Mul64(r.pcg.Uint64(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(r.pcg.Uint64(), un)
		}
	}
	return int(hi)
}

// shuffleInto writes into dst (len(dst) == len(src)) the order in which a
// shuffle buffer of size k emits src, like tf.data's shuffle: the buffer
// starts with the first k elements; each output is a uniformly chosen
// buffer slot, refilled with the next input (or, once the input is
// exhausted, with the buffer's last element). k >= len(src) gives a
// uniform permutation; k <= 1 gives src unchanged. scratch is reused.
func shuffleInto(dst, src, scratch []int32, k int, r rng) []int32 {
	if k <= 1 || len(src) <= 1 {
		copy(dst, src)
		return scratch
	}
	k = min(k, len(src))
	buf := append(scratch[:0], src[:k]...)
	next := k
	for out := range dst {
		j := r.intn(len(buf))
		dst[out] = buf[j]
		if next < len(src) {
			buf[j] = src[next]
			next++
		} else {
			last := len(buf) - 1
			buf[j] = buf[last]
			buf = buf[:last]
		}
	}
	return buf
}
