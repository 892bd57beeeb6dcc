package mirrored

import (
	"context"
	"errors"
	"fmt"
	"io"

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
// their last exchange (collective.GossipOptions.Sparse), never the dense
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
	gc.Strategy = StrategyGossip
	gc.Fill()
	run, err := job.gossipRun(ctx, &gc, c.Rank(), c.Size())
	if err != nil {
		return nil, failStartup(ctx, NewGroup(c), err)
	}
	return runGossip(ctx, &job.Job, &gc, c, run)
}

// gossipRun checks the settings, counts this replica's shard and builds
// the replica for a gossip run of sparse logistic regression.
func (j *SparseJob) gossipRun(ctx context.Context, gc *GossipConfig, rank, world int) (*gossipRun, error) {
	if err := j.validate(); err != nil {
		return nil, err
	}
	if err := gc.Validate(world); err != nil {
		return nil, err
	}
	cfg, sc := &j.Config, &j.Sparse
	switch {
	case sc.Optimizer == "ftrl":
		return nil, errors.New("gossip with --optimizer ftrl: FTRL derives each weight from its own accumulators, which would undo every average: use adagrad or sgd")
	case sc.Optimizer == "sgd" && sc.L2 > 0:
		return nil, fmt.Errorf("gossip with sgd and --l2 %v: the lazy weight decay does not mix with averaging: use --l2 0 or adagrad", sc.L2)
	}
	pr, err := j.prepare(ctx, rank, world, cfg.logger().With(zap.Int("rank", rank)))
	if err != nil {
		return nil, err
	}
	rep, open, pcfg := pr.rep, pr.open, pr.pcfg
	rep.mean = true
	run := &gossipRun{
		rep: rep, settings: append(pr.settings, gc.settings()...), shard: pr.shard,
		pipeline: func(ctx context.Context, steps int) (*data.Pipeline, error) {
			p := pcfg
			p.StepsPerEpoch, p.Epochs = steps, data.Forever // faster replicas do more than their share
			return sparsePipeline(ctx, sc.Train, sc.TrainFiles, open, p)
		},
		schedule: j.schedule,
		result:   j.result(),
		header: func(steps int) string {
			return fmt.Sprintf("%s: %d features, %s, %d gossip replica(s) × batch %d, %s peer each %d step(s), changed coordinates only, %d steps per pass over a shard",
				SparseModel, sc.Features, sc.Optimizer, world, cfg.BatchSize, gc.Schedule, gc.Every, steps)
		},
		sparse:   true,
		opts:     gossip.Options{Sparse: true, SparseTolerance: gossip.DefaultOptions().SparseTolerance},
		maxSteps: sc.MaxSteps,
		done: func(Replica) {
			if sc.OnWeights != nil {
				sc.OnWeights(rep.model.W)
			}
		},
	}
	// Every replica starts from zero weights, so nothing is broadcast; the
	// engine shares the model's own weights, and evaluations score a
	// snapshot of them.
	if rep.test != nil {
		run.evalView = make([]float32, sc.Features)
	}
	run.evaluate = func(ctx context.Context) (Metrics, error) {
		if rep.test == nil {
			return Metrics{}, nil
		}
		m, err := scoreSparse(ctx, j, &sparse.LogReg{W: run.evalView}, open)
		return Metrics{Examples: m.Examples, Loss: m.LogLoss, Accuracy: m.Accuracy, AUC: m.AUC}, err
	}
	return run, nil
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
