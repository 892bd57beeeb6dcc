package mirrored

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/callbacks"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/mirrored/replica"
	"github.com/meshtrain/meshtrain/mirrored/timeline"
	"github.com/meshtrain/meshtrain/nn"
	"go.uber.org/zap"
)

// skipTo reads the first skip batches of a resumed epoch: the checkpoint
// was taken after them.
func skipTo(ctx context.Context, pipe *data.Pipeline, skip, epoch int) error {
	for range skip {
		if _, err := pipe.Next(ctx); err != nil {
			return fmt.Errorf("skipping to the checkpoint's position in epoch %d: %w", epoch, err)
		}
	}
	return nil
}

// syncLoop is one replica's synchronous run in progress.
type syncLoop struct {
	job        *Job
	run        *plan
	g          Group
	sampler    *sampler
	rank       int
	world      int
	obs        *observers
	fp         string
	steps      int // per epoch
	total      int // global steps the run takes at most
	global     int // global steps done
	startEpoch int
	skip       int // steps of startEpoch already done before a resume
	sched      nn.Schedule
	res        *Result
	peer       PeerStats
	times      syncTimes
	trainTime  time.Duration
	evalTime   time.Duration
	ckTime     time.Duration
	stats      StepStats      // the last step's, for its event (no allocation per step)
	hook       loopHook       // the run's part at the loop's seams (ringHook, elastic)
	cb         *callbacks.Run // Job.Callbacks (nil: none)
}

// runSync is the synchronous strategy, for any Replica (see Job): the
// start-up handshake, resume or broadcast, the steps (gradient → combine
// → update), the epoch ends (loss, evaluation, checkpoints, target), the
// final hash comparison and figures.
func runSync(ctx context.Context, job *Job, g Group, run *plan) (*Summary, error) {
	wallStart := time.Now()
	l := &syncLoop{job: job, run: run, g: g, rank: g.Rank(), world: g.Size(), peer: PeerStats{Rank: g.Rank()}, hook: run.hook}
	if l.hook == nil {
		l.hook = ringHook{}
	}
	if err := l.start(ctx); err != nil {
		return nil, err
	}
	defer l.obs.close()
	l.sampler = startSampler(l.job, g)
	defer l.sampler.finish()
	if err := l.train(ctx); err != nil {
		return nil, err
	}
	return l.finish(ctx, wallStart)
}

// start runs the handshake, agrees on the steps per epoch, resumes or
// broadcasts the chief's state, and announces the run.
func (l *syncLoop) start(ctx context.Context) error {
	cfg, run := &l.job.Config, l.run
	l.fp = fingerprint(run.settings)
	me := hello{Settings: run.settings, Shard: run.shard, Checkpoints: l.job.newestSeen()}
	var ck *checkpoint.Checkpoint
	if l.rank == 0 {
		ck, me.Resume, me.Error = l.hook.resumePoint(l)
	}
	cl, err := handshake(ctx, l.g, me)
	if err != nil {
		return err
	}
	if l.steps = data.AgreedSteps(cl.minShard, cl.maxShard, cfg.BatchSize, true); l.steps == 0 {
		return fmt.Errorf("the smallest replica's shard holds %d training examples, less than one batch of %d: use a smaller --batch, more data or fewer replicas",
			cl.minShard, cfg.BatchSize)
	}
	if l.sched, err = run.schedule(l.steps); err != nil {
		return err
	}
	l.total = cfg.Epochs * l.steps
	if run.maxSteps > 0 {
		l.total = min(l.total, run.maxSteps)
	}
	res := run.result
	l.res = &res
	l.res.Replicas, l.res.StepsPerEpoch, l.res.TrainExamples = l.world, l.steps, cl.total
	l.res.TimeToAccuracy = map[string]float64{}
	l.res.Version, l.res.Started = Version(), time.Now().Format(time.RFC3339)
	l.obs = newObservers(l.job, l.rank)
	if err := l.resume(ctx, cl.resume, ck); err != nil {
		l.obs.close()
		return err
	}
	l.startCallbacks()
	if err := l.hook.started(l, cl.resume); err != nil {
		l.obs.close()
		return err
	}
	header := run.header(l.steps, cl.total)
	if err := l.obs.emit(Event{Kind: EventStart, Step: l.global, Steps: l.total, Replicas: l.world, StepsPerEpoch: l.steps, Info: header}); err != nil {
		l.obs.close()
		return err
	}
	return nil
}

