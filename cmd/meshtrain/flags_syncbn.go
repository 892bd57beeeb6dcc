package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/keras"
)

// syncBatchNormFlag is --sync-batchnorm: batch normalization over the
// global batch.
func syncBatchNormFlag() cli.Flag {
	return &cli.BoolFlag{Name: "sync-batchnorm", Usage: "normalise every BatchNormalization over the global batch, as PyTorch's SyncBatchNorm and hvd.SyncBatchNormalization do: " +
		"every peer's per-channel statistics are summed inside the forward and backward passes (for small batches per peer; a model file's model only, under the ring). " +
		"Every peer must use the same"}
}

// syncBatchNormFromFlags sets Job.SyncBatchNorm from --sync-batchnorm. A
// model with no BatchNormalization is refused rather than run as if
// synchronized: PyTorch's convert_sync_batchnorm would silently leave
// such a model alone, but a flag that cannot act on the model is more
// likely the wrong model file than a wish, and the mistake costs a whole
// run to notice. So is gossip, whose replicas never take a step together.
func syncBatchNormFromFlags(c *cli.Context, job *mirrored.Job, file *keras.Model) error {
	if !c.Bool("sync-batchnorm") {
		return nil
	}
	switch {
	case mirrored.IsGossip(job.Strategy):
		return errors.New("--sync-batchnorm with --strategy gossip: gossip's replicas step apart and never normalise a batch together: use the ring")
	case job.Sparse != nil:
		return errors.New("--sync-batchnorm with sparse-lr: the model has no batch normalization: drop the flag")
	case file == nil:
		return fmt.Errorf("--sync-batchnorm with --model %s: the built-in models have no BatchNormalization: give a --model-file with one, or drop the flag", job.Model)
	case !slices.ContainsFunc(file.Arch.Layers, isBatchNorm):
		return fmt.Errorf("--sync-batchnorm: --model-file %s has no BatchNormalization layer, so there are no statistics to synchronize: drop the flag", c.String("model-file"))
	}
	job.SyncBatchNorm = true
	return nil
}

func isBatchNorm(l nn.LayerSpec) bool {
	_, ok := l.(nn.BatchNormalization)
	return ok
}

// withoutRingOnly is flags less those of the ring alone (--wire,
// --sync-batchnorm), for the commands that run gossip beside the ring
// from one set of flags (compare, sweep).
func withoutRingOnly(flags []cli.Flag) []cli.Flag {
	return slices.DeleteFunc(flags, func(f cli.Flag) bool {
		name := f.Names()[0]
		return name == "wire" || name == "sync-batchnorm"
	})
}
