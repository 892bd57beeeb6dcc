package sparse

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Metrics are held-out figures for a binary classifier.
type Metrics struct {
	Examples  int
	Positives int
	// Accuracy counts a prediction as positive when P(y=1) > 0.5.
	Accuracy float64
	// LogLoss is the mean negative log-likelihood in nats.
	LogLoss float64
	// AUC is the exact area under the ROC curve (ties count one half); NaN
	// when the examples are all of one class.
	AUC float64
}

func (m Metrics) String() string {
	return fmt.Sprintf("examples=%d positives=%.2f%% accuracy=%.4f logloss=%.4f auc=%.4f",
		m.Examples, 100*float64(m.Positives)/float64(max(m.Examples, 1)), m.Accuracy, m.LogLoss, m.AUC)
}

// Evaluator accumulates predictions and computes Metrics. It keeps every
// (score, label) pair because the exact AUC needs them sorted: 5 bytes per
// example. The zero value is ready to use.
type Evaluator struct {
	scored  []scored
	lossSum float64
	correct int
	pos     int
}

type scored struct {
	margin float32
	pos    bool
}

// Reset forgets all predictions, keeping storage.
func (e *Evaluator) Reset() { *e = Evaluator{scored: e.scored[:0]} }

// Add records one prediction, given as a margin (log-odds), and its label
// (-1/+1 or 0/1).
func (e *Evaluator) Add(margin float32, label float32) error {
	y, err := label01(label)
	if err != nil {
		return err
	}
	z := float64(margin)
	if math.IsNaN(z) {
		return fmt.Errorf("prediction is NaN: the model has diverged")
	}
	s := 2*y - 1
	e.lossSum += math.Log1p(math.Exp(-math.Abs(z))) + max(0, -s*z)
	if (z > 0) == (y == 1) {
		e.correct++
	}
	if y == 1 {
		e.pos++
	}
	e.scored = append(e.scored, scored{margin: margin, pos: y == 1})
	return nil
}

// Metrics computes the figures over everything added so far. It sorts the
// recorded predictions (O(n log n)).
func (e *Evaluator) Metrics() Metrics {
	n := len(e.scored)
	m := Metrics{Examples: n, Positives: e.pos, AUC: math.NaN()}
	if n == 0 {
		m.Accuracy, m.LogLoss = math.NaN(), math.NaN()
		return m
	}
	m.Accuracy = float64(e.correct) / float64(n)
	m.LogLoss = e.lossSum / float64(n)
	m.AUC = auc(e.scored)
	return m
}

// auc is the Mann-Whitney statistic: the probability that a random positive
// scores above a random negative, ties counting one half. It reorders s.
func auc(s []scored) float64 {
	slices.SortFunc(s, func(a, b scored) int { return cmp.Compare(a.margin, b.margin) })
	var pos, rankSum float64
	for i := 0; i < len(s); {
		j := i
		var p float64
		for ; j < len(s) && s[j].margin == s[i].margin; j++ {
			if s[j].pos {
				p++
			}
		}
		// Ranks i+1..j share their average.
		rankSum += p * float64(i+1+j) / 2
		pos += p
		i = j
	}
	neg := float64(len(s)) - pos
	if pos == 0 || neg == 0 {
		return math.NaN()
	}
	return (rankSum - pos*(pos+1)/2) / (pos * neg)
}
