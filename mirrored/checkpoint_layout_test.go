package mirrored

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/mirrored/evaluate"
	"github.com/meshtrain/meshtrain/mirrored/internal/synth"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/sparse"
)

// headerEntry is one tensor of a safetensors header, as the format
// documents it.
type headerEntry struct {
	DType   string `json:"dtype"`
	Shape   []int  `json:"shape"`
	Offsets [2]int `json:"data_offsets"`
}

// readHeader reads a safetensors file by hand, independently of package
// checkpoint: the 8-byte little-endian header length, the JSON header,
// and the data section after it.
func readHeader(t *testing.T, path string) (map[string]headerEntry, map[string]string, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b[:8])
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &raw); err != nil {
		t.Fatal(err)
	}
	entries, meta := map[string]headerEntry{}, map[string]string{}
	for k, v := range raw {
		var err error
		if k == "__metadata__" {
			err = json.Unmarshal(v, &meta)
		} else {
			var e headerEntry
			err = json.Unmarshal(v, &e)
			entries[k] = e
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return entries, meta, b[8+n:]
}

// pytorchNames lists a model's tensors as PyTorch names them in its
// state_dict: LeNet-5 as conv1, conv2, fc1, fc2, fc3 modules, softmax
// regression as one Linear.
func pytorchNames(model string, classes, inputs int) []string {
	if model == nn.Softmax {
		return []string{fmt.Sprintf("weight %v", []int{classes, inputs}), fmt.Sprintf("bias %v", []int{classes})}
	}
	return []string{"conv1.weight [6 1 5 5]", "conv1.bias [6]", "conv2.weight [16 6 5 5]", "conv2.bias [16]",
		"fc1.weight [120 400]", "fc1.bias [120]", "fc2.weight [84 120]", "fc2.bias [84]",
		fmt.Sprintf("fc3.weight [%d 84]", classes), fmt.Sprintf("fc3.bias [%d]", classes)}
}

// TestCheckpointPyTorchLayout trains, checkpoints and reads the newest
// checkpoint's safetensors header by hand: one F32 tensor per layer under
// PyTorch's names and shapes, the optimizer's state under "optimizer.",
// the tensors tiling the data section in name order, and the parameter
// tensors in PyTorch's order being the final parameters (their SHA-256 is
// the run's). meshtrain eval of the checkpoint reports the run's accuracy.
func TestCheckpointPyTorchLayout(t *testing.T) {
	for _, tc := range []struct {
		model, optimizer    string
		rows, cols, classes int
		stateParts, scalars []string
	}{
		{nn.LeNet5, nn.Momentum, 28, 28, 10, []string{"momentum_buffer"}, nil},
		{nn.Softmax, nn.Adam, 28, 28, 10, []string{"exp_avg", "exp_avg_sq"}, []string{"optimizer.step [1]"}},
		{nn.Softmax, nn.Nesterov, 10, 12, 3, []string{"momentum_buffer"}, nil},
	} {
		t.Run(fmt.Sprintf("%s %s %dx%d %d classes", tc.model, tc.optimizer, tc.rows, tc.cols, tc.classes), func(t *testing.T) {
			mn := synth.Set(240, 60, tc.rows, tc.cols, tc.classes, rand.New(rand.NewPCG(3, 7)))
			job := testJob(t, tc.model, mn, 16, 1)
			job.Optimizer, job.LR = tc.optimizer, 0.01
			job.CheckpointDir = t.TempDir()
			sums, errs := runGroup(t, same(2, job))
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			path, _ := checkpoint.Latest(job.CheckpointDir)
			entries, meta, section := readHeader(t, path)

			params := pytorchNames(tc.model, tc.classes, tc.rows*tc.cols)
			want := slices.Clone(params)
			for _, part := range tc.stateParts {
				for _, p := range params {
					name, shape, _ := strings.Cut(p, " ")
					want = append(want, "optimizer."+name+"."+part+" "+shape)
				}
			}
			want = append(want, tc.scalars...)
			var got []string
			for _, name := range slices.Sorted(maps.Keys(entries)) {
				got = append(got, fmt.Sprintf("%s %v", name, entries[name].Shape))
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("tensors\n got %q\nwant %q", got, want)
			}
			at := 0
			for _, name := range slices.Sorted(maps.Keys(entries)) {
				e := entries[name]
				size := 4
				for _, d := range e.Shape {
					size *= d
				}
				if e.DType != "F32" || e.Offsets != [2]int{at, at + size} {
					t.Errorf("%s: %s at %v, want F32 at [%d %d]", name, e.DType, e.Offsets, at, at+size)
				}
				at += size
			}
			if at != len(section) {
				t.Errorf("tensors cover %d bytes of the %d-byte data section", at, len(section))
			}
			h := sha256.New()
			for _, p := range params {
				name, _, _ := strings.Cut(p, " ")
				e := entries[name]
				h.Write(section[e.Offsets[0]:e.Offsets[1]])
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != sums[0].Run.ParamsSHA256 {
				t.Errorf("the parameter tensors in PyTorch's order hash to %.12s…, the run's parameters to %.12s…", got, sums[0].Run.ParamsSHA256)
			}
			if meta["format"] != "meshtrain-checkpoint/3" || meta["classes"] != fmt.Sprint(tc.classes) || meta["image_size"] != fmt.Sprintf("%dx%d", tc.rows, tc.cols) {
				t.Errorf("metadata format %q classes %q image_size %q", meta["format"], meta["classes"], meta["image_size"])
			}

			ev, err := evaluate.Checkpoint(context.Background(), evaluate.Config{Checkpoint: path, MNIST: mn})
			if err != nil {
				t.Fatal(err)
			}
			if ev.Accuracy != sums[0].Run.FinalAccuracy {
				t.Errorf("eval accuracy %v, the run's final accuracy %v", ev.Accuracy, sums[0].Run.FinalAccuracy)
			}
		})
	}
}

// TestEvalOtherImageSize: a checkpoint of a model trained on 10×12 images
// evaluated on 28×28 ones is an error that says so.
func TestEvalOtherImageSize(t *testing.T) {
	job := testJob(t, nn.Softmax, synth.Set(96, 20, 10, 12, 3, rand.New(rand.NewPCG(1, 2))), 16, 1)
	job.CheckpointDir = t.TempDir()
	if _, errs := runGroup(t, same(1, job)); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	path, _ := checkpoint.Latest(job.CheckpointDir)
	_, err := evaluate.Checkpoint(context.Background(), evaluate.Config{Checkpoint: path, MNIST: synthMNIST(10, 10, 1)})
	if err == nil || !strings.Contains(err.Error(), "was trained on 10×12×1 inputs, the test set's are 28×28×1: evaluate it on the data set it was trained on") {
		t.Errorf("got %v", err)
	}
}

// toV2 rewrites a format 3 checkpoint file as meshtrain wrote format 2:
// the tensors laid end to end in their order as "params" and
// "optimizer_state", sealed with the digest.
func toV2(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tensors, meta, err := checkpoint.DecodeSafetensors(b)
	if err != nil {
		t.Fatal(err)
	}
	flat := map[string]checkpoint.Tensor{}
	for key, name := range map[string]string{"param_order": "params", "state_order": "optimizer_state"} {
		var order []string
		json.Unmarshal([]byte(meta[key]), &order)
		var buf []byte
		for _, n := range order {
			buf = append(buf, tensors[n].Data...)
		}
		if len(buf) > 0 {
			flat[name] = checkpoint.Tensor{DType: "F32", Shape: []int{len(buf) / 4}, Data: buf}
		}
		delete(meta, key)
	}
	delete(meta, "classes")
	delete(meta, "image_size")
	meta["format"] = checkpoint.FormatV2
	meta["digest"] = checkpoint.Digest(flat, meta)
	if b, err = checkpoint.EncodeSafetensors(flat, meta); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestResumeFromV2: a run resumed from a format 2 checkpoint (one flat
// vector) ends bit for bit where the uninterrupted run ends, and eval
// reads it.
func TestResumeFromV2(t *testing.T) {
	mn := synthMNIST(400, 80, 6)
	job := testJob(t, nn.Softmax, mn, 16, 3)
	full, want := checkpointedRun(t, job)
	mid := copyCheckpoint(t, full.CheckpointDir, t.TempDir(), 15, nil)
	toV2(t, mid)
	if ck, err := checkpoint.Read(mid); err != nil || ck.Layout.Params != nil || ck.Unverified {
		t.Fatalf("the v2 copy: %v, layout %v", err, ck.Layout)
	}
	resumed := job
	resumed.Restore, resumed.CheckpointDir = mid, t.TempDir()
	sums, errs := runGroup(t, same(2, resumed))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := sums[0].Run; got.ParamsSHA256 != want.ParamsSHA256 || sums[0].Peer.ResumedStep != 15 {
		t.Errorf("resumed from v2 at step %d: %s, uninterrupted: %s", sums[0].Peer.ResumedStep, got.ParamsSHA256, want.ParamsSHA256)
	}
	if _, err := evaluate.Checkpoint(context.Background(), evaluate.Config{Checkpoint: mid, MNIST: mn}); err != nil {
		t.Errorf("eval of a v2 checkpoint: %v", err)
	}
}

// TestSparseCheckpointLayout: a sparse-lr checkpoint holds "weight" [D]
// and the optimizer's per-feature state under PyTorch's names.
func TestSparseCheckpointLayout(t *testing.T) {
	const dim = 50
	train := sparseSet(t, 1, 100, dim, 4)
	for opt, want := range map[string][]checkpoint.Slot{
		"adagrad": {{Name: "optimizer.weight.sum", Shape: []int{dim}}},
		"ftrl":    {{Name: "optimizer.weight.zn", Shape: []int{dim, 2}}},
		"sgd":     nil,
	} {
		job := sparseTestJob(train, nil, dim, 10, 1, opt, sparse.ExchangeSparse)
		job.CheckpointDir = t.TempDir()
		if _, _, errs := runSparse(t, sameSparse(1, job)); errors.Join(errs...) != nil {
			t.Fatal(errors.Join(errs...))
		}
		path, _ := checkpoint.Latest(job.CheckpointDir)
		ck, err := checkpoint.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		params := []checkpoint.Slot{{Name: "weight", Shape: []int{dim}}}
		if fmt.Sprint(ck.Layout.Params) != fmt.Sprint(params) || fmt.Sprint(ck.Layout.State) != fmt.Sprint(want) {
			t.Errorf("%s: layout %v / %v, want %v / %v", opt, ck.Layout.Params, ck.Layout.State, params, want)
		}
	}
}

// TestCheckpointRecordsVersionAndNormalisation: a run's checkpoint records
// the meshtrain that wrote it and its data set's own normalisation of the
// inputs (what a PyTorch user must apply to evaluate it: pixels/scale,
// then mean and std), as strings in the safetensors metadata; MNIST's is
// its recipe, a set read with x/255 records that, a float set none.
func TestCheckpointRecordsVersionAndNormalisation(t *testing.T) {
	cases := []struct {
		name             string
		norm             data.Normalization
		scale, mean, std float64
		metaScale        string // "" when not written
	}{
		{"MNIST's recipe", data.Normalization{}, 255, data.MNISTMean, data.MNISTStd, ""},
		{"x/255", data.UnitNorm, 255, 0, 1, ""},
		{"as stored", data.NoNorm, 1, 0, 1, "1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set := synthMNIST(64, 16, 2)
			set.Train.Norm, set.Test.Norm = c.norm, c.norm
			job := testJob(t, nn.Softmax, set, 16, 1)
			job.CheckpointDir = t.TempDir()
			if _, err := Train(context.Background(), job); err != nil {
				t.Fatal(err)
			}
			all, err := checkpoint.List(job.CheckpointDir)
			if err != nil || len(all) == 0 {
				t.Fatalf("checkpoints %v, %v", all, err)
			}
			ck, err := checkpoint.Read(all[len(all)-1])
			if err != nil {
				t.Fatal(err)
			}
			if ck.Version != Version() || ck.InputScale != c.scale || ck.InputMean != c.mean || ck.InputStd != c.std {
				t.Errorf("version %q, normalisation scale %v mean %v std %v; want %q, %v, %v, %v", ck.Version, ck.InputScale, ck.InputMean, ck.InputStd, Version(), c.scale, c.mean, c.std)
			}
			b, err := os.ReadFile(all[len(all)-1])
			if err != nil {
				t.Fatal(err)
			}
			_, meta, err := checkpoint.DecodeSafetensors(b)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := meta["input_scale"]; got != c.metaScale || ok != (c.metaScale != "") {
				t.Errorf("metadata input_scale %q (present %t), want %q", got, ok, c.metaScale)
			}
			// Evaluated on test images normalised otherwise, the model's
			// figures would mean nothing: refused, naming both.
			other := synthMNIST(64, 16, 2)
			other.Test.Norm = data.Normalization{Scale: 2, Std: 1}
			_, err = evaluate.Checkpoint(context.Background(), evaluate.Config{Checkpoint: all[len(all)-1], MNIST: other})
			if err == nil || !strings.Contains(err.Error(), "trained on inputs normalised as") || !strings.Contains(err.Error(), "normalised as x/2") {
				t.Errorf("evaluating on x/2 images: %v, want a refusal naming both normalisations", err)
			}
			if _, err := evaluate.Checkpoint(context.Background(), evaluate.Config{Checkpoint: all[len(all)-1], MNIST: set}); err != nil {
				t.Errorf("evaluating on its own set: %v", err)
			}
		})
	}
}
