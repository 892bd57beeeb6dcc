package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/cost"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/launch"
	"github.com/meshtrain/meshtrain/mirrored/launch/cluster"
	"github.com/meshtrain/meshtrain/mirrored/measure/bench"
	"github.com/meshtrain/meshtrain/mirrored/measure/calibrate"
	"github.com/meshtrain/meshtrain/mirrored/membership"
	"github.com/meshtrain/meshtrain/mirrored/observe"
	"github.com/meshtrain/meshtrain/mirrored/report"
	"github.com/meshtrain/meshtrain/mirrored/timeline"
	"github.com/meshtrain/meshtrain/nn"
)

// trainingFlags are the model and optimisation flags of train, worker,
// launch and compare; batchUsage says what --batch counts there. The
// recipe's flags (recipeFlags) default to the chosen --model's recipe
// (mirrored.DefaultConfigFor), which their help lists per model.
func trainingFlags(batchUsage string) []cli.Flag {
	d := mirrored.DefaultConfig()
	return append(append(inCategory(catTraining,
		&cli.StringFlag{Name: "model", Value: d.Model, Usage: "model: " + strings.Join(nn.ModelNames, " | ") + " | " + mirrored.SparseModel},
		&cli.IntFlag{Name: "epochs", Value: d.Epochs, Usage: "passes over the training set", DefaultText: perModel(func(c mirrored.Config) any { return c.Epochs })},
		&cli.IntFlag{Name: "batch", Value: d.BatchSize, Usage: batchUsage, DefaultText: perModel(func(c mirrored.Config) any { return c.BatchSize })},
		&cli.Float64Flag{Name: "lr", Value: d.LR, Usage: "base learning rate", DefaultText: perModel(func(c mirrored.Config) any { return c.LR })},
		&cli.StringFlag{Name: "optimizer", Value: d.Optimizer, Usage: "optimizer: " + strings.Join(nn.OptimizerNames, " | ") + " (sgd uses --momentum if > 0)"},
		&cli.Float64Flag{Name: "momentum", Value: d.Momentum, Usage: "momentum for sgd, momentum and nesterov"},
		&cli.Float64Flag{Name: "weight-decay", Value: d.WeightDecay, Usage: "L2 weight decay"},
		&cli.StringFlag{Name: "lr-schedule", Value: d.Schedule, Usage: "learning-rate schedule: " + strings.Join(nn.ScheduleNames, " | ")},
		&cli.Float64Flag{Name: "lr-gamma", Value: d.LRGamma, Usage: "step schedule: factor per decay"},
		&cli.Float64Flag{Name: "lr-decay-epochs", Value: d.LRDecayEpochs, Usage: "step schedule: epochs between decays"},
		&cli.Float64Flag{Name: "warmup-epochs", Value: d.WarmupEpochs, Usage: "linear learning-rate warm-up, in epochs"},
		&cli.Float64Flag{Name: "min-lr", Value: d.MinLR, Usage: "cosine schedule: final learning rate"},
		&cli.Int64Flag{Name: "seed", Value: d.Seed, Usage: "seed for initialisation and shuffling"},
		wireFlag(),
		syncBatchNormFlag(),
		&cli.StringFlag{Name: "data-dir", Usage: "directory holding (or to fetch) the MNIST IDX files"},
		allowUnverifiedFlag(),
	), inCategory(catTraining, dataFlags()...)...), inCategory(catTraining,
		&cli.StringFlag{Name: "logdir", Usage: "write TensorBoard event files under this directory (worker-N/train and worker-N/validation, as Keras lays them out)"},
		&cli.IntFlag{Name: "log-every", Value: observe.DefaultLogEvery, Usage: "steps between the per-step TensorBoard scalars (loss, rate, examples/s, compute/comm/wait, bytes sent)"},
		&cli.StringFlag{Name: "timeline", Usage: "write the run's timeline to this file (Chrome's trace format: chrome://tracing, ui.perfetto.dev): every peer's input, compute, wait, combine, update, evaluation and checkpoints, on the chief's clock, with who arrived last at each combine"},
		&cli.IntFlag{Name: "timeline-steps", Value: timeline.DefaultSteps, Usage: "the timeline keeps each peer's last this many steps"},
		&cli.StringFlag{Name: "cost-params", Value: defaultCostFile, Usage: "the cost model's calibration (meshtrain model calibrate): the verdict at the end shows its predicted step beside the measured one (the default file is used when it exists)"},
		&cli.Float64Flag{Name: "target-accuracy", Usage: "stop after the first epoch with at least this test accuracy (fraction, e.g. 0.99)"},
		&cli.Float64Flag{Name: "target-loss", Usage: "stop after the first epoch with at most this mean training loss (e.g. 0.35)"},
		&cli.IntFlag{Name: "train-examples", Usage: "use only the first N training examples (0: all)"},
		&cli.IntFlag{Name: "test-examples", Usage: "evaluate on only the first N test examples (0: all)"},
	)...)
}

