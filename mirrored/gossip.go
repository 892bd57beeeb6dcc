package mirrored

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/nn"
)

// Strategies a run may use.
const (
	// StrategyRing is synchronous data parallelism (RunJob): every step's
	// gradients are all-reduced, every replica applies the same update.
	StrategyRing = "ring"
	// StrategyGossip is decentralised asynchronous training (RunGossip).
	StrategyGossip = "gossip"
)

// Strategies lists the valid strategy names.
var Strategies = []string{StrategyRing, StrategyGossip}

// DefaultMaxSkip is GossipConfig.MaxSkip's default: at least one average
// every 4 local steps.
const DefaultMaxSkip = 3

// GossipConfig is the gossip strategy's settings and the fault injection
// both strategies accept. The zero value (after Fill) is gossip with a
// random peer every step and staleness bound 1, no faults.
type GossipConfig struct {
	// Strategy is StrategyRing or StrategyGossip (RunStrategy's choice).
	Strategy string
	// Schedule picks the peer of each exchange: random, rotate or
	// exponential (collective.ParsePeerSchedule).
	Schedule string
	// Every is the number of local steps between exchanges (≥ 1).
	Every int
	// WaitForAverage makes each exchange complete before the next local
	// step; by default the next step overlaps it (its answer lands as a
	// merge during that step, counted in its staleness), as AD-PSGD's
	// communication thread does.
	WaitForAverage bool
	// MaxSkip is how many rounds in a row a replica may skip, when its
	// previous average is still in flight, before it waits for it: it
	// bounds the local steps between two averages to MaxSkip+1, while
	// steps shorter than an exchange's round trip still do not wait for
	// every one. 0 means DefaultMaxSkip; negative, never skip.
	MaxSkip int
	// MaxStaleness bounds the merges a local step may absorb while its
	// gradient is being computed (≥ 1).
	MaxStaleness int
	// Faults are injected into either strategy.
	Faults Faults
}

// Fill sets the defaults: strategy ring, schedule random, Every 1,
// MaxSkip DefaultMaxSkip,
// MaxStaleness 2 (the overlapped answer of the replica's own exchange, and
// one peer's request).
func (g *GossipConfig) Fill() {
	if g.Strategy == "" {
		g.Strategy = StrategyRing
	}
	if g.Schedule == "" {
		g.Schedule = collective.GossipRandom.String()
	}
	if g.Every == 0 {
		g.Every = 1
	}
	if g.MaxStaleness == 0 {
		g.MaxStaleness = 2
	}
	if g.MaxSkip == 0 {
		g.MaxSkip = DefaultMaxSkip
	}
}

// Validate reports the first bad setting, for world replicas.
func (g *GossipConfig) Validate(world int) error {
	switch g.Strategy {
	case StrategyRing, StrategyGossip:
	default:
		return fmt.Errorf("strategy %q: want ring or gossip", g.Strategy)
	}
	if _, err := collective.ParsePeerSchedule(g.Schedule); err != nil {
		return err
	}
	if g.Every < 1 {
		return fmt.Errorf("gossip every %d steps: want ≥ 1", g.Every)
	}
	if g.MaxStaleness < 1 {
		return fmt.Errorf("gossip max staleness %d: want ≥ 1", g.MaxStaleness)
	}
	return g.Faults.Validate(world)
}

// GossipSummary is a gossip replica's Summary plus its gossip figures. Its
// JSON is a Summary's with a "gossip" object added.
type GossipSummary struct {
	Summary
	Gossip GossipReport `json:"gossip"`
}

// GossipEval is one evaluation of a gossip replica's own parameters. A
// replica evaluates each time the cluster's work, as it knows it, crosses
// an epoch (the work of one synchronous epoch: N replicas × steps per
// epoch), so that its curve has the ring's resolution; and at the end.
type GossipEval struct {
	Epoch int `json:"epoch"` // epochs of cluster work completed
	// ClusterEpochs is the cluster's work so far as this replica knew it,
	// in epochs: the x axis comparable with a ring run's epochs.
	ClusterEpochs float64 `json:"cluster_epochs"`
	// LocalPasses is this replica's own work: passes over its shard.
	LocalPasses  float64 `json:"local_passes"`
	Loss         float64 `json:"loss"` // mean training loss since the previous evaluation
	TestLoss     float64 `json:"test_loss"`
	TestAccuracy float64 `json:"test_accuracy"`
	TrainSeconds float64 `json:"train_seconds"` // cumulative, evaluation excluded
	Steps        int     `json:"steps"`         // local steps done
}

