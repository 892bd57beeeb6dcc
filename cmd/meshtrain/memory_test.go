package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// kerasSequential writes a Keras Sequential's JSON with input shape
// shape (without the batch) and layers, each given as class and config
// (a unique name is added), and returns its path.
func kerasSequential(t *testing.T, shape string, layers ...[2]string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `{"class_name": "Sequential", "config": {"name": "s", "layers": [{"class_name": "InputLayer", "config": {"batch_input_shape": [null, %s], "name": "in"}}`, shape)
	for i, l := range layers {
		fmt.Fprintf(&b, `, {"class_name": %q, "config": {"name": "l%d", %s}}`, l[0], i, l[1])
	}
	b.WriteString(`]}, "keras_version": "2.11.0"}`)
	path := filepath.Join(t.TempDir(), "model.json")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestModelMemoryChecked: under a limit of 2 GiB (about what ulimit -v
// 4000000 leaves a meshtrain process, which has mapped some 1.8 GB of
// address space by then; set here through memoryLimit, not the
// machine's), the models that crashed the Go runtime ("fatal error: out
// of memory") are refused before any work with a usage error (exit 2)
// giving the estimate and its largest term; LeNet at its batch fits. The
// runs that pass the check stop at once (a cancelled context). The
// estimate's closeness to a measured peak is nn's
// nn/footprint's TestMatchesPeakRSS.
func TestModelMemoryChecked(t *testing.T) {
	orig := memoryLimit
	memoryLimit = func() (int64, string) { return 2 << 30, "the test's limit" }
	t.Cleanup(func() { memoryLimit = orig })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range issueModels(t) {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"meshtrain", "--log-level", "error", "train", "--epochs", "1"}, tc.args...)
			err := newApp().RunContext(ctx, args)
			var ue usageError
			switch {
			case tc.want == "" && (err == nil || strings.Contains(err.Error(), "needs about")):
				t.Fatalf("got %v, want the check passed and the run cancelled", err)
			case tc.want != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "this process may use (the test's limit)")):
				t.Fatalf("got %v, want a usage error saying %q", err, tc.want)
			}
		})
	}
}

type memoryCase struct {
	name string
	args []string
	want string // "" for a model that fits
}

// issueModels are the models of issue 32 that crashed under ulimit -v
// 4000000 (a Keras file of a Dense of 65,536 then 2,000 Dropout layers, a
// Conv2D(4000, 3) on 28×28, a 237 M-parameter MLP), a batch of a
// million, and LeNet as the recipe runs it.
func issueModels(t *testing.T) []memoryCase {
	dropouts := [][2]string{{"Dense", `"units": 65536, "activation": "relu"`}}
	for range 2000 {
		dropouts = append(dropouts, [2]string{"Dropout", `"rate": 0.1`})
	}
	softmax := [2]string{"Dense", `"units": 10, "activation": "softmax"`}
	dropouts = append(dropouts, softmax)
	return []memoryCase{
		{"Dense 65,536 then 2,000 Dropout", []string{"--model-file", kerasSequential(t, "784", dropouts...)}, "the largest part is activations and their gradients"},
		{"Conv2D(4000, 3) on 28×28", []string{"--model-file", kerasSequential(t, "28, 28, 1", [2]string{"Conv2D", `"filters": 4000, "kernel_size": 3, "activation": "relu"`},
			[2]string{"Flatten", `"data_format": "channels_last"`}, softmax)}, "the largest part is activations and their gradients"},
		{"237 M-parameter MLP", []string{"--model-file", kerasSequential(t, "784", [2]string{"Dense", `"units": 15000, "activation": "relu"`},
			[2]string{"Dense", `"units": 15000, "activation": "relu"`}, softmax)}, "the largest part is gradients (2 shards)"},
		{"lenet at a batch of a million", []string{"--model", "lenet", "--batch", "1000000"}, "model lenet with a batch of 1000000 needs about"},
		{"lenet", []string{"--model", "lenet"}, ""},
	}
}

// memoryChildEnv holds the index of the issueModels case a re-executed
// test process runs under ulimit -v 4000000.
const memoryChildEnv = "MESHTRAIN_MEMORY_CHILD"

// TestModelMemoryUnderUlimit: the same models, each in a process of its
// own under a real address-space limit (RLIMIT_AS of 4,000,000 KiB, as
// ulimit -v 4000000), the limit found by rusage.MemoryLimit: each exits
// with 2 and the figures, in a second, where the Go runtime died.
func TestModelMemoryUnderUlimit(t *testing.T) {
	if v := os.Getenv(memoryChildEnv); v != "" {
		i, _ := strconv.Atoi(v)
		tc := issueModels(t)[i]
		var rl syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_AS, &rl); err != nil {
			t.Fatal(err)
		}
		rl.Cur = 4_000_000 << 10
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &rl); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // a model that fits stops at once
		err := newApp().RunContext(ctx, append([]string{"meshtrain", "--log-level", "error", "train", "--epochs", "1"}, tc.args...))
		fmt.Printf("exit %d: %v\n", exitCode(context.Background(), err), err)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("RLIMIT_AS as Linux counts it")
	}
	for i, tc := range issueModels(t) {
		if tc.want == "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestModelMemoryUnderUlimit$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", memoryChildEnv, i))
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "exit 2: train: model") || !strings.Contains(string(out), tc.want) ||
				!strings.Contains(string(out), "ulimit -v") {
				t.Fatalf("%v after %v:\n%.3000s", err, time.Since(start), out)
			}
			t.Logf("%.400s", out[strings.Index(string(out), "exit 2"):])
		})
	}
}
