package mirrored

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/data/text"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/sparse"
)

func TestDefaultConfigFor(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  Config
	}{
		{nn.LeNet5, DefaultConfig()},
		{nn.Softmax, DefaultSoftmaxConfig()},
		{SparseModel, DefaultSparseConfig()},
		{"vgg", DefaultConfig()}, // Validate names the model
	} {
		got := DefaultConfigFor(tc.model)
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.model, got, tc.want)
		}
	}
	// LeNet's recipe is the anchors' as it was; the others differ from it
	// where their sweeps said.
	if l := DefaultConfig(); l.Model != nn.LeNet5 || l.LR != 0.05 || l.BatchSize != 64 || l.Epochs != 10 || l.Optimizer != nn.SGD || l.Momentum != 0.9 {
		t.Errorf("LeNet's recipe changed: %+v", l)
	}
	if s := DefaultSoftmaxConfig(); s.Model != nn.Softmax || s.LR != 0.02 {
		t.Errorf("softmax recipe %+v", s)
	}
	if s := DefaultSparseConfig(); s.Model != SparseModel || s.LR != 0.2 || s.BatchSize != 64 || s.Epochs != 10 {
		t.Errorf("sparse recipe %+v", s)
	}
	// Every recipe is valid for its model.
	for _, m := range nn.ModelNames {
		if c := DefaultConfigFor(m); c.Validate() != nil {
			t.Errorf("%s: %v", m, c.Validate())
		}
	}
	sj := Job{Config: DefaultSparseConfig(), Sparse: &SparseConfig{Features: 10, TrainFiles: []string{"x"}, Optimizer: "adagrad"}}
	if err := sj.Validate(); err != nil {
		t.Errorf("sparse recipe: %v", err)
	}
}

// spamSlice converts the first n messages of the cached SpamAssassin
// corpus (skipping the test if it is not cached) into a training and a
// test set, split as meshtrain data text-libsvm splits them.
func spamSlice(t *testing.T, n int) (train, test data.Dataset) {
	t.Helper()
	path, err := text.FindSpamAssassin("")
	if err != nil || path == "" {
		t.Skipf("the SpamAssassin corpus is not cached (%v): meshtrain data text-libsvm --spamassassin --out DIR fetches it", err)
	}
	bag := text.BagOfWords{Features: text.DefaultBagFeatures, Values: text.BagBinary}
	type csr struct {
		rowPtr  []int
		indices []int32
		values  []float32
		labels  []float32
	}
	sets := [2]csr{{rowPtr: []int{0}}, {rowPtr: []int{0}}}
	var ex data.Example
	errEnough := errors.New("enough")
	err = text.ReadSpamAssassin(context.Background(), path, func(d text.Document) error {
		if n--; n < 0 {
			return errEnough
		}
		bag.Example(d.Text, d.Label, &ex)
		s := &sets[0]
		if text.HeldOut(d.Text, 20) {
			s = &sets[1]
		}
		s.indices, s.values = append(s.indices, ex.Indices...), append(s.values, ex.Values...)
		s.labels, s.rowPtr = append(s.labels, d.Label), append(s.rowPtr, len(s.indices))
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		t.Fatal(err)
	}
	var ds [2]data.Dataset
	for k, s := range sets {
		if ds[k], err = data.NewSparseSet(s.rowPtr, s.indices, s.values, s.labels); err != nil {
			t.Fatal(err)
		}
	}
	return ds[0], ds[1]
}

// TestSparseRecipeOnSpamAssassin: the sparse default recipe learns real
// text (2,000 SpamAssassin messages), and ends with a lower test log-loss
// than LeNet's rate, which sparse-lr used before it had its own.
func TestSparseRecipeOnSpamAssassin(t *testing.T) {
	train, test := spamSlice(t, 2000)
	run := func(lr float64) Epoch {
		cfg := DefaultSparseConfig()
		cfg.LR = lr
		job := Job{Config: cfg, Sparse: &SparseConfig{Features: text.DefaultBagFeatures, Train: train, Test: test,
			Optimizer: "adagrad", Exchange: sparse.ExchangeSparse}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sum, err := Run(ctx, job, LocalGroup{})
		if err != nil {
			t.Fatal(err)
		}
		eps := sum.Run.EpochResults
		return eps[len(eps)-1]
	}
	def, old := run(DefaultSparseConfig().LR), run(DefaultConfig().LR)
	t.Logf("%d training, %d test messages: lr %v: %.2f%% log-loss %.4f; lr %v: %.2f%% log-loss %.4f", train.Len(), test.Len(),
		DefaultSparseConfig().LR, 100*def.TestAccuracy, def.TestLoss, DefaultConfig().LR, 100*old.TestAccuracy, old.TestLoss)
	if def.TestAccuracy < 0.97 || !(def.TestLoss < old.TestLoss) {
		t.Fatalf("the default recipe ends at %.2f%% and log-loss %.4f (LeNet's rate: %.4f): want ≥ 97%% and a lower log-loss",
			100*def.TestAccuracy, def.TestLoss, old.TestLoss)
	}
}
