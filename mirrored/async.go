package mirrored

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/gossip"
	"github.com/meshtrain/meshtrain/mirrored/replica"
	"github.com/meshtrain/meshtrain/mirrored/timeline"
	"github.com/meshtrain/meshtrain/nn"
	"go.uber.org/zap"
)

// gossipEval is the evaluation of a replica after its local steps (steps
// of them a pass over its shard), when the cluster had done total local
// steps (epochWork of them an epoch); the caller sets Loss.
func gossipEval(total uint64, epochWork, local, steps int, trainTime time.Duration, testLoss, acc float64) GossipEval {
	return GossipEval{Epoch: int(total / uint64(epochWork)), ClusterEpochs: float64(total) / float64(epochWork),
		LocalPasses: float64(local) / float64(steps), TestLoss: testLoss, TestAccuracy: acc, TrainSeconds: trainTime.Seconds(), Steps: local}
}

// ErrGossipCheckpoint says checkpoints are not available under gossip.
var ErrGossipCheckpoint = errors.New("checkpoints and --restore work with the ring strategy only: gossip replicas hold different parameters, and a gossip run is not resumable")

// gossipStopped records why a gossip run's loop ends (the step budget, or a
// stop request: a peer's at its target, or a replica's asked from
// outside), unless reaching the target already did.
func gossipStopped(r *GossipReport, byPeer, asked bool) {
	switch {
	case r.StoppedBy != "":
	case asked:
		r.StoppedBy = "sigterm"
	case byPeer:
		r.StoppedBy = "peer"
	default:
		r.StoppedBy = "budget"
	}
}

// gossipLoop is one gossip replica's run in progress.
type gossipLoop struct {
	g       Group
	sampler *sampler
	job     *Job
	gc      *Gossip
	run     *plan
	c       *collective.Comm
	log     *zap.Logger
	rank    int
	world   int
	obs     *observers
	gos     *gossip.Node
	steps   int // per pass over a shard
	// epochWork is the local steps of one synchronous epoch (steps × N);
	// budget the cluster's local steps in all.
	epochWork int
	budget    uint64
	sched     nn.Schedule
	res       *Result
	rep       GossipReport
	nextEval  int
	local     int // local steps done
	examples  int
	skipped   int     // rounds skipped in a row
	lr        float64 // the last step's
	asked     bool    // Job.Stop was heard and the cluster told
	// Since the last evaluation:
	lossSum                                  float64
	sinceEval                                int
	compute, comm, wait, trainTime, evalTime time.Duration
	stats                                    StepStats // the last step's, for its event
}

// runAsync is the gossip strategy (see Strategy), for either builder's
// replica.
func runAsync(ctx context.Context, job *Job, g Group, run *plan, st Gossip) (*Summary, error) {
	wallStart := time.Now()
	c, _ := replica.Comm(g) // checked by Job.build
	l := &gossipLoop{g: g, job: job, gc: &st, run: run, c: c, rank: c.Rank(), world: c.Size(), nextEval: 1,
		log: job.logger().With(zap.Int("rank", c.Rank()))}
	if err := l.start(ctx); err != nil {
		return nil, err
	}
	defer l.obs.close()
	defer l.gos.Close()
	l.sampler = startSampler(l.job, g)
	defer l.sampler.finish()
	pipe, err := run.pipeline(ctx, 1, data.Forever, l.steps)
	if err != nil {
		return nil, err
	}
	defer pipe.Close()
	for {
		l.heedStop()
		total, stop := l.gos.Progress()
		if stop || total >= l.budget {
			l.stopped(stop)
			break
		}
		if err := l.step(ctx, pipe, total); err != nil {
			return nil, err
		}
		if err := l.maybeEvaluate(ctx); err != nil {
			return nil, err
		}
	}
	return l.finish(ctx, wallStart)
}

// heedStop asks the cluster to stop, through the gossip stop flag, once
// Job.Stop is closed (SIGTERM): every replica ends at its next step and
// they finish as at the end of a normal run (the final swap).
func (l *gossipLoop) heedStop() {
	if l.asked || l.job.Stop == nil {
		return
	}
	select {
	case <-l.job.Stop:
		l.asked = true
		l.log.Info("asked to stop: telling the other gossip replicas", zap.Int("local_step", l.local))
		l.gos.AskStop()
	default:
	}
}

