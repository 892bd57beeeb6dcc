package observe

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/meshtrain/meshtrain/mirrored"
)

// Log writes a run's events to a zap logger: steps not at all, the
// checkpoints at debug level, the start, the epochs and the end at info
// (at debug on the replicas for which quiet says so: those whose progress
// lines show them on the same terminal), a resume with warnings and a
// change of membership at warn. Every line names the replica's rank (the
// event's, or the cluster index: AsPeer).
type Log struct {
	log   *zap.Logger
	quiet func(rank int) bool
	peer  *int // AsPeer's label
}

// AsPeer labels every line with the cluster index peer instead of the
// event's rank: an elastic run's ranks change with its generations, its
// cluster index does not, and it is the one launch's "[rank N]" prefix
// and every other line of the peer's log give.
func (l *Log) AsPeer(peer int) *Log {
	l.peer = &peer
	return l
}

// NewLog logs to log; quiet, if not nil, lowers the start, epoch and done
// lines of the ranks it names to debug.
func NewLog(log *zap.Logger, quiet func(rank int) bool) *Log {
	if log == nil {
		log = zap.NewNop()
	}
	return &Log{log: log, quiet: quiet}
}

// Observe implements mirrored.Observer.
func (l *Log) Observe(e mirrored.Event) error {
	shown := zapcore.InfoLevel
	if l.quiet != nil && l.quiet(e.Rank) {
		shown = zapcore.DebugLevel
	}
	rank := zap.Int("rank", e.Rank)
	if l.peer != nil {
		rank = zap.Int("rank", *l.peer)
	}
	switch e.Kind {
	case mirrored.EventStart:
		l.log.Log(shown, "start", rank, zap.String("run", e.Info), zap.Int("steps", e.Steps))
	case mirrored.EventResumed:
		if e.Info != "" {
			l.log.Warn("resumed", rank, zap.String("checkpoint", e.Path), zap.Int("step", e.Step), zap.String("warning", e.Info))
		} else {
			l.log.Info("resumed", rank, zap.String("checkpoint", e.Path), zap.Int("step", e.Step))
		}
	case mirrored.EventCheckpoint:
		l.log.Debug("checkpoint", rank, zap.String("path", e.Path), zap.Int("step", e.Step))
	case mirrored.EventMembership:
		l.log.Warn("membership changed", rank, zap.String("change", e.Info), zap.Int("step", e.Step))
	case mirrored.EventCallback:
		l.log.Log(shown, "callback", rank, zap.String("did", e.Info), zap.Int("step", e.Step))
	case mirrored.EventEpoch:
		ep := e.Epoch
		fields := []zap.Field{rank, zap.Int("epoch", ep.Epoch), zap.Int("step", e.Step), zap.Float64("loss", ep.Loss),
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
		l.log.Log(shown, "epoch", fields...)
	case mirrored.EventDone:
		l.log.Log(shown, "done", rank, zap.Int("steps", e.Step), zap.String("info", e.Info))
	}
	return nil
}
