package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data/criteo"
	"github.com/meshtrain/meshtrain/internal/rusage"
	"github.com/meshtrain/meshtrain/mirrored/gossip"
	"github.com/meshtrain/meshtrain/sparse"
	"github.com/meshtrain/meshtrain/tests/netns"
)

// timeOp runs op once (rep −1) to check it and warm the links up, then
// reps more, each idle after a barrier, and returns each rep's time on the slowest rank
// and the CPU time of all ranks per rep.
func timeOp(ctx context.Context, c *collective.Comm, reps int, idle time.Duration, op func(rep int) error) ([]float64, float64, error) {
	if err := op(-1); err != nil {
		return nil, 0, err
	}
	secs := make([]float64, reps)
	var cpu time.Duration
	for i := range secs {
		if err := c.Barrier(ctx); err != nil {
			return nil, 0, err
		}
		time.Sleep(idle) // a measuring program: the pause is what it measures after
		cpu0, start := rusage.CPUTime(), time.Now()
		if err := op(i); err != nil {
			return nil, 0, err
		}
		secs[i] = time.Since(start).Seconds()
		cpu += rusage.CPUTime() - cpu0
	}
	cpus := []float64{cpu.Seconds() / float64(reps)}
	if err := c.AllReduceFloat64(ctx, secs, collective.Max); err != nil {
		return nil, 0, err
	}
	if err := c.AllReduceFloat64(ctx, cpus, collective.Sum); err != nil {
		return nil, 0, err
	}
	return secs, cpus[0], nil
}

// report prints r on rank 0.
func report(c *collective.Comm, r netns.OpResult) error {
	if c.Rank() != 0 {
		return nil
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// sparseGather times the sparse gradient exchange of a step: each rank
// encodes touched random features of criteo.Features
// (sparse.AppendVector), all-gathers the encodings in one round
// (AllGatherDirect) and decodes the others', as training does.
func sparseGather(ctx context.Context, c *collective.Comm, touched []int64, reps int, idle time.Duration) error {
	for _, k64 := range touched {
		k := int(k64)
		rng := rand.New(rand.NewPCG(uint64(c.Rank()), uint64(k)))
		v := sparse.Vector{Indices: make([]int32, 0, k), Values: make([]float32, k)}
		seen := map[int32]bool{}
		for len(v.Indices) < k {
			if i := int32(rng.IntN(criteo.Features)); !seen[i] {
				seen[i] = true
				v.Indices = append(v.Indices, i)
			}
		}
		slices.Sort(v.Indices)
		for i := range v.Values {
			v.Values[i] = rng.Float32()
		}
		var enc []byte
		var got sparse.Vector
		secs, cpu, err := timeOp(ctx, c, reps, idle, func(int) error {
			enc = sparse.AppendVector(enc[:0], v)
			parts, err := c.AllGatherDirect(ctx, enc)
			if err != nil {
				return err
			}
			for r, p := range parts {
				if r == c.Rank() {
					continue // training merges its own part from memory
				}
				if err := sparse.DecodeVector(&got, p, criteo.Features); err != nil {
					return fmt.Errorf("rank %d's gradient: %w", r, err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("sparse all-gather of %d features: %w", k, err)
		}
		if err := report(c, netns.OpResult{Op: "gather", N: c.Size(), Bytes: int64(len(enc)), Touched: k, Seconds: secs, CPUSeconds: cpu}); err != nil {
			return err
		}
	}
	return nil
}

// gossipRound times one pairwise gossip average of each size: every rank
// starts an exchange with the next one in turn (gossip.Rotate, so each
// also answers one) and the round ends when its answer is in.
func gossipRound(ctx context.Context, c *collective.Comm, sizes []int64, reps int, idle time.Duration) error {
	for _, size := range sizes {
		params := make([]float32, size/4)
		opts := gossip.DefaultOptions()
		opts.Schedule = gossip.Rotate
		g, err := gossip.New(c, params, opts)
		if err != nil {
			return err
		}
		g.Start(ctx)
		round := uint64(0)
		averaged := []float64{0}
		secs, cpu, err := timeOp(ctx, c, reps, idle, func(rep int) error {
			round++
			res, err := g.Exchange(ctx, round)
			if err == nil && res.Outcome != gossip.Averaged && res.Outcome != gossip.Declined {
				err = fmt.Errorf("round %d with rank %d: %v (%v)", round, res.Peer, res.Outcome, res.Err)
			}
			if rep >= 0 && res.Outcome == gossip.Averaged {
				averaged[0]++
			}
			return err
		})
		if err == nil {
			err = c.AllReduceFloat64(ctx, averaged, collective.Sum)
		}
		if err == nil {
			err = c.Barrier(ctx) // every answer is in before any node stops
		}
		g.Finish(ctx)
		g.Close()
		if err == nil {
			// No rank starts the next size's node (whose messages the old
			// receivers would take) until every old one is closed.
			err = c.Barrier(ctx)
		}
		if err != nil {
			return fmt.Errorf("gossip round of %d bytes: %w", size, err)
		}
		r := netns.OpResult{Op: "gossip", N: c.Size(), Bytes: size, Seconds: secs, CPUSeconds: cpu, Averaged: averaged[0] / float64(reps*c.Size())}
		if err := report(c, r); err != nil {
			return err
		}
	}
	return nil
}