// stopped records why the loop ended (see GossipReport.stopped) and, when
// a rank asked from outside (SIGTERM), Result.Stopped naming it.
func (l *gossipLoop) stopped(stop bool) {
	asker := -1
	if stop {
		asker = l.gos.StopAsker()
	}
	gossipStopped(&l.rep, stop, asker >= 0)
	if asker >= 0 {
		l.res.Stopped = &EarlyStop{Step: l.local, Ranks: []int{asker}, Gossip: true}
	}
}

// start runs the handshake, agrees on the steps per pass, gives everyone
// the chief's parameters if need be and starts the engine.
func (l *gossipLoop) start(ctx context.Context) error {
	cfg, run, g := &l.job.Config, l.run, l.g
	cl, err := handshake(ctx, g, hello{Settings: run.settings, Shard: run.shard})
	if err != nil {
		return err
	}
	if l.steps, err = sparseSteps(cl.minShard, cl.maxShard, cfg.BatchSize); err != nil {
		return err
	}
	if run.broadcastStart {
		if err := g.Broadcast(ctx, run.rep.Params(), 0); err != nil {
			return fmt.Errorf("broadcasting the initial parameters from rank 0: %w", err)
		}
	}
	if l.sched, err = run.schedule(l.steps); err != nil {
		return err
	}
	l.epochWork = l.steps * l.world
	l.budget = uint64(cfg.Epochs * l.epochWork)
	if run.maxSteps > 0 {
		l.budget = min(l.budget, uint64(run.maxSteps*l.world))
	}
	res := run.result
	l.res = &res
	l.res.Replicas, l.res.StepsPerEpoch, l.res.TrainExamples = l.world, l.steps, cl.total
	l.res.TimeToAccuracy = map[string]float64{}
	l.res.Version, l.res.Started = Version(), time.Now().Format(time.RFC3339)
	l.rep = GossipReport{Schedule: l.gc.Schedule, Every: l.gc.Every, MaxStaleness: l.gc.MaxStaleness}

	sched, _ := gossip.ParseSchedule(l.gc.Schedule) // validated
	opts := run.opts
	opts.Schedule, opts.Seed, opts.MaxStaleness = sched, uint64(cfg.Seed), l.gc.MaxStaleness
	opts.Timeout, opts.Logger = l.c.Options().Timeout, cfg.logger().Named("gossip") // it adds the rank
	shared := run.rep.Params()
	if !run.sparse { // local steps compute on a copy; the engine owns the shared vector
		shared = append([]float32(nil), shared...)
	}
	if l.gos, err = gossip.New(l.c, shared, opts); err != nil {
		return err
	}
	l.obs = newObservers(l.job, l.rank)
	l.gos.Start(ctx)
	return l.obs.emit(Event{Kind: EventStart, Steps: cfg.Epochs * l.steps, Replicas: 1, Info: run.header(l.steps, cl.total)})
}

