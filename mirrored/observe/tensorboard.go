package observe

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/meshtrain/meshtrain/internal/tensorboard"
	"github.com/meshtrain/meshtrain/mirrored"
)

// TensorBoard writes event files laid out as Keras writes them, so
// TensorBoard overlays the curves: a train run (per-step scalars every
// `every` steps, averaged over those steps, and the epoch's loss, rate and
// throughput) and a validation run (the epoch's test figures), with the
// same epoch_* tags in both. Its files are created at the first event (a
// run that fails before it starts leaves none), and again at the first
// event after a Close (an elastic run's next generation).
type TensorBoard struct {
	dir        string
	train, val *tensorboard.Writer // nil until the first event
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

// NewTensorBoard writes under dir (a worker's: tensorboard.WorkerDir,
// or Dir) the train and validation runs, with the per-step scalars every
// `every` steps (0: DefaultLogEvery).
func NewTensorBoard(dir string, every int) *TensorBoard {
	return &TensorBoard{dir: dir, every: logEvery(every)}
}

// Dir is where a replica writes its TensorBoard runs under logdir: the
// worker's own directory (tensorboard.WorkerDir) by rank, or under an
// elastic run by its cluster index, since its rank changes with the
// generations and its curve is its own.
func Dir(logdir string, rank int, elastic *mirrored.Elastic) string {
	if elastic != nil && elastic.Membership != nil {
		rank = elastic.Membership.Self()
	}
	return tensorboard.WorkerDir(logdir, rank)
}

// open creates the event files.
func (t *TensorBoard) open() error {
	now := time.Now()
	train, err := tensorboard.Create(filepath.Join(t.dir, "train"), now)
	if err != nil {
		return err
	}
	val, err := tensorboard.Create(filepath.Join(t.dir, "validation"), now)
	if err != nil {
		return errors.Join(err, train.Close())
	}
	t.train, t.val, t.win = train, val, stepWindow{bytes0: -2}
	return nil
}

// Observe implements mirrored.Observer.
func (t *TensorBoard) Observe(e mirrored.Event) error {
	if t.train == nil {
		if err := t.open(); err != nil {
			return err
		}
	}
	switch e.Kind {
	case mirrored.EventResources:
		return t.resources(e)
	case mirrored.EventStep:
		return t.step(e)
	case mirrored.EventEpoch:
		return t.epoch(e)
	case mirrored.EventMembership:
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
func (t *TensorBoard) step(e mirrored.Event) error {
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
func (t *TensorBoard) epoch(e mirrored.Event) error {
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
func (t *TensorBoard) resources(e mirrored.Event) error {
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

// Close closes the event files (the next event opens new ones).
func (t *TensorBoard) Close() error {
	if t.train == nil {
		return nil
	}
	err := errors.Join(t.train.Close(), t.val.Close())
	t.train, t.val = nil, nil
	return err
}
