package collective

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective/half"
)

// halfRingReference is what AllReduceFloat32Half must leave in every
// rank's part: segment k's sum starts at rank k+1, each hop adds its own
// float32 values to the rounded partial sum, and the owner (rank k)
// rounds the total once more; rounding is per chunk, as frames are.
func halfRingReference(f half.Format, parts [][]float32, chunk int) []float32 {
	n, length := len(parts), len(parts[0])
	out := make([]float32, length)
	for k, sg := range segments(length, n) {
		for _, c := range chunks(sg, chunk) {
			acc := make([]float32, c.n)
			copy(acc, parts[(k+1)%n][c.off:c.off+c.n])
			for j := 2; j <= n; j++ {
				half.Round(f, acc, c.n)
				for i, v := range parts[(k+j)%n][c.off : c.off+c.n] {
					acc[i] += v
				}
			}
			half.Round(f, acc, c.n)
			copy(out[c.off:], acc)
		}
	}
	return out
}

// TestAllReduceHalfBits: on 1 to 4 ranks, in both formats, over whole
// buffers and ranges, several chunks or one, every rank ends with the
// reference's bits (so all ranks agree), close to the float32 sum, and
// the elements outside the range untouched.
func TestAllReduceHalfBits(t *testing.T) {
	for _, f := range []half.Format{half.BF16, half.FP16} {
		for n := 1; n <= 4; n++ {
			for _, tc := range []struct {
				name           string
				length, lo, hi int
				chunkBytes     int
				tiny           bool // values far below fp16's range
			}{
				{"whole, many chunks", 1000, 0, 1000, 256, false},
				{"range, one chunk", 700, 100, 613, 1 << 20, false},
				{"fewer elements than ranks", 10, 4, 6, 64, false},
				{"tiny gradients", 300, 0, 300, 128, true},
			} {
				t.Run(f.String()+"/"+tc.name+"/n="+string(rune('0'+n)), func(t *testing.T) {
					comms, _ := newMemComms(t, n, Options{ChunkBytes: tc.chunkBytes, Timeout: 20 * time.Second})
					rng := rand.New(rand.NewPCG(uint64(n), uint64(tc.length)))
					bufs := make([][]float32, n)
					parts := make([][]float32, n)
					exact := make([]float64, tc.hi-tc.lo)
					for r := range bufs {
						bufs[r] = make([]float32, tc.length)
						for i := range bufs[r] {
							v := float32(rng.NormFloat64())
							if tc.tiny {
								v *= 1e-9
							}
							bufs[r][i] = v
						}
						parts[r] = append([]float32(nil), bufs[r][tc.lo:tc.hi]...)
						for i, v := range parts[r] {
							exact[i] += float64(v)
						}
					}
					orig := make([][]float32, n)
					for r := range bufs {
						orig[r] = append([]float32(nil), bufs[r]...)
					}
					noErrors(t, onAll(comms, func(c *Comm) error {
						return c.AllReduceFloat32Half(context.Background(), bufs[c.Rank()], tc.lo, tc.hi, f)
					}))
					chunk := max(comms[0].Options().ChunkBytes/4, 1)
					want := parts[0]
					if n > 1 {
						want = halfRingReference(f, parts, chunk)
					} else {
						want = append([]float32(nil), want...)
						half.Round(f, want, chunk)
					}
					tol := 1.0 / 128 // bf16: 8 significant bits per rounding
					if f == half.FP16 {
						tol = 1.0 / 1024
					}
					for r, b := range bufs {
						for i := range b {
							if i < tc.lo || i >= tc.hi {
								if b[i] != orig[r][i] {
									t.Fatalf("rank %d: element %d outside [%d,%d) changed", r, i, tc.lo, tc.hi)
								}
								continue
							}
							got := b[i]
							if math.Float32bits(got) != math.Float32bits(want[i-tc.lo]) {
								t.Fatalf("rank %d element %d: %g, the reference %g", r, i, got, want[i-tc.lo])
							}
							scale := 0.0
							for q := range parts {
								scale += math.Abs(float64(parts[q][i-tc.lo]))
							}
							if d := math.Abs(float64(got) - exact[i-tc.lo]); d > 2*tol*scale*float64(n) {
								t.Fatalf("rank %d element %d: %g, the exact sum %g (error %g beyond the rounding's bound)", r, i, got, exact[i-tc.lo], d)
							}
						}
					}
				})
			}
		}
	}
}

