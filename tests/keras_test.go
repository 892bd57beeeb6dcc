package tests

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/internal/longtest"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/nn/keras"
)

// kerasFile is a model file of nn/keras's tests, by absolute path.
func kerasFile(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "nn", "keras", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// evalJSON is meshtrain eval --json's output.
type evalJSON struct {
	Model    string  `json:"model"`
	Step     int     `json:"step"`
	Examples int     `json:"examples"`
	Correct  int     `json:"correct"`
	Accuracy float64 `json:"test_accuracy"`
}

// evalCheckpoint runs meshtrain eval --json on the newest checkpoint in
// dir, with no model file: the checkpoint says what the model is.
func evalCheckpoint(t *testing.T, ctx context.Context, dir string, testExamples string) (string, evalJSON) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "ckpt-*.safetensors"))
	if len(files) == 0 {
		t.Fatalf("no checkpoint in %s", dir)
	}
	path := files[len(files)-1]
	r := meshtrain(ctx, nil, "eval", "--checkpoint", path, "--test-examples", testExamples, "--json")
	if r.err != nil {
		t.Fatal(r)
	}
	var ev evalJSON
	if err := json.Unmarshal([]byte(r.stdout), &ev); err != nil {
		t.Fatalf("eval's JSON: %v\n%s", err, r)
	}
	return path, ev
}

// TestKerasModelFile trains models read from Keras files: the classic
// MNIST CNN from tf.keras 2.x's to_json on 2 peers through launch (a few
// steps, checkpointed; eval rebuilds the model from the checkpoint alone
// and scores what the run scored), and the course's LeNet from a
// TensorFlow.js model.json through train; a file with an unsupported layer
// exits 2 naming it, before any work.
func TestKerasModelFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ckdir := t.TempDir()
	sum := filepath.Join(t.TempDir(), "summary.json")
	cnn := kerasFile(t, "mnist_cnn_tfkeras2.json")
	r := meshtrain(ctx, nil, "launch", "-n", "2", "--model-file", cnn, "--epochs", "1", "--batch", "32",
		"--train-examples", "1280", "--test-examples", "500", "--checkpoint-dir", ckdir, "--summary", sum)
	if r.err != nil {
		t.Fatal(r)
	}
	for _, want := range []string{"[launch] keras: 1199882 parameters, 2 replica(s) × batch 32 (global batch 64), 20 steps per epoch",
		"[launch] epoch 1  step 20/20", "parameters identical on every peer"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("launch's output lacks %q\n%s", want, r)
		}
	}
	s := readSummary(t, sum)
	checkPeers(t, s, 2, 0.3) // 20 steps of a CNN from scratch
	if s.Run.Model != "keras" || s.Run.Params != 1199882 {
		t.Errorf("summary: model %q, %d parameters", s.Run.Model, s.Run.Params)
	}
	_, ev := evalCheckpoint(t, ctx, ckdir, "500")
	if ev.Model != "keras" || ev.Step != s.Run.Steps || ev.Accuracy != s.Run.FinalAccuracy {
		t.Errorf("eval of the last checkpoint: %+v; the run: accuracy %v at step %d", ev, s.Run.FinalAccuracy, s.Run.Steps)
	}

	// The fixture's weightsManifest names weight files it comes without:
	// the architecture alone is trained.
	r = meshtrain(ctx, nil, "train", "--model-file", kerasFile(t, "lenet_tfjs_model.json"), "--ignore-weights", "--epochs", "1",
		"--train-examples", "6000", "--test-examples", "1000")
	if r.err != nil {
		t.Fatal(r)
	}
	if !strings.Contains(r.stdout, "keras: 61706 parameters, 1 replica(s)") || !strings.Contains(r.stdout, "done: 1 epochs, 93 steps, final test accuracy") {
		t.Errorf("train's output:\n%s", r)
	}

	lstm := kerasFile(t, "unsupported_lstm.json")
	for _, cmd := range []string{"train", "launch"} {
		r = meshtrain(ctx, nil, cmd, "--model-file", lstm, "--epochs", "1")
		want := `layer 1 "lstm" (LSTM): LSTM is not supported: meshtrain reads InputLayer, Conv2D`
		if exitCode(r.err) != 2 || !strings.Contains(r.stderr, want) || strings.Contains(r.stdout, "[launch] rank") {
			t.Errorf("%s with an unsupported layer: exit %d, want 2 naming the layer before any work\n%s", cmd, exitCode(r.err), r)
		}
	}
}