// step is one local step: the batch, the gradient and update on the
// shared parameters, the injected faults, and (every Every steps) an
// average with one peer. total is the cluster's work as last heard.
func (l *gossipLoop) step(ctx context.Context, pipe *data.Pipeline, total uint64) error {
	rep, gos := l.run.rep, l.gos
	t0 := time.Now()
	b, err := pipe.Next(ctx)
	if err != nil {
		return fmt.Errorf("local step %d: reading the next batch: %w", l.local+1, err)
	}
	t1 := time.Now()
	l.lr = l.sched.At(int(total / uint64(l.world))) // the cluster's progress, as the ring's schedule
	var loss float64
	var correct int
	var counted bool
	if l.run.sparse {
		loss, err = l.sparseStep(b)
	} else {
		gos.Read(rep.Params())
		loss, err = rep.Gradient(b)
		correct, counted = trainCorrect(rep) // its training accuracy, for TensorBoard as under the ring
	}
	if err != nil {
		return fmt.Errorf("local step %d: %w", l.local+1, err)
	}
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return &NonFiniteError{Epoch: l.local/l.steps + 1, Step: l.local % l.steps, GlobalStep: l.local, Loss: loss}
	}
	info := StepInfo{Rank: l.rank, Step: l.local, Started: t0}
	if err := l.fault(ctx, AfterGradient, info); err != nil {
		return err
	}
	if !l.run.sparse {
		gos.Apply(func(p []float32) { rep.Update(p, l.lr) })
	}
	l.local++
	l.sinceEval++
	l.lossSum += loss
	l.examples += b.Size
	gos.SetSteps(uint64(l.local))
	t4 := time.Now()
	if err := l.fault(ctx, AfterUpdate, info); err != nil {
		return err
	}
	if err := l.fault(ctx, BeforeCombine, info); err != nil {
		return err
	}
	if err := l.average(ctx); err != nil {
		return err
	}
	t5 := time.Now()
	if tl := l.job.Timeline; tl != nil {
		tl.Add(timeline.Input, "", l.local, t0, t1)
		tl.Add(timeline.Compute, "gradient and update", l.local, t1, t4)
		tl.Add(timeline.Gossip, "average", l.local, t4, t5)
	}
	l.wait += t1.Sub(t0)
	l.compute += t4.Sub(t1) // the injected slowness emulates slower computing
	l.comm += t5.Sub(t4)
	l.trainTime += t5.Sub(t0)
	l.stats = StepStats{Loss: loss, LR: l.lr, Examples: b.Size, BytesSent: bytesSent(l.c.Transport()), Correct: correct, Counted: counted,
		Compute: t4.Sub(t1), Comm: t5.Sub(t4), Wait: t1.Sub(t0), Seconds: t5.Sub(t0).Seconds()}
	if err := l.obs.emit(Event{Kind: EventStep, Step: l.local, Steps: l.job.Epochs * l.steps, Train: &l.stats}); err != nil {
		return err
	}
	return emitResources(l.obs, l.sampler, l.local, l.job.Epochs*l.steps)
}

// fault calls the faults hook, logging an injected kill.
func (l *gossipLoop) fault(ctx context.Context, p Point, s StepInfo) error {
	err := l.job.Faults.At(ctx, p, s)
	if errors.Is(err, ErrInjectedKill) {
		l.log.Warn("injected fault: this rank dies now", zap.Int("local_step", s.Step+1))
	}
	return err
}

// sparseStep computes and applies the step under the engine's lock, on
// the coordinates the batch touches.
func (l *gossipLoop) sparseStep(b *data.Batch) (float64, error) {
	if b.Size == 0 {
		return 0, nil
	}
	var loss float64
	var stepErr error
	err := l.gos.ApplySparse(b.Indices, func(w []float32) {
		if loss, stepErr = l.run.rep.Gradient(b); stepErr == nil {
			l.run.rep.Update(w, l.lr)
		}
	})
	if err == nil {
		err = stepErr
	}
	return loss, err
}

// average starts (or, waiting for averages, runs) this round's exchange
// when one is due. A round whose predecessor is still in flight is
// skipped, up to MaxSkip in a row, so computing rarely waits for the
// network.
func (l *gossipLoop) average(ctx context.Context) error {
	gc := l.gc
	if l.local%gc.Every != 0 {
		return nil
	}
	round := uint64(l.local/gc.Every - 1)
	var err error
	switch {
	case gc.WaitForAverage || l.run.sparse:
		_, err = l.gos.Exchange(ctx, round)
	case l.skipped < gc.MaxSkip && l.gos.InFlight():
		l.rep.Skipped++
		l.skipped++
	default:
		_, err = l.gos.Begin(ctx, round)
		l.skipped = 0
	}
	return err
}

