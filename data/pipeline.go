package data

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// FullShuffle as Config.ShuffleBuffer shuffles each epoch's shard
// uniformly (a buffer at least as large as the shard).
const FullShuffle = 1<<31 - 1

// Forever as Config.Epochs repeats without end.
const Forever = -1

// Config describes a pipeline: shard -> shuffle -> repeat -> batch ->
// prefetch. The zero value plus a BatchSize is one worker reading one
// epoch in order.
type Config struct {
	// Rank is this worker, 0 <= Rank < World; World is the number of
	// workers (0 means 1).
	Rank, World int
	// Policy says how the input is split among workers. An in-memory
	// Dataset counts as one file, so ShardAuto means ShardData for it.
	Policy ShardPolicy
	// ShuffleBuffer is the shuffle buffer size in examples: 0 or 1 keeps
	// the shard's order; FullShuffle (or any size >= the shard) is a
	// uniform permutation. Each epoch is shuffled with a seed derived from
	// (Seed, epoch, Rank).
	ShuffleBuffer int
	Seed          uint64
	// Epochs is how many times the input is read: 0 means 1, Forever
	// means without end. Batches never span two epochs.
	Epochs int
	// StartEpoch is the number of the first epoch (for resuming from a
	// checkpoint): epoch e is shuffled the same way whatever StartEpoch was.
	StartEpoch int
	// BatchSize is the number of examples per batch (> 0).
	BatchSize int
	// DropRemainder drops each epoch's last partial batch; see Steps for
	// how this makes every rank run the same number of steps.
	DropRemainder bool
	// Prefetch is the number of batches prepared ahead in a goroutine;
	// 0 prepares each batch inside Next.
	Prefetch int
	// StepsPerEpoch, for file pipelines only, is the number of batches
	// every epoch yields on every rank (cut or padded with empty batches,
	// as for Datasets; compute it with AgreedSteps from the shard sizes of
	// all ranks). 0 lets each epoch end where this rank's shard ends, which
	// keeps ranks in step only when all shards hold the same count.
	StepsPerEpoch int
}

// TrainConfig is the usual training setup for rank of world: DATA
// sharding, a full shuffle per epoch, drop remainder (every rank runs
// Steps(n, world, batch, true) steps of full batches), 2 batches of
// prefetch.
func TrainConfig(rank, world, batch int, seed uint64, epochs int) Config {
	return Config{Rank: rank, World: world, Policy: ShardData, ShuffleBuffer: FullShuffle, Seed: seed,
		Epochs: epochs, BatchSize: batch, DropRemainder: true, Prefetch: 2}
}

// EvalConfig reads every example once, in order, in batches of batch (the
// last one partial), on one worker.
func EvalConfig(batch int) Config {
	return Config{World: 1, Policy: ShardOff, Epochs: 1, BatchSize: batch}
}

func (c *Config) check() error {
	if c.World == 0 {
		c.World = 1
	}
	if c.Epochs == 0 {
		c.Epochs = 1
	}
	switch {
	case c.World < 0 || c.Rank < 0 || c.Rank >= c.World:
		return fmt.Errorf("pipeline: rank %d of %d workers: want 0 <= rank < workers", c.Rank, c.World)
	case c.BatchSize <= 0:
		return fmt.Errorf("pipeline: batch size %d: want > 0", c.BatchSize)
	case c.ShuffleBuffer < 0:
		return fmt.Errorf("pipeline: shuffle buffer %d: want >= 0 (0: no shuffle)", c.ShuffleBuffer)
	case c.Epochs < Forever:
		return fmt.Errorf("pipeline: epochs %d: want > 0, 0 (one) or Forever (-1)", c.Epochs)
	case c.StartEpoch < 0:
		return fmt.Errorf("pipeline: start epoch %d: want >= 0", c.StartEpoch)
	case c.Prefetch < 0:
		return fmt.Errorf("pipeline: prefetch %d: want >= 0", c.Prefetch)
	case c.StepsPerEpoch < 0:
		return fmt.Errorf("pipeline: steps per epoch %d: want >= 0", c.StepsPerEpoch)
	}
	return nil
}