// recipeModels are the models with a default recipe, in the order their
// help lists them.
var recipeModels = append(slices.Clone(nn.ModelNames), mirrored.SparseModel)

// perModel is the help's default of a recipe flag: one value when every
// model's recipe has the same, else "per --model: lenet 0.05, ...".
func perModel(field func(mirrored.Config) any) string {
	first := fmt.Sprint(field(mirrored.DefaultConfigFor(recipeModels[0])))
	parts, same := []string{recipeModels[0] + " " + first}, true
	for _, m := range recipeModels[1:] {
		v := fmt.Sprint(field(mirrored.DefaultConfigFor(m)))
		same = same && v == first
		parts = append(parts, m+" "+v)
	}
	if same {
		return first
	}
	return "per --model: " + strings.Join(parts, ", ")
}

// allowUnverifiedFlag is --allow-unverified, on every command that reads
// --data-dir.
func allowUnverifiedFlag() cli.Flag {
	return &cli.BoolFlag{Name: "allow-unverified", Usage: "accept IDX files in --data-dir that are not the published MNIST: a modified copy, or another image-classification set in MNIST's format and file names (any image size softmax takes, classes from the labels); structure is still checked"}
}

// configFromFlags reads trainingFlags into a Config (unvalidated: the
// sparse job checks its own): the --model's recipe, with the flags given.
func configFromFlags(c *cli.Context) (mirrored.Config, error) {
	acc := c.Float64("target-accuracy")
	if acc > 1 && acc <= 100 {
		return mirrored.Config{}, fmt.Errorf("--target-accuracy %v: give a fraction (e.g. %v)", acc, acc/100)
	}
	cfg := mirrored.DefaultConfigFor(c.String("model"))
	cfg.Model = c.String("model")
	given(c, "epochs", &cfg.Epochs, c.Int)
	given(c, "batch", &cfg.BatchSize, c.Int)
	given(c, "lr", &cfg.LR, c.Float64)
	given(c, "optimizer", &cfg.Optimizer, c.String)
	given(c, "momentum", &cfg.Momentum, c.Float64)
	given(c, "weight-decay", &cfg.WeightDecay, c.Float64)
	given(c, "lr-schedule", &cfg.Schedule, c.String)
	given(c, "lr-gamma", &cfg.LRGamma, c.Float64)
	given(c, "lr-decay-epochs", &cfg.LRDecayEpochs, c.Float64)
	given(c, "warmup-epochs", &cfg.WarmupEpochs, c.Float64)
	given(c, "min-lr", &cfg.MinLR, c.Float64)
	cfg.Seed = c.Int64("seed")
	cfg.TargetAccuracy, cfg.TargetLoss = acc, c.Float64("target-loss")
	cfg.DataDir = c.String("data-dir")
	var err error
	if cfg.Data, cfg.DataFormat, cfg.DataRead, err = dataFromFlags(c); err != nil {
		return mirrored.Config{}, err
	}
	if n := c.Int("log-every"); n < 0 { // the observers' setting, checked with the others
		return mirrored.Config{}, fmt.Errorf("log every %d steps: want ≥ 1 (0: every %d)", n, observe.DefaultLogEvery)
	}
	cfg.AllowUnverified = c.Bool("allow-unverified")
	cfg.TrainExamples, cfg.TestExamples = c.Int("train-examples"), c.Int("test-examples")
	return cfg, nil
}

