package replica

import (
	"testing"
	"time"
)

// TestMergeBuckets: a step's buckets become at most two spans, those
// during the backward pass and those after it.
func TestMergeBuckets(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, int64(ms)*int64(time.Millisecond)) }
	got := MergeBuckets([]BucketSpan{
		{Lo: 900, Hi: 1000, Start: at(1), End: at(2), Early: true},
		{Lo: 500, Hi: 900, Start: at(2), End: at(5), Early: true},
		{Lo: 100, Hi: 500, Start: at(6), End: at(7)},
		{Lo: 0, Hi: 100, Start: at(7), End: at(9)},
	})
	want := []BucketSpan{{Lo: 500, Hi: 1000, Start: at(1), End: at(5), Early: true}, {Lo: 0, Hi: 500, Start: at(6), End: at(9)}}
	if len(got) != len(want) {
		t.Fatalf("%+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Lo != w.Lo || g.Hi != w.Hi || !g.Start.Equal(w.Start) || !g.End.Equal(w.End) || g.Early != w.Early {
			t.Fatalf("span %d: %+v, want %+v", i, g, w)
		}
	}
	if len(MergeBuckets(nil)) != 0 {
		t.Fatal("spans from no buckets")
	}
}
