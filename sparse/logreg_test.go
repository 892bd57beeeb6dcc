package sparse

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomBatch returns rows with nnz features each drawn from [0, dim)
// (duplicates within a row possible) and labels in the given encoding.
func randomBatch(r *rand.Rand, rows, nnz, dim int, zeroOne bool) (CSR, []float32) {
	var x CSR
	x.Reset()
	labels := make([]float32, rows)
	idx := make([]int32, nnz)
	val := make([]float32, nnz)
	for i := 0; i < rows; i++ {
		for k := range idx {
			idx[k] = int32(r.IntN(dim))
			val[k] = float32(r.NormFloat64())
		}
		n := 1 + r.IntN(nnz)
		x.AppendRow(idx[:n], val[:n])
		labels[i] = 1
		if r.IntN(2) == 0 {
			labels[i] = -1
			if zeroOne {
				labels[i] = 0
			}
		}
	}
	return x, labels
}

// denseLoss is the reference: mean log-loss and its gradient computed over
// dense rows in float64.
func denseLoss(x CSR, labels []float32, w []float64) (float64, []float64) {
	grad := make([]float64, len(w))
	var loss float64
	for r := 0; r < x.Rows(); r++ {
		xr := make([]float64, len(w))
		row := x.Row(r)
		for k, i := range row.Indices {
			xr[i] += float64(row.Values[k])
		}
		var z float64
		for i := range w {
			z += w[i] * xr[i]
		}
		y := 0.0
		if labels[r] == 1 {
			y = 1
		}
		p := 1 / (1 + math.Exp(-z))
		loss += -y*math.Log(p) - (1-y)*math.Log(1-p)
		for i := range w {
			grad[i] += (p - y) * xr[i]
		}
	}
	n := float64(x.Rows())
	for i := range grad {
		grad[i] /= n
	}
	return loss / n, grad
}

func TestGradientMatchesDense(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var g, gs Vector
	for trial := 0; trial < 50; trial++ {
		dim := 1 + r.IntN(40)
		m, err := NewLogReg(dim)
		if err != nil {
			t.Fatal(err)
		}
		w64 := make([]float64, dim)
		for i := range m.W {
			m.W[i] = float32(r.NormFloat64() * 0.5)
			w64[i] = float64(m.W[i])
		}
		x, labels := randomBatch(r, 1+r.IntN(30), 1+r.IntN(8), dim, trial%2 == 0)
		loss, err := m.Gradient(x, labels, &g)
		if err != nil {
			t.Fatal(err)
		}
		wantLoss, wantGrad := denseLoss(x, labels, w64)
		if math.Abs(loss-wantLoss) > 1e-5*(1+wantLoss) {
			t.Fatalf("trial %d: loss %v, dense %v", trial, loss, wantLoss)
		}
		if err := g.Validate(dim); err != nil {
			t.Fatalf("trial %d: gradient invalid: %v", trial, err)
		}
		got := make([]float32, dim)
		g.ToDense(got)
		touched := map[int32]bool{}
		for _, i := range x.Indices {
			touched[i] = true
		}
		if g.Len() != len(touched) {
			t.Fatalf("trial %d: gradient has %d entries, the batch touches %d features", trial, g.Len(), len(touched))
		}
		for i := range got {
			if math.Abs(float64(got[i])-wantGrad[i]) > 1e-5 {
				t.Fatalf("trial %d: grad[%d] = %v, dense %v", trial, i, got[i], wantGrad[i])
			}
		}
		lossSum, err := m.GradientSum(x, labels, &gs)
		if err != nil {
			t.Fatal(err)
		}
		if n := float64(x.Rows()); math.Abs(lossSum/n-loss) > 1e-9 {
			t.Fatalf("trial %d: GradientSum loss %v / %v != %v", trial, lossSum, n, loss)
		}
		for k := range gs.Values {
			if d := math.Abs(float64(gs.Values[k])/float64(x.Rows()) - float64(g.Values[k])); d > 1e-6 {
				t.Fatalf("trial %d: GradientSum/n differs from Gradient by %v", trial, d)
			}
		}
	}
}