// gradientBucketFlag is --gradient-bucket as Config.GradientBucket.
func gradientBucketFlag(v string) (int, error) {
	if v == "off" || v == "0" {
		return -1, nil
	}
	sizes, err := bench.ParseSizes(v)
	if err != nil || len(sizes) != 1 || sizes[0] > 1<<30 {
		return 0, fmt.Errorf("--gradient-bucket %q: want a size such as 256K or 1M (at most 1G), or off", v)
	}
	if sizes[0] == 0 {
		return -1, nil
	}
	return int(sizes[0]), nil
}

// given sets *dst to flag name's value if the command line gives it, and
// leaves the recipe's default otherwise.
func given[T any](c *cli.Context, name string, dst *T, value func(string) T) {
	if c.IsSet(name) {
		*dst = value(name)
	}
}

// jobFlags are the training and cluster flags shared by worker and launch
// (launch forwards the ones given to every worker).
func jobFlags() []cli.Flag {
	flags := trainingFlags("examples per worker per step (global batch = batch × workers)")
	// --scale-lr goes next to --lr in the help.
	lr := slices.IndexFunc(flags, func(f cli.Flag) bool { return f.Names()[0] == "lr" })
	flags = slices.Insert(flags, lr+1, inCategory(catTraining, &cli.BoolFlag{Name: "scale-lr", Usage: "multiply --lr by the number of workers (linear scaling rule for the larger global batch)"})...)
	flags = append(flags, inCategory(catTraining,
		&cli.StringFlag{Name: "checkpoint-dir", Usage: "the chief writes checkpoints here, and a run resumes from the newest one here"},
		&cli.IntFlag{Name: "checkpoint-every", Usage: "steps between checkpoints (0: at the end of every epoch)"},
		&cli.IntFlag{Name: "keep-checkpoints", Value: 3, Usage: "how many checkpoints to keep (0: all)"},
		&cli.StringFlag{Name: "restore", Usage: "resume from this checkpoint file (read by the chief) instead of the newest in --checkpoint-dir"},
	)...)
	return append(append(flags, inCategory(catCluster,
		&cli.IntFlag{Name: "hash-every", Value: 500, Usage: "steps between comparisons of the replicas' parameter hashes (0: only at the end)"},
		&cli.BoolFlag{Name: "measure-wait", Value: true, Usage: "barrier before each gradient all-reduce, to tell waiting for slower peers from communicating"},
		&cli.StringFlag{Name: "gradient-bucket", Value: "1M", Usage: "all-reduce the gradient in buckets of at least this size (K, M suffixes) while the backward pass computes the rest, as DDP's bucket_cap_mb; 0 or off: the whole gradient after the pass (the bits are the same)"},
		&cli.StringFlag{Name: "security", Value: string(p2p.SecurityTLS), Usage: "link security: tls | noise | quic | plaintext (plaintext only on trusted networks)"},
		&cli.StringFlag{Name: "intra-host", Value: string(p2p.IntraHostAuto), Usage: "links between peers on one host, as one user: auto (shared memory, admitted by the kernel's peer credentials and the cluster secret; no cipher) | tls (over --security, as between hosts); every peer must use the same"},
		&cli.StringFlag{Name: "allreduce-algo", Value: "auto", Usage: "gradient all-reduce: auto (by size, and hierarchical where some host runs several peers) | ring | tree (recursive doubling) | star (rank 0 reduces; small buffers at 3-8 ranks) | hierarchical (reduce in each host, ring over one leader per host, broadcast back)"},
		&cli.StringFlag{Name: "host-id", Usage: "the host this peer counts as for the hierarchical all-reduce (default: this machine, boot and network namespace); peers given the same are one host"},
		&cli.DurationFlag{Name: "collective-timeout", Value: 60 * time.Second, Usage: "longest wait for a peer in any collective (and for connecting)"},
	)...), elasticFlags()...)
}

