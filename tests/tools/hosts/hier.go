package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/meshtrain/meshtrain/tests/netns"
)

// hier compares the flat ring with the hierarchical all-reduce on hosts
// running several peers each: -pairs alternating pairs of runs (netns.
// MeasureAlgoPairs), one line a run, then the medians and their ratio.
func hier(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hier", flag.ContinueOnError)
	n := fs.Int("n", 2, "hosts")
	perHost := fs.Int("per-host", 2, "peers on each host")
	rates := fs.String("rate", "1gbit", "link rate of every host")
	mib := fs.Int("mib", 64, "all-reduce size in MiB")
	pairs := fs.Int("pairs", 5, "alternating pairs of runs")
	reps := fs.Int("reps", 3, "timed all-reduces a run (the run reports their median)")
	sec := fs.String("security", "tls", "link security: tls, noise or plaintext")
	intra := fs.String("intra-host", "auto", "links between the peers of one host: auto (shared memory, no cipher) or tls (over -security)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 2 || *perHost < 1 || *mib < 1 || *pairs < 1 || *reps < 1 {
		return fmt.Errorf("hier: -n %d -per-host %d -mib %d -pairs %d -reps %d: want at least 2 hosts and positive counts", *n, *perHost, *mib, *pairs, *reps)
	}
	rate, err := netns.ParseRate(*rates)
	if err != nil {
		return err
	}
	bin, remove, err := buildNetbench(ctx)
	if err != nil {
		return err
	}
	defer remove()
	h, err := netns.Up(ctx, netns.TagForProcess(), *n, rate)
	if err != nil {
		return err
	}
	defer h.Down()
	res, err := netns.MeasureAlgoPairs(ctx, h, *perHost, bin, *sec, int64(*mib)<<20, *pairs, *reps, "-intra-host", *intra)
	if err != nil {
		return err
	}
	fmt.Println("pair\torder\talgo\tsize\tbusbw(MB/s)\treps(MB/s)\tCPU s/op (all peers)\tsame-host links\tload")
	for i, p := range res {
		order := "ring first"
		if !p.RingFirst {
			order = "auto first"
		}
		for _, r := range []netns.AllReduceResult{p.Ring, p.Auto} {
			var each []string
			for _, b := range r.BusBW {
				each = append(each, fmt.Sprintf("%.1f", b/1e6))
			}
			fmt.Printf("%d\t%s\t%s\t%dMiB\t%.1f\t%s\t%.2f\t%d\t%s\n", i+1, order, r.Algo, r.Bytes>>20, r.Median()/1e6, strings.Join(each, ","), r.CPUSeconds, r.SameHostLinks, p.Load)
		}
	}
	ring, auto, ratio := netns.PairMedians(res)
	fmt.Printf("%d hosts × %d peers at %s, %s, --intra-host %s, %d MiB: median busbw ring %.1f MB/s, %s %.1f MB/s: %.2f×\n",
		*n, *perHost, rate, *sec, *intra, *mib, ring/1e6, res[0].Auto.Algo, auto/1e6, ratio)
	return h.Down()
}
