package mirrored

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/gossip"
	"github.com/meshtrain/meshtrain/sparse"
)

// RunSparseGossip runs sparse logistic regression (a SparseJob) as gossip
// replica c.Rank() of c.Size(), as RunGossip does for the dense models,
// with one difference that matters at Criteo's D (135 MB of weights): each
// pairwise exchange carries only the coordinates either side changed since
// their last exchange (gossip.Options.Sparse), never the dense
// vector. Each local step (gradient and update, a few thousand weights) runs
// under the gossip lock, so its staleness is 0.
//
// The optimizer must keep the weights themselves as its state: adagrad, or
// sgd without L2 (lazy decay would be applied to averaged values at the
// next touch, and ftrl recomputes each weight from its own accumulators,
// which would undo every average). Each replica evaluates its own weights
// on the whole test set each time the cluster's work crosses an epoch;
// there is no final average model (swapping D floats is what sparse
// gossip avoids), the consensus figures are the pairwise distances seen at
// each exchange (exact: coordinates not exchanged are equal).
func RunSparseGossip(ctx context.Context, job SparseJob, gc GossipConfig, c *collective.Comm) (*GossipSummary, error) {
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
	cfg, sc := &job.Config, &job.Sparse
	switch {
	case sc.Optimizer == "ftrl":
		return nil, errors.New("gossip with --optimizer ftrl: FTRL derives each weight from its own accumulators, which would undo every average: use adagrad or sgd")
	case sc.Optimizer == "sgd" && sc.L2 > 0:
		return nil, fmt.Errorf("gossip with sgd and --l2 %v: the lazy weight decay does not mix with averaging: use --l2 0 or adagrad", sc.L2)
	}
	sched, _ := gossip.ParseSchedule(gc.Schedule) // validated
	base := cfg.logger()
	log := base.With(zap.Int("rank", rank))
	dim := sc.Features
	open := job.opener(log.Named("data"))

	settings, err := job.settings(world)
	if err != nil {
		return nil, err
	}
	settings = append(settings, gc.settings()...)
	pcfg, shard, err := job.trainPipeline(ctx, rank, world, open)
	if err != nil {
		return nil, err
	}
	minShard, maxShard, trainExamples, err := job.handshake(ctx, NewGroup(c), settings, shard)
	if err != nil {
		return nil, err
	}
	steps, err := sparseSteps(minShard, maxShard, cfg.BatchSize)
	if err != nil {
		return nil, err
	}
	pcfg.StepsPerEpoch = steps
	pcfg.Epochs = data.Forever // faster replicas do more than their share
	pipe, err := sparsePipeline(ctx, sc.Train, sc.TrainFiles, open, pcfg)
	if err != nil {
		return nil, err
	}
	defer pipe.Close()

	model, err := sparse.NewLogReg(dim)
	if err != nil {
		return nil, err
	}
	opt, err := sparse.NewOptimizer(sc.Optimizer, dim, job.optimizerConfig())
	if err != nil {
		return nil, err
	}
	// Every replica starts from zero weights, so nothing is broadcast.
	gos, err := gossip.New(c, model.W, gossip.Options{
		Schedule: sched, Seed: uint64(cfg.Seed), Sparse: true, SparseTolerance: gossip.DefaultOptions().SparseTolerance, MaxStaleness: gc.MaxStaleness,
		Timeout: c.Options().Timeout, Logger: base.Named("gossip"), // it adds the rank
	})
	if err != nil {
		return nil, err
	}
	gos.Start(ctx)
	defer gos.Close()

	res := &Result{
		Model: SparseModel, Params: dim, Replicas: world, BatchSize: cfg.BatchSize, Epochs: cfg.Epochs,
		Optimizer: sc.Optimizer, LR: cfg.LR, WeightDecay: sc.L2, Schedule: "constant", Seed: cfg.Seed,
		TrainExamples: trainExamples, StepsPerEpoch: steps, TargetAccuracy: cfg.TargetAccuracy,
		TimeToAccuracy: map[string]float64{},
	}
	rep := GossipReport{Schedule: gc.Schedule, Every: gc.Every, MaxStaleness: gc.MaxStaleness}
	if cfg.Progress != nil && rank == 0 {
		fmt.Fprintf(cfg.Progress, "%s: %d features, %s, %d gossip replica(s) × batch %d, %s peer each %d step(s), changed coordinates only, %d steps per pass over a shard\n",
			SparseModel, dim, sc.Optimizer, world, cfg.BatchSize, gc.Schedule, gc.Every, steps)
	}
	gossipEmit(&job.Job, Event{Kind: "start", Rank: rank, Steps: cfg.Epochs * steps})

	evalW := make([]float32, 0)
	evaluate := func() (sparse.Metrics, error) {
		if sc.Test == nil && len(sc.TestFiles) == 0 {
			return sparse.Metrics{}, nil
		}
		if cap(evalW) < dim {
			evalW = make([]float32, dim)
		}
		evalW = evalW[:dim]
		gos.Snapshot(evalW)
		return scoreSparse(ctx, &job, &sparse.LogReg{W: evalW}, open)
	}

	epochWork := steps * world
	budget := uint64(cfg.Epochs * epochWork)
	if sc.MaxSteps > 0 {
		budget = min(budget, uint64(sc.MaxSteps*world))
	}
	nextEval := 1
	var compute, comm, wait, trainTime, evalTime, lastStep time.Duration
	var g sparse.Vector
	var lossSum float64
	local, examples, sinceEval := 0, 0, 0
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
		var loss float64
		var stepErr error
		if b.Size > 0 {
			x := sparse.CSR{RowPtr: b.RowPtr, Indices: b.Indices, Values: b.Values}
			err := gos.ApplySparse(b.Indices, func(w []float32) {
				if loss, stepErr = model.Gradient(x, b.Labels, &g); stepErr == nil {
					opt.Step(w, g)
				}
			})
			if err == nil {
				err = stepErr
			}
			if err != nil {
				return nil, fmt.Errorf("local step %d: %w", local+1, err)
			}
			if math.IsNaN(loss) || math.IsInf(loss, 0) {
				return nil, &NonFiniteError{Epoch: local/steps + 1, Step: local % steps, GlobalStep: local, Loss: loss}
			}
		}
		t2 := time.Now()
		if err := gc.Faults.straggle(ctx, rank, lastStep, t2.Sub(t0)); err != nil {
			return nil, err
		}
		t3 := time.Now()
		local++
		sinceEval++
		lossSum += loss
		examples += b.Size
		gos.SetSteps(uint64(local))
		if err := gc.Faults.crash(log, rank, local); err != nil {
			return nil, err
		}
		if local%gc.Every == 0 {
			if _, err := gos.Exchange(ctx, uint64(local/gc.Every-1)); err != nil {
				return nil, err
			}
		}
		t4 := time.Now()
		wait += t1.Sub(t0)
		compute += t3.Sub(t1)
		comm += t4.Sub(t3)
		trainTime += t4.Sub(t0)
		lastStep = t4.Sub(t0) - t3.Sub(t2)

		if total, _ := gos.Progress(); total >= uint64(nextEval*epochWork) {
			te := time.Now()
			m, err := evaluate()
			evalTime += time.Since(te)
			if err != nil {
				return nil, fmt.Errorf("evaluating at local step %d: %w", local, err)
			}
			nextEval = int(total/uint64(epochWork)) + 1
			ev := gossipEval(total, epochWork, local, steps, trainTime, m.LogLoss, m.Accuracy)
			ev.Loss = lossSum / float64(sinceEval)
			rep.Evals = append(rep.Evals, ev)
			ep := Epoch{Epoch: ev.Epoch, Loss: ev.Loss, TestLoss: m.LogLoss, TestAccuracy: m.Accuracy, LR: cfg.LR,
				ExamplesPerSec: float64(examples) / trainTime.Seconds(), TrainSeconds: ev.TrainSeconds}
			res.EpochResults = append(res.EpochResults, ep)
			res.TestExamples = m.Examples
			lossSum, sinceEval = 0, 0
			log.Info("epoch", zap.Int("epoch", ev.Epoch), zap.Float64("cluster_epochs", ev.ClusterEpochs), zap.Float64("loss", ev.Loss),
				zap.Float64("test_accuracy", m.Accuracy), zap.Float64("test_log_loss", m.LogLoss), zap.Float64("test_auc", m.AUC))
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "rank %d epoch %2d (cluster work %.2f epochs)  loss %.4f  test %s  train %.1fs\n",
					rank, ev.Epoch, ev.ClusterEpochs, ev.Loss, m.String(), ev.TrainSeconds)
			}
			epCopy := ep
			gossipEmit(&job.Job, Event{Kind: "epoch", Rank: rank, Step: local, Steps: cfg.Epochs * steps, Epoch: &epCopy})
			if cfg.TargetAccuracy > 0 && m.Accuracy >= cfg.TargetAccuracy {
				rep.TimeToTarget, rep.StoppedBy = ev.TrainSeconds, "target"
				gos.RequestStop()
			}
		}
	}
	gos.Finish(ctx) // tells the others this replica is done; weights stay local
	rep.Stats = gos.Stats()
	rep.Survivors = []int{rank}
	if n := len(rep.Distances); n > 0 {
		// The latest exchange's distance stands for the end state.
		d := rep.Distances[n-1]
		rep.FinalConsensus = d.Distance
		if d.Norm > 0 {
			rep.RelConsensus = d.Distance / d.Norm
		}
	}
	if len(rep.Evals) == 0 || rep.Evals[len(rep.Evals)-1].Steps != local {
		m, err := evaluate()
		if err != nil {
			return nil, fmt.Errorf("evaluating the final weights: %w", err)
		}
		total, _ := gos.Progress()
		rep.Evals = append(rep.Evals, gossipEval(total, epochWork, local, steps, trainTime, m.LogLoss, m.Accuracy))
	}
	last := rep.Evals[len(rep.Evals)-1]
	if trainTime > 0 {
		rep.StepsPerSec = float64(local) / trainTime.Seconds()
	}
	res.Steps, res.TrainSeconds, res.FinalAccuracy = local, trainTime.Seconds(), last.TestAccuracy
	res.TargetReached = rep.TimeToTarget > 0
	res.TimeToTarget = rep.TimeToTarget
	gos.Snapshot(model.W) // quiescent now; a plain copy onto itself
	res.ParamsSHA256 = ParamsHash(model.W)
	if sc.OnWeights != nil {
		sc.OnWeights(model.W)
	}
	res.WallSeconds = time.Since(wallStart).Seconds()
	peer := PeerStats{Rank: rank, Steps: local, Examples: examples, TestAccuracy: res.FinalAccuracy, ParamsSHA256: res.ParamsSHA256}
	peer.finish(c.Transport(), compute, comm, wait)
	peer.EvalSeconds = evalTime.Seconds()
	return &GossipSummary{Summary: Summary{Run: res, Peer: peer}, Gossip: rep}, nil
}

// scoreSparse evaluates model on the whole test set of job on this
// replica alone (no collective: under gossip a peer may be gone).
func scoreSparse(ctx context.Context, job *SparseJob, model *sparse.LogReg, open data.Opener) (sparse.Metrics, error) {
	ecfg := data.Config{World: 1, Policy: data.ShardOff, BatchSize: sparseEvalBatch, Epochs: 1}
	pipe, err := sparsePipeline(ctx, job.Sparse.Test, job.Sparse.TestFiles, open, ecfg)
	if err != nil {
		return sparse.Metrics{}, err
	}
	defer pipe.Close()
	var e sparse.Evaluator
	for {
		b, err := pipe.Next(ctx)
		if errors.Is(err, io.EOF) {
			return e.Metrics(), nil
		}
		if err != nil {
			return sparse.Metrics{}, err
		}
		if err := model.Evaluate(sparse.CSR{RowPtr: b.RowPtr, Indices: b.Indices, Values: b.Values}, b.Labels, &e); err != nil {
			return sparse.Metrics{}, err
		}
	}
}
