package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/internal/inputfile"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/launch"
	"github.com/meshtrain/meshtrain/mirrored/membership"
)

// elasticFlags are the ring's elastic mode, on worker and launch.
func elasticFlags() []cli.Flag {
	return inCategory(catCluster,
		&cli.BoolFlag{Name: "elastic", Usage: "ring: survive lost peers (the survivors agree on who is left, roll back to the last in-memory commit, re-shard the data and go on) and admit a restarted worker at the next commit"},
		&cli.IntFlag{Name: "min-workers", Value: 1, Usage: "elastic: the fewest peers the run goes on with; below it the run stops with a checkpoint, naming who was lost"},
		&cli.IntFlag{Name: "commit-every", Value: mirrored.DefaultCommitEvery, Usage: "elastic: steps between in-memory commits (a loss costs the steps since the last one; epoch ends commit too)"},
		&cli.StringFlag{Name: "membership-schedule", Usage: "elastic: replay a recorded membership (a summary's or report's JSON with \"membership\"), changing members at those commits (every peer it names must be there): the run then ends with the recorded run's parameters, bit for bit"},
	)
}

// elasticFromFlags reads the elastic flags (nil without --elastic); the
// kill faults of a worker that launch restarted are dropped: they killed
// its first life.
func elasticFromFlags(c *cli.Context, workers int) (*mirrored.Elastic, error) {
	if !c.Bool("elastic") {
		for _, name := range []string{"min-workers", "commit-every", "membership-schedule", "max-restarts"} {
			if c.IsSet(name) {
				return nil, fmt.Errorf("--%s without --elastic: it configures the elastic mode", name)
			}
		}
		return nil, nil
	}
	el := &mirrored.Elastic{MinWorkers: c.Int("min-workers"), CommitEvery: c.Int("commit-every")}
	switch {
	case el.MinWorkers < 1 || el.MinWorkers > workers:
		return nil, fmt.Errorf("--min-workers %d: want 1 to the cluster's %d workers", el.MinWorkers, workers)
	case el.CommitEvery < 1:
		return nil, fmt.Errorf("--commit-every %d: want ≥ 1 step", el.CommitEvery)
	}
	if path := c.String("membership-schedule"); path != "" {
		b, err := inputfile.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--membership-schedule: %w", err)
		}
		if el.Schedule, err = membership.ParseSchedule(b); err != nil {
			return nil, fmt.Errorf("--membership-schedule %s: %w", path, err)
		}
		if err := membership.CheckSchedule(el.Schedule, workers, el.CommitEvery); err != nil {
			return nil, fmt.Errorf("--membership-schedule %s: %w", path, err)
		}
	}
	return el, nil
}

// restarted says how many times launch restarted this worker.
func restarted() int {
	n, _ := strconv.Atoi(os.Getenv(launch.RestartEnv))
	return n
}