// jobFromFlags builds the job (model, sparse-lr's settings, strategy and
// faults, checked for workers ranks) and the link security from the flags.
func jobFromFlags(c *cli.Context, workers int) (job mirrored.Job, sec p2p.Security, err error) {
	if err := checkPeerCount(c, workers); err != nil {
		return job, "", err
	}
	cfg, err := configFromFlags(c)
	if err != nil {
		return job, "", err
	}
	job = mirrored.Job{
		Config:          cfg,
		CheckpointDir:   c.String("checkpoint-dir"),
		CheckpointEvery: c.Int("checkpoint-every"),
		KeepCheckpoints: c.Int("keep-checkpoints"),
		Restore:         c.String("restore"),
		HashEvery:       c.Int("hash-every"),
		MeasureWait:     c.Bool("measure-wait"),
	}
	if job.Config.GradientBucket, err = gradientBucketFlag(c.String("gradient-bucket")); err != nil {
		return job, "", err
	}
	if job.Sparse, err = sparseFromFlags(c); err != nil {
		return job, "", err
	}
	if job.Callbacks, err = callbacksFromFlags(c); err != nil {
		return job, "", err
	}
	file, err := modelFromFile(c, &job)
	if err != nil {
		return job, "", err
	}
	if c.Bool("scale-lr") { // after the model file's rate, if it gives one
		job.LR *= float64(workers)
	}
	if job.Strategy, job.Faults, err = strategyFromFlags(c, workers); err != nil {
		return job, "", err
	}
	el, err := elasticFromFlags(c, workers)
	if err != nil {
		return job, "", err
	}
	if err := wireFromFlags(c, &job); err != nil {
		return job, "", err
	}
	if err := syncBatchNormFromFlags(c, &job, file); err != nil {
		return job, "", err
	}
	if el != nil && mirrored.IsGossip(job.Strategy) {
		return job, "", errors.New("--elastic with --strategy gossip: gossip already goes on without a lost replica (launch --tolerate-loss); --elastic is for the ring")
	}
	if el != nil {
		job.Strategy = el // the ring, elastic
		if restarted() > 0 {
			job.Faults.KillAfter = 0 // the kill was its first life's
		}
	}
	if err := job.Validate(); err != nil {
		return job, "", err
	}
	perHost := 1 // a worker is one process of the cluster
	if c.Command.Name == "launch" || c.Command.Name == "compare" {
		perHost = workers // every worker on this machine
	}
	if err := checkMemory(c, job, file, perHost); err != nil {
		return job, "", err
	}
	if sec, err = p2p.ParseSecurity(c.String("security")); err != nil {
		return job, "", err
	}
	if _, err := intraHostFlag(c); err != nil {
		return job, "", err
	}
	if c.Duration("collective-timeout") <= 0 {
		return job, "", fmt.Errorf("--collective-timeout %v: want > 0", c.Duration("collective-timeout"))
	}
	return job, sec, nil
}

// intraHostFlag is --intra-host.
func intraHostFlag(c *cli.Context) (p2p.IntraHost, error) {
	ih, err := p2p.ParseIntraHost(c.String("intra-host"))
	if err != nil {
		return "", fmt.Errorf("--intra-host: %w", err)
	}
	return ih, nil
}

// credentials are this peer's: its --identity key, if given, and the
// cluster secret and PSK from the environment (the secret may be missing
// when the peer has its own key and every peer is listed with its ID).
func credentials(c *cli.Context, spec *cluster.Cluster) (secret, psk []byte, identity crypto.PrivKey, err error) {
	if path := c.String("identity"); path != "" {
		if identity, err = p2p.LoadIdentity(path); err != nil {
			return nil, nil, nil, fmt.Errorf("--identity: %w (make a key with meshtrain worker --new-identity FILE)", err)
		}
	}
	if path := c.String("secret-file"); path != "" {
		secret, psk, err = launch.SecretFromFile(path)
		return secret, psk, identity, err
	}
	secret, psk, err = launch.SecretFromEnv(identity != nil && spec.AllPeerIDs())
	return secret, psk, identity, err
}

