package data

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Opener opens one input file as a Source. A file pipeline calls it once
// per file per epoch and, if the Source is also an io.Closer, closes it
// when the file is exhausted or the pipeline is closed.
type Opener func(ctx context.Context, path string) (Source, error)

// NewFilePipeline returns a pipeline over files read by open, one Source
// per file, for data that is sharded by file or does not fit in memory.
// With ShardFile (or ShardAuto with at least World files) rank r reads
// files r, r+World, ...; with ShardData it reads every file and keeps
// every World-th example, counting across files in list order. When
// shuffling, the order of this rank's files is also permuted each epoch.
// Examples must be all dense of one width or all sparse; the shuffle
// buffer holds copies of ShuffleBuffer examples.
func NewFilePipeline(ctx context.Context, files []string, open Opener, cfg Config) (*Pipeline, error) {
	s, err := newStreamProducer(files, open, cfg)
	if err != nil {
		return nil, err
	}
	return newPipeline(ctx, s, s.cfg.StepsPerEpoch, s.cfg), nil
}

// ShardCount returns the number of examples rank cfg.Rank reads per epoch
// from files under cfg's shard policy, by reading its share once. With the
// smallest and largest count over all ranks (a Min and a Max all-reduce),
// AgreedSteps gives the Config.StepsPerEpoch that keeps ranks in step.
func ShardCount(ctx context.Context, files []string, open Opener, cfg Config) (int, error) {
	s, err := newStreamProducer(files, open, cfg)
	if err != nil {
		return 0, err
	}
	defer s.close()
	for i := range s.files {
		s.order = append(s.order, i)
	}
	var ex Example
	n := 0
	for {
		ok, err := s.read(ctx, &ex)
		if err != nil || !ok {
			return n, err
		}
		n++
	}
}

func newStreamProducer(files []string, open Opener, cfg Config) (*streamProducer, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	policy, err := cfg.Policy.resolve(len(files), cfg.World)
	if err != nil {
		return nil, err
	}
	mine := files
	if policy == ShardFile {
		mine = nil
		for i := cfg.Rank; i < len(files); i += cfg.World {
			mine = append(mine, files[i])
		}
	}
	return &streamProducer{cfg: cfg, policy: policy, files: mine, open: open, dim: -1, epoch: cfg.StartEpoch - 1, ended: true}, nil
}

// streamProducer is the file pipeline's state. Within an epoch it reads
// examples from this rank's files in turn, keeps its DATA shard, passes
// them through the shuffle buffer (slots) and appends them to batches.
type streamProducer struct {
	cfg    Config
	policy ShardPolicy
	files  []string
	open   Opener

	epoch, ran int
	order      []int  // this epoch's file order
	fi         int    // next position in order
	src        Source // open file, or nil
	srcName    string
	srcIndex   int // examples read from src
	seen       int // examples read this epoch, for DATA sharding
	rng        rng

	slots   []Example // shuffle buffer, grown up to cfg.ShuffleBuffer; each slot owns its slices
	filled  int       // slots in use
	drained bool      // this epoch's input is exhausted
	ended   bool      // this epoch has emitted all its batches
	step    int
	batches int // batches with examples this epoch
	dim     int // dense width, 0 sparse, -1 not yet known
}

func (s *streamProducer) startEpoch(ctx context.Context) error {
	s.epoch++
	s.ran++
	s.step, s.batches, s.fi, s.seen, s.filled = 0, 0, 0, 0, 0
	s.drained, s.ended = false, false
	s.order = s.order[:0]
	for i := range s.files {
		s.order = append(s.order, i)
	}
	if s.cfg.ShuffleBuffer > 1 {
		// Rank 0's seed on every rank: under ShardData all ranks must read
		// the files in the same order for their shards to partition them.
		r := newRNG(s.cfg.Seed, streamFiles, s.epoch, 0)
		for i := len(s.order) - 1; i > 0; i-- {
			j := r.intn(i + 1)
			s.order[i], s.order[j] = s.order[j], s.order[i]
		}
	}
	s.rng = newRNG(s.cfg.Seed, streamExamples, s.epoch, s.cfg.Rank)
	if s.cfg.ShuffleBuffer > 1 {
		for s.filled < s.cfg.ShuffleBuffer {
			if s.filled == len(s.slots) {
				s.slots = append(s.slots, Example{})
			}
			ok, err := s.read(ctx, &s.slots[s.filled])
			if err != nil || !ok {
				return err
			}
			s.filled++
		}
	}
	return nil
}

// read copies this rank's next example into dst (reusing dst's slices) and
// reports false once the epoch's input is exhausted.
func (s *streamProducer) read(ctx context.Context, dst *Example) (bool, error) {
	for {
		if s.src == nil {
			if s.fi == len(s.order) {
				s.drained = true
				return false, nil
			}
			s.srcName = s.files[s.order[s.fi]]
			s.fi++
			src, err := s.open(ctx, s.srcName)
			if err != nil {
				return false, fmt.Errorf("opening %s: %w", s.srcName, err)
			}
			s.src, s.srcIndex = src, 0
		}
		ex, err := s.src.Next(ctx)
		if errors.Is(err, io.EOF) {
			if err := s.closeSrc(); err != nil {
				return false, err
			}
			continue
		}
		if err != nil {
			return false, fmt.Errorf("%s: example %d: %w", s.srcName, s.srcIndex, err)
		}
		s.srcIndex++
		s.seen++
		if s.policy == ShardData && (s.seen-1)%s.cfg.World != s.cfg.Rank {
			continue
		}
		if err := s.checkKind(ex); err != nil {
			return false, err
		}
		dst.Features = append(dst.Features[:0], ex.Features...)
		dst.Indices = append(dst.Indices[:0], ex.Indices...)
		dst.Values = append(dst.Values[:0], ex.Values...)
		dst.Label = ex.Label
		return true, nil
	}
}