// producer fills batches; the Pipeline runs it inline or in the prefetch
// goroutine (never both), so it needs no locking.
type producer interface {
	// fill makes b the next batch, or returns io.EOF after the last one.
	fill(ctx context.Context, b *Batch) error
	// close releases open files.
	close() error
}

// Pipeline yields batches; create it with NewPipeline (in-memory Dataset)
// or NewFilePipeline (streaming Sources, one per file), read it with Next
// and release it with Close.
//
// A *Batch returned by Next belongs to the pipeline and stays valid until
// the following call to Next or Close; copy what must live longer. Next is
// not safe for concurrent use.
type Pipeline struct {
	prod  producer
	steps int

	// without prefetch
	buf *Batch

	// with prefetch: the goroutine takes buffers from free, fills them and
	// sends them on out; the consumer holds at most one (held) and returns
	// it to free on its next call. There are Prefetch+2 buffers: one
	// being filled, Prefetch queued, one held, so neither side waits on
	// the other for memory.
	ctx    context.Context
	cancel context.CancelFunc
	out    chan fetched
	free   chan *Batch
	held   *Batch
	done   chan struct{}

	err       error // terminal: io.EOF or the first failure
	closeOnce sync.Once
	closeErr  error
}

type fetched struct {
	b   *Batch
	err error
}

func newPipeline(ctx context.Context, prod producer, steps int, cfg Config) *Pipeline {
	p := &Pipeline{prod: prod, steps: steps}
	if cfg.Prefetch == 0 {
		p.buf = new(Batch)
		return p
	}
	p.ctx, p.cancel = context.WithCancel(ctx)
	p.out = make(chan fetched, cfg.Prefetch)
	p.free = make(chan *Batch, cfg.Prefetch+2)
	for range cfg.Prefetch + 2 {
		p.free <- new(Batch)
	}
	p.done = make(chan struct{})
	go p.run()
	return p
}