// slurmHelp is worker's help on running under srun.
const slurmHelp = "With no TF_CONFIG, under srun (SLURM_PROCID set), the cluster is the job step: rank SLURM_PROCID, the step's\n" +
	"nodes under block distribution, task i on a node at the step's i-th reserved port (srun --resv-ports), else at\n" +
	"a base derived from SLURM_JOB_ID (or --slurm-base-port) + i:\n\n" +
	"  srun meshtrain worker --secret-file ~/.meshtrain-secret --model lenet --epochs 10 --summary summary.json\n\n"

func init() {
	flags := append(append(append(append(append(withModelFile(jobFlags()), sparseFlags()...), strategyFlags()...), linkFaultFlags()...), callbackFlags()...),
		&cli.StringFlag{Name: "tf-config", Usage: "cluster spec file (default: the TF_CONFIG environment variable, else Slurm's environment under srun)"},
		&cli.IntFlag{Name: "slurm-base-port", EnvVars: []string{cluster.SlurmBasePortEnv}, Usage: "under srun: task i on a node listens on this port plus i",
			DefaultText: fmt.Sprintf("the step's reserved ports (%s, from srun --resv-ports), else %d + %d × (%s mod %d), so that jobs sharing a node do not meet",
				cluster.SlurmResvPortsEnv, cluster.SlurmJobPortLow, cluster.SlurmJobPortStride, cluster.SlurmJobIDEnv, cluster.SlurmJobPortSlots)},
		&cli.StringFlag{Name: "secret-file", EnvVars: []string{launch.SecretFileEnv}, Usage: "read the cluster secret from this file (mode 600) instead of " + launch.SecretEnv},
		&cli.StringFlag{Name: "report", Usage: "write this peer's summary as JSON to this file; " + rankPlaceholder + " in it is replaced by this peer's rank (one srun gives every task the same arguments: --report peer-" + rankPlaceholder + ".json)"},
		&cli.StringFlag{Name: "summary", Usage: "on the chief: write the cluster's summary (every peer's figures, gathered at the end, as launch --summary writes it) as JSON to this file (the chief prints launch's table in any case)"},
		&cli.BoolFlag{Name: "events", Usage: "print progress events as marked JSON lines on stdout (for meshtrain launch)"},
		&cli.StringFlag{Name: "identity", Usage: "this peer's libp2p key file (instead of the one derived from " + launch.SecretEnv + "), for a TF_CONFIG of /p2p/ multiaddrs"},
		&cli.StringFlag{Name: "new-identity", Usage: "write a fresh key to this file, print its peer ID and exit"},
		&cli.DurationFlag{Name: "evaluator-timeout", Value: launch.DefaultEvaluatorTimeout, Usage: "evaluator task: longest wait for a new checkpoint before stopping"},
		&cli.StringFlag{Name: "peer-pattern", EnvVars: []string{cluster.PeerPatternEnv}, Usage: "Kubernetes Indexed Job (with " + cluster.JobIndexEnv + " set, no TF_CONFIG): the peers' host:port with " + cluster.IndexPlaceholder + " for each pod's index, e.g. 'train-{index}.train:7000' (Job train, headless Service train)"},
		&cli.IntFlag{Name: "num-workers", EnvVars: []string{cluster.NumWorkersEnv}, Usage: "Kubernetes Indexed Job: the number of workers (the Job's completions)"},
		&cli.StringFlag{Name: "health-addr", EnvVars: []string{"MESHTRAIN_HEALTH_ADDR"}, Usage: "serve HTTP probes here (e.g. :8080): /healthz 200 while running, /readyz 200 once this peer listens (the readinessProbe: a pod's DNS name is published once it is ready), /readyz/cluster 200 once the cluster has formed; both 503 after SIGTERM"},
		&cli.IntFlag{Name: "sigterm-exit-code", Value: exitTerminated, Usage: "exit code of the peer that got SIGTERM, once stopped cleanly: 128 + SIGTERM by default, which Kubeflow's restartPolicy ExitCode and an Indexed Job retry (a chief that exits 0 marks a TFJob Succeeded; an Indexed Job's pod that exits 0 counts as its index done); 0 for a stop that is the end of the job"},
		&cli.DurationFlag{Name: "stop-timeout", Value: 25 * time.Second, Usage: "after SIGTERM: the peers stop together within " + fmt.Sprint(mirrored.StopVoteEvery) + " steps (gossip: at their next step), the chief writes a checkpoint (with --checkpoint-dir) and this peer exits --sigterm-exit-code; past this long it exits at once (keep it under the pod's terminationGracePeriodSeconds)"},
	)
	register(&cli.Command{
		Name:  "worker",
		Usage: "run one peer of a multi-worker training cluster described by TF_CONFIG or started by srun",
		Description: "Every peer runs the same command with the same training flags and its own TF_CONFIG:\n\n" +
			"  TF_CONFIG='{\"cluster\": {\"worker\": [\"host1:7000\", \"host2:7000\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}' \\\n" +
			"  " + launch.SecretEnv + "=<the same 64 hex digits on every peer> meshtrain worker --model lenet --epochs 10\n\n" +
			"Worker 0 is the chief (rank 0); with a \"chief\" entry, the chief is rank 0 and worker i is rank i+1.\n" +
			"The peers' libp2p identities are derived from " + launch.SecretEnv + "; entries may instead be\n" +
			"multiaddrs ending in /p2p/<peer-id>, each peer given its key with --identity (made by --new-identity).\n" + launch.PSKEnv + " (64 hex digits) adds a private-network key.\n\n" +
			slurmHelp +
			"With task type \"evaluator\" (a cluster's \"evaluator\" entry) it joins no collective: it follows the chief's\n" +
			"--checkpoint-dir, evaluates each new checkpoint on the test set and writes --logdir/evaluator/validation,\n" +
			"until the run's last checkpoint (or --evaluator-timeout without a new one).",
		CustomHelpTemplate: withExample(launch.SecretEnv + "=$(openssl rand -hex 32) meshtrain worker --tf-config tf_config.json --epochs 10"),
		Flags:              flags,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError{fmt.Errorf("worker takes no arguments, got %q", c.Args().Slice())}
			}
			if path := c.String("new-identity"); path != "" {
				id, err := p2p.WriteIdentity(path)
				if err != nil {
					return fmt.Errorf("worker: --new-identity: %w", err)
				}
				fmt.Println(id)
				return nil
			}
			cl, err := cluster.Discover(cluster.DiscoverOptions{File: c.String("tf-config"), SlurmBasePort: c.Int("slurm-base-port"),
				PeerPattern: c.String("peer-pattern"), NumWorkers: c.Int("num-workers"), MaxWorkers: c.Int("max-workers")})
			if err != nil {
				// A cluster spec, environment or flag that describes no
				// cluster: a usage error, before any work.
				return usageError{fmt.Errorf("worker: %w", err)}
			}
			if cl.IsEvaluator() {
				return runEvaluator(c)
			}
			if r := c.String("report"); strings.Contains(r, rankPlaceholder) {
				if err := c.Set("report", perRank(r, cl.Rank)); err != nil {
					return fmt.Errorf("worker: --report: %w", err)
				}
			}
			job, sec, err := jobFromFlags(c, len(cl.Peers))
			if err != nil {
				return usageError{fmt.Errorf("worker: %w", err)}
			}
			algo, err := collective.ParseAlgo(c.String("allreduce-algo"))
			if err != nil {
				return usageError{fmt.Errorf("worker: --allreduce-algo: %w", err)}
			}
			host := c.String("host-id")
			if c.IsSet("host-id") && (strings.TrimSpace(host) != host || host == "" || len(host) > 256) {
				return usageError{fmt.Errorf("worker: --host-id %q: want a name of 1 to 256 characters without surrounding spaces, the same on every peer of one host", host)}
			}
			costParams, err := costFromFlags(c)
			if err != nil {
				return fmt.Errorf("worker: %w", err)
			}
			faults, err := linkFaultsFromFlags(c)
			if err != nil {
				return usageError{fmt.Errorf("worker: %w", err)}
			}
			if err := checkOutputs(c); err != nil {
				return fmt.Errorf("worker: %w", err)
			}
			if !c.Bool("events") { // under launch, which warned once for all
				warnIgnored(c)
			}
			secret, psk, identity, err := credentials(c, cl)
			if err != nil {
				return fmt.Errorf("worker: %w", err)
			}
			intra, err := intraHostFlag(c)
			if err != nil {
				return usageError{fmt.Errorf("worker: %w", err)}
			}
			log := logger(c, "worker")
			if cl.Scheduler == cluster.SchedulerSlurm && cl.Rank != 0 && !c.IsSet("log-level") {
				// srun gathers every task's output into one file: the
				// others' info lines would repeat rank 0's.
				log = log.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))
			}
			job.Logger = log
			job.Progress = screen.Stdout()
			progress := job.Progress
			if c.Bool("events") {
				// The launcher prints the progress; the log stays as quiet
				// as on a worker that prints it.
				job.Progress, progress = nil, io.Discard
			}
			if job.Observers, err = observe.Standard(observe.Options{Logger: log, Progress: progress,
				EveryRank: mirrored.IsGossip(job.Strategy), QuietProgressLog: c.String("log-format") == "console",
				LogDir: c.String("logdir"), Rank: cl.Rank, Elastic: mirrored.ElasticOf(job.Strategy), LogEvery: c.Int("log-every")}); err != nil {
				return usageError{fmt.Errorf("worker: %w", err)}
			}
			wc := launch.WorkerConfig{
				Job: job, Cluster: cl, Security: sec, IntraHost: intra, Secret: secret, PSK: psk, Identity: identity,
				Timeout: c.Duration("collective-timeout"), Algo: algo, Host: host, Report: c.String("report"), Logger: log,
				LinkFaults: faults, Summary: c.String("summary"), Timeline: c.String("timeline"), TimelineSteps: c.Int("timeline-steps"),
				Cost: costParams, LogEvery: c.Int("log-every"),
			}
			if wc.Grow, err = growFromFlags(c, cl); err != nil {
				return usageError{fmt.Errorf("worker: %w", err)}
			}
			if (cl.Rank == 0 || mirrored.ElasticOf(job.Strategy) != nil) && !c.Bool("events") {
				// The chief prints the cluster's table, as launch does
				// (elastic: the last generation's chief); under launch
				// (--events), launch prints it.
				wc.Table = os.Stdout
			}
			if c.Bool("events") {
				wc.Events = os.Stdout
			}
			return runPeer(c, wc)
		},
	})
}

