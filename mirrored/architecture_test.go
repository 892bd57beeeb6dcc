package mirrored

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/mirrored/evaluate"
	"github.com/meshtrain/meshtrain/nn"
)

// mlp is a small Sequential for synthMNIST's 28×28 images, with dropout
// rate rate: models of different rates have the same parameters and
// different architectures.
func mlp(rate float64) nn.Architecture {
	return nn.Architecture{Name: "mlp", Input: nn.Shape{H: 28, W: 28, C: 1}, Layers: []nn.LayerSpec{
		nn.Flatten{},
		nn.Dense{Units: 16, KernelInit: &nn.Initializer{Kind: nn.InitVarianceScaling, Scale: 2, Mode: "fan_in", Distribution: "uniform"}},
		nn.Activation{Fn: "relu"},
		nn.Dropout{Rate: rate},
		nn.Dense{Units: 10},
		nn.Activation{Fn: "softmax"},
	}}
}

// archJob is testJob training arch through Job.NewModel.
func archJob(t *testing.T, arch nn.Architecture) Job {
	job := testJob(t, "", synthMNIST(480, 80, 11), 16, 2)
	job.Model = "keras"
	job.NewModel = func(spec nn.Spec, seed int64, shards int) (nn.Model, error) { return arch.New(seed, shards) }
	return job
}

// TestArchitectureSetting: replicas given Sequentials of different
// architectures (the same parameter count) are named at start-up; the
// built-in models and NewModel models that are not Sequentials have no
// architecture setting.
func TestArchitectureSetting(t *testing.T) {
	a, b := mlp(0.25), mlp(0.5)
	da, _ := a.Digest()
	db, _ := b.Digest()
	jobs := []Job{archJob(t, a), archJob(t, a), archJob(t, b)}
	_, errs := runGroup(t, jobs)
	for r, err := range errs {
		want := fmt.Sprintf("architecture is %s on ranks 0, 1 but %s on rank 2", da, db)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "params is") {
			t.Errorf("rank %d: %v\nwant it to name the architectures: %s", r, err, want)
		}
	}
	for _, tc := range []struct {
		name string
		job  Job
		want bool
	}{
		{"sequential", archJob(t, a), true},
		{"built-in", testJob(t, nn.Softmax, synthMNIST(100, 20, 1), 16, 1), false},
		{"built-in through NewModel", func() Job {
			j := testJob(t, nn.Softmax, synthMNIST(100, 20, 1), 16, 1)
			j.NewModel = func(spec nn.Spec, seed int64, shards int) (nn.Model, error) {
				m, err := nn.NewModelFor(nn.Softmax, spec, seed, shards)
				return struct{ nn.Model }{m}, err // not a Sequential: no Architecture
			}
			return j
		}(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.job.build(context.Background(), LocalGroup{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range p.settings {
				names = append(names, s.Name)
			}
			got := strings.Contains(strings.Join(names, " "), "params architecture replicas")
			if got != tc.want {
				t.Errorf("settings %v: architecture after params %v, want %v", names, got, tc.want)
			}
		})
	}
}

// TestCheckpointRecordsArchitecture: a NewModel Sequential's checkpoint
// records its architecture, so evaluate.Checkpoint rebuilds the model from
// the checkpoint alone and scores what the run scored; a run of another
// architecture does not resume from it, naming the setting; eval given
// another architecture refuses it. Built-in models record none.
func TestCheckpointRecordsArchitecture(t *testing.T) {
	arch := mlp(0.25)
	job, res := checkpointedRun(t, archJob(t, arch))
	path, err := checkpoint.Latest(job.CheckpointDir)
	if err != nil || path == "" {
		t.Fatalf("no checkpoint: %v", err)
	}
	ck, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	back, err := nn.ParseArchitecture([]byte(ck.Architecture))
	if err != nil {
		t.Fatalf("metadata architecture %q: %v", ck.Architecture, err)
	}
	d0, _ := arch.Digest()
	if d, _ := back.Digest(); d != d0 || ck.Model != "keras" || ck.Layout.Params[0].Name != "1.weight" {
		t.Errorf("checkpoint of model %s, architecture %s (want %s), tensors %v", ck.Model, d, d0, ck.Layout.Params)
	}
	ev, err := evaluate.Checkpoint(context.Background(), evaluate.Config{Checkpoint: path, MNIST: job.MNIST})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Accuracy != res.FinalAccuracy || ev.Step != res.Steps {
		t.Errorf("eval: accuracy %v at step %d; the run: %v at %d", ev.Accuracy, ev.Step, res.FinalAccuracy, res.Steps)
	}
	if _, err := evaluate.Checkpoint(context.Background(), evaluate.Config{Checkpoint: path, MNIST: job.MNIST, Architecture: &arch}); err != nil {
		t.Errorf("eval with the checkpoint's architecture: %v", err)
	}
	other := mlp(0.5)
	_, err = evaluate.Checkpoint(context.Background(), evaluate.Config{Checkpoint: path, MNIST: job.MNIST, Architecture: &other})
	if err == nil || !strings.Contains(err.Error(), "not a checkpoint of this model") {
		t.Errorf("eval with another architecture: %v", err)
	}

	// Resuming into another architecture of the same parameter count.
	again := archJob(t, other)
	again.CheckpointDir = job.CheckpointDir
	again.Epochs = 3
	_, errs := runGroup(t, same(2, again))
	if err := errors.Join(errs...); err == nil || !strings.Contains(err.Error(), "was written by another configuration") || !strings.Contains(err.Error(), "architecture is ") {
		t.Errorf("resume into another architecture: %v", err)
	}

	// The built-in models keep their checkpoints as they were.
	lj, _ := checkpointedRun(t, testJob(t, nn.Softmax, synthMNIST(200, 40, 2), 16, 1))
	lp, _ := checkpoint.Latest(lj.CheckpointDir)
	if lck, err := checkpoint.Read(lp); err != nil || lck.Architecture != "" {
		t.Errorf("softmax's checkpoint: architecture %q, %v", lck.Architecture, err)
	}
}
