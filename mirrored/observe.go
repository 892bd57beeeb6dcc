package mirrored

import (
	"errors"
	"io"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/meshtrain/meshtrain/internal/tensorboard"
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
	// EventMembership: an elastic run's new generation started (Info
	// says who left or joined, from which step, how long it paused).
	EventMembership = "membership"
	EventDone       = "done"
	// EventResources carries a resource sample (about one a second, with
	// the step events; not passed to an OnEvent hook).
	EventResources = "resources"
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
	// Train is a step's figures (kind step only). In the step events an
	// OnEvent hook receives, it sums up the steps since the previous one.
	Train *StepStats `json:"train,omitempty"`
	// Gossip is a gossip replica's evaluation (kind epoch under gossip).
	Gossip *GossipEval `json:"-"`
	// Resources is a resource sample (kind resources).
	Resources *ResourceSample `json:"-"`
	// Change is an elastic run's change of membership (kind membership).
	Change *MembershipChange `json:"change,omitempty"`
}

// StepStats are one training step's figures, on this replica; or, with
// Steps > 1, those of the Steps steps up to the event's.
type StepStats struct {
	Loss     float64 `json:"loss"` // on its batch (the mean over Steps)
	LR       float64 `json:"lr"`
	Examples int     `json:"examples"` // in its batch (in the Steps batches)
	// Correct is how many of the batch's examples the model classified
	// correctly computing the loss, when Counted (an nn.TrainCounter).
	Correct int  `json:"-"`
	Counted bool `json:"-"`
	Steps   int  `json:"steps,omitempty"` // steps covered; 0 means 1
	// Compute, Comm and Wait split the step's time as PeerStats does.
	Compute, Comm, Wait time.Duration `json:"-"`
	// BytesSent is the bytes this replica has sent so far (-1: the
	// transport does not count).
	BytesSent int64 `json:"-"`
}

// bytesSent is what counted has sent so far, -1 if it does not count.
func bytesSent(counted any) int64 {
	if tr, ok := counted.(Traffic); ok {
		sent, _ := tr.Traffic()
		return sent
	}
	return -1
}

// Observer receives a run's events, on the replica's goroutine, in order:
// meshtrain's own (log, progress, TensorBoard) and the caller's
// (Job.Observers). An error stops the run (a TensorBoard file that cannot
// be written is not silently skipped); an Observer that is an io.Closer is
// closed once at the end of the run.
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
// the progress output (rank 0 only unless everyRank, as under gossip where
// every replica's curve is its own; replicas is how many replicas' examples
// its throughput counts), TensorBoard event files under LogDir, and the
// caller's OnEvent.
func newObservers(job *Job, rank, replicas int, everyRank bool) (*observers, error) {
	cfg, onEvent := &job.Config, job.OnEvent
	progress := cfg.Progress != nil && (rank == 0 || everyRank)
	shown := zap.InfoLevel // the level of what the progress shows
	if progress && cfg.QuietProgressLog {
		shown = zap.DebugLevel
	}
	o := &observers{rank: rank, obs: []Observer{logObserver{cfg.logger().With(zap.Int("rank", rank)), shown}}}
	if progress {
		o.obs = append(o.obs, newProgressObserver(cfg.Progress, cfg.logEvery(), replicas, everyRank, rank))
	}
	if cfg.LogDir != "" {
		dir := rank
		if el := job.Elastic; el != nil && el.Membership != nil {
			dir = el.Membership.Self() // a peer's ranks change with the generations; its curve is its own
		}
		tb, err := newTensorboardObserver(tensorboard.WorkerDir(cfg.LogDir, dir), cfg.logEvery())
		if err != nil {
			return nil, err
		}
		o.obs = append(o.obs, tb)
	}
	if onEvent != nil {
		o.obs = append(o.obs, &stepSampler{onEvent: onEvent, every: cfg.logEvery(), last: time.Now()})
	}
	o.obs = append(o.obs, job.Observers...)
	return o, nil
}

// SampleInterval is the longest an OnEvent hook goes without a step event
// while steps are being taken (a launcher's progress bar moves at least
// this often).
const SampleInterval = 500 * time.Millisecond

