package mirrored

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/nn/tensorboard"
)

// Event kinds, in the order a run emits them: one start, at most one
// resumed, a step per training step, an epoch per evaluation (and
// checkpoints where they are written), one done.
const (
	EventStart      = "start"
	EventResumed    = "resumed"
	EventStep       = "step"
	EventEpoch      = "epoch"
	EventCheckpoint = "checkpoint"
	EventDone       = "done"
)

// Event is one thing a replica's run reports. Every strategy emits the
// same kinds with the same meaning, so whatever observes a run (the log,
// the progress lines, TensorBoard, the launcher) works in every mode.
type Event struct {
	Kind  string `json:"kind"`
	Rank  int    `json:"rank"`
	Step  int    `json:"step"`  // global steps done (gossip: this replica's local steps)
	Steps int    `json:"steps"` // steps the run will take at most
	Epoch *Epoch `json:"epoch,omitempty"`
	Path  string `json:"path,omitempty"` // checkpoint file
	Info  string `json:"info,omitempty"` // start: the run in one line; epoch: what is particular to the mode; resumed: warnings, one a line
	// Train is a step's figures (kind step only; not sent to the launcher).
	Train *StepStats `json:"-"`
	// Gossip is a gossip replica's evaluation (kind epoch under gossip).
	Gossip *GossipEval `json:"-"`
}

// StepStats are one training step's figures.
type StepStats struct {
	Loss float64 // this replica's loss on its batch
	LR   float64
	// Compute, Comm and Wait split the step's time as PeerStats does.
	Compute, Comm, Wait time.Duration
}

// Observer receives a run's events, on the replica's goroutine, in order.
// An error stops the run (a TensorBoard file that cannot be written is
// not silently skipped).
type Observer interface {
	Observe(Event) error
}

// ObserverFunc adapts a function.
type ObserverFunc func(Event) error

func (f ObserverFunc) Observe(e Event) error { return f(e) }

// observers sends each event to every observer in order, stamping the
// rank; it closes those that are io.Closers once (on done, or by close
// when the run fails first).
type observers struct {
	rank   int
	obs    []Observer
	closed bool
}

func (o *observers) emit(e Event) error {
	e.Rank = o.rank
	var errs []error
	for _, ob := range o.obs {
		if err := ob.Observe(e); err != nil {
			errs = append(errs, err)
		}
	}
	if e.Kind == EventDone {
		errs = append(errs, o.close())
	}
	return errors.Join(errs...)
}

