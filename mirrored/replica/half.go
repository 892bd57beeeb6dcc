package replica

import (
	"context"
	"fmt"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/half"
	"github.com/meshtrain/meshtrain/mirrored/settings"
)

// Half is the Combiner of --wire bf16 and fp16: Mean with the gradient
// travelling in 16 bits (collective.Comm.AllReduceFloat32Half), half the
// bytes of float32 and so half the cipher's work. Every hop adds in
// float32 and every replica keeps the same rounded sum, so the replicas
// stay bitwise identical; the sum is then scaled by 1/N in float32. A
// replica alone rounds its gradient as a frame would, so that one
// replica applies what a cluster would.
type Half struct {
	// Format is half.BF16 or half.FP16.
	Format half.Format
}

var _ Combiner = Half{}

// Name says the format: the replicas compare it, and mirrored states it
// as the setting "wire".
func (h Half) Name() string { return "mean, " + h.Format.String() + " on the wire" }

func (h Half) CombineRange(ctx context.Context, g Group, grad []float32, lo, hi int) error {
	if !h.Format.Half() {
		return fmt.Errorf("combining in %s on the wire: Half takes bf16 or fp16 (fp32 is Mean)", h.Format)
	}
	hr, ok := g.(HalfReducer)
	if !ok {
		return fmt.Errorf("all-reducing the gradients in %s: this group cannot send 16-bit frames (%T): use --wire fp32", h.Format, g)
	}
	if err := hr.AllReduceSumHalf(ctx, grad, lo, hi, h.Format); err != nil {
		return fmt.Errorf("all-reducing the gradients [%d,%d) of %d in %s: %w", lo, hi, len(grad), h.Format, err)
	}
	if n := g.Size(); n > 1 {
		scale := 1 / float32(n)
		part := grad[lo:hi]
		for i := range part {
			part[i] *= scale
		}
	}
	return nil
}

// HalfReducer is implemented by Groups that can sum a range of a buffer
// with 16-bit frames (collective.Comm.AllReduceFloat32Half); Half needs it.
type HalfReducer interface {
	AllReduceSumHalf(ctx context.Context, buf []float32, lo, hi int, f half.Format) error
}

var (
	_ HalfReducer = (*commGroup)(nil)
	_ HalfReducer = LocalGroup{}
)

func (g *commGroup) AllReduceSumHalf(ctx context.Context, buf []float32, lo, hi int, f half.Format) error {
	return g.c.AllReduceFloat32Half(ctx, buf, lo, hi, f)
}

// AllReduceSumHalf rounds buf[lo:hi] as a trip in format f would, in
// chunks of the default collective chunk's elements (what a one-rank
// Comm does).
func (LocalGroup) AllReduceSumHalf(ctx context.Context, buf []float32, lo, hi int, f half.Format) error {
	if lo < 0 || hi > len(buf) || lo > hi {
		return fmt.Errorf("mirrored: 16-bit sum of [%d,%d) of a buffer of %d: the range must lie within the buffer", lo, hi, len(buf))
	}
	half.Round(f, buf[lo:hi], collective.DefaultChunkBytes/4)
	return ctx.Err()
}

// WireOf is the format c sends the gradient in: Half's, else FP32.
func WireOf(c Combiner) half.Format {
	if h, ok := c.(Half); ok {
		return h.Format
	}
	return half.FP32
}

// CombinerSettings is what the replicas must share of c: a 16-bit wire
// (Half) by WireSettings, another Combiner by its Name (and the wire as
// fp32).
func CombinerSettings(c Combiner) []settings.Setting {
	if h, ok := c.(Half); ok {
		return WireSettings(h.Format)
	}
	if c.Name() != MeanName {
		return append(WireSettings(half.FP32), settings.Setting{Name: "combiner", Value: c.Name(), Resume: true})
	}
	return WireSettings(half.FP32)
}

// WireSettings is the setting "wire": a 16-bit format shapes the
// arithmetic, so checkpoints record it (Resume); fp32 is compared at
// start-up only, so that the default's checkpoints and fingerprints are
// those from before the 16-bit wire, and a peer started with another
// --wire is refused by the setting's name.
func WireSettings(f half.Format) []settings.Setting {
	return []settings.Setting{{Name: "wire", Value: f.String(), Resume: f.Half()}}
}
