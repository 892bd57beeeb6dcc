package sparse

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// mergePairwise is the reference merge: parts folded in one at a time into
// a float64 accumulator (acc = parts[0], then acc += parts[r] for r = 1..),
// which sums every index in rank order by construction.
func mergePairwise(parts []Vector, scale float64) Vector {
	var accIdx []int32
	var accVal []float64
	for r, p := range parts {
		if r == 0 {
			accIdx = append(accIdx, p.Indices...)
			for _, v := range p.Values {
				accVal = append(accVal, float64(v))
			}
			continue
		}
		var outIdx []int32
		var outVal []float64
		a, b := 0, 0
		for a < len(accIdx) || b < len(p.Indices) {
			switch {
			case b == len(p.Indices) || (a < len(accIdx) && accIdx[a] < p.Indices[b]):
				outIdx, outVal = append(outIdx, accIdx[a]), append(outVal, accVal[a])
				a++
			case a == len(accIdx) || accIdx[a] > p.Indices[b]:
				outIdx, outVal = append(outIdx, p.Indices[b]), append(outVal, float64(p.Values[b]))
				b++
			default:
				outIdx, outVal = append(outIdx, accIdx[a]), append(outVal, accVal[a]+float64(p.Values[b]))
				a++
				b++
			}
		}
		accIdx, accVal = outIdx, outVal
	}
	out := Vector{Indices: accIdx, Values: []float32{}}
	for _, v := range accVal {
		out.Values = append(out.Values, float32(v*scale))
	}
	if out.Indices == nil {
		out.Indices = []int32{}
	}
	return out
}

// zipfPart returns a sorted unique gradient of about nnz indices below dim,
// Zipf-distributed like Criteo's features, with values that stress the sum:
// signed zeros, tiny and large magnitudes.
func zipfPart(rng *rand.Rand, z *rand.Zipf, nnz int) Vector {
	seen := map[int32]bool{}
	var idx []int32
	for range nnz {
		i := int32(z.Uint64())
		if !seen[i] {
			seen[i] = true
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	v := Vector{Indices: idx, Values: make([]float32, len(idx))}
	for k := range v.Values {
		switch rng.IntN(8) {
		case 0:
			v.Values[k] = float32(math.Copysign(0, -1))
		case 1:
			v.Values[k] = 0
		case 2:
			v.Values[k] = float32(rng.NormFloat64() * 1e-30)
		case 3:
			v.Values[k] = float32(rng.NormFloat64() * 1e30)
		default:
			v.Values[k] = float32(rng.NormFloat64())
		}
	}
	return v
}

func TestMergeMatchesPairwiseBitwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const dim = 1 << 20
	z := rand.NewZipf(rng, 1.1, 1, dim-1)
	var c Coalescer
	for trial := range 200 {
		n := 1 + trial%6
		parts := make([]Vector, n)
		for r := range parts {
			if rng.IntN(5) > 0 { // some ranks have nothing
				parts[r] = zipfPart(rng, z, rng.IntN(300))
			}
		}
		if trial%50 == 0 { // the largest valid index next to the sentinel
			parts[0] = Vector{Indices: []int32{math.MaxInt32 - 1}, Values: []float32{1}}
		}
		examples := 1 + rng.IntN(500)
		var got Vector
		if err := c.MergeGradients(&got, parts, math.MaxInt32, examples); err != nil {
			t.Fatal(err)
		}
		want := mergePairwise(parts, 1/float64(examples))
		if !slices.Equal(got.Indices, want.Indices) {
			t.Fatalf("trial %d (%d parts): indices differ:\n got %v\nwant %v", trial, n, got.Indices, want.Indices)
		}
		for k := range want.Values {
			if math.Float32bits(got.Values[k]) != math.Float32bits(want.Values[k]) {
				t.Fatalf("trial %d (%d parts): index %d: got %v (%#x), want %v (%#x)", trial, n, want.Indices[k],
					got.Values[k], math.Float32bits(got.Values[k]), want.Values[k], math.Float32bits(want.Values[k]))
			}
		}
	}
}

// BenchmarkMerge compares the one-pass merge with the pairwise reference
// on Zipf-distributed parts of Criteo's shape (~1,260 unique indices per
// peer's batch of 100 over 33.7M features).
func BenchmarkMerge(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(rng, 1.05, 1, 33_762_577)
	for _, n := range []int{2, 4} {
		parts := make([]Vector, n)
		for r := range parts {
			parts[r] = zipfPart(rng, z, 1400)
		}
		b.Run(fmt.Sprintf("N=%d/one-pass", n), func(b *testing.B) {
			var c Coalescer
			var g Vector
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu0 := threadCPUSeconds()
			for b.Loop() {
				c.merge(&g, parts, 0.01)
			}
			b.ReportMetric((threadCPUSeconds()-cpu0)*1e9/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(g.Len()), "nnz-union")
		})
		b.Run(fmt.Sprintf("N=%d/pairwise", n), func(b *testing.B) {
			for b.Loop() {
				mergePairwise(parts, 0.01)
			}
		})
	}
}

func TestMergeEncodedMatchesDecodeAndMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const dim = 1 << 20
	z := rand.NewZipf(rng, 1.1, 1, dim-1)
	var c, ref Coalescer
	for trial := range 100 {
		n := 1 + trial%6
		self := rng.IntN(n)
		parts := make([]Vector, n)
		encoded := make([][]byte, n)
		for r := range parts {
			if rng.IntN(5) > 0 {
				parts[r] = zipfPart(rng, z, rng.IntN(300))
			}
			encoded[r] = AppendVector(nil, parts[r])
		}
		encoded[self] = []byte("ignored")
		examples := 1 + rng.IntN(500)
		var got, want Vector
		pairs, err := c.MergeEncoded(&got, encoded, self, parts[self], dim, examples)
		if err != nil {
			t.Fatal(err)
		}
		if err := ref.MergeGradients(&want, parts, dim, examples); err != nil {
			t.Fatal(err)
		}
		wantPairs := 0
		for _, p := range parts {
			wantPairs += p.Len()
		}
		if pairs != wantPairs || !slices.Equal(got.Indices, want.Indices) || len(got.Values) != len(want.Values) {
			t.Fatalf("trial %d: %d pairs, %d indices; want %d pairs, %d indices", trial, pairs, got.Len(), wantPairs, want.Len())
		}
		for k := range want.Values {
			if math.Float32bits(got.Values[k]) != math.Float32bits(want.Values[k]) {
				t.Fatalf("trial %d: index %d: got %v, want %v", trial, want.Indices[k], got.Values[k], want.Values[k])
			}
		}
	}
	// A bad part is an error naming its rank, whatever the others hold.
	good := AppendVector(nil, Vector{Indices: []int32{1, 5}, Values: []float32{1, 2}})
	for _, tc := range []struct {
		name string
		bad  []byte
		want string
	}{
		{"out of range", AppendVector(nil, Vector{Indices: []int32{3, dim}, Values: []float32{1, 2}}), "leaves [0, 1048576)"},
		{"infinite", AppendVector(nil, Vector{Indices: []int32{3}, Values: []float32{float32(math.Inf(-1))}}), "not finite"},
		{"truncated", good[:len(good)-1], "only"},
		{"empty", nil, "truncated"},
	} {
		var dst Vector
		_, err := c.MergeEncoded(&dst, [][]byte{good, nil, tc.bad}, 1, Vector{}, dim, 3)
		if err == nil || !strings.Contains(err.Error(), "rank 2") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming rank 2 and %q", tc.name, err, tc.want)
		}
	}
}