// checkKind fixes the batch kind from the first example and rejects
// examples of another kind or width.
func (s *streamProducer) checkKind(ex Example) error {
	d := len(ex.Features)
	if s.dim == -1 {
		s.dim = d
	}
	if d != s.dim {
		return fmt.Errorf("%s: example %d has %d dense features, earlier examples %d: inputs must be all dense of one width or all sparse", s.srcName, s.srcIndex-1, d, s.dim)
	}
	if d == 0 {
		if err := checkSparse(ex); err != nil {
			return fmt.Errorf("%s: example %d: %w", s.srcName, s.srcIndex-1, err)
		}
	}
	return nil
}

func (s *streamProducer) closeSrc() error {
	if s.src == nil {
		return nil
	}
	var err error
	if c, ok := s.src.(io.Closer); ok {
		if cerr := c.Close(); IsChanged(cerr) {
			err = cerr // it names the file
		} else if cerr != nil {
			err = fmt.Errorf("closing %s: %w", s.srcName, cerr)
		}
	}
	s.src = nil
	return err
}

// nextExample moves the next shuffled example into b; false once the epoch
// has no more.
func (s *streamProducer) nextExample(ctx context.Context, b *Batch) (bool, error) {
	if s.cfg.ShuffleBuffer <= 1 {
		if len(s.slots) == 0 {
			s.slots = make([]Example, 1)
		}
		ok, err := s.read(ctx, &s.slots[0])
		if ok {
			s.appendExample(b, &s.slots[0])
		}
		return ok, err
	}
	if s.filled == 0 {
		return false, nil
	}
	j := s.rng.intn(s.filled)
	s.appendExample(b, &s.slots[j])
	if !s.drained {
		ok, err := s.read(ctx, &s.slots[j])
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
	}
	// Input exhausted: move the last slot into j, keeping both slots'
	// memory (swap, not copy) for the next epoch.
	s.filled--
	s.slots[j], s.slots[s.filled] = s.slots[s.filled], s.slots[j]
	return true, nil
}

func (s *streamProducer) appendExample(b *Batch, ex *Example) {
	if s.dim > 0 {
		b.appendDense(ex.Features, ex.Label)
	} else {
		b.appendSparse(ex.Indices, ex.Values, ex.Label)
	}
}

func (s *streamProducer) fill(ctx context.Context, b *Batch) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.ended {
			if s.ran > 0 && s.batches == 0 && s.cfg.StepsPerEpoch == 0 {
				return io.EOF // an epoch without examples: repeating it yields nothing
			}
			if s.cfg.Epochs != Forever && s.ran == s.cfg.Epochs {
				return io.EOF
			}
			if err := s.startEpoch(ctx); err != nil {
				return err
			}
		}
		steps := s.cfg.StepsPerEpoch
		if steps > 0 && s.step == steps {
			s.endEpoch()
			continue
		}
		b.reset(max(s.dim, 0), s.cfg.BatchSize, s.dim <= 0)
		for b.Size < s.cfg.BatchSize {
			ok, err := s.nextExample(ctx, b)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
		}
		b.Dim = max(s.dim, 0) // the first example may have fixed it just now
		if s.dim > 0 {
			b.RowPtr = b.RowPtr[:0]
		}
		full := b.Size == s.cfg.BatchSize
		switch {
		case full || (b.Size > 0 && !s.cfg.DropRemainder):
			s.batches++
		case steps > 0:
			// Padding to the agreed step count: an empty batch.
			b.reset(max(s.dim, 0), 0, s.dim == 0)
		default:
			s.endEpoch()
			continue
		}
		b.Epoch, b.Step = s.epoch, s.step
		s.step++
		return nil
	}
}

// endEpoch finishes the epoch; with StepsPerEpoch set the rest of the
// shard is left unread.
func (s *streamProducer) endEpoch() {
	s.ended = true
	_ = s.closeSrc()
	s.filled = 0
}

func (s *streamProducer) close() error { return s.closeSrc() }

// SliceSource is a Source over examples held in memory, for tests and for
// small generated data.
type SliceSource struct {
	Examples []Example
	pos      int
}

// Next returns the next example, or io.EOF after the last.
func (s *SliceSource) Next(ctx context.Context) (Example, error) {
	if err := ctx.Err(); err != nil {
		return Example{}, err
	}
	if s.pos == len(s.Examples) {
		return Example{}, io.EOF
	}
	s.pos++
	return s.Examples[s.pos-1], nil
}

var _ Source = (*SliceSource)(nil)