// stepSampler passes every event but steps on to an OnEvent hook; the
// steps it passes at a bounded rate, each summing up the steps since the
// last (Train.Steps of them): every `every` steps (so a launcher can write
// its plain progress lines at the same steps as a single worker), after
// SampleInterval, and at the last step.
type stepSampler struct {
	onEvent func(Event)
	every   int
	sum     StepStats
	last    time.Time
}

func (s *stepSampler) Observe(e Event) error {
	if e.Kind == EventResources {
		return nil // the history reaches the caller in the Summary
	}
	if e.Kind != EventStep {
		s.onEvent(e)
		return nil
	}
	st := e.Train
	n := float64(s.sum.Steps)
	s.sum.Loss = (s.sum.Loss*n + st.Loss) / (n + 1)
	s.sum.LR, s.sum.Examples, s.sum.Steps = st.LR, s.sum.Examples+st.Examples, s.sum.Steps+1
	if now := time.Now(); e.Step%s.every == 0 || e.Step >= e.Steps || now.Sub(s.last) >= SampleInterval {
		sum := s.sum
		e.Train = &sum
		s.onEvent(e)
		s.sum, s.last = StepStats{}, now
	}
	return nil
}

// logObserver writes the events to the zap logger (steps at debug level;
// the start, the epochs and the end at shown).
type logObserver struct {
	log   *zap.Logger
	shown zapcore.Level
}

func (l logObserver) Observe(e Event) error {
	switch e.Kind {
	case EventStart:
		l.log.Log(l.shown, "start", zap.String("run", e.Info), zap.Int("steps", e.Steps))
	case EventResumed:
		if e.Info != "" {
			l.log.Warn("resumed", zap.String("checkpoint", e.Path), zap.Int("step", e.Step), zap.String("warning", e.Info))
		} else {
			l.log.Info("resumed", zap.String("checkpoint", e.Path), zap.Int("step", e.Step))
		}
	case EventCheckpoint:
		l.log.Debug("checkpoint", zap.String("path", e.Path), zap.Int("step", e.Step))
	case EventMembership:
		l.log.Warn("membership changed", zap.String("change", e.Info), zap.Int("step", e.Step))
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
		l.log.Log(l.shown, "epoch", fields...)
	case EventDone:
		l.log.Log(l.shown, "done", zap.Int("steps", e.Step), zap.String("info", e.Info))
	}
	return nil
}

// tensorboardObserver writes event files laid out as Keras writes them, so
// TensorBoard overlays the curves: a train run (per-step scalars every
// `every` steps, averaged over those steps, and the epoch's loss, rate and
// throughput) and a validation run (the epoch's test figures), with the
// same epoch_* tags in both.
type tensorboardObserver struct {
	train, val *tensorboard.Writer
	every      int
	win        stepWindow
}

// stepWindow adds up the steps since the last scalars were written.
type stepWindow struct {
	steps, examples     int
	correct, counted    int // examples counted, and correct among them
	loss                float64
	compute, comm, wait time.Duration
	bytes0              int64 // bytes sent before the window (-1: not counted)
}

func newTensorboardObserver(dir string, every int) (*tensorboardObserver, error) {
	now := time.Now()
	train, err := tensorboard.Create(filepath.Join(dir, "train"), now)
	if err != nil {
		return nil, err
	}
	val, err := tensorboard.Create(filepath.Join(dir, "validation"), now)
	if err != nil {
		return nil, errors.Join(err, train.Close())
	}
	return &tensorboardObserver{train: train, val: val, every: every, win: stepWindow{bytes0: -2}}, nil
}

func (t *tensorboardObserver) Observe(e Event) error {
	switch e.Kind {
	case EventResources:
		return t.resources(e)
	case EventStep:
		return t.step(e)
	case EventEpoch:
		return t.epoch(e)
	case EventMembership:
		if c := e.Change; c != nil {
			now := time.Now()
			return errors.Join(t.train.Scalar("elastic/workers", int64(e.Step), float32(len(c.Members)), now),
				t.train.Scalar("elastic/pause_ms", int64(e.Step), float32(c.PauseSeconds*1000), now),
				t.train.Scalar("elastic/rolled_back_steps", int64(e.Step), float32(c.RolledBack), now), t.train.Flush())
		}
	}
	return nil
}

