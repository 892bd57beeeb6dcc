package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/observe"
	"github.com/meshtrain/meshtrain/mirrored/report"
	"github.com/meshtrain/meshtrain/mirrored/timeline"
)

func init() {
	register(&cli.Command{
		Name:  "train",
		Usage: "train on one worker (no network): LeNet-5, softmax regression, sparse logistic regression or a Keras model file, on MNIST or your data",
		Description: "With no flags this is the recipe that reaches ≥ 97.5% test accuracy after one epoch\n" +
			"and ≥ 99.0% within 10: LeNet-5, SGD momentum 0.9, batch 64, lr 0.05 halved every epoch\n" +
			"(in four steps per epoch) after a warm-up over the first tenth of an epoch. Softmax and\n" +
			"sparse-lr have recipes of their own (see --lr), chosen as README.md's \"Default recipes\" says.\n" +
			"Per epoch it prints the training loss, the test loss and accuracy on the full 10k test set,\n" +
			"and training examples/s (evaluation excluded).",
		CustomHelpTemplate: withExample("meshtrain train --model softmax --epochs 3 --summary run.json"),
		Flags: append(append(append(withModelFile(trainingFlags("examples per step")),
			&cli.StringFlag{Name: "summary", Usage: "write the run's figures as JSON to this file"}),
			sparseFlags()...), append(trainStrategyFlags(), callbackFlags()...)...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError{fmt.Errorf("train takes no arguments, got %q", c.Args().Slice())}
			}
			// One replica: there is nobody to slow down or lose.
			if err := rejectFlags(c, "needs several replicas: use launch (or compare)", faultFlagNames()...); err != nil {
				return err
			}
			strategy, _, err := strategyFromFlags(c, 1)
			if err != nil {
				return usageError{fmt.Errorf("train: %w", err)}
			}
			if mirrored.IsGossip(strategy) { // it would run alone, averaging with nobody
				return usageError{errors.New("train: --strategy gossip needs several replicas: use launch -n N --strategy gossip (or compare)")}
			}
			if err := checkOutputs(c); err != nil {
				return fmt.Errorf("train: %w", err)
			}
			warnIgnored(c)
			cfg, err := configFromFlags(c)
			if err != nil {
				return usageError{fmt.Errorf("train: %w", err)}
			}
			cfg.Progress, cfg.Logger = screen.Stdout(), logger(c, "train")
			job := mirrored.Job{Config: cfg, Strategy: strategy, Resources: observe.Resources(0)}
			// The progress shows each epoch; a console log repeats it only at debug.
			if job.Observers, err = observe.Standard(observe.Options{Logger: cfg.Logger, Progress: screen.Stdout(),
				QuietProgressLog: c.String("log-format") == "console", LogDir: c.String("logdir"), LogEvery: c.Int("log-every")}); err != nil {
				return usageError{fmt.Errorf("train: %w", err)}
			}
			if c.String("timeline") != "" {
				job.Timeline = timeline.NewRecorder(c.Int("timeline-steps"))
			}
			if job.Sparse, err = sparseFromFlags(c); err != nil {
				return usageError{fmt.Errorf("train: %w", err)}
			}
			if job.Callbacks, err = callbacksFromFlags(c); err != nil {
				return usageError{fmt.Errorf("train: %w", err)}
			}
			file, err := modelFromFile(c, &job)
			if err != nil {
				return fmt.Errorf("train: %w", err)
			}
			if err := wireFromFlags(c, &job); err != nil { // alone, it rounds as the wire would
				return usageError{fmt.Errorf("train: %w", err)}
			}
			if err := syncBatchNormFromFlags(c, &job, file); err != nil { // alone, its shards meet as peers would
				return usageError{fmt.Errorf("train: %w", err)}
			}
			if err := job.Validate(); err != nil {
				return usageError{fmt.Errorf("train: %w", err)}
			}
			if err := checkMemory(c, job, file, 1); err != nil {
				return usageError{fmt.Errorf("train: %w", err)}
			}
			costParams, err := costFromFlags(c)
			if err != nil {
				return fmt.Errorf("train: %w", err)
			}
			sum, err := mirrored.Train(c.Context, job)
			if err != nil {
				return fmt.Errorf("train: %w", err)
			}
			res := sum.Run
			fmt.Printf("done: %d epochs, %d steps, final test accuracy %.2f%%, %.1fs training, %.1fs wall, params sha256 %s\n",
				len(res.EpochResults), res.Steps, 100*res.FinalAccuracy, res.TrainSeconds, res.WallSeconds, res.ParamsSHA256)
			vr := report.FromPeers([]*mirrored.PeerStats{&sum.Peer}, "")
			if costParams != nil && res.Model != mirrored.SparseModel {
				vr.Cost, vr.GradientBytes = costParams, 4*float64(res.Params)
			}
			v, ok := report.VerdictOf(vr)
			if ok {
				fmt.Println(v)
			}
			if path := c.String("timeline"); path != "" {
				if err := timeline.WriteFile(path, []timeline.Peer{{Spans: job.Timeline.Spans()}}); err != nil {
					return fmt.Errorf("train: %w", err)
				}
			}
			if path := c.String("summary"); path != "" {
				// The run's figures, its verdict and its resource history.
				out := struct {
					*mirrored.Result
					Verdict   *report.Verdict           `json:"verdict,omitempty"`
					Resources []mirrored.ResourceSample `json:"resources,omitempty"`
				}{Result: res, Resources: sum.Peer.Resources}
				if ok {
					out.Verdict = &v
				}
				b, err := json.MarshalIndent(out, "", "  ")
				if err != nil {
					return fmt.Errorf("train: encoding the summary: %w", err)
				}
				if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
					return fmt.Errorf("train: writing the summary: %w", err)
				}
			}
			return nil
		},
	})
}
