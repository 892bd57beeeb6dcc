package mirrored

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/mirrored/evaluate"
	"github.com/meshtrain/meshtrain/mirrored/internal/synth"
	"github.com/meshtrain/meshtrain/nn"
)

// TestTrainOnNPZ is the end-to-end proof that the dense path is no longer
// MNIST-shaped: a small image set written as a Keras-layout .npz (with
// npyio), named by Config.Data and so opened through data.OpenImages,
// trains the softmax model through Train above chance, with the set's
// own shape, classes and normalisation; float32 pixels holding x/255
// train to the very parameters the uint8 pixels read as x/255 do; a
// colour set trains too, its channels recorded in the checkpoint.
func TestTrainOnNPZ(t *testing.T) {
	const classes = 4
	bytesSet := func() *data.ImageSet {
		s := synth.Set(256, 64, 8, 6, classes, rand.New(rand.NewPCG(3, 7)))
		s.Train.Norm, s.Test.Norm = data.UnitNorm, data.UnitNorm
		return s
	}
	floats := func(im *data.Images) *data.Images {
		out := *im
		out.Floats, out.Pixels, out.Norm = make([]float32, len(im.Pixels)), nil, data.NoNorm
		for i, p := range im.Pixels {
			out.Floats[i] = float32(p) / 255
		}
		return &out
	}
	colour := func(im *data.Images) *data.Images {
		out := *im
		out.Channels, out.Pixels = 3, make([]uint8, 3*len(im.Pixels))
		for i, p := range im.Pixels {
			out.Pixels[3*i], out.Pixels[3*i+1], out.Pixels[3*i+2] = p, p, p
		}
		return &out
	}
	cases := []struct {
		name string
		set  func() *data.ImageSet
		norm data.Normalization
		err  string
	}{
		{"uint8", bytesSet, data.UnitNorm, ""},
		{"float32", func() *data.ImageSet {
			s := bytesSet()
			s.Train, s.Test = floats(s.Train), floats(s.Test)
			return s
		}, data.NoNorm, ""},
		{"colour", func() *data.ImageSet {
			s := bytesSet()
			s.Train, s.Test = colour(s.Train), colour(s.Test)
			return s
		}, data.UnitNorm, ""},
	}
	var params [][]float32 // of each case that trained, in order
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "set.npz")
			if err := data.WriteNPZ(path, c.set()); err != nil {
				t.Fatal(err)
			}
			job := testJob(t, nn.Softmax, nil, 16, 1)
			job.Data, job.LR = path, 0.1
			job.CheckpointDir = t.TempDir()
			sum, err := Train(context.Background(), job)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r := sum.Run; r.Steps != 256/16 || r.TestExamples != 64 || r.FinalAccuracy <= 0.6 {
				t.Errorf("%d steps, %d test examples, accuracy %.3f; want 16, 64, above chance (%.2f) by far", r.Steps, r.TestExamples, r.FinalAccuracy, 1.0/classes)
			}
			// The checkpoint records the set's shape, classes and own
			// normalisation, and evaluates on the set it names.
			last := latestCheckpoint(t, job.CheckpointDir)
			ck, err := checkpoint.Read(last)
			if err != nil {
				t.Fatal(err)
			}
			if ck.Classes != classes || ck.Rows != 8 || ck.Cols != 6 || ck.InputScale != c.norm.Scale || ck.InputMean != c.norm.Mean || ck.InputStd != c.norm.Std {
				t.Errorf("checkpoint records %d classes of %d×%d, normalisation (x/%v - %v)/%v; want %d of 8×6, %s", ck.Classes, ck.Rows, ck.Cols, ck.InputScale, ck.InputMean, ck.InputStd, classes, c.norm)
			}
			if want := map[string]int{"colour": 3}[c.name]; ck.Channels != want {
				t.Errorf("checkpoint records %d channels, want %d", ck.Channels, want)
			}
			if params = append(params, ck.Params); len(params) == 2 && !slices.Equal(params[0], params[1]) {
				t.Error("float32 pixels x/255 trained to other parameters than uint8 pixels read as x/255")
			}
			res, err := evaluate.Checkpoint(context.Background(), evaluate.Config{Checkpoint: last, Data: path})
			if err != nil {
				t.Fatal(err)
			}
			if res.Accuracy != sum.Run.FinalAccuracy || res.Examples != 64 {
				t.Errorf("evaluated accuracy %v on %d examples, the run's %v on 64", res.Accuracy, res.Examples, sum.Run.FinalAccuracy)
			}
		})
	}
}