// rankPlaceholder in --report stands for the peer's rank. Every task of
// one srun gets the same arguments, and nothing between the batch script
// and meshtrain expands a per-task name there: Slurm's own %t is expanded
// by srun in its --output, --error and --input only, a shell's
// $SLURM_PROCID once for all tasks (before srun starts them), and
// urfave/cli expands nothing. So meshtrain expands it, in the spelling of
// --peer-pattern's {index}, which a shell and srun both leave alone.
const rankPlaceholder = "{rank}"

// perRank is path with every rankPlaceholder replaced by rank.
func perRank(path string, rank int) string {
	return strings.ReplaceAll(path, rankPlaceholder, strconv.Itoa(rank))
}

// runPeer runs this peer (launch.RunWorker) with the pod's side: the
// health probes (--health-addr), the graceful SIGTERM (wc.Job.Stop; the
// peers all stop after one step), and the line saying how it ended.
func runPeer(c *cli.Context, wc launch.WorkerConfig) error {
	stopping := stopGracefully(c.Duration("stop-timeout"))
	wc.Job.Stop = stopping
	if addr := c.String("health-addr"); addr != "" {
		h, err := launch.ServeHealth(c.Context, addr, wc.Logger.Named("health"))
		if err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		defer h.Close()
		wc.OnListening = h.Listening
		wc.Job.Observers = append(wc.Job.Observers, mirrored.ObserverFunc(func(e mirrored.Event) error {
			if e.Kind == mirrored.EventStart {
				h.Formed()
			}
			return nil
		}))
		go func() { // a stopping pod takes no more traffic
			select {
			case <-stopping:
				h.Stopping()
			case <-c.Context.Done():
			}
		}()
	}
	sum, err := launch.RunWorker(c.Context, wc)
	if errors.Is(err, membership.ErrPastEnd) {
		return usageError{fmt.Errorf("worker: %w", err)} // the schedule does not fit the run: nothing to replay
	}
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	replayVerdict(c, wc, sum)
	if !c.Bool("events") {
		p := sum.Peer
		fmt.Printf("rank %d done: %d steps, %.0f examples/s, test accuracy %.2f%%, sent %s, received %s, CPU %.1fs, compute %.0f%% comm %.0f%% wait %.0f%%, params sha256 %s\n",
			p.Rank, p.Steps, p.ExamplesPerSec, 100*p.TestAccuracy, report.BytesIEC(p.BytesSent), report.BytesIEC(p.BytesReceived), p.CPUSeconds,
			100*p.ComputeShare, 100*p.CommShare, 100*p.WaitShare, p.ParamsSHA256)
	}
	st := sum.Run.Stopped
	asked := false // this peer got SIGTERM, if only after the vote (the job deleted: SIGTERMs race)
	select {
	case <-stopping:
		asked = true
	default:
	}
	switch {
	case st == nil && asked && sum.Peer.Left != "" && c.Int("sigterm-exit-code") != 0:
		// An elastic peer that left on SIGTERM: the others go on; a
		// restart (the code schedulers retry) rejoins them.
		return exitError{c.Int("sigterm-exit-code"), fmt.Errorf("worker: %s; exiting %d (--sigterm-exit-code)", sum.Peer.Left, c.Int("sigterm-exit-code"))}
	case st == nil:
		return nil
	case asked && c.Int("sigterm-exit-code") == 0:
		wc.Logger.Info("stopped on SIGTERM: " + st.String())
		return nil
	case asked:
		return exitError{c.Int("sigterm-exit-code"), fmt.Errorf("worker: stopped on SIGTERM: %s; exiting %d (--sigterm-exit-code)", st, c.Int("sigterm-exit-code"))}
	}
	return exitError{exitTerminated, fmt.Errorf("worker: stopped early: %s; this peer was not asked to stop, so it exits %d for the job to restart it", st, exitTerminated)}
}

