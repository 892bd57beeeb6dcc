package sparse

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestEvaluatorHandComputed(t *testing.T) {
	var e Evaluator
	// margins and labels: (2,+) (1,-) (1,+) (-1,-) (0,+)
	for _, p := range []struct{ m, y float32 }{{2, 1}, {1, -1}, {1, 0 + 1}, {-1, 0}, {0, 1}} {
		if err := e.Add(p.m, p.y); err != nil {
			t.Fatal(err)
		}
	}
	m := e.Metrics()
	// Correct: (2,+) (1,+) (-1,-); (1,-) wrong, (0,+) wrong since p = 0.5 is not > 0.5.
	if m.Examples != 5 || m.Positives != 3 || m.Accuracy != 0.6 {
		t.Fatalf("got %v, want 5 examples, 3 positives, accuracy 0.6", m)
	}
	// Pairs (pos, neg): 3 positives × 2 negatives = 6.
	// vs neg 1:  2>1 win, 1=1 half, 0<1 loss  -> 1.5
	// vs neg -1: all three win                -> 3
	if want := 4.5 / 6; math.Abs(m.AUC-want) > 1e-12 {
		t.Fatalf("AUC %v, want %v", m.AUC, want)
	}
	l := func(z float64) float64 { return math.Log1p(math.Exp(-z)) }
	want := (l(2) + l(-1) + l(1) + l(1) + l(0)) / 5
	if math.Abs(m.LogLoss-want) > 1e-12 {
		t.Fatalf("log-loss %v, want %v", m.LogLoss, want)
	}
	if err := e.Add(0, 3); err == nil {
		t.Fatal("label 3 accepted")
	}
	e.Reset()
	if err := e.Add(1, 1); err != nil {
		t.Fatal(err)
	}
	if m := e.Metrics(); !math.IsNaN(m.AUC) || m.Examples != 1 {
		t.Fatalf("one class: %v, want AUC NaN", m)
	}
}

func TestAUCMatchesPairCount(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for trial := 0; trial < 50; trial++ {
		var e Evaluator
		n := 2 + r.IntN(200)
		var ms []float32
		var ys []bool
		for i := 0; i < n; i++ {
			m := float32(r.IntN(10)) // many ties
			y := r.IntN(3) == 0
			ms, ys = append(ms, m), append(ys, y)
			label := float32(-1)
			if y {
				label = 1
			}
			if err := e.Add(m, label); err != nil {
				t.Fatal(err)
			}
		}
		var wins, pairs float64
		for i := range ms {
			for j := range ms {
				if ys[i] && !ys[j] {
					pairs++
					switch {
					case ms[i] > ms[j]:
						wins++
					case ms[i] == ms[j]:
						wins += 0.5
					}
				}
			}
		}
		got := e.Metrics().AUC
		if pairs == 0 {
			if !math.IsNaN(got) {
				t.Fatalf("trial %d: AUC %v with one class", trial, got)
			}
			continue
		}
		if math.Abs(got-wins/pairs) > 1e-12 {
			t.Fatalf("trial %d: AUC %v, pair count %v", trial, got, wins/pairs)
		}
	}
}