// resume takes the run to the chief's checkpoint, if any, and gives every
// replica the chief's state.
func (l *syncLoop) resume(ctx context.Context, pos *resumePos, ck *checkpoint.Checkpoint) error {
	l.startEpoch = 1
	rep := l.run.rep
	if ck != nil { // the chief
		copy(rep.Params(), ck.Params)
		rest := ck.OptState
		for _, a := range rep.OptState() {
			rest = rest[copy(a, rest):]
		}
	}
	if pos != nil || l.run.broadcastStart {
		for i, a := range append([][]float32{rep.Params()}, rep.OptState()...) {
			if len(a) == 0 {
				continue
			}
			if err := l.g.Broadcast(ctx, a, 0); err != nil {
				what := "parameters"
				if i > 0 {
					what = "optimizer state"
				}
				return fmt.Errorf("broadcasting the %s from rank 0: %w", what, err)
			}
		}
	}
	if pos == nil {
		return nil
	}
	if pos.StepsPerEpoch > 0 && pos.StepsPerEpoch != l.steps {
		// An elastic commit taken at another number of peers: the same
		// share of the epoch is done.
		pos.StepInEpoch = pos.StepInEpoch * l.steps / pos.StepsPerEpoch
		pos.Step = (pos.Epoch-1)*l.steps + pos.StepInEpoch
	}
	l.startEpoch, l.skip, l.global = pos.Epoch, pos.StepInEpoch, pos.Step
	if l.startEpoch < 1 || l.global != (l.startEpoch-1)*l.steps+l.skip {
		return fmt.Errorf("checkpoint %s: step %d is not epoch %d step %d at %d steps per epoch: it belongs to another configuration",
			pos.Path, l.global, l.startEpoch, l.skip, l.steps)
	}
	l.res.EpochResults = pos.History
	if n := len(pos.History); n > 0 {
		l.trainTime = time.Duration(pos.History[n-1].TrainSeconds * float64(time.Second))
		for _, ep := range pos.History {
			markAccuracy(l.res, ep)
		}
	}
	l.peer.ResumedFrom, l.peer.ResumedStep = pos.Path, pos.Step
	if l.rank != 0 {
		l.peer.ResumedFrom = "rank 0's " + pos.Path
	}
	return l.obs.emit(Event{Kind: EventResumed, Step: l.global, Steps: l.total, Path: pos.Path, Info: strings.Join(pos.Warnings, "\n")})
}

// train runs the epochs left.
func (l *syncLoop) train(ctx context.Context) error {
	cfg := &l.job.Config
	if l.startEpoch > cfg.Epochs || l.global >= l.total || targetMet(cfg, l.res.EpochResults) || l.cb != nil && l.cb.Stopped() {
		return nil
	}
	pipe, err := l.run.pipeline(ctx, l.startEpoch, max(1, cfg.Epochs-l.startEpoch+1), l.steps)
	if err != nil {
		return err
	}
	defer pipe.Close()
	if pipe.StepsPerEpoch() != l.steps {
		return fmt.Errorf("input pipeline yields %d steps per epoch, expected %d", pipe.StepsPerEpoch(), l.steps)
	}
	if err := skipTo(ctx, pipe, l.skip, l.startEpoch); err != nil {
		return err
	}
	for epoch := l.startEpoch; epoch <= cfg.Epochs && l.global < l.total; epoch++ {
		first := 0
		if epoch == l.startEpoch {
			first = l.skip
		}
		stop, err := l.epoch(ctx, pipe, epoch, first)
		if err != nil || stop {
			return err
		}
	}
	return nil
}

// stepClock holds the times of a step: asking for the batch, having it,
// the gradient computed, past the sampled barrier, the exchange done, the
// update done.
type stepClock [6]time.Time

