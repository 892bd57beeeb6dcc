package mirrored

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/mirrored/evaluate"
	"github.com/meshtrain/meshtrain/nn"
)

// bnCNN is a Job.NewModel with batch normalization: conv → BN → relu →
// pool → dense.
func bnCNN(spec nn.Spec, seed int64, shards int) (nn.Model, error) {
	return nn.NewSequential("bn-cnn", nn.Shape{H: spec.Rows, W: spec.Cols, C: 1}, seed, shards,
		nn.Conv2D{Filters: 4, Kernel: 3}, nn.BatchNormalization{}, nn.Activation{Fn: "relu"},
		nn.MaxPooling2D{Size: 2}, nn.Flatten{}, nn.Dense{Units: spec.Classes})
}

// residual is a Job.NewModel that is a graph: conv → BN → relu, then a
// residual block (conv → BN → relu → conv → BN, added to its input),
// relu, pool, dense.
func residual(spec nn.Spec, seed int64, shards int) (nn.Model, error) {
	return nn.NewGraph("residual", nn.Shape{H: spec.Rows, W: spec.Cols, C: 1}, seed, shards,
		nn.Node{Layer: nn.Conv2D{Filters: 4, Kernel: 3, Padding: nn.Same}, Inputs: []int{-1}}, // 0
		nn.Node{Layer: nn.BatchNormalization{}, Inputs: []int{0}},                             // 1
		nn.Node{Layer: nn.Activation{Fn: "relu"}, Inputs: []int{1}},                           // 2
		nn.Node{Layer: nn.Conv2D{Filters: 4, Kernel: 3, Padding: nn.Same}, Inputs: []int{2}},  // 3
		nn.Node{Layer: nn.BatchNormalization{}, Inputs: []int{3}},                             // 4
		nn.Node{Layer: nn.Activation{Fn: "relu"}, Inputs: []int{4}},                           // 5
		nn.Node{Layer: nn.Conv2D{Filters: 4, Kernel: 3, Padding: nn.Same}, Inputs: []int{5}},  // 6
		nn.Node{Layer: nn.BatchNormalization{}, Inputs: []int{6}},                             // 7
		nn.Node{Layer: nn.Add{}, Inputs: []int{7, 2}},                                         // 8
		nn.Node{Layer: nn.Activation{Fn: "relu"}, Inputs: []int{8}},                           // 9
		nn.Node{Layer: nn.MaxPooling2D{Size: 2}, Inputs: []int{9}},                            // 10
		nn.Node{Layer: nn.Flatten{}, Inputs: []int{10}},                                       // 11
		nn.Node{Layer: nn.Dense{Units: spec.Classes}, Inputs: []int{11}})                      // 12
}

// TestBuffersStayIdentical: models with batch normalization (a chain and
// a residual graph) train on 3 replicas, with gradient buckets and
// without, and end with the same parameters and the same moving
// statistics, which moved from their initial values; the statistics are
// compared every few steps with the parameters.
func TestBuffersStayIdentical(t *testing.T) {
	mn := synthMNIST(240, 60, 5)
	for _, tc := range []struct {
		name   string
		model  func(nn.Spec, int64, int) (nn.Model, error)
		bucket int
	}{
		{"chain", bnCNN, 0},
		{"chain-buckets", bnCNN, 1},
		{"residual-graph", residual, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := testJob(t, "", mn, 8, 2)
			job.NewModel, job.GradientBucket, job.HashEvery = tc.model, tc.bucket, 3
			sums, errs := runGroup(t, same(3, job))
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			first := sums[0].Run
			if first.BuffersSHA256 == "" {
				t.Fatal("no buffers hash: the model's buffers were not seen")
			}
			for r, s := range sums {
				if s.Run.ParamsSHA256 != first.ParamsSHA256 || s.Run.BuffersSHA256 != first.BuffersSHA256 {
					t.Fatalf("rank %d ends with params %s buffers %s, rank 0 with %s and %s", r,
						s.Run.ParamsSHA256, s.Run.BuffersSHA256, first.ParamsSHA256, first.BuffersSHA256)
				}
			}
			fresh, err := tc.model(nn.Spec{Rows: 28, Cols: 28, Classes: 10}, job.Seed, 2)
			if err != nil {
				t.Fatal(err)
			}
			if first.BuffersSHA256 == ParamsHash(fresh.(nn.Stateful).Buffers()) {
				t.Fatal("the moving statistics never moved")
			}
			if first.FinalAccuracy < 0.5 {
				t.Errorf("final accuracy %.3f: want above chance", first.FinalAccuracy)
			}
		})
	}
}

// TestBuffersCheckpointed: the buffers are in every checkpoint (under
// PyTorch's names, after the optimizer's state), a resumed run ends with
// the uninterrupted run's parameters and statistics, and a checkpoint
// evaluated alone scores what the run scored (evaluation uses the
// moving statistics).
func TestBuffersCheckpointed(t *testing.T) {
	job := testJob(t, "", synthMNIST(320, 80, 9), 16, 3) // 10 steps per epoch on 2 replicas
	job.NewModel = residual
	full, want := checkpointedRun(t, job)
	mid := filepath.Join(full.CheckpointDir, checkpoint.FileName(15))
	ck, err := checkpoint.Read(mid)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range ck.Layout.State {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, " "); !strings.Contains(got, "1.running_mean 1.running_var") || !strings.HasSuffix(got, "7.running_var") {
		t.Fatalf("checkpoint state tensors %q: want the buffers last, under PyTorch's names", got)
	}
	resumed := job
	resumed.Restore, resumed.CheckpointDir = mid, t.TempDir()
	sums, errs := runGroup(t, same(2, resumed))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := sums[0].Run; got.ParamsSHA256 != want.ParamsSHA256 || got.BuffersSHA256 != want.BuffersSHA256 {
		t.Fatalf("resumed run: params %s buffers %s; uninterrupted: %s and %s", got.ParamsSHA256, got.BuffersSHA256, want.ParamsSHA256, want.BuffersSHA256)
	}
	last, err := checkpoint.List(full.CheckpointDir)
	if err != nil || len(last) == 0 {
		t.Fatalf("checkpoints: %v, %v", last, err)
	}
	ev, err := evaluate.Checkpoint(context.Background(), evaluate.Config{Checkpoint: last[len(last)-1], MNIST: job.MNIST})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Accuracy != want.FinalAccuracy {
		t.Errorf("the final checkpoint scores %.4f alone, the run scored %.4f", ev.Accuracy, want.FinalAccuracy)
	}
}

// TestBuffersRefusedUnderGossip: gossip averages parameters only, so a
// model with buffers is refused by name rather than left to drift.
func TestBuffersRefusedUnderGossip(t *testing.T) {
	job := testJob(t, "", synthMNIST(120, 30, 4), 8, 1)
	job.NewModel, job.HashEvery = bnCNN, 0
	_, errs := runGossipGroup(t, gossiping(2, job, Gossip{}), nil)
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "1.running_mean") || !strings.Contains(err.Error(), "use the ring") {
			t.Fatalf("rank %d: %v, want the buffers named and the ring advised", r, err)
		}
	}
}
