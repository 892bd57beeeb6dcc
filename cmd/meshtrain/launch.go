package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/launch"
	"github.com/meshtrain/meshtrain/mirrored/report"
)

func init() {
	shared := append(append(append(append(withModelFile(jobFlags()), sparseFlags()...), strategyFlags()...), linkFaultFlags()...), callbackFlags()...)
	flags := append([]cli.Flag{
		&cli.IntFlag{Name: "n", Aliases: []string{"workers"}, Value: 2, Usage: "number of worker processes"},
		&cli.StringFlag{Name: "run-dir", Usage: "keep the workers' TF_CONFIG files and reports here (default: a temporary directory)"},
		&cli.StringFlag{Name: "summary", Usage: "write the per-peer summary (with parameter hashes and per-epoch accuracy) as JSON to this file"},
		// Gossip's: under the ring a lost peer stops every replica, so it
		// is warned about as ignored, like gossip's other flags.
		inCategory(catGossip, &cli.BoolFlag{Name: "tolerate-loss", Usage: "gossip: succeed when some replicas were lost and the others finished (default: exit non-zero naming them); the ring's --elastic succeeds on its own while at least --min-workers are left"})[0],
		inCategory(catCluster, &cli.IntFlag{Name: "max-restarts", Usage: "elastic: restart a worker that dies up to this many times (torchrun's flag); it rejoins the running cluster at the next commit"})[0],
	}, shared...)
	register(&cli.Command{
		Name:  "launch",
		Usage: "train on N local worker processes that talk over libp2p (like N machines)",
		Description: "Picks N free ports on 127.0.0.1, writes each worker's TF_CONFIG, starts N `meshtrain worker`\n" +
			"processes with a fresh random cluster secret, prints their output prefixed by rank and one\n" +
			"status line per epoch, then a summary table per peer. Training flags are passed to every\n" +
			"worker. If a worker fails, the others are stopped and launch exits non-zero naming the rank\n" +
			"the others were waiting for. Every wait is bounded: once a worker has exited, the rest have\n" +
			"the collective timeout plus 5 s to follow, or are killed and named.",
		CustomHelpTemplate: withExample("meshtrain launch -n 2 --epochs 2 --summary run.json"),
		Flags:              flags,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError{fmt.Errorf("launch takes no arguments, got %q", c.Args().Slice())}
			}
			n := c.Int("n")
			if n < 1 {
				return usageError{fmt.Errorf("launch: -n %d: want at least 1 worker", n)}
			}
			// Check the flags here so that a typo fails once, not N times.
			job, _, err := jobFromFlags(c, n)
			if err != nil {
				return usageError{fmt.Errorf("launch: %w", err)}
			}
			algo, err := collective.ParseAlgo(c.String("allreduce-algo"))
			if err != nil {
				return usageError{fmt.Errorf("launch: --allreduce-algo: %w", err)}
			}
			costParams, err := costFromFlags(c)
			if err != nil {
				return fmt.Errorf("launch: %w", err)
			}
			faults, err := linkFaultsFromFlags(c)
			if err != nil {
				return usageError{fmt.Errorf("launch: %w", err)}
			}
			if err := checkOutputs(c); err != nil {
				return fmt.Errorf("launch: %w", err)
			}
			if err := absModelFile(c); err != nil {
				return fmt.Errorf("launch: %w", err)
			}
			warnIgnored(c) // once here: the workers launched with --events do not repeat it
			if job.Sparse == nil && job.Data == "" {
				// Find or fetch MNIST once, showing the fetch's bytes, before
				// the workers look for it (they then find it): it is the
				// image set when none is named.
				if _, err := data.EnsureMNIST(c.Context, data.MNISTOptions{Dir: job.DataDir, AllowUnverified: job.AllowUnverified,
					Logger: logger(c, "data"), Progress: screen.Stdout()}); err != nil {
					return fmt.Errorf("launch: %w", err)
				}
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("launch: finding this binary to start the workers: %w", err)
			}
			var workerArgs []string
			for _, f := range shared {
				name := f.Names()[0]
				if c.IsSet(name) {
					workerArgs = append(workerArgs, fmt.Sprintf("--%s=%v", name, c.Value(name)))
				}
			}
			// The workers log warnings and errors unless asked for more:
			// the launcher's status lines say what their info logs would.
			global := []string{"--log-level=warn"}
			for _, name := range []string{"log-format", "log-level"} {
				if c.IsSet(name) {
					global = append(global, fmt.Sprintf("--%s=%v", name, c.String(name)))
				}
			}
			rep, err := launch.Run(c.Context, launch.Config{
				N: n, Executable: exe, GlobalArgs: global, WorkerArgs: workerArgs,
				QUIC: c.String("security") == string(p2p.SecurityQUIC), RunDir: c.String("run-dir"),
				StopGrace: c.Duration("collective-timeout") + 5*time.Second,
				Gossip:    mirrored.IsGossip(job.Strategy), TolerateLoss: c.Bool("tolerate-loss"),
				Elastic: mirrored.ElasticOf(job.Strategy) != nil, MaxRestarts: c.Int("max-restarts"),
				Stdout: screen.Stdout(), Stderr: screen.Stderr(), LogEvery: c.Int("log-every"), Logger: logger(c, "launch"),
				Info: report.RunInfo{Strategy: job.Strategy.Name(), Security: c.String("security"), AllReduceAlgo: algo.String(), LinkFaults: faults.String(), Wire: wireInfo(job)},
			})
			if rep != nil && len(rep.Peers) > 0 && c.Context.Err() == nil { // after Ctrl-C: no table of dashes
				rep.Cost = costParams
				fmt.Println()
				report.WriteTable(os.Stdout, rep)
				if path := c.String("summary"); path != "" {
					if werr := report.WriteSummary(path, rep); werr != nil {
						err = errors.Join(err, werr)
					}
				}
			}
			if err != nil {
				return fmt.Errorf("launch: %w", err)
			}
			if !rep.Identical && !rep.Gossip {
				return errors.New("launch: the workers finished with different parameters")
			}
			return nil
		},
	})
}