// gossipEval is the evaluation of a replica after its local steps (steps
// of them a pass over its shard), when the cluster had done total local
// steps (epochWork of them an epoch); the caller sets Loss.
func gossipEval(total uint64, epochWork, local, steps int, trainTime time.Duration, testLoss, acc float64) GossipEval {
	return GossipEval{Epoch: int(total / uint64(epochWork)), ClusterEpochs: float64(total) / float64(epochWork),
		LocalPasses: float64(local) / float64(steps), TestLoss: testLoss, TestAccuracy: acc, TrainSeconds: trainTime.Seconds(), Steps: local}
}

// GossipReport are one replica's gossip figures.
type GossipReport struct {
	Schedule     string `json:"schedule"`
	Every        int    `json:"every"`
	MaxStaleness int    `json:"max_staleness"`
	collective.GossipStats
	Evals []GossipEval `json:"evals"`
	// Skipped counts rounds without an exchange because the previous one
	// was still in flight (overlapped mode never waits for the network).
	Skipped int `json:"skipped"`
	// StepsPerSec is this replica's local steps over its training time.
	StepsPerSec float64 `json:"steps_per_sec"`
	// StoppedBy says why training ended: "budget" (the cluster did as
	// many steps as the synchronous run would), "target" (this replica
	// reached the target) or "peer" (another one did).
	StoppedBy string `json:"stopped_by"`
	// Survivors are the ranks whose final parameters this replica
	// received (itself included); FinalConsensus is the exact consensus
	// distance among them, sqrt(mean ‖x_i − x̄‖²), and RelConsensus that
	// over ‖x̄‖.
	Survivors      []int   `json:"survivors"`
	FinalConsensus float64 `json:"final_consensus"`
	RelConsensus   float64 `json:"rel_consensus"`
	// AverageAccuracy and AverageLoss are the test figures of x̄, the
	// survivors' average model (dense models only: 0 for sparse-lr, whose
	// replicas never swap whole weight vectors).
	AverageAccuracy float64 `json:"average_accuracy"`
	AverageLoss     float64 `json:"average_loss"`
	// TimeToTarget is the training seconds at which this replica first
	// reached the target accuracy (0: never).
	TimeToTarget float64 `json:"time_to_target_seconds,omitempty"`
}

// ErrGossipCheckpoint says checkpoints are not available under gossip.
var ErrGossipCheckpoint = errors.New("checkpoints and --restore work with the ring strategy only: gossip replicas hold different parameters, and a gossip run is not resumable")

