package mirrored

import (
	"context"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/sparse"
)

// The test helpers of package mirrored, for its external tests
// (observers_test.go: package mirrored_test, which can import
// mirrored/observe, itself an importer of mirrored).

func SynthMNIST(ntrain, ntest int, seed uint64) *data.MNIST { return synthMNIST(ntrain, ntest, seed) }

func NewTestJob(t *testing.T, model string, mn *data.MNIST, batch, epochs int) Job {
	return testJob(t, model, mn, batch, epochs)
}

func RunGroup(t *testing.T, jobs []Job) ([]*Summary, []error) { return runGroup(t, jobs) }

func Same(n int, j Job) []Job { return same(n, j) }

func SparseSet(t *testing.T, seed uint64, n, dim, k int) *data.SparseSet {
	return sparseSet(t, seed, n, dim, k)
}

func SparseTestJob(train, test data.Dataset, dim, batch, epochs int, optimizer string, exch sparse.Exchange) Job {
	return sparseTestJob(train, test, dim, batch, epochs, optimizer, exch)
}

func RunSparse(t *testing.T, jobs []Job) ([]*Summary, [][]float32, []error) {
	return runSparse(t, jobs)
}

// OnMemCluster runs run on n replicas over an in-memory network
// (onMemCluster without wiring).
func OnMemCluster(t *testing.T, n int, deadline time.Duration, run func(ctx context.Context, r int, c *collective.Comm) error) []error {
	_, errs := onMemCluster(t, n, deadline, nil, func(ctx context.Context, r int, c *collective.Comm) (struct{}, error) {
		return struct{}{}, run(ctx, r, c)
	})
	return errs
}
