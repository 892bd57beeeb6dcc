package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/measure/sweep"
	"github.com/meshtrain/meshtrain/mirrored/report"
)

// sweepDropped are the training and cluster flags a sweep does not take:
// its own --batch is a list, and a sweep point keeps no checkpoints,
// timeline or cost-model line.
// A recorded membership (--membership-schedule) fits one cluster size,
// and a sweep varies it.
var sweepDropped = []string{"batch", "checkpoint-dir", "checkpoint-every", "keep-checkpoints", "restore", "timeline", "timeline-steps", "cost-params",
	"membership-schedule"}

// sweepPassed are the flags a sweep passes to every point's workers
// unchanged and records in its settings (a resumed sweep must share
// them) and report: the model file, the data, the link faults and the
// elastic mode (the ring points': gossip goes on without a lost peer
// anyway).
func sweepPassed() []string {
	return append(append(append([]string{"model-file", "ignore-weights"}, flagNames(dataFlags())...), flagNames(linkFaultFlags())...),
		append(flagNames(elasticFlags()), "max-restarts")...)
}

func init() {
	var shared []cli.Flag
	for _, f := range append(append(withModelFile(withoutRingOnly(jobFlags())), gossipFlags()...), linkFaultFlags()...) {
		if !slices.Contains(sweepDropped, f.Names()[0]) {
			shared = append(shared, f)
		}
	}
	flags := append([]cli.Flag{
		&cli.StringFlag{Name: "workers", Value: "1,2,3", Usage: "comma-separated numbers of workers: a run per value (with each batch size, strategy and straggler scenario)"},
		&cli.StringFlag{Name: "batch", Value: "50,100,200", Usage: "comma-separated batch sizes per worker"},
		&cli.StringFlag{Name: "strategies", Value: mirrored.StrategyRing, Usage: "comma-separated strategies: ring, gossip"},
		&cli.StringFlag{Name: "slow-peer", Value: "none", Usage: "comma-separated straggler scenarios: none, or RANK:FACTOR (that rank's steps take FACTOR× as long), e.g. none,1:3"},
		&cli.StringFlag{Name: "out", Usage: "report directory: report.md, results.json (each point as it finishes) and PNG plots (required)"},
		&cli.Float64Flag{Name: "target", Usage: "test accuracy whose time-to is reported (default: --target-accuracy, else 0.97 for lenet and 0.90 for softmax)"},
		&cli.BoolFlag{Name: "fresh", Usage: "discard the results already in --out and start over (default: continue them, skipping the points there, and refuse other settings)"},
		inCategory(catCluster, &cli.IntFlag{Name: "max-restarts", Usage: "elastic: restart a point's worker that dies up to this many times, as launch does"})[0],
	}, shared...)
	register(&cli.Command{
		Name:  "sweep",
		Usage: "run a grid of trainings (workers × batch × strategy × straggler) and write one table with plots",
		Description: "Runs every combination of --workers, --batch, --strategies and --slow-peer, one after the other, each\n" +
			"a full run of `meshtrain worker` processes on 127.0.0.1 (as launch starts them) on the same data and\n" +
			"seed, and writes to --out a table with a row per point (CPU, peak memory, bytes received and sent per\n" +
			"peer, final test loss and accuracy, training time, time to --target, examples/s, the bottleneck) as\n" +
			"report.md and results.json, with plots. results.json is rewritten as each point finishes: after\n" +
			"Ctrl-C, the same command continues at the next point (--fresh starts over). Combinations that make\n" +
			"no sense (one worker under gossip or with a straggler) are skipped and listed. --model-file, --data,\n" +
			"the link faults (--link-delay, --link-rate) and --elastic (the ring's points) go to every point's\n" +
			"workers, and the report records them.",
		CustomHelpTemplate: withExample("meshtrain sweep --workers 1,2,3 --batch 50,100,200 --model lenet --epochs 1 --out sweep/"),
		Flags:              flags,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError{fmt.Errorf("sweep takes no arguments, got %q", c.Args().Slice())}
			}
			cfg, err := sweepFromFlags(c)
			if err != nil {
				return usageError{sweepError(err)}
			}
			if err := checkOutputs(c); err != nil {
				return fmt.Errorf("sweep: %w", err)
			}
			warnIgnored(c)
			log := logger(c, "sweep")
			if c.IsSet("gossip-schedule") || c.IsSet("gossip-every") || c.IsSet("gossip-max-staleness") || c.IsSet("gossip-wait") || c.IsSet("gossip-max-skip") {
				if !slices.Contains(cfg.Grid.Strategies, mirrored.StrategyGossip) {
					log.Warn("the gossip flags are ignored: --strategies has no gossip")
				}
			}
			// Find or fetch MNIST once, showing the fetch's bytes, before
			// the workers look for it (they then find it): it is the image
			// set when none is named.
			if cfg.Job.Data != "" {
				// Read it here as the largest point's worker 0 will, so
				// that a bad set fails once, with exit 2, before any point.
				opts := cfg.Job.ImageOptions(logger(c, "data"))
				opts.Read.Shard = data.Shard{Rank: 0, World: slices.Max(cfg.Grid.Workers)}
				if _, err := data.OpenImages(c.Context, cfg.Job.Data, opts); err != nil {
					return usageError{fmt.Errorf("sweep: --data: %w", err)}
				}
			}
			if cfg.Job.Data == "" {
				if _, err := data.EnsureMNIST(c.Context, data.MNISTOptions{Dir: cfg.Job.DataDir, AllowUnverified: cfg.Job.AllowUnverified,
					Logger: logger(c, "data"), Progress: screen.Stdout()}); err != nil {
					return fmt.Errorf("sweep: %w", err)
				}
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("sweep: finding this binary to start the workers: %w", err)
			}
			if err := errors.Join(absModelFile(c), absData(c)); err != nil { // the workers' directory is not ours
				return fmt.Errorf("sweep: %w", err)
			}
			faults, _ := linkFaultsFromFlags(c) // checked by sweepFromFlags
			run := &sweep.Processes{Executable: exe, QUIC: cfg.Security == p2p.SecurityQUIC,
				StopGrace: c.Duration("collective-timeout") + 5*time.Second, LogEvery: c.Int("log-every"),
				Stdout: screen.Stdout(), Stderr: screen.Stderr(), Logger: logger(c, "launch"),
				Elastic: c.Bool("elastic"), MaxRestarts: c.Int("max-restarts"),
				Info: report.RunInfo{Security: string(cfg.Security), AllReduceAlgo: cfg.Settings["allreduce-algo"], LinkFaults: faults.String()}}
			// The workers log warnings and errors unless asked for more.
			run.GlobalArgs = []string{"--log-level=warn"}
			for _, name := range []string{"log-format", "log-level"} {
				if c.IsSet(name) {
					run.GlobalArgs = append(run.GlobalArgs, fmt.Sprintf("--%s=%v", name, c.String(name)))
				}
			}
			gossipNames, elasticNames := flagNames(gossipFlags()), flagNames(elasticFlags())
			for _, f := range shared {
				name := f.Names()[0]
				if !c.IsSet(name) || name == "logdir" { // each point gets its own --logdir
					continue
				}
				arg := fmt.Sprintf("--%s=%v", name, c.Value(name))
				switch {
				case slices.Contains(gossipNames, name):
					run.GossipArgs = append(run.GossipArgs, arg)
				case slices.Contains(elasticNames, name):
					run.RingArgs = append(run.RingArgs, arg)
				default:
					run.WorkerArgs = append(run.WorkerArgs, arg)
				}
			}
			cfg.Runner, cfg.Progress, cfg.Logger, cfg.LogDir = run, screen.Stdout(), log, c.String("logdir")
			if points, skipped := cfg.Grid.Points(); len(points) > 0 {
				fmt.Fprintf(screen.Stdout(), "sweep: %d point(s), %d skipped, results in %s\n", len(points), len(skipped), cfg.Out)
			}
			res, err := sweep.Run(c.Context, cfg)
			var se *sweep.SettingsError
			switch {
			case errors.As(err, &se) || errors.Is(err, sweep.ErrNotSweep):
				return usageError{fmt.Errorf("sweep: --out %s: %w: give --fresh to start over in it, or another --out", cfg.Out, err)}
			case err != nil && res == nil && c.Context.Err() == nil: // nothing ran
				return usageError{sweepError(err)}
			case err != nil:
				return sweepError(err)
			}
			report := filepath.Join(cfg.Out, sweep.ReportFile)
			fmt.Fprintf(screen.Stdout(), "report: %s\n", report)
			failed := 0
			for _, r := range res.Points {
				if r.Row.Errors != "" {
					failed++
				}
			}
			if failed > 0 {
				return fmt.Errorf("sweep: %d of %d points failed (see %s; running the same command again runs them again)", failed, len(res.Points), report)
			}
			return nil
		},
	})
}