// run is the prefetch goroutine; it exits when the producer ends or fails,
// or when the pipeline's context is cancelled (by its parent or by Close).
func (p *Pipeline) run() {
	defer close(p.done)
	defer func() { p.closeErr = p.prod.close() }()
	for {
		var b *Batch
		select {
		case b = <-p.free:
		case <-p.ctx.Done():
			return
		}
		err := p.prod.fill(p.ctx, b)
		select {
		case p.out <- fetched{b, err}:
		case <-p.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// StepsPerEpoch returns the number of batches each epoch yields, the same
// on every rank; 0 for a file pipeline without Config.StepsPerEpoch, whose
// epochs end where the shard ends.
func (p *Pipeline) StepsPerEpoch() int { return p.steps }

// Next returns the next batch, or io.EOF after the last epoch. Batch.Epoch
// and Batch.Step say where it belongs. After an error (including io.EOF,
// and ctx ending while a batch was being made) every later call returns
// the same error, because a half-made batch cannot be resumed; ctx ending
// while Next only waits for the prefetch goroutine is not sticky. See
// Pipeline for how long the batch stays valid.
func (p *Pipeline) Next(ctx context.Context) (*Batch, error) {
	if p.err != nil {
		return nil, p.err
	}
	if p.out == nil {
		if err := p.prod.fill(ctx, p.buf); err != nil {
			p.err = err
			return nil, err
		}
		return p.buf, nil
	}
	if p.held != nil {
		p.free <- p.held // never blocks: free has room for every buffer
		p.held = nil
	}
	select {
	case f := <-p.out:
		if f.err != nil {
			p.err = f.err
			return nil, f.err
		}
		p.held = f.b
		return f.b, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the prefetch goroutine's next batch: %w", ctx.Err())
	case <-p.ctx.Done():
		p.err = fmt.Errorf("pipeline stopped: %w", context.Cause(p.ctx))
		return nil, p.err
	}
}

// Close stops the prefetch goroutine (waiting for it to exit) and closes
// open files. It is safe to call more than once.
func (p *Pipeline) Close() error {
	p.closeOnce.Do(func() {
		if p.out == nil {
			p.closeErr = p.prod.close()
		} else {
			p.cancel()
			<-p.done
		}
		if p.err == nil {
			p.err = errors.New("pipeline closed")
		}
	})
	return p.closeErr
}

// NewPipeline returns a pipeline over an in-memory Dataset. It works on
// example indices: this rank's shard is a list of indices, each epoch
// shuffles that list, and a batch copies the chosen rows into a reused
// Batch, so steady-state iteration allocates nothing. Every epoch yields
// exactly Steps(...) batches (see steps.go for the policy). ctx bounds the
// prefetch goroutine; Close stops it earlier.
func NewPipeline(ctx context.Context, ds Dataset, cfg Config) (*Pipeline, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	policy, err := cfg.Policy.resolve(1, cfg.World)
	if err != nil {
		return nil, fmt.Errorf("in-memory dataset (one input): %w", err)
	}
	n := ds.Len()
	if n > 1<<31-1 {
		return nil, fmt.Errorf("pipeline: %d examples: at most %d supported", n, 1<<31-1)
	}
	world := cfg.World
	if policy == ShardOff {
		world = 1
	}
	var shard []int32
	if policy == ShardOff {
		shard = make([]int32, n)
		for i := range shard {
			shard[i] = int32(i)
		}
	} else {
		shard = make([]int32, 0, ShardSize(n, cfg.World, cfg.Rank))
		for i := cfg.Rank; i < n; i += cfg.World {
			shard = append(shard, int32(i))
		}
	}
	m := &memProducer{
		ds: ds, cfg: cfg, shard: shard, order: make([]int32, len(shard)),
		steps: Steps(n, world, cfg.BatchSize, cfg.DropRemainder),
	}
	m.step = m.steps // the first fill starts an epoch
	m.epoch = cfg.StartEpoch - 1
	return newPipeline(ctx, m, m.steps, cfg), nil
}

// memProducer is the in-memory pipeline's state.
type memProducer struct {
	ds      Dataset
	cfg     Config
	shard   []int32 // this rank's example indices, in dataset order
	order   []int32 // this epoch's order of shard
	scratch []int32 // shuffle buffer
	steps   int     // batches per epoch, agreed by all ranks
	epoch   int     // current epoch number
	ran     int     // epochs started
	step    int     // batches emitted this epoch
	pos     int     // next position in order
}

func (m *memProducer) fill(ctx context.Context, b *Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.step == m.steps {
		if m.steps == 0 || (m.cfg.Epochs != Forever && m.ran == m.cfg.Epochs) {
			return io.EOF
		}
		m.epoch++
		m.ran++
		m.step, m.pos = 0, 0
		m.scratch = shuffleInto(m.order, m.shard, m.scratch, m.cfg.ShuffleBuffer, newRNG(m.cfg.Seed, streamExamples, m.epoch, m.cfg.Rank))
	}
	k := min(m.cfg.BatchSize, len(m.order)-m.pos) // 0 for a padding batch
	b.reset(m.ds.Dim(), m.cfg.BatchSize, m.ds.Dim() == 0)
	if ss, ok := m.ds.(*SparseSet); ok {
		ss.appendRows(b, m.order[m.pos:m.pos+k])
	} else {
		for _, i := range m.order[m.pos : m.pos+k] {
			m.ds.Append(b, int(i))
		}
	}
	m.pos += k
	b.Epoch, b.Step = m.epoch, m.step
	m.step++
	return nil
}

func (m *memProducer) close() error { return nil }

// MNISTBatches is the one-call entry point for MNIST training: it returns
// the pipeline of TrainConfig(rank, world, batch, seed, epochs) over the
// normalised images. Every rank gets StepsPerEpoch() full batches per
// epoch; call Close when done.
func MNISTBatches(ctx context.Context, im *Images, rank, world, batch int, seed uint64, epochs int) (*Pipeline, error) {
	return NewPipeline(ctx, im.Dataset(), TrainConfig(rank, world, batch, seed, epochs))
}
