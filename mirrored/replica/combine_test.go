package replica

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
)

// wrapped is a Group that hides the range all-reduce of the Group it
// wraps, as a caller's counting or delaying wrapper does.
type wrapped struct{ Group }

// combineOn combines each replica's grads (one per rank) with Mean over
// an in-memory group, in the given ranges in turn, and returns what each
// replica holds after, or the first error.
func combineOn(t *testing.T, grads [][]float32, ranges [][2]int, wrap bool) ([][]float32, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := len(grads)
	net := collective.NewMemNetwork(n)
	out, errs := make([][]float32, n), make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		c, err := collective.New(net.Transport(r), collective.Options{Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		g := NewGroup(c)
		if wrap {
			g = wrapped{g}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			grad := append([]float32(nil), grads[r]...)
			for _, rg := range ranges {
				if errs[r] = (Mean{}).CombineRange(ctx, g, grad, rg[0], rg[1]); errs[r] != nil {
					cancel() // the peers would wait for this rank's part
					return
				}
			}
			out[r] = grad
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TestMeanRangesEqualWhole: Mean over buckets, top down as the backward
// pass sends them, ends with the bits of Mean over the whole buffer on
// every replica; a Group that cannot reduce part of a buffer is told so,
// by its type, and still combines whole buffers.
func TestMeanRangesEqualWhole(t *testing.T) {
	const n, size = 3, 1000
	grads := make([][]float32, n)
	for r := range grads {
		grads[r] = make([]float32, size)
		for i := range grads[r] {
			grads[r][i] = float32(math.Sin(float64(r*size+i))) / 3
		}
	}
	whole := [][2]int{{0, size}}
	want, err := combineOn(t, grads, whole, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		ranges  [][2]int
		wrap    bool
		wantErr string
	}{
		{"two buckets", [][2]int{{600, size}, {0, 600}}, false, ""},
		{"a bucket per hundred", [][2]int{{900, 1000}, {800, 900}, {500, 800}, {100, 500}, {0, 100}}, false, ""},
		{"whole, wrapped", whole, true, ""},
		{"buckets, wrapped", [][2]int{{600, size}, {0, 600}}, true, "reduces whole buffers only (replica.wrapped)"},
	} {
		got, err := combineOn(t, grads, tc.ranges, tc.wrap)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for r := range got {
			for i := range got[r] {
				if math.Float32bits(got[r][i]) != math.Float32bits(want[0][i]) {
					t.Fatalf("%s: rank %d element %d is %v, the whole buffer's mean %v", tc.name, r, i, got[r][i], want[0][i])
				}
			}
		}
	}
}

// TestComm: the Comm behind a NewGroup, and none behind any other Group.
func TestComm(t *testing.T) {
	c, err := collective.New(collective.NewMemNetwork(1).Transport(0), collective.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		g    Group
		want *collective.Comm
	}{
		{"NewGroup", NewGroup(c), c},
		{"LocalGroup", LocalGroup{}, nil},
		{"a wrapper", wrapped{NewGroup(c)}, nil},
	} {
		if got, ok := Comm(tc.g); got != tc.want || ok != (tc.want != nil) {
			t.Errorf("%s: %p %v, want %p", tc.name, got, ok, tc.want)
		}
	}
}