// sweepError is err as sweep's: with the command's name, once.
func sweepError(err error) error {
	if strings.HasPrefix(err.Error(), "sweep: ") {
		return err
	}
	return fmt.Errorf("sweep: %w", err)
}

// flagNames are the flags' names.
func flagNames(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()[0])
	}
	return names
}

// sweepFromFlags is the sweep the flags ask for, without its runner.
func sweepFromFlags(c *cli.Context) (sweep.Config, error) {
	var cfg sweep.Config
	var err error
	g := &cfg.Grid
	if g.Workers, err = sweep.ParseInts("workers", c.String("workers")); err != nil {
		return cfg, err
	}
	if g.Batches, err = sweep.ParseInts("batch", c.String("batch")); err != nil {
		return cfg, err
	}
	if g.Strategies, err = sweep.ParseStrategies(c.String("strategies")); err != nil {
		return cfg, err
	}
	if g.Stragglers, err = sweep.ParseStragglers(c.String("slow-peer")); err != nil {
		return cfg, err
	}
	if err := g.Check(); err != nil {
		return cfg, err
	}
	if err := g.Runnable(); err != nil {
		return cfg, err
	}
	if c.String("model") == mirrored.SparseModel {
		return cfg, fmt.Errorf("--model %s is not swept: its data and flags are its own (use launch for each run)", mirrored.SparseModel)
	}
	cfg.Out = c.String("out")
	if cfg.Out == "" {
		return cfg, errors.New("--out DIR is required (the report directory)")
	}
	tc, err := configFromFlags(c)
	if err != nil {
		return cfg, err
	}
	tc.BatchSize = g.Batches[0] // each point sets its own
	if tc.GradientBucket, err = gradientBucketFlag(c.String("gradient-bucket")); err != nil {
		return cfg, err
	}
	cfg.Job = mirrored.Job{Config: tc, HashEvery: c.Int("hash-every"), MeasureWait: c.Bool("measure-wait")}
	file, err := modelFromFile(c, &cfg.Job)
	if err != nil {
		return cfg, err
	}
	if _, err := linkFaultsFromFlags(c); err != nil {
		return cfg, err
	}
	el, err := elasticFromFlags(c, slices.Min(g.Workers)) // --min-workers fits every point
	if err != nil {
		return cfg, err
	}
	if el != nil && !slices.Contains(g.Strategies, mirrored.StrategyRing) {
		return cfg, fmt.Errorf("--elastic with --strategies %s: the elastic mode is the ring's (gossip goes on without a lost peer anyway); add ring to --strategies", c.String("strategies"))
	}
	cfg.Gossip = gossipFromFlags(c)
	if err := cfg.Job.Validate(); err != nil {
		return cfg, err
	}
	if err := cfg.Gossip.Validate(); err != nil {
		return cfg, err
	}
	if cfg.Security, err = p2p.ParseSecurity(c.String("security")); err != nil {
		return cfg, err
	}
	if c.Duration("collective-timeout") <= 0 {
		return cfg, fmt.Errorf("--collective-timeout %v: want > 0", c.Duration("collective-timeout"))
	}
	algo, err := collective.ParseAlgo(c.String("allreduce-algo"))
	if err != nil {
		return cfg, fmt.Errorf("--allreduce-algo: %w", err)
	}
	cfg.ScaleLR, cfg.Target, cfg.Timeout = c.Bool("scale-lr"), c.Float64("target"), c.Duration("collective-timeout")
	if t := cfg.Target; t != 0 && !(t > 0 && t <= 1) {
		return cfg, fmt.Errorf("--target %v: want a fraction in (0, 1], e.g. 0.97", t)
	}
	cfg.Resume = !c.Bool("fresh")
	// What changes a run beyond the job's settings, which a resumed sweep
	// must share too.
	cfg.Settings = map[string]string{"allreduce-algo": algo.String(), "allow-unverified": fmt.Sprint(cfg.Job.AllowUnverified)}
	for _, name := range sweepPassed() { // only those given: older results have none
		if c.IsSet(name) {
			cfg.Settings[name] = fmt.Sprint(c.Value(name))
		}
	}
	if file != nil {
		if cfg.Settings["architecture"], err = file.Arch.Digest(); err != nil {
			return cfg, fmt.Errorf("--model-file: %w", err)
		}
	}
	return cfg, nil
}