// maybeEvaluate evaluates this replica's parameters each time the
// cluster's work crosses an epoch, and stops the cluster at the target.
func (l *gossipLoop) maybeEvaluate(ctx context.Context) error {
	total, _ := l.gos.Progress()
	if total < uint64(l.nextEval*l.epochWork) {
		return nil
	}
	ev, err := l.evaluate(ctx, total)
	if err != nil {
		return fmt.Errorf("evaluating at local step %d: %w", l.local, err)
	}
	l.nextEval = int(total/uint64(l.epochWork)) + 1
	cfg := &l.job.Config
	ep := Epoch{Epoch: ev.Epoch, Loss: ev.Loss, TestLoss: ev.TestLoss, TestAccuracy: ev.TestAccuracy, LR: l.lr,
		ExamplesPerSec: float64(l.examples) / l.trainTime.Seconds(), TrainSeconds: ev.TrainSeconds}
	if n := len(l.res.EpochResults); n > 0 {
		ep.EpochSeconds = ep.TrainSeconds - l.res.EpochResults[n-1].TrainSeconds
	} else {
		ep.EpochSeconds = ep.TrainSeconds
	}
	l.res.EpochResults = append(l.res.EpochResults, ep)
	markAccuracy(l.res, ep)
	if err := l.obs.emit(Event{Kind: EventEpoch, Step: l.local, Steps: cfg.Epochs * l.steps, Epoch: &ep, Gossip: &ev}); err != nil {
		return err
	}
	if targetMet(cfg, l.res.EpochResults) {
		if cfg.TargetAccuracy > 0 && ev.TestAccuracy >= cfg.TargetAccuracy {
			l.rep.TimeToTarget = ev.TrainSeconds
		}
		l.rep.StoppedBy = "target"
		l.gos.RequestStop()
	}
	return nil
}

// evaluate scores a snapshot of the shared parameters and records it,
// with the mean training loss since the previous evaluation.
func (l *gossipLoop) evaluate(ctx context.Context, total uint64) (GossipEval, error) {
	te := time.Now()
	l.gos.Snapshot(l.run.evalView)
	m, err := l.run.evaluate(ctx)
	l.evalTime += time.Since(te)
	l.job.Timeline.Add(timeline.Evaluate, "", l.local, te, time.Now())
	if err != nil {
		return GossipEval{}, err
	}
	ev := gossipEval(total, l.epochWork, l.local, l.steps, l.trainTime, m.Loss, m.Accuracy)
	if l.sinceEval > 0 {
		ev.Loss = l.lossSum / float64(l.sinceEval)
	}
	if m.Examples > 0 {
		l.res.TestExamples = m.Examples
	}
	l.lossSum, l.sinceEval = 0, 0
	l.rep.Evals = append(l.rep.Evals, ev)
	return ev, nil
}

// finish waits for the exchange in flight, swaps the final parameters
// with the survivors and fills in the figures.
func (l *gossipLoop) finish(ctx context.Context, wallStart time.Time) (*Summary, error) {
	tf := time.Now()
	if _, err := l.gos.Wait(ctx); err != nil {
		return nil, err
	}
	finals := l.gos.Finish(ctx)
	l.comm += time.Since(tf)
	l.rep.Stats = l.gos.Stats()
	if err := l.consensus(ctx, finals); err != nil {
		return nil, err
	}
	if len(l.rep.Evals) == 0 || l.rep.Evals[len(l.rep.Evals)-1].Steps != l.local {
		// Evaluate the final parameters if steps were taken since, and
		// report them (TensorBoard's last point) without making them an
		// epoch of the result.
		total, _ := l.gos.Progress()
		ev, err := l.evaluate(ctx, total)
		if err != nil {
			return nil, fmt.Errorf("evaluating the final parameters: %w", err)
		}
		ep := Epoch{Epoch: ev.Epoch, Loss: ev.Loss, TestLoss: ev.TestLoss, TestAccuracy: ev.TestAccuracy, LR: l.lr, TrainSeconds: ev.TrainSeconds}
		if err := l.obs.emit(Event{Kind: EventEpoch, Step: l.local, Steps: l.job.Epochs * l.steps, Epoch: &ep, Gossip: &ev, Info: "final"}); err != nil {
			return nil, err
		}
	}
	if l.trainTime > 0 {
		l.rep.StepsPerSec = float64(l.local) / l.trainTime.Seconds()
	}
	if len(l.rep.Dead) > 0 {
		l.log.Warn("gossip run finished without peers that died", zap.Ints("dead", l.rep.Dead), zap.Ints("survivors", l.rep.Survivors))
	}
	cfg, res, rep := &l.job.Config, l.res, l.run.rep
	res.Steps, res.TrainSeconds = l.local, l.trainTime.Seconds()
	res.FinalAccuracy = l.rep.Evals[len(l.rep.Evals)-1].TestAccuracy
	if res.TargetReached = targetMet(cfg, res.EpochResults); res.TargetReached {
		res.TimeToTarget = res.EpochResults[len(res.EpochResults)-1].TrainSeconds
	}
	l.gos.Snapshot(rep.Params()) // quiescent now
	res.ParamsSHA256 = ParamsHash(rep.Params())
	if l.run.done != nil {
		l.run.done()
	}
	res.WallSeconds = time.Since(wallStart).Seconds()
	peer := PeerStats{Rank: l.rank, Steps: l.local, Examples: l.examples, TestAccuracy: res.FinalAccuracy, ParamsSHA256: res.ParamsSHA256}
	finishPeer(&peer, l.c.Transport(), l.compute, l.comm, l.wait)
	peer.InputSeconds = l.wait.Seconds() // a gossip replica waits for nobody else
	peer.EvalSeconds = l.evalTime.Seconds()
	peer.Resources = l.sampler.finish()
	// The last, partial interval's sample reaches the observers too.
	if err := emitResources(l.obs, l.sampler, l.local, l.job.Epochs*l.steps); err != nil {
		return nil, err
	}
	info := ""
	if l.rank == 0 {
		info = fmt.Sprintf("gossip done: %d local steps (%.1f steps/s), survivors %v, consensus distance %.3g (%.2g relative)",
			l.local, l.rep.StepsPerSec, l.rep.Survivors, l.rep.FinalConsensus, l.rep.RelConsensus)
		if l.run.averageModel {
			info += fmt.Sprintf(", average model test accuracy %.2f%%", 100*l.rep.AverageAccuracy)
		}
	}
	if err := l.obs.emit(Event{Kind: EventDone, Step: l.local, Steps: cfg.Epochs * l.steps, Info: info}); err != nil {
		return nil, err
	}
	return &Summary{Run: res, Peer: peer, Gossip: &l.rep}, nil
}

