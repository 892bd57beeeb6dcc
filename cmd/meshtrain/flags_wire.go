package main

import (
	"fmt"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/collective/half"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/replica"
)

// wireFlag is --wire: the format the dense gradient travels in.
func wireFlag() cli.Flag {
	return &cli.StringFlag{Name: "wire", Value: half.FP32.String(), Usage: "the dense gradient's format between peers: fp32 | bf16 | fp16 " +
		"(16 bits: half the bytes, every hop adds in float32 and every peer keeps the same bits; fp16 is scaled per chunk so small gradients do not flush to zero). " +
		"Every peer must use the same"}
}

// wireFromFlags sets job's Combiner from --wire: replica.Half for bf16
// and fp16, the default Mean for fp32. The 16-bit wire is the ring's
// dense gradient exchange only; gossip's averages and sparse-lr's
// exchange keep float32, so asking for it there is refused rather than
// ignored.
func wireFromFlags(c *cli.Context, job *mirrored.Job) error {
	if !c.IsSet("wire") { // fp32, or a command without --wire (compare, sweep)
		return nil
	}
	f, err := half.ParseFormat(c.String("wire"))
	if err != nil {
		return fmt.Errorf("--wire: %w", err)
	}
	if !f.Half() {
		return nil
	}
	switch {
	case job.Sparse != nil:
		return fmt.Errorf("--wire %s: sparse-lr exchanges its own gradients (--exchange), in float32: leave --wire at fp32", f)
	case mirrored.IsGossip(job.Strategy):
		return fmt.Errorf("--wire %s: gossip averages parameters in float32, not gradients: leave --wire at fp32, or use the ring", f)
	}
	job.Combiner = replica.Half{Format: f}
	return nil
}

// withoutWire is flags less --wire, for the commands that run gossip
// beside the ring from one set of flags (compare, sweep).
func withoutWire(flags []cli.Flag) []cli.Flag {
	return slices.DeleteFunc(flags, func(f cli.Flag) bool { return f.Names()[0] == "wire" })
}