// RunGossip runs job as replica c.Rank() of c.Size() with decentralised
// asynchronous training in the manner of AD-PSGD (Lian et al., 2018):
//
//   - start-up: the replicas compare their settings (as RunJob does) and
//     rank 0 broadcasts the initial parameters; no collective is used
//     after that, so a dead peer cannot stop the others;
//   - each local step: copy the shared parameters, forward/backward on the
//     replica's own batch (data.ShardAuto over its shard, reshuffled each
//     pass), optimizer step on the shared parameters (which peers may have
//     averaged meanwhile: that is the step's staleness, bounded by
//     MaxStaleness); every Every steps, average with one peer chosen by
//     the schedule (collective.Gossip), overlapped with the next step
//     unless WaitForAverage (a round whose predecessor is still in flight
//     is skipped, up to MaxSkip in a row, so computing rarely waits for
//     the network). No barrier: a slow replica only
//     answers late, never makes the others wait for its computation;
//   - the learning-rate schedule follows the cluster's progress (the sum
//     of the replicas' steps over N), so it matches the ring's per epoch;
//   - the run ends when the cluster has done the synchronous run's work
//     (Epochs × steps per epoch × N local steps; faster replicas do more
//     of them), or when a replica reaches the target accuracy;
//   - each time the cluster's work crosses an epoch, the replica evaluates
//     its own parameters on the whole test set; at the end the survivors swap their final
//     parameters and each reports the consensus distance and the accuracy
//     of their average;
//   - a peer that dies is detected (its link fails, or it does not answer
//     within the collective timeout), logged and dropped; the rest finish.
func RunGossip(ctx context.Context, job Job, gc GossipConfig, c *collective.Comm) (*GossipSummary, error) {
	wallStart := time.Now()
	gc.Strategy = StrategyGossip
	gc.Fill()
	if err := job.validate(); err != nil {
		return nil, err
	}
	rank, world := c.Rank(), c.Size()
	if err := gc.Validate(world); err != nil {
		return nil, err
	}
	if job.CheckpointDir != "" || job.Restore != "" {
		return nil, ErrGossipCheckpoint
	}
	sched, _ := collective.ParsePeerSchedule(gc.Schedule) // validated
	cfg := &job.Config
	base := cfg.logger()
	log := base.With(zap.Int("rank", rank))

	mn := cfg.MNIST
	if mn == nil {
		var err error
		if mn, err = data.LoadMNIST(ctx, data.MNISTOptions{Dir: cfg.DataDir, Logger: log.Named("data")}); err != nil {
			return nil, err
		}
	}
	trainSet, testSet := firstN(mn.Train, cfg.TrainExamples), firstN(mn.Test, cfg.TestExamples)
	shards := cfg.Shards
	if shards == 0 {
		shards = nn.DefaultShards
	}
	model, err := nn.NewModelShards(cfg.Model, cfg.Seed, shards)
	if err != nil {
		return nil, err
	}
	if d := trainSet.Rows * trainSet.Cols; d != model.InputDim() {
		return nil, fmt.Errorf("model %s takes %d inputs, the images have %d pixels", cfg.Model, model.InputDim(), d)
	}
	params, grads := model.Params(), model.Grads()
	opt, err := nn.NewOptimizer(cfg.Optimizer, nn.OptimizerConfig{
		Params: len(params), LR: cfg.LR, Momentum: cfg.Momentum, WeightDecay: cfg.WeightDecay})
	if err != nil {
		return nil, err
	}
	steps := data.Steps(trainSet.N, world, cfg.BatchSize, true)
	if steps == 0 {
		return nil, fmt.Errorf("%d training examples over %d replicas give no full batch of %d: use a smaller batch or more examples",
			trainSet.N, world, cfg.BatchSize)
	}
	lrs, err := nn.NewSchedule(nn.ScheduleConfig{
		Kind: cfg.Schedule, Base: cfg.LR, Gamma: cfg.LRGamma,
		DecayEvery:  max(1, int(math.Round(cfg.LRDecayEpochs*float64(steps)))),
		TotalSteps:  cfg.Epochs * steps,
		MinLR:       cfg.MinLR,
		WarmupSteps: int(math.Round(cfg.WarmupEpochs * float64(steps))),
	})
	if err != nil {
		return nil, err
	}

	// Start-up: the same settings everywhere, then rank 0's parameters.
	g := NewGroup(c)
	settings := append(job.settings(len(params), world, dataDigest(trainSet, testSet)), gc.settings()...)
	hb, err := json.Marshal(hello{Settings: settings})
	if err != nil {
		return nil, err
	}
	all, err := g.AllGather(ctx, hb)
	if err != nil {
		return nil, fmt.Errorf("start-up handshake (comparing the peers' settings): %w", err)
	}
	who, sets := make([]string, world), make([][]Setting, world)
	for r, b := range all {
		var h hello
		if err := json.Unmarshal(b, &h); err != nil {
			return nil, fmt.Errorf("start-up handshake: rank %d sent an unreadable hello (a different meshtrain version?): %w", r, err)
		}
		who[r], sets[r] = fmt.Sprintf("rank %d", r), h.Settings
	}
	if err := compareSettings(who, sets); err != nil {
		return nil, fmt.Errorf("the peers were started with different settings: %w: start every peer with the same training flags", err)
	}
	if err := g.Broadcast(ctx, params, 0); err != nil {
		return nil, fmt.Errorf("broadcasting the initial parameters from rank 0: %w", err)
	}

	shared := append([]float32(nil), params...)
	gos, err := collective.NewGossip(c, shared, collective.GossipOptions{
		Schedule: sched, Seed: uint64(cfg.Seed), MaxStaleness: gc.MaxStaleness,
		Timeout: c.Options().Timeout, Logger: base.Named("gossip"), // it adds the rank
	})
	if err != nil {
		return nil, err
	}
	gos.Start(ctx)
	defer gos.Close()

	pcfg := data.TrainConfig(rank, world, cfg.BatchSize, uint64(cfg.Seed), data.Forever)
	pcfg.Policy = data.ShardAuto
	if job.NoShuffle {
		pcfg.ShuffleBuffer = 0
	}
	pipe, err := data.NewPipeline(ctx, trainSet.Dataset(), pcfg)
	if err != nil {
		return nil, err
	}
	defer pipe.Close()
	testX, testY := denseRange(testSet, 0, testSet.N)

	res := &Result{
		Model: cfg.Model, Params: len(params), Replicas: world, BatchSize: cfg.BatchSize, Epochs: cfg.Epochs,
		Optimizer: cfg.Optimizer, LR: cfg.LR, Momentum: cfg.Momentum, WeightDecay: cfg.WeightDecay,
		Schedule: cfg.Schedule, WarmupEpochs: cfg.WarmupEpochs, Seed: cfg.Seed,
		TrainExamples: trainSet.N, TestExamples: testSet.N, StepsPerEpoch: steps,
		TargetAccuracy: cfg.TargetAccuracy, TargetLoss: cfg.TargetLoss,
		TimeToAccuracy: map[string]float64{},
	}
	rep := GossipReport{Schedule: gc.Schedule, Every: gc.Every, MaxStaleness: gc.MaxStaleness}
	peer := PeerStats{Rank: rank}
	evaluate := func() (float64, float64, error) {
		if testSet.N == 0 {
			return 0, 0, nil
		}
		loss, correct, err := model.Evaluate(testX, testY, testSet.N)
		return loss / float64(testSet.N), float64(correct) / float64(testSet.N), err
	}
	if cfg.Progress != nil && rank == 0 {
		fmt.Fprintf(cfg.Progress, "%s: %d parameters, %d gossip replica(s) × batch %d, %s peer each %d step(s), %d steps per pass over a shard, %d training and %d test examples\n",
			cfg.Model, len(params), world, cfg.BatchSize, gc.Schedule, gc.Every, steps, trainSet.N, testSet.N)
	}
	gossipEmit(&job, Event{Kind: "start", Rank: rank, Steps: cfg.Epochs * steps})

	epochWork := steps * world // local steps of one synchronous epoch
	budget := uint64(cfg.Epochs * epochWork)
	nextEval := 1
	var compute, comm, wait, trainTime, evalTime, lastStep time.Duration
	skipped := 0 // rounds skipped in a row
	var lossSum float64
	local, examples, epochSteps := 0, 0, 0
	var labels []int32
	for {
		total, stop := gos.Progress()
		if stop || total >= budget {
			rep.stopped(stop)
			break
		}
		t0 := time.Now()
		b, err := pipe.Next(ctx)
		if err != nil {
			return nil, fmt.Errorf("local step %d: reading the next batch: %w", local+1, err)
		}
		t1 := time.Now()
		gos.Read(params)
		labels = b.IntLabels(labels)
		loss, err := model.ForwardBackward(b.X, labels, b.Size)
		if err != nil {
			return nil, fmt.Errorf("local step %d: %w", local+1, err)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return nil, &NonFiniteError{Epoch: local/steps + 1, Step: local % steps, GlobalStep: local, Loss: loss}
		}
		t2 := time.Now()
		if err := gc.Faults.straggle(ctx, rank, lastStep, t2.Sub(t0)); err != nil {
			return nil, err
		}
		t3 := time.Now()
		lr := lrs.At(int(total / uint64(world)))
		gos.Apply(func(p []float32) {
			opt.SetLR(lr)
			opt.Step(p, grads)
		})
		local++
		epochSteps++
		lossSum += loss
		examples += b.Size
		gos.SetSteps(uint64(local))
		t4 := time.Now()
		if err := gc.Faults.crash(log, rank, local); err != nil {
			return nil, err
		}
		if local%gc.Every == 0 {
			round := uint64(local/gc.Every - 1)
			switch {
			case gc.WaitForAverage:
				_, err = gos.Exchange(ctx, round)
			case skipped < gc.MaxSkip && gos.InFlight():
				// The previous average has not landed yet: keep computing
				// rather than wait for the network (MaxSkip times in a row).
				rep.Skipped++
				skipped++
			default:
				_, err = gos.Begin(ctx, round)
				skipped = 0
			}
			if err != nil {
				return nil, err
			}
		}
		t5 := time.Now()
		wait += t1.Sub(t0)
		compute += t2.Sub(t1) + t3.Sub(t2) + t4.Sub(t3) // the injected slowness emulates slower computing
		comm += t5.Sub(t4)
		trainTime += t5.Sub(t0)
		lastStep = t5.Sub(t0) - t3.Sub(t2)

		if total, _ := gos.Progress(); total >= uint64(nextEval*epochWork) {
			te := time.Now()
			gos.Snapshot(params)
			testLoss, acc, err := evaluate()
			if err != nil {
				return nil, fmt.Errorf("evaluating on the test set: %w", err)
			}
			evalTime += time.Since(te)
			nextEval = int(total/uint64(epochWork)) + 1
			ev := gossipEval(total, epochWork, local, steps, trainTime, testLoss, acc)
			ev.Loss = lossSum / float64(epochSteps)
			rep.Evals = append(rep.Evals, ev)
			ep := Epoch{Epoch: ev.Epoch, Loss: ev.Loss, TestLoss: testLoss, TestAccuracy: acc, LR: lr,
				ExamplesPerSec: float64(examples) / trainTime.Seconds(), TrainSeconds: ev.TrainSeconds}
			res.EpochResults = append(res.EpochResults, ep)
			markAccuracy(res, ep)
			lossSum, epochSteps = 0, 0
			log.Info("epoch", zap.Int("epoch", ev.Epoch), zap.Float64("cluster_epochs", ev.ClusterEpochs), zap.Float64("local_passes", ev.LocalPasses),
				zap.Float64("loss", ev.Loss), zap.Float64("test_accuracy", acc), zap.Float64("train_seconds", ev.TrainSeconds))
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "rank %d epoch %2d (cluster work %.2f epochs, own %.2f passes)  loss %.4f  test accuracy %6.2f%%  train %.1fs\n",
					rank, ev.Epoch, ev.ClusterEpochs, ev.LocalPasses, ev.Loss, 100*acc, ev.TrainSeconds)
			}
			epCopy := ep
			gossipEmit(&job, Event{Kind: "epoch", Rank: rank, Step: local, Steps: cfg.Epochs * steps, Epoch: &epCopy})
			if targetMet(cfg, res.EpochResults) {
				if cfg.TargetAccuracy > 0 && acc >= cfg.TargetAccuracy {
					rep.TimeToTarget = ev.TrainSeconds
				}
				rep.StoppedBy = "target"
				gos.RequestStop()
			}
		}
	}

	// The survivors swap final parameters: consensus and the average model.
	tf := time.Now()
	if _, err := gos.Wait(ctx); err != nil {
		return nil, err
	}
	finals := gos.Finish(ctx)
	comm += time.Since(tf)
	gs := gos.Stats()
	rep.GossipStats = gs
	avg := make([]float64, len(params))
	for r, f := range finals {
		if f == nil {
			continue
		}
		rep.Survivors = append(rep.Survivors, r)
		for i, v := range f {
			avg[i] += float64(v)
		}
	}
	var dist2, norm2 float64
	for i := range avg {
		avg[i] /= float64(len(rep.Survivors))
		norm2 += avg[i] * avg[i]
	}
	for _, f := range finals {
		for i, v := range f {
			d := float64(v) - avg[i]
			dist2 += d * d
		}
	}
	rep.FinalConsensus = math.Sqrt(dist2 / float64(len(rep.Survivors)))
	if norm2 > 0 {
		rep.RelConsensus = rep.FinalConsensus / math.Sqrt(norm2)
	}
	own := finals[rank]
	for i := range params {
		params[i] = float32(avg[i])
	}
	if rep.AverageLoss, rep.AverageAccuracy, err = evaluate(); err != nil {
		return nil, fmt.Errorf("evaluating the average model on the test set: %w", err)
	}
	copy(params, own)
	if len(rep.Evals) == 0 || rep.Evals[len(rep.Evals)-1].Steps != local {
		// Evaluate the final parameters if steps were taken since.
		testLoss, acc, err := evaluate()
		if err != nil {
			return nil, fmt.Errorf("evaluating on the test set: %w", err)
		}
		total, _ := gos.Progress()
		rep.Evals = append(rep.Evals, gossipEval(total, epochWork, local, steps, trainTime, testLoss, acc))
		if epochSteps > 0 {
			rep.Evals[len(rep.Evals)-1].Loss = lossSum / float64(epochSteps)
		}
	}
	if trainTime > 0 {
		rep.StepsPerSec = float64(local) / trainTime.Seconds()
	}
	if len(gs.Dead) > 0 {
		log.Warn("gossip run finished without peers that died", zap.Ints("dead", gs.Dead), zap.Ints("survivors", rep.Survivors))
	}

	last := rep.Evals[len(rep.Evals)-1]
	res.Steps = local
	res.TrainSeconds = trainTime.Seconds()
	res.FinalAccuracy = last.TestAccuracy
	res.TargetReached = targetMet(cfg, res.EpochResults)
	if res.TargetReached {
		res.TimeToTarget = res.EpochResults[len(res.EpochResults)-1].TrainSeconds
	}
	res.ParamsSHA256 = ParamsHash(params)
	res.WallSeconds = time.Since(wallStart).Seconds()
	peer.Steps, peer.Examples = local, examples
	peer.TestAccuracy, peer.ParamsSHA256 = res.FinalAccuracy, res.ParamsSHA256
	peer.finish(c.Transport(), compute, comm, wait)
	peer.EvalSeconds = evalTime.Seconds()
	if cfg.Progress != nil && rank == 0 {
		fmt.Fprintf(cfg.Progress, "gossip done: %d local steps (%.1f steps/s), survivors %v, consensus distance %.3g (%.2g relative), average model test accuracy %.2f%%\n",
			local, rep.StepsPerSec, rep.Survivors, rep.FinalConsensus, rep.RelConsensus, 100*rep.AverageAccuracy)
	}
	return &GossipSummary{Summary: Summary{Run: res, Peer: peer}, Gossip: rep}, nil
}

