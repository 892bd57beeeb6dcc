package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/gossip"
	"github.com/meshtrain/meshtrain/mirrored/measure/compare"
)

// gossipFlags tune the gossip strategy; their defaults are
// gossip.DefaultOptions'.
func gossipFlags() []cli.Flag {
	d := gossip.DefaultOptions()
	return inCategory(catGossip,
		&cli.StringFlag{Name: "gossip-schedule", Value: d.Schedule.String(), Usage: "gossip: how each replica picks its peer: random | rotate | exponential (all seeded by --seed)"},
		&cli.IntFlag{Name: "gossip-every", Value: d.Every, Usage: "gossip: local steps between pairwise averages"},
		&cli.IntFlag{Name: "gossip-max-staleness", Value: d.MaxStaleness, Usage: "gossip: merges a local step may absorb while computing its gradient (a peer at the bound declines)"},
		&cli.BoolFlag{Name: "gossip-wait", Usage: "gossip: finish each pairwise average before the next local step (default: overlap it with the next step)"},
		&cli.IntFlag{Name: "gossip-max-skip", Value: d.MaxSkip, Usage: "gossip: rounds in a row a replica may skip while its previous average is in flight, before waiting for it (-1: never skip)"},
	)
}

// faultFlags inject a straggler or a crash (for experiments and tests).
func faultFlags() []cli.Flag {
	return inCategory(catFaults,
		&cli.StringFlag{Name: "slow-peer", Usage: "RANK:FACTOR: that rank's steps take FACTOR× as long (e.g. 1:3)"},
		&cli.IntFlag{Name: "kill-rank", Usage: "with --kill-after: the rank that dies"},
		&cli.IntFlag{Name: "kill-after", Usage: "the --kill-rank peer dies after this many steps (0: never)"},
	)
}

// strategyFlags are --strategy, the gossip flags and the fault flags, for
// train, launch and worker.
func strategyFlags() []cli.Flag {
	return append(append(inCategory(catCluster,
		&cli.StringFlag{Name: "strategy", Value: mirrored.StrategyRing, Usage: "ring (synchronous all-reduce) | gossip (decentralised asynchronous pairwise averaging)"},
	), gossipFlags()...), faultFlags()...)
}

// trainStrategyFlags are strategyFlags for train, whose one replica
// cannot be slowed down or lost: the fault flags are hidden from its help,
// and rejected.
func trainStrategyFlags() []cli.Flag {
	flags := strategyFlags()
	for _, f := range flags {
		if f.(cli.CategorizableFlag).GetCategory() == catFaults {
			hide(f)
		}
	}
	return flags
}

// faultFlagNames are the names of faultFlags.
func faultFlagNames() []string {
	var names []string
	for _, f := range faultFlags() {
		names = append(names, f.Names()[0])
	}
	return names
}

// gossipFromFlags is the gossip knobs of strategyFlags.
func gossipFromFlags(c *cli.Context) mirrored.Gossip {
	return mirrored.Gossip{Schedule: c.String("gossip-schedule"), Every: c.Int("gossip-every"),
		MaxStaleness: c.Int("gossip-max-staleness"), WaitForAverage: c.Bool("gossip-wait"), MaxSkip: c.Int("gossip-max-skip")}
}

// strategyFromFlags builds the strategy and faults from strategyFlags (the
// flags not defined on c keep their defaults), checked for workers ranks.
func strategyFromFlags(c *cli.Context, workers int) (mirrored.Strategy, mirrored.Faults, error) {
	st, err := mirrored.NewStrategy(c.String("strategy"), gossipFromFlags(c))
	if err != nil {
		return st, mirrored.Faults{}, err
	}
	rank, factor, err := mirrored.ParseSlowPeer(c.String("slow-peer"))
	if err != nil {
		return st, mirrored.Faults{}, err
	}
	f := mirrored.Faults{SlowRank: rank, SlowFactor: factor, KillRank: c.Int("kill-rank"), KillAfter: c.Int("kill-after")}
	if c.IsSet("kill-rank") && !c.IsSet("kill-after") {
		return st, f, fmt.Errorf("--kill-rank %d needs --kill-after STEPS", f.KillRank)
	}
	if err := st.Validate(); err != nil {
		return st, f, err
	}
	return st, f, f.Validate(workers)
}

func init() {
	flags := append([]cli.Flag{
		&cli.IntFlag{Name: "n", Value: 3, Usage: "replicas per run"},
		&cli.StringFlag{Name: "strategies", Value: "ring,gossip", Usage: "comma-separated strategies to compare"},
		&cli.StringFlag{Name: "out", Usage: "report directory (report.md, results.json, PNG plots)", Required: true},
		&cli.Float64Flag{Name: "target", Usage: "test accuracy whose time-to is compared (default: --target-accuracy, else 0.97 for lenet and 0.90 for softmax, which its recipe reaches)"},
		&cli.StringFlag{Name: "slow-peer", Value: "1:3", Usage: "RANK:FACTOR of the straggler scenario (none: skip it)"},
	}, append(withModelFile(withoutRingOnly(jobFlags())), gossipFlags()...)...)
	register(&cli.Command{
		Name:  "compare",
		Usage: "run the ring and gossip strategies side by side and write a report with plots",
		Description: "Runs each strategy as N replicas (one process, one libp2p host each on 127.0.0.1) on the same\n" +
			"data, seed and N, without and then with a straggler (--slow-peer), and writes report.md,\n" +
			"results.json and PNG plots to --out: test accuracy against time and epochs, time to the\n" +
			"target accuracy, steps/s and bytes sent per peer, and the gossip replicas' consensus distance.",
		CustomHelpTemplate: withExample("meshtrain compare --strategies ring,gossip -n 3 --model softmax --epochs 3 --out report/"),
		Flags:              flags,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError{fmt.Errorf("compare takes no arguments, got %q", c.Args().Slice())}
			}
			n := c.Int("n")
			job, sec, err := jobFromFlags(c, n)
			if err != nil {
				return fmt.Errorf("compare: %w", err)
			}
			rank, factor, err := mirrored.ParseSlowPeer(c.String("slow-peer"))
			if err != nil {
				return fmt.Errorf("compare: %w", err)
			}
			if err := checkOutputs(c); err != nil {
				return fmt.Errorf("compare: %w", err)
			}
			warnIgnored(c)
			log := logger(c, "compare")
			job.Logger = log
			var strategies []string
			for _, s := range strings.Split(c.String("strategies"), ",") {
				if s = strings.TrimSpace(s); s != "" {
					strategies = append(strategies, s)
				}
			}
			rep, err := compare.Compare(c.Context, compare.Config{
				N: n, Job: job, Strategies: strategies,
				Gossip:   mirrored.Gossip{Schedule: c.String("gossip-schedule"), Every: c.Int("gossip-every"), MaxStaleness: c.Int("gossip-max-staleness")},
				SlowRank: rank, SlowFactor: factor, Target: c.Float64("target"),
				Security: sec, Timeout: c.Duration("collective-timeout"), Out: c.String("out"),
				Progress: os.Stdout, Logger: log, LogDir: c.String("logdir"), LogEvery: c.Int("log-every"),
			})
			if err != nil {
				return err
			}
			fmt.Printf("report: %s\n", rep.Markdown)
			return nil
		},
	})
}