// consensus fills the survivors and the consensus figures. With
// averageModel, finals holds the survivors' final parameters: the exact
// consensus distance sqrt(mean ‖x_i − x̄‖²) and the average model's test
// figures. Otherwise the latest exchange's distance stands for the end
// state.
func (l *gossipLoop) consensus(ctx context.Context, finals [][]float32) error {
	if !l.run.averageModel {
		l.rep.Survivors = []int{l.rank}
		if n := len(l.rep.Distances); n > 0 {
			d := l.rep.Distances[n-1]
			l.rep.FinalConsensus = d.Distance
			if d.Norm > 0 {
				l.rep.RelConsensus = d.Distance / d.Norm
			}
		}
		return nil
	}
	avg, dist, norm := consensusOf(finals)
	for r, f := range finals {
		if f != nil {
			l.rep.Survivors = append(l.rep.Survivors, r)
		}
	}
	l.rep.FinalConsensus = dist
	if norm > 0 {
		l.rep.RelConsensus = dist / norm
	}
	params := l.run.rep.Params()
	for i := range params {
		params[i] = float32(avg[i])
	}
	m, err := l.run.evaluate(ctx)
	if err != nil {
		return fmt.Errorf("evaluating the survivors' average model: %w", err)
	}
	l.rep.AverageLoss, l.rep.AverageAccuracy = m.Loss, m.Accuracy
	copy(params, finals[l.rank])
	return nil
}

// consensusOf is the average x̄ of the non-nil vectors, the consensus
// distance sqrt(mean ‖x_i − x̄‖²) and ‖x̄‖.
func consensusOf(finals [][]float32) (avg []float64, dist, norm float64) {
	n := 0
	for _, f := range finals {
		if f == nil {
			continue
		}
		if avg == nil {
			avg = make([]float64, len(f))
		}
		n++
		for i, v := range f {
			avg[i] += float64(v)
		}
	}
	var dist2, norm2 float64
	for i := range avg {
		avg[i] /= float64(n)
		norm2 += avg[i] * avg[i]
	}
	for _, f := range finals {
		for i, v := range f {
			d := float64(v) - avg[i]
			dist2 += d * d
		}
	}
	return avg, math.Sqrt(dist2 / float64(n)), math.Sqrt(norm2)
}
