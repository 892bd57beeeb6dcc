package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/internal/inputfile"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/launch"
	"github.com/meshtrain/meshtrain/mirrored/launch/cluster"
	"github.com/meshtrain/meshtrain/mirrored/membership"
)

// elasticFlags are the ring's elastic mode, on worker and launch.
func elasticFlags() []cli.Flag {
	return inCategory(catCluster,
		&cli.BoolFlag{Name: "elastic", Usage: "ring: survive lost peers (the survivors agree on who is left, roll back to the last in-memory commit, re-shard the data and go on) and admit a restarted worker at the next commit"},
		&cli.IntFlag{Name: "min-workers", Value: 1, Usage: "elastic: the fewest peers the run goes on with; below it the run stops with a checkpoint, naming who was lost"},
		&cli.IntFlag{Name: "commit-every", Value: mirrored.DefaultCommitEvery, Usage: "elastic: steps between in-memory commits (a loss costs the steps since the last one; epoch ends commit too)"},
		&cli.StringFlag{Name: "elastic-lr", Value: membership.LRScale, Usage: "elastic: how the learning rate follows the peers as they leave and join: scale (times peers ÷ the cluster's workers, --max-workers if given, as the global batch: the linear scaling rule Horovod's docs advise) or keep (as given)"},
		&cli.IntFlag{Name: "max-workers", Usage: "elastic: let workers outside the cluster's list join, up to this many workers in all (they hold the cluster secret; --discover-cmd finds them)"},
		&cli.StringFlag{Name: "discover-cmd", Usage: "elastic, with --max-workers: a command (sh -c) the running peers run every --discover-every, printing the workers' host:port, one a line, the new ones after the old (as Horovod's --host-discovery-script); a new one joins at the next commit"},
		&cli.BoolFlag{Name: "join", Usage: "elastic, with --max-workers: this worker is a newcomer, listed last in its cluster list: it joins the running run at the next commit once --discover-cmd lists it, and never starts a run of its own"},
		&cli.DurationFlag{Name: "discover-every", Value: launch.DefaultDiscoverEvery, Usage: "elastic: time between two runs of --discover-cmd, each of which must finish within it (it is killed and named otherwise)"},
		&cli.StringFlag{Name: "membership-schedule", Usage: "elastic: replay a recorded membership (a summary's or report's JSON with \"membership\"), changing members at those commits (every peer it names must be there): the run then ends with the recorded run's parameters, bit for bit"},
	)
}

// elasticFromFlags reads the elastic flags (nil without --elastic); the
// kill faults of a worker that launch restarted are dropped: they killed
// its first life.
func elasticFromFlags(c *cli.Context, workers int) (*mirrored.Elastic, error) {
	if !c.Bool("elastic") {
		for _, name := range []string{"min-workers", "commit-every", "elastic-lr", "max-workers", "discover-cmd", "discover-every", "join", "membership-schedule", "max-restarts"} {
			if c.IsSet(name) {
				return nil, fmt.Errorf("--%s without --elastic: it configures the elastic mode", name)
			}
		}
		return nil, nil
	}
	el := &mirrored.Elastic{MinWorkers: c.Int("min-workers"), CommitEvery: c.Int("commit-every"), LR: c.String("elastic-lr")}
	if err := membership.CheckLRPolicy(el.LR); err != nil {
		return nil, err
	}
	switch {
	case el.MinWorkers < 1 || el.MinWorkers > workers:
		return nil, fmt.Errorf("--min-workers %d: want 1 to the cluster's %d workers", el.MinWorkers, workers)
	case el.CommitEvery < 1:
		return nil, fmt.Errorf("--commit-every %d: want ≥ 1 step", el.CommitEvery)
	}
	if path := c.String("membership-schedule"); path != "" {
		b, err := inputfile.ReadFileMax(path, membership.MaxScheduleBytes)
		if err != nil {
			return nil, fmt.Errorf("--membership-schedule: %w", err)
		}
		if el.Schedule, err = membership.ParseSchedule(b); err != nil {
			return nil, fmt.Errorf("--membership-schedule %s: %w", path, err)
		}
		if err := membership.CheckSchedule(el.Schedule, max(workers, c.Int("max-workers")), el.CommitEvery); err != nil {
			return nil, fmt.Errorf("--membership-schedule %s: %w", path, err)
		}
	}
	return el, nil
}

// growFromFlags reads --max-workers, --discover-cmd and --join for
// cluster cl (a scaled-up Indexed Job's pod joins on its own, and its
// next pods' addresses are known: no command is needed).
func growFromFlags(c *cli.Context, cl *cluster.Cluster) (launch.Grow, error) {
	g := launch.Grow{Max: c.Int("max-workers"), Cmd: c.String("discover-cmd"), Every: c.Duration("discover-every"),
		Join: c.Bool("join") || cl.Joining, Slots: cl.Slots}
	if len(cl.Slots) > 0 || cl.Joining { // MESHTRAIN_MAX_WORKERS said how far
		g.Max = max(g.Max, len(cl.Peers)+len(cl.Slots))
	}
	if g.Max == 0 && g.Cmd != "" {
		return g, fmt.Errorf("--discover-cmd without --max-workers: say how many workers the run may grow to")
	}
	return g, g.Check(len(cl.Peers))
}

// restarted says how many times launch restarted this worker.
func restarted() int {
	n, _ := strconv.Atoi(os.Getenv(launch.RestartEnv))
	return n
}

// replayVerdict logs, after a run that replayed --membership-schedule,
// whether every recorded change happened at its step and whether the
// final parameters equal the record's: the replay promises both, and a
// replay that did not keep the promise must not pass in silence. A peer
// that left the run has no final parameters to compare.
func replayVerdict(c *cli.Context, wc launch.WorkerConfig, sum *mirrored.Summary) {
	path := c.String("membership-schedule")
	if mirrored.ElasticOf(wc.Job.Strategy) == nil || path == "" || sum == nil || sum.Run == nil || sum.Peer.Left != "" {
		return
	}
	b, err := inputfile.ReadFileMax(path, membership.MaxScheduleBytes)
	if err != nil {
		wc.Logger.Warn("replay: the schedule cannot be read again to compare", zap.Error(err))
		return
	}
	rec, err := membership.ParseRecord(b)
	if err != nil {
		wc.Logger.Warn("replay: the schedule cannot be read again to compare", zap.Error(err))
		return
	}
	if v := membership.CheckReplay(rec, sum.Run.Membership, sum.Run.ParamsSHA256); v.OK() {
		wc.Logger.Info(v.String())
	} else {
		wc.Logger.Warn(v.String())
	}
}