// latestCheckpoint is the newest checkpoint in dir.
func latestCheckpoint(t *testing.T, dir string) string {
	t.Helper()
	all, err := checkpoint.List(dir)
	if err != nil || len(all) == 0 {
		t.Fatalf("checkpoints in %s: %v, %v", dir, all, err)
	}
	return all[len(all)-1]
}

// TestIDXThroughOpenerSameBits: an IDX set (MNIST's format) reached
// through data.OpenImages, by DataDir as MNIST always was or by Data
// naming its directory, trains to the very parameters of the same images
// handed over in memory, as every run before the opener did: the opener
// changes where the images come from, not a bit of what is trained.
func TestIDXThroughOpenerSameBits(t *testing.T) {
	set := synthMNIST(128, 32, 5)
	dir := t.TempDir()
	if err := data.WriteMNIST(dir, set, true); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		set  func(j *Job)
	}{
		{"in memory", func(j *Job) { j.MNIST = set }},
		{"DataDir", func(j *Job) { j.DataDir = dir }},
		{"Data", func(j *Job) { j.Data = dir }},
		{"Data, format given", func(j *Job) { j.Data, j.DataFormat = dir, data.FormatMNIST }},
	}
	var want []float32
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			job := testJob(t, nn.Softmax, nil, 16, 1)
			job.AllowUnverified, job.CheckpointDir = true, t.TempDir()
			c.set(&job)
			if _, err := Train(context.Background(), job); err != nil {
				t.Fatal(err)
			}
			ck, err := checkpoint.Read(latestCheckpoint(t, job.CheckpointDir))
			if err != nil {
				t.Fatal(err)
			}
			if want == nil {
				want = ck.Params
			} else if !slices.Equal(ck.Params, want) {
				t.Error("trained to other parameters than the set handed over in memory")
			}
			if ck.InputScale != 255 || ck.InputMean != data.MNISTMean || ck.InputStd != data.MNISTStd {
				t.Errorf("normalisation (x/%v - %v)/%v recorded, want MNIST's", ck.InputScale, ck.InputMean, ck.InputStd)
			}
		})
	}
}

// TestBadNormalizationRefused: a hand-built set whose normalisation
// cannot be applied (std 0 would make every input infinite) is refused
// before training.
func TestBadNormalizationRefused(t *testing.T) {
	set := synthMNIST(64, 16, 2)
	set.Train.Norm = data.Normalization{Scale: 255}
	_, err := Train(context.Background(), testJob(t, nn.Softmax, set, 16, 1))
	if want := "normalisation x/255/0: want a finite scale and std above 0"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want an error containing %q", err, want)
	}
}

// TestShardedReadTrainsAsWhole: replicas that each read only their shard
// of a .npz (Config.Data, data.ReadOptions.Shard) train to the very
// parameters replicas holding the whole set do, colour images among
// them: the rows a peer reads are the rows the pipeline would have
// given it.
func TestShardedReadTrainsAsWhole(t *testing.T) {
	set := synth.Set(203, 40, 6, 5, 3, rand.New(rand.NewPCG(5, 9)))
	for _, im := range []*data.Images{set.Train, set.Test} { // colour: the grey value in three channels, scaled
		px := make([]uint8, 3*len(im.Pixels))
		for i, p := range im.Pixels {
			px[3*i], px[3*i+1], px[3*i+2] = p, p/2, 255-p
		}
		im.Pixels, im.Channels, im.Norm = px, 3, data.UnitNorm
	}
	path := filepath.Join(t.TempDir(), "set.npz")
	if err := data.WriteNPZ(path, set); err != nil {
		t.Fatal(err)
	}
	run := func(fromFile bool) []string {
		var jobs []Job
		for range 3 {
			job := testJob(t, nn.Softmax, nil, 16, 2)
			if fromFile {
				job.Data = path
			} else {
				whole, err := data.OpenImages(context.Background(), path, data.ImageOptions{})
				if err != nil {
					t.Fatal(err)
				}
				job.MNIST = whole
			}
			jobs = append(jobs, job)
		}
		sums, errs := runGroup(t, jobs)
		var hashes []string
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
			hashes = append(hashes, sums[r].Run.ParamsSHA256)
		}
		return hashes
	}
	sharded, whole := run(true), run(false)
	if !slices.Equal(sharded, whole) || sharded[0] == "" {
		t.Errorf("parameters of replicas reading their shard %v, of replicas holding the whole set %v", sharded, whole)
	}
}
