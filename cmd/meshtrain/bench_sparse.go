package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/data/criteo"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/measure/bench"
)

func init() {
	registerSub("bench", &cli.Command{
		Name:               "sparse",
		Usage:              "time sparse logistic regression at Criteo's width: one core locally, then N peers over libp2p (sparse vs dense exchange)",
		CustomHelpTemplate: withExample("meshtrain bench sparse --peers 2 --features 1000000 --steps 2000"),
		Description: "Generates Criteo-like examples in memory (no files), then runs the real synchronous training loop\n" +
			"(mirrored.Run): on one core without peers, then for each --peers count with N local peer\n" +
			"processes over libp2p, --steps steps exchanging sparse gradients and --dense-steps steps all-reducing\n" +
			"the dense D-float gradient. Reports examples/s, steps/s, bytes sent per step per peer and the split of\n" +
			"step time into compute, communication and waiting for input.",
		Flags: append(benchClusterFlags(0)[1:], // --peers instead of -n
			&cli.StringFlag{Name: "peers", Value: "2,4", Usage: "comma-separated cluster sizes to time (without --tf-config)"},
			&cli.IntFlag{Name: "features", Value: criteo.Features, Usage: "number of features D (below the Criteo width, generated indices are folded modulo D)"},
			&cli.IntFlag{Name: "batch", Value: 100, Usage: "examples per peer per step"},
			&cli.IntFlag{Name: "examples", Value: 50_000, Usage: "distinct generated examples per peer"},
			&cli.IntFlag{Name: "steps", Value: 5000, Usage: "timed steps with the sparse exchange, per cluster size"},
			&cli.IntFlag{Name: "dense-steps", Value: 2, Usage: "timed steps with the dense exchange, per cluster size (0: skip; 135 MB each at Criteo's D)"},
			&cli.IntFlag{Name: "local-steps", Value: 5000, Usage: "steps of the one-core local run (0: skip)"},
			&cli.StringFlag{Name: "sparse-optimizer", Value: "adagrad", Usage: "sgd | adagrad | ftrl"},
			&cli.Float64Flag{Name: "lr", Value: 0.05, Usage: "learning rate (FTRL: alpha)"},
			&cli.StringFlag{Name: "gather", Value: mirrored.GatherDirect, Usage: "sparse all-gather: direct (one round) | ring (AllGatherV)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "generator seed"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write CPU profiles: the local run to PREFIX-local.pprof, rank 0 of each cluster run to PREFIX-n<N>.pprof (sparse) and PREFIX-n<N>-dense.pprof"},
		),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("bench sparse takes no arguments, got %q", c.Args().Slice())
			}
			if err := checkOutputs(c, output{name: "cpuprofile", suffix: "-local.pprof"}); err != nil {
				return fmt.Errorf("bench sparse: %w", err)
			}
			var peers []int
			for _, f := range strings.Split(c.String("peers"), ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil {
					return fmt.Errorf("--peers %q: want comma-separated counts like 2,4", c.String("peers"))
				}
				peers = append(peers, n)
			}
			cl, err := benchCluster(c)
			if err != nil {
				return err
			}
			return bench.Sparse(c.Context, bench.SparseConfig{
				Peers: peers, Features: c.Int("features"), Batch: c.Int("batch"), Examples: c.Int("examples"),
				Steps: c.Int("steps"), DenseSteps: c.Int("dense-steps"), LocalSteps: c.Int("local-steps"),
				Optimizer: c.String("sparse-optimizer"), LR: c.Float64("lr"), Gather: c.String("gather"),
				Seed: c.Uint64("seed"), Cluster: cl, CPUProfile: c.String("cpuprofile"), JSON: c.Bool("json"),
			}, c.App.Writer)
		},
	})
}
