package launch

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored"
)

// TestEvaluatorRefuses: the evaluator's mistakes are named at once, and it
// never waits forever for a checkpoint that does not come.
func TestEvaluatorRefuses(t *testing.T) {
	dir := t.TempDir()
	mn := &data.MNIST{Train: &data.Images{Rows: 28, Cols: 28}, Test: &data.Images{Rows: 28, Cols: 28}}
	tests := []struct {
		name string
		cfg  EvaluatorConfig
		want string
	}{
		{"no checkpoint dir", EvaluatorConfig{MNIST: mn}, "evaluator: --checkpoint-dir is needed"},
		{"sparse run", EvaluatorConfig{CheckpointDir: dir, Model: mirrored.SparseModel, MNIST: mn}, "evaluator: --model sparse-lr: the evaluator evaluates MNIST models only"},
		{"no checkpoint comes", EvaluatorConfig{CheckpointDir: dir, MNIST: mn, Timeout: time.Second}, "evaluator: no checkpoint appeared in " + dir + " within 1s (--evaluator-timeout)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Logger = zaptest.NewLogger(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := RunEvaluator(ctx, tt.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}
