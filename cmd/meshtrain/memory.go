package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/internal/rusage"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/footprint"
	"github.com/meshtrain/meshtrain/nn/keras"
)

// memoryLimit is rusage.MemoryLimit, a variable so that a test can set the
// limit a machine does not have.
var memoryLimit = rusage.MemoryLimit

// checkMemory refuses, before any work, a dense run whose model cannot
// fit in the memory this process may use (the limit sparse-lr's
// --features is checked against: GOMEMLIMIT, the cgroup, ulimit -v, the
// machine): the estimate (nn/footprint) counts the
// parameters and their copies (the shards' gradients, the optimizer's
// state, the exchange buffers, elastic commits, checkpoint encoding) and
// every layer's activations and gradients for the per-peer batch. perHost
// processes of the run share this machine (launch and compare start them
// all here). Past the limit the Go runtime dies with "fatal error: out of
// memory" and a dump of every goroutine, or the kernel kills the process
// without a word; refused, it is a usage error (exit 2) with the figures
// and the largest term. file is --model-file's model, nil for a built-in.
func checkMemory(c *cli.Context, job mirrored.Job, file *keras.Model, perHost int) error {
	if job.Sparse != nil || job.Config.Model == mirrored.SparseModel {
		return nil // sparse-lr checks its own (--features)
	}
	var arch nn.Architecture
	if file != nil {
		arch = file.Arch
	} else {
		m, err := nn.NewModelFor(job.Config.Model, nn.MNISTSpec, 0, 1) // a built-in is small: built to read its architecture
		s, ok := m.(*nn.Sequential)
		if err != nil || !ok {
			return nil // a model Validate let through, built another way
		}
		arch = s.Architecture()
	}
	cfg := job.Config
	f, err := footprint.Of(arch, footprint.Plan{
		Batch: cfg.BatchSize, Shards: cfg.Shards, OptimizerCopies: footprint.OptimizerCopies(cfg.Optimizer, cfg.Momentum),
		Exchange: perHost > 1 || c.Command.Name == "worker", Commits: mirrored.ElasticOf(job.Strategy) != nil,
		Checkpoints: job.CheckpointDir != "" || job.Restore != "",
	})
	if err != nil {
		return usageError{fmt.Errorf("model %s: %w", arch.Name, err)}
	}
	need := f.Total() * int64(perHost)
	limit, source := memoryLimit()
	logger(c, c.Command.Name).Debug("memory estimate", zap.String("model", arch.Name), zap.Int64("bytes", f.Total()),
		zap.Int("processes", perHost), zap.String("terms", f.String()), zap.Int64("limit", limit), zap.String("limit_source", source))
	if limit == 0 || need <= limit {
		return nil
	}
	per := ""
	if perHost > 1 {
		per = fmt.Sprintf(" for each of the %d workers on this machine (%s in all)", perHost, footprint.Bytes(need))
	}
	big := f.Largest()
	return usageError{fmt.Errorf("model %s with a batch of %d needs about %s%s, more than the %s this process may use (%s); the largest part is %s, %s (all: %s): "+
		"lower --batch, use a smaller model, or run with more memory",
		arch.Name, cfg.BatchSize, footprint.Bytes(f.Total()), per, footprint.Bytes(limit), source, big.Name, footprint.Bytes(big.Bytes), f)}
}