// TestWorkersWithDifferentKerasFiles starts two workers by hand, given
// Keras files of the same parameters but another activation: both exit
// at start-up naming the architectures and the ranks, as for any setting.
// Two files of one model in tf.keras 2.x's and Keras 3's forms agree.
func TestWorkersWithDifferentKerasFiles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	lenet := kerasFile(t, "lenet_tfjs_model.json")
	b, err := os.ReadFile(lenet)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(string(b), `"activation": "relu"`)
	tanh := filepath.Join(t.TempDir(), "lenet_tanh.json")
	if err := os.WriteFile(tanh, []byte(string(b[:i])+`"activation": "tanh"`+string(b[i+len(`"activation": "relu"`):])), 0o644); err != nil {
		t.Fatal(err)
	}
	digest := func(path string) string {
		m, err := keras.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		d, err := m.Arch.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	run := func(files [2]string) [2]result {
		peers := freePorts(t, 2)
		secret := "MESHTRAIN_CLUSTER_SECRET=" + hex.EncodeToString([]byte("an e2e test secret, 32 bytes...."))
		var results [2]result
		var wg sync.WaitGroup
		for r := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[r] = meshtrain(ctx, []string{secret, "TF_CONFIG=" + tfConfig(peers, r)},
					"worker", "--model-file", files[r], "--ignore-weights", "--epochs", "1", "--batch", "32", "--train-examples", "640", "--test-examples", "200",
					"--collective-timeout", "20s")
			}()
		}
		wg.Wait()
		return results
	}
	want := "the peers were started with different settings: architecture is " + digest(lenet) + " on rank 0 but " + digest(tanh) + " on rank 1"
	for r, res := range run([2]string{lenet, tanh}) {
		if res.err == nil || !strings.Contains(res.stderr, want) || strings.Contains(res.stderr, "params is") {
			t.Errorf("rank %d does not name the architectures (and only them):\n%s\nwant %q", r, res, want)
		}
	}
	// The same CNN in two forms, two of its steps.
	if digest(kerasFile(t, "mnist_cnn_tfkeras2.json")) != digest(kerasFile(t, "mnist_cnn_keras3.json")) {
		t.Fatal("the CNN's two files differ")
	}
}

// torchPython returns a Python 3 that imports torch and numpy, or "" and
// what was tried.
func torchPython() (string, string) {
	var tried []string
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		cmd := exec.Command(path, "-c", "import torch, numpy")
		cmd.Env = append(os.Environ(), "OPENBLAS_NUM_THREADS=1")
		if err := cmd.Run(); err == nil {
			return path, ""
		}
		tried = append(tried, path)
	}
	return "", strings.Join(tried, ", ")
}

// TestLongCheckpointLoadsIntoPyTorch: a checkpoint of a model read from a
// Keras file loads into the torch.nn.Sequential built from the same
// layers with load_state_dict(strict=True) (tests/testdata/torch_eval.py
// builds it from the architecture the checkpoint records), which then
// scores what meshtrain eval scores. Skipped where PyTorch is not
// installed (Debian: apt-get install python3-torch).
func TestLongCheckpointLoadsIntoPyTorch(t *testing.T) {
	longtest.Require(t, "PyTorch loading four checkpoints")
	py, tried := torchPython()
	if py == "" {
		t.Skipf("PyTorch is not installed (no python3 that imports torch and numpy; tried %s): install it (Debian: apt-get install python3-torch) to check meshtrain's checkpoints against torch.nn.Sequential", tried)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	mnist, err := data.EnsureMNIST(ctx, data.MNISTOptions{})
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "torch_eval.py"))
	if err != nil {
		t.Fatal(err)
	}
	const testExamples = "2000"
	for _, tc := range []struct {
		file    string
		train   string
		modules string
	}{
		// conv, max-pooling, dropout, softmax
		{"mnist_cnn_tfkeras2.json", "1280", "Conv2d ReLU Conv2d ReLU MaxPool2d Dropout Flatten Linear ReLU Dropout Linear Softmax"},
		// same padding, average pooling
		{"lenet_tfjs_model.json", "6000", "SameConv2d ReLU AvgPool2d Conv2d ReLU AvgPool2d Flatten Linear ReLU Linear ReLU Linear Softmax"},
		// a vector input
		{"mnist_mlp_keras22.json", "3000", "Linear ReLU Dropout Linear ReLU Dropout Linear Softmax"},
		// a Functional chain, logits out
		{"functional_chain_keras3.json", "3000", "SameConv2d ReLU MaxPool2d Flatten Dropout Linear"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			ckdir := t.TempDir()
			r := meshtrain(ctx, nil, "launch", "-n", "1", "--model-file", kerasFile(t, tc.file), "--ignore-weights", "--epochs", "1", "--batch", "32",
				"--train-examples", tc.train, "--test-examples", testExamples, "--checkpoint-dir", ckdir)
			if r.err != nil {
				t.Fatal(r)
			}
			path, ev := evalCheckpoint(t, ctx, ckdir, testExamples)
			cmd := exec.CommandContext(ctx, py, script, path, mnist, testExamples)
			cmd.Env = append(os.Environ(), "OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1")
			out, err := cmd.Output()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("%s: %v\n%s", script, err, ee.Stderr)
			}
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Correct, Examples int
				Modules           []string
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			t.Logf("%s: PyTorch %d/%d correct, meshtrain eval %d/%d (%.2f%%)", tc.file, got.Correct, got.Examples, ev.Correct, ev.Examples, 100*ev.Accuracy)
			if strings.Join(got.Modules, " ") != tc.modules {
				t.Errorf("torch.nn.Sequential of %s, want %s", got.Modules, tc.modules)
			}
			// The same function of the same parameters; float32 sums in
			// another order may tip an example whose two best scores tie.
			if got.Examples != ev.Examples || got.Correct < ev.Correct-1 || got.Correct > ev.Correct+1 {
				t.Errorf("PyTorch scores %d/%d, meshtrain eval %d/%d", got.Correct, got.Examples, ev.Correct, ev.Examples)
			}
		})
	}
}

