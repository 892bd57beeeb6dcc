package observe

import (
	"fmt"
	"io"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/mirrored"
)

// Options are the observers meshtrain's commands install on a replica,
// from the settings their flags give.
type Options struct {
	// Logger receives the run's events (Log); nil logs nothing.
	Logger *zap.Logger
	// Progress, if set, receives the progress (Progress) of rank 0 or,
	// with EveryRank (gossip: every replica's curve is its own), of every
	// rank.
	Progress  io.Writer
	EveryRank bool
	// QuietProgressLog logs the events Progress shows (the run's start,
	// each epoch, its end) at debug level instead of info on a replica
	// whose progress is shown, so that a person reading the log and the
	// progress on one terminal sees each once (the CLI sets it with
	// console logs; JSON logs keep them at info for the machines).
	QuietProgressLog bool
	// LogDir, if set, receives TensorBoard event files in Dir(LogDir,
	// Rank, Elastic): a train and a validation run.
	LogDir  string
	Rank    int
	Elastic *mirrored.Elastic
	// LogEvery is the number of steps between the per-step figures (the
	// TensorBoard scalars, the plain progress lines, OnEvent's steps); 0
	// means DefaultLogEvery.
	LogEvery int
	// OnEvent, if set, is called with the events, the steps at a bounded
	// rate (Sampled).
	OnEvent func(mirrored.Event)
}

// Standard is the observers o asks for, in the order they see each event:
// the log, the progress, TensorBoard, the OnEvent hook.
func Standard(o Options) ([]mirrored.Observer, error) {
	if o.LogEvery < 0 {
		return nil, fmt.Errorf("log every %d steps: want ≥ 1 (0: every %d)", o.LogEvery, DefaultLogEvery)
	}
	var obs []mirrored.Observer
	var progress *Progress
	if o.Progress != nil {
		progress = NewProgress(o.Progress, o.LogEvery, o.EveryRank)
		if o.Elastic != nil {
			progress.ByEpoch()
		}
	}
	if o.Logger != nil {
		var quiet func(int) bool
		if progress != nil && o.QuietProgressLog {
			quiet = progress.Shows
		}
		log := NewLog(o.Logger, quiet)
		if o.Elastic != nil {
			log.AsPeer(o.Rank) // the cluster index, as every line of the peer's
		}
		obs = append(obs, log)
	}
	if progress != nil {
		obs = append(obs, progress)
	}
	if o.LogDir != "" {
		obs = append(obs, NewTensorBoard(Dir(o.LogDir, o.Rank, o.Elastic), o.LogEvery))
	}
	if o.OnEvent != nil {
		obs = append(obs, Sampled(o.LogEvery, o.OnEvent))
	}
	return obs, nil
}