// syncStep is the synchronous step of rep on its batch b: the gradient,
// [a barrier first when barrier is set, to measure waiting], the group's
// mean gradient, the update at learning rate lr, with the faults hook
// called at each Point (at may be nil). It records the times from clk[2]
// on (clk may be nil). A non-finite loss stops it before the exchange
// with a *NonFiniteError (Epoch and Step for the caller to fill).
func syncStep(ctx context.Context, rep replica.Replica, g Group, b *data.Batch, global int, lr float64, barrier bool, clk *stepClock, at func(Point) error) (float64, error) {
	if clk == nil {
		clk = new(stepClock)
	}
	if at == nil {
		at = func(Point) error { return nil }
	}
	clk[1] = time.Now()
	// The gradient's last buckets are exchanged while the first layers'
	// are computed, except on the steps that measure waiting: their
	// barrier must come before any exchange.
	if ov, ok := rep.(replica.Overlapper); ok && !barrier && ov.StartOverlap(ctx, g) {
		defer ov.AbortOverlap() // a step that ends before Combine: wait for what it started
	}
	replica.UseStepGroup(rep, ctx, g)
	loss, err := rep.Gradient(b)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return 0, &NonFiniteError{GlobalStep: global, Loss: loss}
	}
	if err := at(AfterGradient); err != nil {
		return 0, err
	}
	clk[2] = time.Now()
	if barrier {
		if err := g.Barrier(ctx); err != nil {
			return 0, fmt.Errorf("waiting for the other replicas: %w", err)
		}
	}
	clk[3] = time.Now()
	if err := at(BeforeCombine); err != nil {
		return 0, err
	}
	if err := rep.Combine(ctx, g, global+1); err != nil {
		return 0, err
	}
	clk[4] = time.Now()
	rep.Update(rep.Params(), lr)
	clk[5] = time.Now()
	return loss, at(AfterUpdate)
}

// epochSums are one epoch's running figures on this replica.
type epochSums struct {
	loss          float64
	ran, examples int
	// correct of counted examples (the replica counts them: trainCorrect)
	correct, counted int
}

// trainCorrect is the count of correct examples in the last step's batch,
// if rep counts them.
func trainCorrect(rep replica.Replica) (int, bool) {
	if tc, ok := rep.(interface{ TrainCorrect() (int, bool) }); ok {
		return tc.TrainCorrect()
	}
	return 0, false
}

// epoch runs the steps of one epoch from step first, then its end; stop
// says a target was reached.
func (l *syncLoop) epoch(ctx context.Context, pipe *data.Pipeline, epoch, first int) (stop bool, err error) {
	start := time.Now()
	var sums epochSums
	for step := first; step < l.steps && l.global < l.total; step++ {
		ranks, err := l.hook.stopping(ctx, l, step > first)
		if err != nil {
			return false, err
		}
		if len(ranks) > 0 {
			l.trainTime += time.Since(start)
			l.peer.Steps += sums.ran
			l.peer.Examples += sums.examples
			return true, l.stopNow(ranks, epoch, step)
		}
		if err := l.step(ctx, pipe, epoch, step, &sums); err != nil {
			return false, err
		}
	}
	elapsed := time.Since(start)
	l.trainTime += elapsed
	l.peer.Steps += sums.ran
	l.peer.Examples += sums.examples
	return l.endEpoch(ctx, epoch, first+sums.ran == l.steps, elapsed, sums)
}

