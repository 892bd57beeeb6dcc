package footprint

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/nn"
)

// memoryModels are the models whose Footprint TestMatchesPeakRSS
// checks against a process's measured peak: one where the parameters
// and the optimizer dominate, one where a convolution's activations do,
// LeNet at a large batch.
var memoryModels = map[string]struct {
	arch  nn.Architecture
	batch int
	opt   string
}{
	"mlp": {nn.Architecture{Name: "mlp", Input: nn.Shape{C: 784}, Layers: []nn.LayerSpec{
		nn.Dense{Units: 2048, Init: nn.He}, nn.Activation{Fn: "relu"}, nn.Dense{Units: 2048, Init: nn.He}, nn.Activation{Fn: "relu"}, nn.Dense{Units: 10, Init: nn.Glorot}}}, 256, nn.Adam},
	"conv": {nn.Architecture{Name: "conv", Input: nn.Shape{H: 28, W: 28, C: 1}, Layers: []nn.LayerSpec{
		nn.Conv2D{Filters: 64, Kernel: 3, Padding: nn.Same, Init: nn.He}, nn.Activation{Fn: "relu"}, nn.Flatten{}, nn.Dense{Units: 10, Init: nn.Glorot}}}, 256, nn.Momentum},
	"lenet": {lenet(), 2048, nn.Momentum},
	"base":  {nn.Architecture{Name: "base", Input: nn.Shape{C: 4}, Layers: []nn.LayerSpec{nn.Flatten{}, nn.Dense{Units: 2, Init: nn.Glorot}}}, 1, nn.SGD},
}

// lenet is LeNet-5's architecture, as nn builds it.
func lenet() nn.Architecture {
	m, err := nn.NewModel(nn.LeNet5, 1)
	if err != nil {
		panic(err)
	}
	return m.(*nn.Sequential).Architecture()
}

// memoryChildEnv names the model a re-executed test process trains one
// step of, reporting its peak RSS.
const memoryChildEnv = "MESHTRAIN_NN_MEMORY_CHILD"

// TestMatchesPeakRSS: a process that builds a model and runs a
// training step and an optimizer update peaks, above a process that does
// the same for a model of a few parameters, at about the Footprint
// estimated before (VmHWM, the kernel's count of the resident peak). The
// estimate must cover the measure (never under by more than 10%) and not
// be more than twice it, so that a limit it refuses at is one the run
// would have come near.
func TestMatchesPeakRSS(t *testing.T) {
	if name := os.Getenv(memoryChildEnv); name != "" {
		memoryChild(t, name)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("VmHWM is Linux's")
	}
	if testing.Short() {
		t.Skip("runs four processes")
	}
	peak := func(name string) int64 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMatchesPeakRSS$", "-test.v")
		cmd.Env = append(os.Environ(), memoryChildEnv+"="+name, "GOMAXPROCS=2")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "peak "); ok {
				b, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
		}
		t.Fatalf("%s: no peak in\n%s", name, out)
		return 0
	}
	base := peak("base")
	for _, name := range []string{"mlp", "conv", "lenet"} {
		m := memoryModels[name]
		f, err := Of(m.arch, Plan{Batch: m.batch, OptimizerCopies: OptimizerCopies(m.opt, 0.9)})
		if err != nil {
			t.Fatal(err)
		}
		got := peak(name) - base
		ratio := float64(f.Total()) / float64(got)
		t.Logf("%s, batch %d, %s: estimated %s (%s), measured %s above a tiny model's peak (%s): estimate/measure %.2f",
			name, m.batch, m.opt, Bytes(f.Total()), f, Bytes(got), Bytes(base), ratio)
		if ratio < 0.9 || ratio > 2 {
			t.Errorf("%s: estimate/measure %.2f, want 0.9 to 2", name, ratio)
		}
	}
}

// memoryChild builds model name, runs a training step, an update and an
// evaluation, and prints the process's peak RSS.
func memoryChild(t *testing.T, name string) {
	m := memoryModels[name]
	model, err := m.arch.New(1, nn.DefaultShards)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := nn.NewOptimizer(m.opt, nn.OptimizerConfig{Params: len(model.Params()), LR: 0.01, Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, m.batch*model.InputDim())
	for i := range x {
		x[i] = float32(i%7) / 7
	}
	labels := make([]int32, m.batch)
	for step := range 2 {
		for i := range labels {
			labels[i] = int32((i + step) % model.Classes())
		}
		if _, err := model.ForwardBackward(x, labels, m.batch); err != nil {
			t.Fatal(err)
		}
		opt.Step(model.Params(), model.Grads())
	}
	if _, _, err := model.Evaluate(x, labels, m.batch); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("peak %d\n", vmHWM(t))
}

// vmHWM is /proc/self/status's VmHWM in bytes.
func vmHWM(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) >= 2 && fs[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(fs[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}
