package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/collective/half"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/replica"
)

// wireFlag is --wire: the format the dense gradient travels in.
func wireFlag() cli.Flag {
	return &cli.StringFlag{Name: "wire", Value: half.FP32.String(), Usage: "the dense gradient's format between peers (sparse-lr: its dense exchange steps): fp32 | bf16 | fp16 " +
		"(16 bits: half the bytes, every hop adds in float32 and every peer keeps the same bits; fp16 is scaled per chunk so small gradients do not flush to zero). " +
		"Every peer must use the same"}
}

// wireFromFlags sets the 16-bit wire from --wire: for a dense model the
// Combiner replica.Half, for sparse-lr the format of its dense exchange
// steps (--exchange dense, or auto's dense steps); fp32 leaves the
// defaults. Gossip averages parameters, not gradients, in float32, so
// asking for it there is refused rather than ignored.
func wireFromFlags(c *cli.Context, job *mirrored.Job) error {
	if !c.IsSet("wire") { // fp32, or a command without --wire (compare, sweep)
		return nil
	}
	f, err := half.ParseFormat(c.String("wire"))
	if err != nil {
		return fmt.Errorf("--wire: %w", err)
	}
	switch {
	case !f.Half():
		return nil
	case mirrored.IsGossip(job.Strategy):
		return fmt.Errorf("--wire %s: gossip averages parameters in float32, not gradients: leave --wire at fp32, or use the ring", f)
	case job.Sparse != nil:
		job.Sparse.Wire = f
		return nil
	}
	job.Combiner = replica.Half{Format: f}
	return nil
}

// wireInfo is the summary's RunInfo.Wire: the 16-bit format, or "" for fp32.
func wireInfo(job mirrored.Job) string {
	if f := replica.WireOf(job.Combiner); f.Half() {
		return f.String()
	}
	return ""
}