// step is one training step: the batch, the gradient, [a barrier on the
// sampled steps], the combination across the group, the update; then the
// hash comparison and checkpoint that fall due.
func (l *syncLoop) step(ctx context.Context, pipe *data.Pipeline, epoch, step int, sums *epochSums) error {
	rep, job := l.run.rep, l.job
	t0 := time.Now()
	b, err := pipe.Next(ctx)
	if err != nil {
		return fmt.Errorf("epoch %d step %d: reading the next batch: %w", epoch, step, err)
	}
	lr := l.rate(l.global)
	sample := job.MeasureWait && l.global%WaitSampleEvery == 0
	var clk stepClock
	clk[0] = t0
	info := StepInfo{Rank: l.rank, Step: l.peer.Steps + sums.ran, Started: t0}
	l.hook.atStep(&info)
	loss, err := syncStep(ctx, rep, l.g, b, l.global, lr, sample, &clk, func(p Point) error { return l.fault(ctx, p, info) })
	if err != nil {
		var nf *NonFiniteError
		if errors.As(err, &nf) {
			nf.Epoch, nf.Step = epoch, step
			return nf
		}
		return fmt.Errorf("epoch %d step %d: %w", epoch, step, err)
	}
	sums.loss += loss
	sums.examples += b.Size
	correct, counted := trainCorrect(rep)
	if counted && b.Size > 0 {
		sums.correct += correct
		sums.counted += b.Size
	}
	l.global++
	sums.ran++
	l.hook.stepped(l.global)
	l.times.step(clk, sample)
	l.spans(clk, sample)
	l.stats = StepStats{Loss: l.run.stepLoss(loss, b.Size), LR: lr, Examples: b.Size, BytesSent: bytesSent(l.g), Correct: correct, Counted: counted,
		Compute: clk[2].Sub(clk[1]) + clk[5].Sub(clk[4]), Comm: clk[4].Sub(clk[3]), Wait: clk[1].Sub(clk[0]) + clk[3].Sub(clk[2]), Seconds: clk[5].Sub(clk[0]).Seconds()}
	if err := l.obs.emit(Event{Kind: EventStep, Step: l.global, Steps: l.total, Train: &l.stats}); err != nil {
		return err
	}
	if err := emitResources(l.obs, l.sampler, l.global, l.total); err != nil {
		return err
	}
	if err := l.due(ctx, epoch, step); err != nil {
		return err
	}
	return l.hook.atCommit(ctx, l, epoch, step+1)
}

// spans records the step's phases on the timeline (Job.Timeline), its
// bucketed all-reduces at most two spans.
func (l *syncLoop) spans(clk stepClock, sample bool) {
	tl := l.job.Timeline
	if tl == nil {
		return
	}
	tl.Add(timeline.Input, "", l.global, clk[0], clk[1])
	tl.Add(timeline.Compute, "gradient", l.global, clk[1], clk[2])
	if sample {
		tl.Add(timeline.Wait, "barrier", l.global, clk[2], clk[3])
	}
	tl.Add(timeline.Combine, "", l.global, clk[3], clk[4])
	tl.Add(timeline.Update, "", l.global, clk[4], clk[5])
	if ov, ok := l.run.rep.(replica.Overlapper); ok {
		for _, b := range replica.MergeBuckets(ov.Buckets()) {
			when := "after the backward pass"
			if b.Early {
				when = "during the backward pass"
			}
			tl.Add(timeline.Buckets, fmt.Sprintf("all-reduce of gradient [%d,%d) %s", b.Lo, b.Hi, when), l.global, b.Start, b.End)
		}
	}
}

// due runs what falls due after a step: the hash comparison every
// Job.HashEvery steps and the checkpoint every Job.CheckpointEvery.
func (l *syncLoop) due(ctx context.Context, epoch, step int) error {
	if l.job.HashEvery > 0 && l.global%l.job.HashEvery == 0 {
		vals, what := l.run.rep.Checked()
		if err := l.checkHashes(ctx, paramsSum(vals), fmt.Sprintf("step %d%s", l.global, what)); err != nil {
			return err
		}
	}
	if l.job.CheckpointEvery > 0 && l.global%l.job.CheckpointEvery == 0 && step+1 < l.steps {
		// Every replica settles deferred work here, so the arithmetic
		// after a resume is the uninterrupted run's.
		t := time.Now()
		l.run.rep.Settle()
		l.ckTime += time.Since(t)
		if err := l.checkpoint(epoch, step+1); err != nil {
			return err
		}
	}
	return nil
}

// fault calls the faults hook, logging an injected kill.
func (l *syncLoop) fault(ctx context.Context, p Point, s StepInfo) error {
	err := l.job.Faults.At(ctx, p, s)
	if errors.Is(err, ErrInjectedKill) {
		l.job.logger().Warn("injected fault: this rank dies now", zap.Int("rank", s.Rank), zap.Int("local_step", s.Step+1))
	}
	return err
}

// stepLoss is a step's loss per example, as progress and TensorBoard show
// it: loss as Gradient returned it, a batch mean, or with !perStepLoss
// (the sparse model, whose exchange needs sums) the sum of size examples.
func (r *plan) stepLoss(loss float64, size int) float64 {
	if r.perStepLoss || size == 0 {
		return loss
	}
	return loss / float64(size)
}

