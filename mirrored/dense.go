package mirrored

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/replica"
	"github.com/meshtrain/meshtrain/nn"
	"go.uber.org/zap"
)

// denseBuilder builds the replicas of the dense models (nn.Model): LeNet-5,
// softmax regression, or Job.NewModel's.
type denseBuilder Job

func (j *denseBuilder) validate() error {
	if j.NewModel == nil {
		return j.Config.Validate()
	}
	c := j.Config
	c.Model = nn.Softmax // any built-in name: the others are checked as usual
	return c.Validate()
}

// build loads the data set (fetching MNIST if need be) and builds the
// replica. Under the ring each replica evaluates its share of the test
// set and the figures are combined; under gossip each evaluates its own
// parameters on the whole test set.
func (j *denseBuilder) build(ctx context.Context, rank, world int) (*plan, error) {
	cfg, gossiping := &j.Config, !(*Job)(j).strategy().Lockstep()
	train, test, set, classes, err := cfg.images(ctx, rank, world)
	if err != nil {
		return nil, err
	}
	if train, test, err = replica.InputNorm(j.NewModel, train, test, classes, j.Seed); err != nil {
		return nil, err
	}
	evalRank, evalWorld := rank, world
	if gossiping {
		evalRank, evalWorld = 0, 1
	}
	rep, err := newDenseReplica(cfg, j.NewModel, test, classes, evalRank, evalWorld, set)
	if err != nil {
		return nil, err
	}
	rep.UseCombiner((*Job)(j).combiner())
	if gossiping && len(rep.Buffers()) > 0 {
		return nil, fmt.Errorf("strategy gossip with model %s: its buffers (%s …) would stay each replica's own, since gossip averages only the parameters: use the ring", rep.Model().Name(), rep.BufferTensors()[0].Name)
	}
	model := cfg.Model
	if model == "" {
		model = rep.Model().Name()
	}
	digest := "unchecked" // one replica with no checkpoint: nothing to compare with
	if world > 1 || gossiping || j.CheckpointDir != "" || j.Restore != "" {
		digest = dataDigest(train, test)
	}
	res := Result{
		Model: model, Params: len(rep.Params()), BatchSize: cfg.BatchSize, Epochs: cfg.Epochs,
		Optimizer: cfg.Optimizer, LR: cfg.LR, Momentum: cfg.Momentum, WeightDecay: cfg.WeightDecay,
		Schedule: cfg.Schedule, WarmupEpochs: cfg.WarmupEpochs, Seed: cfg.Seed, TestExamples: test.N,
		TargetAccuracy: cfg.TargetAccuracy, TargetLoss: cfg.TargetLoss, ClassNames: set.ClassNames,
	}
	if cfg.Schedule == nn.ScheduleStep {
		res.LRGamma, res.LRDecayEpochs = cfg.LRGamma, cfg.LRDecayEpochs
	}
	settings := (*Job)(j).settings(model, len(rep.Params()), world, digest)
	if rep.ArchDigest() != "" {
		// Right after the parameter count: peers (and checkpoints) of
		// another architecture are named, and a checkpoint of one is not
		// resumed into another.
		i := slices.IndexFunc(settings, func(s setting) bool { return s.Name == "params" }) + 1
		settings = slices.Insert(settings, i, setting{Name: "architecture", Value: rep.ArchDigest(), Resume: true})
	}
	p := &plan{
		rep: rep, settings: settings, shard: data.ShardSize(train.N, world, rank),
		pipeline: func(ctx context.Context, startEpoch, epochs, _ int) (*data.Pipeline, error) {
			pcfg := data.TrainConfig(rank, world, cfg.BatchSize, uint64(cfg.Seed), epochs)
			pcfg.Policy = data.ShardAuto
			pcfg.StartEpoch = startEpoch - 1 // the pipeline counts epochs from 0
			if j.NoShuffle {
				pcfg.ShuffleBuffer = 0
			}
			return data.NewPipeline(ctx, train.Dataset(), pcfg)
		},
		schedule: cfg.schedule,
		result:   res,
		header: func(steps, examples int) string {
			return fmt.Sprintf("%s: %d parameters, %d replica(s) × batch %d (global batch %d), %d steps per epoch, %d training and %d test examples",
				model, len(rep.Params()), world, cfg.BatchSize, world*cfg.BatchSize, steps, examples, test.N)
		},
		broadcastStart: true,
		perStepLoss:    true,
	}
	if st, ok := (*Job)(j).strategy().(Gossip); ok {
		p.header = func(steps, _ int) string {
			return fmt.Sprintf("%s: %d parameters, %d gossip replica(s) × batch %d, %s peer each %d step(s), %d steps per pass over a shard, %d training and %d test examples",
				model, len(rep.Params()), world, cfg.BatchSize, st.Schedule, st.Every, steps, train.N, test.N)
		}
		p.evalView = rep.Params()
		p.evaluate = func(ctx context.Context) (replica.Metrics, error) { return rep.Evaluate(ctx, LocalGroup{}) }
		p.averageModel = true
	}
	return p, nil
}

// images returns the training and test images the run uses (Config.MNIST,
// or Data opened, MNIST when empty, this rank's shard if the reader can)
// cut to the example limits, the set and its class count.
func (c *Config) images(ctx context.Context, rank, world int) (train, test *data.Images, set *data.ImageSet, classes int, err error) {
	set = c.MNIST
	if set == nil || (set.Train.Shard.World > 1 && set.Train.Shard != (data.Shard{Rank: rank, World: world})) { // an elastic generation's
		opts := c.ImageOptions(c.logger().With(zap.Int("rank", rank)).Named("data"))
		// A fetch shows its bytes where the run shows its progress.
		opts.MNIST.Progress = c.Progress
		opts.Read.Shard = data.Shard{Rank: rank, World: world} // one replica: the whole set
		if set, err = data.OpenImages(ctx, c.Data, opts); err != nil {
			return nil, nil, nil, 0, err
		}
		c.MNIST = set // an elastic run's next generations build from it
	}
	if err := replica.CheckImages(set.Train); err != nil {
		return nil, nil, nil, 0, err
	}
	return set.Train.Head(c.TrainExamples), set.Test.Head(c.TestExamples), set, set.NumClasses(), nil
}

// MNISTOptions are the options that load MNIST (DataDir,
// AllowUnverified), logging to log.
func (c *Config) MNISTOptions(log *zap.Logger) data.MNISTOptions {
	return data.MNISTOptions{Dir: c.DataDir, AllowUnverified: c.AllowUnverified, Logger: log}
}

// ImageOptions are the options with which data.OpenImages opens the
// run's image set (Data in DataFormat, or MNIST), logging to log.
func (c *Config) ImageOptions(log *zap.Logger) data.ImageOptions {
	read := c.DataRead
	read.SplitSeed = cmp.Or(read.SplitSeed, uint64(c.Seed))
	return data.ImageOptions{Format: c.DataFormat, MNIST: c.MNISTOptions(log), Read: read}
}

// schedule is the learning rate per global step at steps per epoch.
func (c *Config) schedule(steps int) (nn.Schedule, error) {
	return nn.NewSchedule(nn.ScheduleConfig{
		Kind: c.Schedule, Base: c.LR, Gamma: c.LRGamma,
		DecayEvery:  max(1, int(math.Round(c.LRDecayEpochs*float64(steps)))),
		TotalSteps:  c.Epochs * steps,
		MinLR:       c.MinLR,
		WarmupSteps: int(math.Round(c.WarmupEpochs * float64(steps))),
	})
}
