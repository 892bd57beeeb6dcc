package data

import (
	"context"
	"fmt"
	"strings"
)

// Example is one training example, dense (Features) or sparse
// (Indices/Values). Exactly one of Features and Indices is non-nil, except
// for a sparse example with no non-zero feature, which has both nil.
type Example struct {
	Features []float32 // dense input (MNIST: 784 normalised pixels); nil for sparse
	Indices  []int32   // sparse feature indices, sorted and unique; nil for dense
	Values   []float32 // values matching Indices
	Label    float32   // class id (MNIST 0..9) or binary label (-1/+1 or 0/1)
}

// Source yields examples in order; Next returns io.EOF after the last one.
// The slices of a returned Example may be reused by the Source on the next
// call; stages that keep an example (shuffle) copy it.
type Source interface {
	Next(ctx context.Context) (Example, error)
}

// Batch is what trainers consume. Dense batches fill X; sparse batches fill
// the CSR fields. Its slices are sized for Size examples but may have larger
// capacity, because the pipeline reuses one Batch's memory across steps.
type Batch struct {
	Size    int       // examples in the batch
	Dim     int       // dense feature width (0 for sparse batches)
	X       []float32 // Size*Dim, row-major
	Labels  []float32 // Size labels
	RowPtr  []int32   // sparse: len Size+1; row r is Indices[RowPtr[r]:RowPtr[r+1]]
	Indices []int32
	Values  []float32

	// Epoch and Step locate a batch made by a Pipeline: the epoch number
	// and the batch's index within that epoch.
	Epoch, Step int
}

// IntLabels writes the labels as int32 class ids into dst (grown if short)
// and returns it; nn models take labels in that form.
func (b *Batch) IntLabels(dst []int32) []int32 {
	if cap(dst) < b.Size {
		dst = make([]int32, b.Size)
	}
	dst = dst[:b.Size]
	for i, l := range b.Labels[:b.Size] {
		dst[i] = int32(l)
	}
	return dst
}

// ShardPolicy says how the input is split among workers, like tf.data's
// AutoShardPolicy.
type ShardPolicy int

const (
	// ShardOff: every worker reads all the data.
	ShardOff ShardPolicy = iota
	// ShardFile: worker r reads files r, r+world, r+2*world, ...; an error
	// when there are fewer files than workers.
	ShardFile
	// ShardData: every worker reads everything and keeps every world-th
	// example, starting at its rank.
	ShardData
	// ShardAuto: ShardFile when there are at least as many files as
	// workers, else ShardData.
	ShardAuto
)

var shardNames = [...]string{ShardOff: "off", ShardFile: "file", ShardData: "data", ShardAuto: "auto"}

// String returns the policy's name as ParseShardPolicy accepts it.
func (p ShardPolicy) String() string {
	if p < 0 || int(p) >= len(shardNames) {
		return fmt.Sprintf("ShardPolicy(%d)", int(p))
	}
	return shardNames[p]
}

// ParseShardPolicy parses off, file, data or auto (any case).
func ParseShardPolicy(s string) (ShardPolicy, error) {
	for p, name := range shardNames {
		if strings.EqualFold(s, name) {
			return ShardPolicy(p), nil
		}
	}
	return 0, fmt.Errorf("unknown shard policy %q: want off, file, data or auto", s)
}

// resolve turns ShardAuto into ShardFile or ShardData for nfiles inputs,
// and checks ShardFile has a file for every worker.
func (p ShardPolicy) resolve(nfiles, world int) (ShardPolicy, error) {
	switch p {
	case ShardOff, ShardData:
		return p, nil
	case ShardAuto:
		if nfiles >= world {
			return ShardFile, nil
		}
		return ShardData, nil
	case ShardFile:
		if nfiles < world {
			return 0, fmt.Errorf("shard policy file: %d input files for %d workers: need at least one file per worker; use shard policy data or auto, or split the input into more files", nfiles, world)
		}
		return p, nil
	}
	return 0, fmt.Errorf("invalid shard policy %d: want off, file, data or auto", int(p))
}