// settings are the gossip settings every replica must share.
func (g *GossipConfig) settings() []Setting {
	return []Setting{
		{Name: "strategy", Value: g.Strategy, Resume: true},
		{Name: "gossip_schedule", Value: g.Schedule, Resume: true},
		{Name: "gossip_every", Value: strconv.Itoa(g.Every), Resume: true},
		{Name: "gossip_max_staleness", Value: strconv.Itoa(g.MaxStaleness), Resume: true},
		{Name: "gossip_wait_for_average", Value: strconv.FormatBool(g.WaitForAverage), Resume: true},
		{Name: "gossip_max_skip", Value: strconv.Itoa(g.MaxSkip), Resume: true},
		{Name: "slow_peer", Value: g.Faults.slowString()},
		{Name: "kill", Value: g.Faults.killString()},
	}
}

// stopped records why a gossip run's loop ends (the step budget, or a
// peer's stop request), unless reaching the target already did.
func (r *GossipReport) stopped(byPeer bool) {
	switch {
	case r.StoppedBy != "":
	case byPeer:
		r.StoppedBy = "peer"
	default:
		r.StoppedBy = "budget"
	}
}

func gossipEmit(j *Job, e Event) {
	if j.OnEvent != nil {
		j.OnEvent(e)
	}
}
