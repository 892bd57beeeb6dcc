// Package footprint estimates the memory a dense training process needs
// before anything is allocated, so that a model that cannot fit is
// refused with the figures instead of killing the Go runtime ("fatal
// error: out of memory", a dump of every goroutine) or the machine. It
// counts the model's buffers (nn.Architecture.Buffers) times what
// multiplies them (a Plan): the data set, the runtime and the network
// are not in it. TestMatchesPeakRSS checks it against a process's
// measured peak.
package footprint

import (
	"fmt"
	"sort"
	"strings"

	"github.com/meshtrain/meshtrain/nn"
)

// Plan is what multiplies a model's sizes in a training process: the
// examples a step runs, the parts they are split into, and the copies of
// the parameters the optimizer and the run keep.
type Plan struct {
	// Batch is the examples of one step on this process (the per-peer
	// batch; an evaluation batch of the same size reuses the buffers).
	Batch int
	// Shards is how many parts the batch is split into (nn.DefaultShards
	// if 0): each part has its own gradient buffer and activations.
	Shards int
	// OptimizerCopies is the optimizer's state in copies of the
	// parameters (OptimizerCopies).
	OptimizerCopies int
	// Exchange is set when the gradient is exchanged with peers: the
	// all-reduce's send and receive frames and the gradient buckets hold
	// about two copies of it.
	Exchange bool
	// Commits is set for an elastic run: an in-memory copy of the
	// parameters and optimizer state at every commit.
	Commits bool
	// Checkpoints is set when the run writes or reads checkpoints: their
	// encoding holds the parameters and state twice (tensors, file).
	Checkpoints bool
}

// OptimizerCopies is the state an optimizer keeps, in copies of the
// parameters: 0 for plain SGD, 1 with momentum, 2 for Adam (see
// nn.NewOptimizer).
func OptimizerCopies(name string, momentum float64) int {
	switch name {
	case nn.Adam:
		return 2
	case nn.Momentum, nn.Nesterov:
		return 1
	case nn.SGD:
		if momentum > 0 {
			return 1
		}
	}
	return 0
}

// Term is one part of a Footprint.
type Term struct {
	Name  string
	Bytes int64
}

// Footprint is the memory a training process of a model needs, by term,
// in bytes.
type Footprint []Term

// Total is the sum of the terms.
func (f Footprint) Total() int64 {
	var t int64
	for _, m := range f {
		t += m.Bytes
	}
	return t
}

// Largest is the largest term.
func (f Footprint) Largest() Term {
	var l Term
	for _, m := range f {
		if m.Bytes > l.Bytes {
			l = m
		}
	}
	return l
}

// String lists the terms, largest first.
func (f Footprint) String() string {
	s := append(Footprint(nil), f...)
	sort.SliceStable(s, func(i, j int) bool { return s[i].Bytes > s[j].Bytes })
	parts := make([]string, 0, len(s))
	for _, m := range s {
		if m.Bytes > 0 {
			parts = append(parts, m.Name+" "+Bytes(m.Bytes))
		}
	}
	return strings.Join(parts, ", ")
}

// Bytes writes n bytes in binary units (KiB, MiB, GiB …), 3 figures.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/unit, 0
	for v >= unit && u < 4 {
		v, u = v/unit, u+1
	}
	return fmt.Sprintf("%.3g %ciB", v, "KMGTP"[u])
}

// Of estimates the memory a training process of a needs under p: per
// shard (n examples) a gradient buffer of every parameter, the
// activations and their gradients, the convolutions' scratch and the
// input; per process the parameters, the optimizer's state, and the
// copies p asks for.
func Of(a nn.Architecture, p Plan) (Footprint, error) {
	shards := p.Shards
	if shards <= 0 {
		shards = nn.DefaultShards
	}
	n := (max(p.Batch, 1) + shards - 1) / shards
	b, err := a.Buffers(n)
	if err != nil {
		return nil, err
	}
	const f32 = 4
	k := int64(shards)
	w := f32 * b.Params
	state := int64(p.OptimizerCopies) * w
	f := Footprint{
		{"parameters", w},
		{fmt.Sprintf("gradients (%d shards)", shards), k * w},
		{"optimizer state", state},
		{fmt.Sprintf("activations and their gradients (%d examples × %d shards)", n, shards), k * f32 * b.Activations},
		{"convolution scratch", k * f32 * b.Scratch},
		{"input batches (this one and the next)", 2 * k * f32 * b.Input},
	}
	if p.Exchange {
		f = append(f, Term{"exchange and bucket buffers", 2 * w})
	}
	if p.Commits {
		f = append(f, Term{"elastic commits", w + state})
	}
	if p.Checkpoints {
		f = append(f, Term{"checkpoint encoding", 2 * (w + state)})
	}
	return f, nil
}