// endEpoch combines the epoch's loss, evaluates, reports, checkpoints and
// says whether a target stops the run. An epoch cut short by a step limit
// ends the run without a checkpoint of its own.
func (l *syncLoop) endEpoch(ctx context.Context, epoch int, complete bool, elapsed time.Duration, sums epochSums) (bool, error) {
	cfg, rep := &l.job.Config, l.run.rep
	agg := []float32{float32(sums.loss), float32(sums.ran), float32(sums.examples), float32(sums.correct), float32(sums.counted)}
	if err := l.g.AllReduceSum(ctx, agg); err != nil {
		return false, fmt.Errorf("epoch %d: all-reducing the epoch loss: %w", epoch, err)
	}
	ep := Epoch{Epoch: epoch, LR: l.rate(l.global - 1), ExamplesPerSec: float64(agg[2]) / elapsed.Seconds(),
		EpochSeconds: elapsed.Seconds(), TrainSeconds: l.trainTime.Seconds()}
	if agg[4] > 0 { // counts of whole examples: exact in float32 below 2^24
		ep.Accuracy = float64(agg[3]) / float64(agg[4])
	}
	switch {
	case !l.run.perStepLoss:
		ep.Loss = float64(agg[0]) / math.Max(float64(agg[2]), 1)
	case l.world == 1: // exact, not rounded through float32
		ep.Loss = sums.loss / float64(sums.ran)
	default:
		ep.Loss = float64(agg[0]) / float64(agg[1])
	}
	rep.Settle() // before anything reads the parameters
	te := time.Now()
	m, err := rep.Evaluate(ctx, l.g)
	l.evalTime += time.Since(te)
	l.job.Timeline.Add(timeline.Evaluate, fmt.Sprintf("epoch %d", epoch), l.global, te, time.Now())
	if err != nil {
		return false, fmt.Errorf("epoch %d: evaluating: %w", epoch, err)
	}
	if m.Examples > 0 {
		ep.TestLoss, ep.TestAccuracy, ep.TestAUC = m.Loss, m.Accuracy, m.AUC
		l.res.TestExamples = m.Examples
	}
	l.res.EpochResults = append(l.res.EpochResults, ep)
	markAccuracy(l.res, ep)
	info := ""
	if in, ok := rep.(replica.EpochInformer); ok {
		info = in.EpochInfo()
	}
	if err := l.obs.emit(Event{Kind: EventEpoch, Step: l.global, Steps: l.total, Epoch: &ep, Info: info}); err != nil {
		return false, err
	}
	reached := targetMet(cfg, l.res.EpochResults)
	stop, err := l.callbacks(ep, m.Examples > 0, reached || epoch == cfg.Epochs || l.global >= l.total)
	if reached = reached || stop; err != nil {
		return false, err
	}
	if complete && (l.job.CheckpointEvery == 0 || l.global%l.job.CheckpointEvery == 0 || epoch == cfg.Epochs || reached) {
		if err := l.checkpoint(epoch+1, 0); err != nil {
			return false, err
		}
	}
	if complete {
		if err := l.hook.atCommit(ctx, l, epoch+1, 0); err != nil {
			return false, err
		}
	}
	return reached, nil
}

// checkpoint (chief only, with a directory) saves the state at the
// current step: the pipeline's position is (epoch, stepInEpoch).
func (l *syncLoop) checkpoint(epoch, stepInEpoch int) error {
	if l.rank != 0 || l.job.CheckpointDir == "" {
		return nil
	}
	t := time.Now()
	path, err := checkpoint.Write(l.job.CheckpointDir, l.state(epoch, stepInEpoch), l.job.KeepCheckpoints)
	l.ckTime += time.Since(t)
	l.job.Timeline.Add(timeline.Checkpoint, "", l.global, t, time.Now())
	if err != nil {
		return fmt.Errorf("writing the checkpoint at step %d: %w", l.global, err)
	}
	return l.obs.emit(Event{Kind: EventCheckpoint, Step: l.global, Steps: l.total, Path: path})
}