func (o *observers) close() error {
	if o.closed {
		return nil
	}
	o.closed = true
	var errs []error
	for _, ob := range o.obs {
		if c, ok := ob.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// newObservers builds a run's observers from its Config and Job: the log,
// the progress lines (rank 0 only unless everyRank, as under gossip where
// every replica's curve is its own), TensorBoard event files under LogDir,
// and the caller's OnEvent.
func newObservers(cfg *Config, onEvent func(Event), rank int, everyRank bool) (*observers, error) {
	o := &observers{rank: rank, obs: []Observer{logObserver{cfg.logger().With(zap.Int("rank", rank))}}}
	if cfg.Progress != nil && (rank == 0 || everyRank) {
		o.obs = append(o.obs, &progressObserver{w: cfg.Progress, prefix: everyRank, chief: rank == 0})
	}
	if cfg.LogDir != "" {
		tb, err := tensorboard.Create(tensorboard.WorkerDir(cfg.LogDir, rank), time.Now())
		if err != nil {
			return nil, err
		}
		o.obs = append(o.obs, &tensorboardObserver{w: tb})
	}
	if onEvent != nil {
		o.obs = append(o.obs, ObserverFunc(func(e Event) error {
			if e.Kind != EventStep {
				onEvent(e)
			}
			return nil
		}))
	}
	return o, nil
}

// logObserver writes the events to the zap logger (steps at debug level).
type logObserver struct{ log *zap.Logger }

func (l logObserver) Observe(e Event) error {
	switch e.Kind {
	case EventStart:
		l.log.Info("start", zap.String("run", e.Info), zap.Int("steps", e.Steps))
	case EventResumed:
		if e.Info != "" {
			l.log.Warn("resumed", zap.String("checkpoint", e.Path), zap.Int("step", e.Step), zap.String("warning", e.Info))
		} else {
			l.log.Info("resumed", zap.String("checkpoint", e.Path), zap.Int("step", e.Step))
		}
	case EventCheckpoint:
		l.log.Debug("checkpoint", zap.String("path", e.Path), zap.Int("step", e.Step))
	case EventEpoch:
		ep := e.Epoch
		fields := []zap.Field{zap.Int("epoch", ep.Epoch), zap.Int("step", e.Step), zap.Float64("loss", ep.Loss),
			zap.Float64("test_accuracy", ep.TestAccuracy), zap.Float64("test_loss", ep.TestLoss),
			zap.Float64("examples_per_sec", ep.ExamplesPerSec), zap.Float64("lr", ep.LR)}
		if ep.TestAUC > 0 {
			fields = append(fields, zap.Float64("test_auc", ep.TestAUC))
		}
		if g := e.Gossip; g != nil {
			fields = append(fields, zap.Float64("cluster_epochs", g.ClusterEpochs), zap.Float64("local_passes", g.LocalPasses))
		}
		if e.Info != "" {
			fields = append(fields, zap.String("info", e.Info))
		}
		l.log.Info("epoch", fields...)
	case EventDone:
		l.log.Info("done", zap.Int("steps", e.Step), zap.String("info", e.Info))
	}
	return nil
}

// progressObserver writes the human-readable lines: the run's header, a
// line per epoch, the resume point and the end.
type progressObserver struct {
	w      io.Writer
	prefix bool // "rank N " before each epoch line
	chief  bool // rank 0 also writes the run's header, resume and end
}

func (p *progressObserver) Observe(e Event) error {
	if e.Kind != EventEpoch && !p.chief {
		return nil
	}
	switch e.Kind {
	case EventStart:
		fmt.Fprintln(p.w, e.Info)
	case EventResumed:
		fmt.Fprintf(p.w, "resumed from %s: step %d\n", e.Path, e.Step)
		for _, w := range strings.Split(e.Info, "\n") {
			if w != "" {
				fmt.Fprintf(p.w, "warning: %s\n", w)
			}
		}
	case EventEpoch:
		p.epoch(e)
	case EventDone:
		if e.Info != "" {
			fmt.Fprintln(p.w, e.Info)
		}
	}
	return nil
}

func (p *progressObserver) epoch(e Event) {
	ep := e.Epoch
	if p.prefix {
		fmt.Fprintf(p.w, "rank %d ", e.Rank)
	}
	fmt.Fprintf(p.w, "epoch %2d", ep.Epoch)
	if g := e.Gossip; g != nil {
		fmt.Fprintf(p.w, " (cluster work %.2f epochs, own %.2f passes)", g.ClusterEpochs, g.LocalPasses)
	}
	fmt.Fprintf(p.w, "  loss %.4f  test loss %.4f  test accuracy %6.2f%%", ep.Loss, ep.TestLoss, 100*ep.TestAccuracy)
	if ep.TestAUC > 0 {
		fmt.Fprintf(p.w, "  AUC %.4f", ep.TestAUC)
	}
	fmt.Fprintf(p.w, "  %8.0f examples/s  lr %.4g  train %.1fs", ep.ExamplesPerSec, ep.LR, ep.TrainSeconds)
	if e.Info != "" {
		fmt.Fprintf(p.w, "  %s", e.Info)
	}
	fmt.Fprintln(p.w)
}

// tensorboardObserver writes the epoch figures as scalars at the global
// step, in every mode.
type tensorboardObserver struct{ w *tensorboard.Writer }

func (t *tensorboardObserver) Observe(e Event) error {
	if e.Kind != EventEpoch {
		return nil
	}
	ep, now, step := e.Epoch, time.Now(), int64(e.Step)
	errs := []error{
		t.w.Scalar("loss", step, float32(ep.Loss), now),
		t.w.Scalar("test_loss", step, float32(ep.TestLoss), now),
		t.w.Scalar("test_accuracy", step, float32(ep.TestAccuracy), now),
		t.w.Scalar("examples_per_sec", step, float32(ep.ExamplesPerSec), now),
		t.w.Scalar("lr", step, float32(ep.LR), now),
	}
	if ep.TestAUC > 0 {
		errs = append(errs, t.w.Scalar("test_auc", step, float32(ep.TestAUC), now))
	}
	return errors.Join(append(errs, t.w.Flush())...)
}

func (t *tensorboardObserver) Close() error { return t.w.Close() }
