package mirrored

import (
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/replica"
	"github.com/meshtrain/meshtrain/nn"
)

// newDenseReplica builds cfg's model for test's image size and classes
// classes (replica.NewDense), with rank's contiguous share of the test
// set out of world.
func newDenseReplica(cfg *Config, newModel func(nn.Spec, int64, int) (nn.Model, error), test *data.Images, classes, rank, world int, set *data.ImageSet) (*replica.Dense, error) {
	lo, hi := rank*test.N/world, (rank+1)*test.N/world
	testX, testY := replica.Examples(test, lo, hi)
	return replica.NewDense(replica.DenseConfig{
		NewModel: newModel, Model: cfg.Model,
		Spec: replica.ImageSpec(test, classes),
		Norm: test.Norm.Resolve(), ClassNames: set.ClassNames, Features: set.Features,
		Seed: cfg.Seed, Shards: cfg.Shards,
		Optimizer: cfg.Optimizer, LR: cfg.LR, Momentum: cfg.Momentum, WeightDecay: cfg.WeightDecay,
		GradientBucket: cfg.GradientBucket, SyncBatchNorm: cfg.SyncBatchNorm,
		TestX: testX, TestY: testY, TestN: test.N,
		Rank: rank, World: world,
	})
}