// TestAllReduceHalfBytes: a 16-bit all-reduce moves half the payload
// bytes of the float32 ring, plus its frames' 4-byte headers.
func TestAllReduceHalfBytes(t *testing.T) {
	const length = 100_000
	for _, n := range []int{2, 3} {
		moved := func(run func(c *Comm, buf []float32) error) int64 {
			net := NewMemNetwork(n)
			comms := make([]*Comm, n)
			counters := make([]*CountingTransport, n)
			for r := range comms {
				counters[r] = CountTraffic(net.Transport(r))
				c, err := New(counters[r], Options{Algo: Ring, Timeout: 20 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				comms[r] = c
			}
			noErrors(t, onAll(comms, func(c *Comm) error {
				buf := make([]float32, length)
				for i := range buf {
					buf[i] = float32(i%97) * 0.01
				}
				return run(c, buf)
			}))
			sent, _ := counters[0].Traffic()
			return sent
		}
		fp32 := moved(func(c *Comm, buf []float32) error { return c.AllReduceFloat32(context.Background(), buf, Sum) })
		for _, f := range []half.Format{half.BF16, half.FP16} {
			got := moved(func(c *Comm, buf []float32) error {
				return c.AllReduceFloat32Half(context.Background(), buf, 0, length, f)
			})
			if ratio := float64(got) / float64(fp32); ratio < 0.49 || ratio > 0.51 {
				t.Errorf("n=%d %s: rank 0 sent %d bytes, float32 %d: ratio %.4f, want half", n, f, got, fp32, ratio)
			}
		}
	}
}

// TestAllReduceHalfMismatch: ranks that send different formats fail on
// every rank, naming both.
func TestAllReduceHalfMismatch(t *testing.T) {
	comms, _ := newMemComms(t, 2, Options{Timeout: 5 * time.Second})
	errs := onAll(comms, func(c *Comm) error {
		f := half.BF16
		if c.Rank() == 1 {
			f = half.FP16
		}
		return c.AllReduceFloat32Half(context.Background(), make([]float32, 64), 0, 64, f)
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "mismatch") || !strings.Contains(err.Error(), "bf16") || !strings.Contains(err.Error(), "fp16") {
			t.Errorf("rank %d: %v, want a mismatch naming bf16 and fp16", r, err)
		}
	}
	c := comms[0]
	for _, tc := range []struct {
		lo, hi int
		f      half.Format
		want   string
	}{
		{-1, 4, half.BF16, "within the buffer"},
		{0, 65, half.BF16, "within the buffer"},
		{0, 4, half.FP32, "want bf16 or fp16"},
	} {
		if err := c.AllReduceFloat32Half(context.Background(), make([]float32, 64), tc.lo, tc.hi, tc.f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("[%d,%d) in %s: %v, want %q", tc.lo, tc.hi, tc.f, err, tc.want)
		}
	}
}

// TestAllReduceHalfBadFrames: a peer whose frame is short, of another
// format or badly scaled fails the all-reduce on the receiving rank with
// an error that names the peer and the reason.
func TestAllReduceHalfBadFrames(t *testing.T) {
	const count = 8
	good := half.AppendFrame(nil, half.BF16, make([]float32, count/2))
	for _, tc := range []struct {
		name    string
		payload []byte
		want    string
	}{
		{"short", []byte{1, 0}, "shorter than its 4-byte header"},
		{"another format", append([]byte{byte(half.FP16)}, good[1:]...), "peers must share --wire"},
		{"scaled bf16", append([]byte{1, 0, 5, 0}, good[4:]...), "bf16 is never scaled"},
		{"too few values", good[:len(good)-2], "mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			net := NewMemNetwork(2)
			c, err := New(net.Transport(0), Options{Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			// Rank 1 is a bare transport that sends rank 0 the first
			// reduce-scatter frame it expects, damaged.
			h := Header{Kind: KindAllReduceRing, DType: BFloat16, Op: Sum, Seq: 1, Count: count}
			if err := net.Transport(1).Send(context.Background(), 0, h, tc.payload); err != nil {
				t.Fatal(err)
			}
			err = c.AllReduceFloat32Half(context.Background(), make([]float32, count), 0, count, half.BF16)
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "rank 1") {
				t.Fatalf("%v, want an error naming rank 1 and %q", err, tc.want)
			}
		})
	}
}