// state is the run's state now as a checkpoint at pipeline position
// (epoch, stepInEpoch).
func (l *syncLoop) state(epoch, stepInEpoch int) *checkpoint.Checkpoint {
	hist, _ := json.Marshal(l.res.EpochResults) // plain numbers: cannot fail
	var state []float32
	for _, a := range l.run.rep.OptState() {
		state = append(state, a...)
	}
	ck := l.checkpointTemplate()
	ck.Params, ck.OptState, ck.Step, ck.Epoch, ck.StepInEpoch, ck.StepsPerEpoch = l.run.rep.Params(), state, l.global, epoch, stepInEpoch, l.steps
	ck.History, ck.SavedAt = string(hist), time.Now()
	return ck
}

// checkpointTemplate is what every checkpoint of this run says besides
// its state and position.
func (l *syncLoop) checkpointTemplate() *checkpoint.Checkpoint {
	return &checkpoint.Checkpoint{Model: l.res.Model, Layout: l.run.rep.Layout(), Seed: l.job.Seed, Fingerprint: l.fp,
		Config: settingsJSON(l.run.settings), Version: Version()}
}

// checkHashes compares this replica's hash (paramsSum; every HashEvery
// steps, of the weights the step touched) with the others', counted as
// communication: the hashing is not.
func (l *syncLoop) checkHashes(ctx context.Context, sum [32]byte, what string) error {
	t := time.Now()
	err := compareParamHashes(ctx, l.g, sum, what)
	l.times.comm += time.Since(t)
	return err
}

// finish compares the final parameters and fills in the figures.
func (l *syncLoop) finish(ctx context.Context, wallStart time.Time) (*Summary, error) {
	rep, res := l.run.rep, l.res
	// The summary's hash, computed once and compared: only the comparison
	// counts as communication (hashing sparse-LR's 135 MB would add
	// noticeably to each step of a short run's exchange: BENCHMARKS.md,
	// "Figures behind the code": hashing the parameters).
	sum := paramsSum(rep.Params())
	if l.world > 1 { // alone there is nobody to compare with
		if err := l.checkHashes(ctx, sum, "the end"); err != nil {
			return nil, err
		}
	}
	if b, ok := rep.(replica.Buffered); ok && len(b.Buffers()) > 0 {
		bsum := paramsSum(b.Buffers())
		if l.world > 1 {
			if err := l.checkHashes(ctx, bsum, "the end (the model's buffers)"); err != nil {
				return nil, err
			}
		}
		res.BuffersSHA256 = hex.EncodeToString(bsum[:])
	}
	info := ""
	if targetMet(&l.job.Config, res.EpochResults) {
		last := res.EpochResults[len(res.EpochResults)-1]
		res.TargetReached, res.TimeToTarget = true, last.TrainSeconds
		info = fmt.Sprintf("target reached after %d epochs, %.1fs of training", last.Epoch, last.TrainSeconds)
	}
	res.Steps = l.global
	res.TrainSeconds = l.trainTime.Seconds()
	l.hook.finish(res)
	if n := len(res.EpochResults); n > 0 {
		res.FinalAccuracy = res.EpochResults[n-1].TestAccuracy
	}
	if l.cb != nil { // a restored epoch's accuracy is the final one
		r := l.cb.Report()
		if res.Callbacks = &r; r.RestoredEpoch > 0 {
			res.FinalAccuracy = res.EpochResults[r.RestoredEpoch-1].TestAccuracy
		}
	}
	res.ParamsSHA256 = hex.EncodeToString(sum[:])
	if l.run.done != nil {
		l.run.done()
	}
	res.WallSeconds = time.Since(wallStart).Seconds()
	peer := &l.peer
	peer.TestAccuracy, peer.ParamsSHA256 = res.FinalAccuracy, res.ParamsSHA256
	l.times.finish(peer, l.g)
	peer.EvalSeconds, peer.CheckpointSeconds = l.evalTime.Seconds(), l.ckTime.Seconds()
	peer.Resources = l.sampler.finish()
	// The last, partial interval's sample reaches the observers too.
	if err := emitResources(l.obs, l.sampler, l.global, l.total); err != nil {
		return nil, err
	}
	if err := l.obs.emit(Event{Kind: EventDone, Step: l.global, Steps: l.total, Info: info}); err != nil {
		return nil, err
	}
	return &Summary{Run: res, Peer: *peer}, nil
}