// step adds a step to the window and writes its averages every t.every
// steps.
func (t *tensorboardObserver) step(e Event) error {
	w, st := &t.win, e.Train
	if w.bytes0 == -2 { // the first step: its bytes start the count
		w.bytes0 = st.BytesSent
	}
	w.steps++
	w.examples += st.Examples
	if st.Counted {
		w.correct += st.Correct
		w.counted += st.Examples
	}
	w.loss += st.Loss
	w.compute += st.Compute
	w.comm += st.Comm
	w.wait += st.Wait
	if e.Step%t.every != 0 {
		return nil
	}
	n, now, step := float64(w.steps), time.Now(), int64(e.Step)
	total := w.compute + w.comm + w.wait
	ms := func(d time.Duration) float32 { return float32(d.Seconds() * 1000 / n) }
	errs := []error{
		t.train.Scalar("batch_loss", step, float32(w.loss/n), now),
		t.train.Scalar("learning_rate", step, float32(st.LR), now),
		t.train.Scalar("examples_per_sec", step, float32(float64(w.examples)/total.Seconds()), now),
		t.train.Scalar("step/time_ms", step, ms(total), now),
		t.train.Scalar("step/compute_ms", step, ms(w.compute), now),
		t.train.Scalar("step/comm_ms", step, ms(w.comm), now),
		t.train.Scalar("step/wait_ms", step, ms(w.wait), now),
	}
	if w.counted > 0 {
		errs = append(errs, t.train.Scalar("batch_accuracy", step, float32(float64(w.correct)/float64(w.counted)), now))
	}
	if w.bytes0 >= 0 && st.BytesSent >= 0 {
		errs = append(errs, t.train.Scalar("step/bytes_sent", step, float32(float64(st.BytesSent-w.bytes0)/n), now))
	}
	t.win = stepWindow{bytes0: st.BytesSent}
	return errors.Join(append(errs, t.train.Flush())...)
}

// epoch writes the epoch's training figures to the train run and its test
// figures to the validation run, at the epoch's index as Keras writes its
// epoch_* scalars (0 for the first), so runs overlay by epoch; the per-step
// scalars stay at the global step.
func (t *tensorboardObserver) epoch(e Event) error {
	ep, now, step := e.Epoch, time.Now(), int64(e.Epoch.Epoch-1)
	errs := []error{
		t.train.Scalar("epoch_loss", step, float32(ep.Loss), now),
		t.train.Scalar("epoch_learning_rate", step, float32(ep.LR), now),
		t.train.Scalar("epoch_examples_per_sec", step, float32(ep.ExamplesPerSec), now),
		t.val.Scalar("epoch_loss", step, float32(ep.TestLoss), now),
		t.val.Scalar("epoch_accuracy", step, float32(ep.TestAccuracy), now),
	}
	if ep.Accuracy > 0 {
		errs = append(errs, t.train.Scalar("epoch_accuracy", step, float32(ep.Accuracy), now))
	}
	if ep.TestAUC > 0 {
		errs = append(errs, t.val.Scalar("epoch_auc", step, float32(ep.TestAUC), now))
	}
	return errors.Join(append(errs, t.train.Flush(), t.val.Flush())...)
}

// resources writes a resource sample under system/, at the steps done
// when it was taken: CPU in cores, memory in MiB, rates in MB/s.
func (t *tensorboardObserver) resources(e Event) error {
	r, now, step := e.Resources, time.Now(), int64(e.Step)
	mb := func(x float64) float32 { return float32(x / 1e6) }
	errs := []error{
		t.train.Scalar("system/cpu_user", step, float32(r.CPUUser), now),
		t.train.Scalar("system/cpu_system", step, float32(r.CPUSystem), now),
		t.train.Scalar("system/rss_mib", step, float32(float64(r.RSSBytes)/(1<<20)), now),
		t.train.Scalar("system/disk_read_mb_per_sec", step, mb(r.DiskRead), now),
		t.train.Scalar("system/disk_write_mb_per_sec", step, mb(r.DiskWrite), now),
		t.train.Scalar("system/net_sent_mb_per_sec", step, mb(r.Sent), now),
		t.train.Scalar("system/net_received_mb_per_sec", step, mb(r.Received), now),
	}
	return errors.Join(errs...)
}

func (t *tensorboardObserver) Close() error { return errors.Join(t.train.Close(), t.val.Close()) }