// runEvaluator runs the evaluator task (see launch.RunEvaluator), once its
// output (--logdir: it reads --checkpoint-dir, which may be mounted
// read-only) is checked and the ignored flags warned about.
func runEvaluator(c *cli.Context) error {
	if err := checkOutputs(c, output{name: "logdir", dir: true}); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	if !c.Bool("events") {
		warnIgnored(c)
	}
	dataPath, dataFormat, dataRead, err := dataFromFlags(c)
	if err != nil {
		return usageError{fmt.Errorf("worker: %w", err)}
	}
	dataRead.SplitSeed = uint64(c.Int64("seed"))
	_, err = launch.RunEvaluator(c.Context, launch.EvaluatorConfig{
		CheckpointDir: c.String("checkpoint-dir"), LogDir: c.String("logdir"), Model: c.String("model"),
		DataDir: c.String("data-dir"), TestExamples: c.Int("test-examples"), Timeout: c.Duration("evaluator-timeout"),
		Data: dataPath, DataFormat: dataFormat, DataRead: dataRead,
		AllowUnverified: c.Bool("allow-unverified"),
		Out:             os.Stdout, Logger: logger(c, "evaluator"),
	})
	return err
}

// costFromFlags loads --cost-params: nil when the flag is left at its
// default and that file does not exist (no calibration on this machine).
func costFromFlags(c *cli.Context) (*cost.Params, error) {
	path := c.String("cost-params")
	if path == "" {
		return nil, nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) && !c.IsSet("cost-params") {
		return nil, nil
	}
	f, err := calibrate.Load(path)
	if err != nil {
		return nil, fmt.Errorf("--cost-params: %w", err)
	}
	return &f.Params, nil
}
