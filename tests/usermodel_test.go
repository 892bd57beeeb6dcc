package tests

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/nn"
)

// linear is a model written outside meshtrain's packages, as a user would:
// multinomial logistic regression with its parameters and gradients in
// one flat buffer each (weights row-major [classes × dim], then biases),
// trained through mirrored.Run by way of Job.NewModel.
type linear struct {
	dim, classes  int
	params, grads []float32
	logits        []float64
}

func newLinear(spec nn.Spec, seed int64, _ int) (nn.Model, error) {
	dim, k := spec.Rows*spec.Cols, spec.Classes
	m := &linear{dim: dim, classes: k, params: make([]float32, k*dim+k), grads: make([]float32, k*dim+k), logits: make([]float64, k)}
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	for i := range k * dim {
		m.params[i] = float32(rng.NormFloat64() * 0.01)
	}
	return m, nil
}

func (m *linear) Name() string      { return "user-linear" }
func (m *linear) InputDim() int     { return m.dim }
func (m *linear) Classes() int      { return m.classes }
func (m *linear) Params() []float32 { return m.params }
func (m *linear) Grads() []float32  { return m.grads }
func (m *linear) Tensors() []nn.ParamTensor {
	return []nn.ParamTensor{{Name: "weight", Shape: []int{m.classes, m.dim}}, {Name: "bias", Shape: []int{m.classes}, Offset: m.classes * m.dim}}
}

// probs fills m.logits with the softmax of example x and returns the loss
// of label y.
func (m *linear) probs(x []float32, y int32) float64 {
	w, b := m.params[:m.classes*m.dim], m.params[m.classes*m.dim:]
	top := math.Inf(-1)
	for c := range m.classes {
		s := float64(b[c])
		for j, v := range x {
			s += float64(w[c*m.dim+j] * v)
		}
		m.logits[c] = s
		top = max(top, s)
	}
	var sum float64
	for c := range m.classes {
		m.logits[c] = math.Exp(m.logits[c] - top)
		sum += m.logits[c]
	}
	for c := range m.classes {
		m.logits[c] /= sum
	}
	return -math.Log(max(m.logits[y], 1e-30))
}

func (m *linear) check(x []float32, labels []int32, n int) error {
	if len(x) < n*m.dim || len(labels) < n {
		return fmt.Errorf("linear: batch of %d needs %d inputs and %d labels, got %d and %d", n, n*m.dim, n, len(x), len(labels))
	}
	for _, y := range labels[:n] {
		if y < 0 || int(y) >= m.classes {
			return fmt.Errorf("linear: label %d outside [0, %d)", y, m.classes)
		}
	}
	return nil
}

func (m *linear) ForwardBackward(x []float32, labels []int32, n int) (float64, error) {
	if err := m.check(x, labels, n); err != nil {
		return 0, err
	}
	clear(m.grads)
	w := m.grads[:m.classes*m.dim]
	b := m.grads[m.classes*m.dim:]
	var loss float64
	for i := range n {
		xi := x[i*m.dim : (i+1)*m.dim]
		loss += m.probs(xi, labels[i])
		for c := range m.classes {
			d := m.logits[c]
			if int32(c) == labels[i] {
				d--
			}
			d /= float64(n)
			b[c] += float32(d)
			for j, v := range xi {
				w[c*m.dim+j] += float32(d) * v
			}
		}
	}
	return loss / float64(n), nil
}

func (m *linear) Evaluate(x []float32, labels []int32, n int) (float64, int, error) {
	if err := m.check(x, labels, n); err != nil {
		return 0, 0, err
	}
	var loss float64
	correct := 0
	for i := range n {
		loss += m.probs(x[i*m.dim:(i+1)*m.dim], labels[i])
		best := 0
		for c := range m.classes {
			if m.logits[c] > m.logits[best] {
				best = c
			}
		}
		if int32(best) == labels[i] {
			correct++
		}
	}
	return loss, correct, nil
}

// bands is a small learnable data set: class c lights up the c-th of four
// bands of an 8×8 image.
func bands(ntrain, ntest int) *data.MNIST {
	rng := rand.New(rand.NewPCG(3, 4))
	gen := func(n int) *data.Images {
		im := &data.Images{N: n, Rows: 8, Cols: 8, Pixels: make([]uint8, n*64), Labels: make([]uint8, n)}
		for i := range n {
			c := rng.IntN(4)
			im.Labels[i] = uint8(c)
			for j := range 64 {
				im.Pixels[i*64+j] = uint8(rng.IntN(60))
				if j/16 == c {
					im.Pixels[i*64+j] = uint8(150 + rng.IntN(100))
				}
			}
		}
		return im
	}
	return &data.MNIST{Train: gen(ntrain), Test: gen(ntest), Classes: 4}
}

func userJob(mn *data.MNIST) mirrored.Job {
	cfg := mirrored.DefaultConfig()
	cfg.Model, cfg.MNIST, cfg.Epochs, cfg.BatchSize, cfg.LR = "", mn, 2, 16, 0.1
	return mirrored.Job{Config: cfg, NewModel: newLinear, HashEvery: 5}
}