// TestKerasCompileSettings: a model file's recorded compile settings
// (TF.js's model.save with includeOptimizer: Adam 0.002, categorical
// cross-entropy) train the model through train, said in one line and
// recorded in the summary; --lr given wins over the file's; a loss
// meshtrain cannot honour (mean squared error) exits 2 naming it, before
// any work.
func TestKerasCompileSettings(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adam := kerasFile(t, "compile_adam_tfjs_model.json")
	for _, tc := range []struct {
		flags []string
		line  string
		lr    float64
	}{
		{nil, "optimizer: adam lr 0.002, constant schedule; loss categorical_crossentropy (the model file's compile settings (trainingConfig): Adam lr 0.002; --optimizer, --lr, --momentum and --lr-schedule override)\n", 0.002},
		{[]string{"--lr", "0.001"}, "optimizer: adam lr 0.001, constant schedule; loss categorical_crossentropy (--lr given; the rest from the model file's compile settings (trainingConfig): Adam lr 0.002)\n", 0.001},
	} {
		sum := filepath.Join(t.TempDir(), "summary.json")
		r := meshtrain(ctx, nil, append([]string{"train", "--model-file", adam, "--epochs", "1", "--batch", "32",
			"--train-examples", "640", "--test-examples", "200", "--summary", sum}, tc.flags...)...)
		if r.err != nil {
			t.Fatal(r)
		}
		if !strings.Contains(r.stdout, tc.line) {
			t.Errorf("train's output lacks %q\n%s", tc.line, r)
		}
		b, err := os.ReadFile(sum)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Optimizer    string
			Schedule     string `json:"lr_schedule"`
			LR           float64
			WarmupEpochs float64                `json:"warmup_epochs"`
			PerEpoch     []struct{ LR float64 } `json:"per_epoch"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if s.Optimizer != "adam" || s.LR != tc.lr || s.Schedule != "constant" || s.WarmupEpochs != 0 || len(s.PerEpoch) != 1 || s.PerEpoch[0].LR != tc.lr {
			t.Errorf("summary: %+v, want adam at a constant %v without warm-up", s, tc.lr)
		}
	}
	r := meshtrain(ctx, nil, "train", "--model-file", kerasFile(t, "compile_rmsprop_mse_tfjs_model.json"), "--epochs", "1", "--data-dir", filepath.Join(t.TempDir(), "none"))
	want := `its compile settings: "trainingConfig": loss: mean_squared_error: meshtrain trains classifiers with cross-entropy`
	if exitCode(r.err) != 2 || !strings.Contains(r.stderr, want) || strings.Contains(r.stdout, "epoch") {
		t.Errorf("a file compiled with mean squared error: exit %d, want 2 naming the loss before any work\n%s", exitCode(r.err), r)
	}
}