// TestDenseReferenceFiniteDifference checks the reference itself, so the
// comparison above is against the true derivative and not a shared mistake.
func TestDenseReferenceFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	dim := 6
	x, labels := randomBatch(r, 8, 4, dim, false)
	w := make([]float64, dim)
	for i := range w {
		w[i] = r.NormFloat64()
	}
	_, grad := denseLoss(x, labels, w)
	const h = 1e-6
	for i := range w {
		w[i] += h
		up, _ := denseLoss(x, labels, w)
		w[i] -= 2 * h
		down, _ := denseLoss(x, labels, w)
		w[i] += h
		if fd := (up - down) / (2 * h); math.Abs(fd-grad[i]) > 1e-6 {
			t.Fatalf("d/dw[%d]: analytic %v, finite difference %v", i, grad[i], fd)
		}
	}
}

func TestGradientExtremeMargins(t *testing.T) {
	m, _ := NewLogReg(2)
	m.W[0], m.W[1] = 1000, -1000
	x := CSR{RowPtr: []int32{0, 1, 2}, Indices: []int32{0, 1}, Values: []float32{1, 1}}
	var g Vector
	loss, err := m.Gradient(x, []float32{-1, 1}, &g)
	if err != nil {
		t.Fatal(err)
	}
	// Both examples are wrong with margin 1000: loss 1000 each, no overflow.
	if math.Abs(loss-1000) > 1e-9 || g.Values[0] != 0.5 || g.Values[1] != -0.5 {
		t.Fatalf("loss %v gradient %+v, want 1000 and [0.5 -0.5]", loss, g)
	}
}

func TestGradientRejects(t *testing.T) {
	m, _ := NewLogReg(4)
	one := CSR{RowPtr: []int32{0, 1}, Indices: []int32{1}, Values: []float32{1}}
	for _, tc := range []struct {
		name   string
		x      CSR
		labels []float32
		want   string
	}{
		{"label 0.5", one, []float32{0.5}, "row 0: label 0.5"},
		{"label 2", one, []float32{2}, "label 2"},
		{"label NaN", one, []float32{float32(math.NaN())}, "label NaN"},
		{"index", CSR{RowPtr: []int32{0, 1, 2}, Indices: []int32{1, 4}, Values: []float32{1, 1}}, []float32{1, 1}, "row 1: feature index 4 is outside [0, 4)"},
		{"negative index", CSR{RowPtr: []int32{0, 1}, Indices: []int32{-3}, Values: []float32{1}}, []float32{1}, "index -3"},
		{"labels", one, []float32{1, 1}, "1 rows but 2 labels"},
		{"empty", CSR{}, nil, "empty batch"},
		{"rowptr", CSR{RowPtr: []int32{0, 2}, Indices: []int32{1}, Values: []float32{1}}, []float32{1}, "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g Vector
			_, err := m.Gradient(tc.x, tc.labels, &g)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Gradient: %v, want error containing %q", err, tc.want)
			}
		})
	}
	if _, err := NewLogReg(0); err == nil {
		t.Fatal("NewLogReg(0) succeeded")
	}
}

func TestGradientDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	m, _ := NewLogReg(1 << 20)
	x, labels := randomBatch(r, 100, 40, 1<<20, false)
	var g Vector
	if _, err := m.Gradient(x, labels, &g); err != nil {
		t.Fatal(err)
	}
	opt, _ := NewFTRL(m.Dim(), 0.1, 1, 0, 0)
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := m.Gradient(x, labels, &g); err != nil {
			t.Fatal(err)
		}
		opt.Step(m.W, g)
	})
	if allocs != 0 {
		t.Fatalf("a gradient + update step allocates %v times", allocs)
	}
}