// TestUserModelInMemory trains a model defined in this package through
// mirrored.Run on 3 replicas of the in-memory network: the replicas end
// bitwise identical, the model learns, and the summary names it.
func TestUserModelInMemory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 3
	rec := &recorder{}
	net := collective.NewMemNetwork(n)
	sums, errs := make([]*mirrored.Summary, n), make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		c, err := collective.New(net.Transport(r), collective.Options{Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		job := userJob(bands(480, 120))
		if r == 0 {
			job.Observers = []mirrored.Observer{rec}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[r], errs[r] = mirrored.Run(ctx, job, mirrored.NewGroup(c))
		}()
	}
	wg.Wait()
	for r := range n {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if sums[r].Run.ParamsSHA256 != sums[0].Run.ParamsSHA256 {
			t.Fatalf("rank %d ended with parameters %s, rank 0 with %s", r, sums[r].Run.ParamsSHA256, sums[0].Run.ParamsSHA256)
		}
	}
	res := sums[0].Run
	if res.Model != "user-linear" || res.Params != 4*64+4 || res.FinalAccuracy < 0.9 {
		t.Fatalf("model %q with %d parameters reached %.3f, want user-linear, 260, ≥ 0.9", res.Model, res.Params, res.FinalAccuracy)
	}
	// The caller's observer saw the run: start, every step, both epochs,
	// the end, and was closed once.
	kinds := map[string]int{}
	for _, e := range rec.events {
		kinds[e.Kind]++
	}
	if len(rec.events) == 0 || rec.events[0].Kind != mirrored.EventStart || rec.events[len(rec.events)-1].Kind != mirrored.EventDone ||
		kinds[mirrored.EventEpoch] != 2 || kinds[mirrored.EventStep] != res.Steps || rec.closed != 1 {
		t.Fatalf("observer saw %v (first/last of %d events), closed %d times; want start…done, 2 epochs, %d steps, closed once", kinds, len(rec.events), rec.closed, res.Steps)
	}
	// One replica on the whole batch: the same model trained by Train.
	one, err := mirrored.Train(ctx, userJob(bands(480, 120)))
	if err != nil || one.Run.FinalAccuracy < 0.9 {
		t.Fatalf("Train: %v (accuracy %v)", err, one)
	}
}

// TestUserModelOverLibp2p trains the user's model on 2 libp2p peers over
// TLS, under the ring and under gossip, with checkpoints under the ring.
func TestUserModelOverLibp2p(t *testing.T) {
	for _, st := range []mirrored.Strategy{mirrored.Ring{}, mirrored.Gossip{Schedule: "rotate"}} {
		t.Run(st.Name(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dir := t.TempDir()
			sums := make([]*mirrored.Summary, 2)
			errs := onPeers(t, ctx, 2, st.Name(), st.Lockstep(), func(r int, log *zap.Logger, m *collective.Member, _ *p2p.Transport) error {
				job := userJob(bands(480, 120))
				job.Strategy, job.Logger = st, log
				if st.Lockstep() {
					job.CheckpointDir = dir
				}
				var err error
				sums[r], err = mirrored.Run(ctx, job, mirrored.NewGroup(m.Comm))
				return err
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			for r, s := range sums {
				if s.Run.Model != "user-linear" || s.Run.FinalAccuracy < 0.85 {
					t.Fatalf("rank %d: model %q reached %.3f", r, s.Run.Model, s.Run.FinalAccuracy)
				}
				if (s.Gossip != nil) != !st.Lockstep() {
					t.Fatalf("rank %d: gossip report %v under %s", r, s.Gossip, st.Name())
				}
			}
			if !st.Lockstep() {
				return
			}
			if sums[0].Run.ParamsSHA256 != sums[1].Run.ParamsSHA256 {
				t.Fatalf("ring replicas differ: %s and %s", sums[0].Run.ParamsSHA256, sums[1].Run.ParamsSHA256)
			}
			files, err := checkpoint.List(dir)
			if err != nil || len(files) == 0 {
				t.Fatalf("no checkpoint of the user's model in %s (%v)", dir, err)
			}
			ck, err := checkpoint.Read(files[len(files)-1])
			if err != nil || ck.Model != "user-linear" || len(ck.Layout.Params) != 2 || ck.Layout.Params[0].Name != "weight" {
				t.Fatalf("checkpoint %s: %v, model %q, layout %+v", files[len(files)-1], err, ck.Model, ck.Layout.Params)
			}
		})
	}
}

// recorder is a caller's Observer that is also an io.Closer.
type recorder struct {
	events []mirrored.Event
	closed int
}

func (r *recorder) Observe(e mirrored.Event) error { r.events = append(r.events, e); return nil }
func (r *recorder) Close() error                   { r.closed++; return nil }

// TestExampleProgram runs the example program: a model composed of nn's
// layers, trained through mirrored.Run on three replicas that end
// identical.
func TestExampleProgram(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "run", "github.com/meshtrain/meshtrain/mirrored/example/usermodel").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "replicas identical: true") || !strings.Contains(string(out), "small-cnn") {
		t.Fatalf("the example program: %v\n%s", err, out)
	}
}
