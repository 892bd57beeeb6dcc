package outcome

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/mirrored/callbacks"
	"github.com/meshtrain/meshtrain/mirrored/gossip"
	"github.com/meshtrain/meshtrain/mirrored/membership"
)

// Summary is one replica's view of a finished run: the run's figures
// (identical on every replica under the ring) and this peer's own; under
// gossip also its gossip figures.
type Summary struct {
	Run    *Result       `json:"run"`
	Peer   PeerStats     `json:"peer"`
	Gossip *GossipReport `json:"gossip,omitempty"`
}

// Epoch is the record of one epoch.
type Epoch struct {
	Epoch int     `json:"epoch"` // 1-based
	Loss  float64 `json:"loss"`  // mean training loss over the epoch's steps (all replicas)
	// Accuracy is the training accuracy over the epoch's batches (all
	// replicas), as the model counted it computing the loss (a model
	// that is an nn.TrainCounter; 0 otherwise).
	Accuracy     float64 `json:"accuracy,omitempty"`
	TestLoss     float64 `json:"test_loss"`
	TestAccuracy float64 `json:"test_accuracy"`      // fraction
	TestAUC      float64 `json:"test_auc,omitempty"` // area under the ROC curve (sparse-lr; binary labels only)
	// GlobalExamplesPerSec is over all replicas, in the epoch's training
	// time.
	ExamplesPerSec float64 `json:"global_examples_per_sec"`
	LR             float64 `json:"lr"` // rate of the epoch's last step
	// EpochSeconds is this epoch's training time alone; TrainSeconds the
	// cumulative training time at its end (evaluation excluded in both).
	EpochSeconds float64 `json:"epoch_seconds"`
	TrainSeconds float64 `json:"elapsed_seconds"`
}

// UnmarshalJSON reads an epoch, also under the names used before
// summary format 2 (train_seconds, examples_per_sec), which checkpoints
// written by earlier versions hold in their history.
func (e *Epoch) UnmarshalJSON(b []byte) error {
	type plain Epoch // without this method
	var v struct {
		plain
		OldTrainSeconds   *float64 `json:"train_seconds"`
		OldExamplesPerSec *float64 `json:"examples_per_sec"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*e = Epoch(v.plain)
	if v.OldTrainSeconds != nil && e.TrainSeconds == 0 {
		e.TrainSeconds = *v.OldTrainSeconds
	}
	if v.OldExamplesPerSec != nil && e.ExamplesPerSec == 0 {
		e.ExamplesPerSec = *v.OldExamplesPerSec
	}
	return nil
}

// Result is what a run produced; it is also the --summary JSON.
type Result struct {
	// Version is the meshtrain build that ran (see Version), Started when
	// this replica started (RFC 3339).
	Version string `json:"meshtrain_version"`
	Started string `json:"started"`
	// Membership is an elastic run's changes of membership, in order
	// (Elastic.Schedule replays them).
	Membership     []membership.Change `json:"membership,omitempty"`
	Model          string              `json:"model"`
	Params         int                 `json:"params"`
	Replicas       int                 `json:"replicas"`
	BatchSize      int                 `json:"batch_size"` // per replica
	Epochs         int                 `json:"epochs"`     // requested
	Optimizer      string              `json:"optimizer"`
	LR             float64             `json:"lr"`
	Momentum       float64             `json:"momentum"`
	WeightDecay    float64             `json:"weight_decay"`
	Schedule       string              `json:"lr_schedule"`
	LRGamma        float64             `json:"lr_gamma,omitempty"`
	LRDecayEpochs  float64             `json:"lr_decay_epochs,omitempty"`
	WarmupEpochs   float64             `json:"warmup_epochs,omitempty"`
	Seed           int64               `json:"seed"`
	TrainExamples  int                 `json:"train_examples"`
	TestExamples   int                 `json:"test_examples"`
	StepsPerEpoch  int                 `json:"steps_per_epoch"`
	Steps          int                 `json:"steps"`
	TargetAccuracy float64             `json:"target_accuracy,omitempty"`
	TargetLoss     float64             `json:"target_loss,omitempty"`

	// Topology is the peers' hosts and the gradient's all-reduce
	// (collective.Comm.Describe), set by the worker; "" where unknown.
	Topology string `json:"topology,omitempty"`

	EpochResults []Epoch `json:"per_epoch"`
	// TargetReached says whether a target stopped the run, after
	// TimeToTarget seconds of training (evaluation excluded).
	TargetReached bool    `json:"target_reached"`
	TimeToTarget  float64 `json:"time_to_target_seconds,omitempty"`
	// TimeToAccuracy maps the test accuracies 0.975, 0.985 and 0.99 to the
	// training seconds at the end of the first epoch that reached them.
	TimeToAccuracy map[string]float64 `json:"time_to_accuracy_seconds"`
	TrainSeconds   float64            `json:"train_seconds"`
	WallSeconds    float64            `json:"wall_seconds"`
	FinalAccuracy  float64            `json:"final_test_accuracy"`
	// ParamsSHA256 is the SHA-256 of the final parameters as little-endian
	// float32 bytes, hex: equal hashes mean bitwise-equal models.
	ParamsSHA256 string `json:"params_sha256"`
	// BuffersSHA256 is the SHA-256 of the model's final non-trainable
	// buffers (batch normalization's moving statistics), compared between
	// the replicas like the parameters; empty for a model without.
	BuffersSHA256 string `json:"buffers_sha256,omitempty"`
	// Stopped, if set, says the run stopped early, on request (Job.Stop).
	Stopped *EarlyStop `json:"stopped,omitempty"`
	// ClassNames names the classes by id when the data set does (an
	// image folder's class folders, a table's label values).
	ClassNames []string `json:"class_names,omitempty"`
	// Callbacks is what Keras's callbacks (Job.Callbacks) did, if any
	// was on: early stopping, plateaus, the save-best file.
	Callbacks *callbacks.Report `json:"callbacks,omitempty"`
}

// PeerStats are one replica's own figures: what users of TensorFlow's
// MultiWorkerMirroredStrategy gathered with dstat, top and iftop.
type PeerStats struct {
	Rank     int `json:"rank"`
	Steps    int `json:"steps"`    // steps this process ran (after any resume)
	Examples int `json:"examples"` // training examples this process computed on
	// ElasticSteps and ElasticExamples are what this process ran over
	// every generation of an elastic run (steps rolled back and redone
	// included), where Steps and Examples are the last generation's.
	ElasticSteps    int `json:"elastic_steps,omitempty"`
	ElasticExamples int `json:"elastic_examples,omitempty"`
	// ExamplesPerSec is Examples over this process's training time.
	ExamplesPerSec float64 `json:"peer_examples_per_sec"`
	TestAccuracy   float64 `json:"test_accuracy"`
	// BytesSent and BytesReceived count collective frames (headers and
	// payloads) as the transport saw them, 0 if it does not count.
	BytesSent     int64 `json:"bytes_sent"`
	BytesReceived int64 `json:"bytes_received"`
	// Links splits them per link (peer rank), where known.
	Links []collective.LinkTraffic `json:"links,omitempty"`
	// SameHostLinks is how many of those went through shared memory, with
	// no cipher (--intra-host auto); the others are on the run's security.
	SameHostLinks int `json:"same_host_links,omitempty"`
	// Left says that this peer left an elastic run before its end (the
	// membership schedule), and when.
	Left string `json:"left,omitempty"`
	// CPUSeconds (user + system) and PeakRSSBytes are the process's, from
	// getrusage: with several replicas in one process they are shared.
	CPUSeconds   float64 `json:"cpu_seconds"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	// The training steps' time, split: computing (input excluded:
	// forward, backward, update), communicating (the gradient all-reduce
	// and the hash checks) and waiting (for the input pipeline and, with
	// MeasureWait, for the slowest replica: estimated from sampled steps,
	// see Job.MeasureWait).
	ComputeSeconds float64 `json:"compute_seconds"`
	CommSeconds    float64 `json:"comm_seconds"`
	WaitSeconds    float64 `json:"wait_seconds"`
	ComputeShare   float64 `json:"compute_share"`
	CommShare      float64 `json:"comm_share"`
	WaitShare      float64 `json:"wait_share"`
	// InputSeconds is the part of WaitSeconds spent waiting for the input
	// pipeline's next batch (the rest is waiting for slower peers).
	InputSeconds float64 `json:"input_seconds"`
	// EvalSeconds and CheckpointSeconds are spent outside the steps.
	EvalSeconds       float64 `json:"eval_seconds"`
	CheckpointSeconds float64 `json:"checkpoint_seconds"`
	ParamsSHA256      string  `json:"params_sha256"`
	// Host is the machine's name and Cores its logical CPUs (to tell
	// peers that shared a machine's cores).
	Host  string `json:"host,omitempty"`
	Cores int    `json:"cores,omitempty"`
	// HostCPUSeconds is the whole machine's busy CPU time, every
	// process's, over ProcessSeconds, this process's life so far; set
	// beside the CPUSeconds of the peers on the host, it measures the
	// load of other processes. Load1 is the machine's 1-minute load
	// average at the end. All 0 where the machine's figures are unknown.
	HostCPUSeconds float64 `json:"host_cpu_seconds,omitempty"`
	ProcessSeconds float64 `json:"process_seconds,omitempty"`
	Load1          float64 `json:"load1,omitempty"`
	// PID is the process (replicas in one process share its CPUSeconds).
	PID int `json:"pid,omitempty"`
	// Resources is the process's resource use over the run, from the
	// Job's ResourceSampler (observe.Resources: one sample a second,
	// merged in pairs past observe.MaxResourceSamples).
	Resources []ResourceSample `json:"resources,omitempty"`
	// ResumedFrom is the checkpoint the run continued from (on the chief;
	// "rank 0's checkpoint" elsewhere) and ResumedStep its step.
	ResumedFrom string `json:"resumed_from,omitempty"`
	ResumedStep int    `json:"resumed_step,omitempty"`
}

// GossipEval is one evaluation of a gossip replica's own parameters. A
// replica evaluates each time the cluster's work, as it knows it, crosses
// an epoch (the work of one synchronous epoch: N replicas × steps per
// epoch), so that its curve has the ring's resolution; and at the end.
type GossipEval struct {
	Epoch int `json:"epoch"` // epochs of cluster work completed
	// ClusterEpochs is the cluster's work so far as this replica knew it,
	// in epochs: the x axis comparable with a ring run's epochs.
	ClusterEpochs float64 `json:"cluster_epochs"`
	// LocalPasses is this replica's own work: passes over its shard.
	LocalPasses  float64 `json:"local_passes"`
	Loss         float64 `json:"loss"` // mean training loss since the previous evaluation
	TestLoss     float64 `json:"test_loss"`
	TestAccuracy float64 `json:"test_accuracy"`
	TrainSeconds float64 `json:"elapsed_seconds"` // cumulative, evaluation excluded
	Steps        int     `json:"steps"`           // local steps done
}

// GossipReport are one replica's gossip figures.
type GossipReport struct {
	Schedule     string `json:"schedule"`
	Every        int    `json:"every"`
	MaxStaleness int    `json:"max_staleness"`
	gossip.Stats
	Evals []GossipEval `json:"evals"`
	// Skipped counts rounds without an exchange because the previous one
	// was still in flight (overlapped mode never waits for the network).
	Skipped int `json:"skipped"`
	// StepsPerSec is this replica's local steps over its training time.
	StepsPerSec float64 `json:"steps_per_sec"`
	// StoppedBy says why training ended: "budget" (the cluster did as
	// many steps as the synchronous run would), "target" (this replica
	// reached the target), "peer" (another one did) or "sigterm" (a
	// replica was asked to stop, Job.Stop: Result.Stopped names it).
	StoppedBy string `json:"stopped_by"`
	// Survivors are the ranks whose final parameters this replica
	// received (itself included); FinalConsensus is the exact consensus
	// distance among them, sqrt(mean ‖x_i − x̄‖²), and RelConsensus that
	// over ‖x̄‖.
	Survivors      []int   `json:"survivors"`
	FinalConsensus float64 `json:"final_consensus"`
	RelConsensus   float64 `json:"rel_consensus"`
	// AverageAccuracy and AverageLoss are the test figures of x̄, the
	// survivors' average model (dense models only: 0 for sparse-lr, whose
	// replicas never swap whole weight vectors).
	AverageAccuracy float64 `json:"average_accuracy"`
	AverageLoss     float64 `json:"average_loss"`
	// TimeToTarget is the training seconds at which this replica first
	// reached the target accuracy (0: never).
	TimeToTarget float64 `json:"time_to_target_seconds,omitempty"`
}

// EarlyStop says why and where a run stopped before its end: Ranks were
// asked to stop (Job.Stop closed: SIGTERM in a pod), every replica stopped
// after Step, and the chief wrote Checkpoint there ("" without a
// Job.CheckpointDir).
//
// In a gossip run (Gossip) the request spreads with the averages instead
// of a vote: each replica stops at its own next step (Step is this
// replica's local steps), Ranks holds the lowest rank asked, and there is
// no checkpoint.
type EarlyStop struct {
	Step       int    `json:"step"`
	Ranks      []int  `json:"ranks"`
	Checkpoint string `json:"checkpoint,omitempty"`
	Gossip     bool   `json:"gossip,omitempty"`
}

// String names the ranks asked to stop and where every replica stopped.
func (s *EarlyStop) String() string {
	ranks := make([]string, len(s.Ranks))
	for i, r := range s.Ranks {
		ranks[i] = fmt.Sprint(r)
	}
	who := "rank " + strings.Join(ranks, ", rank ")
	if s.Gossip {
		return fmt.Sprintf("%s asked to stop (SIGTERM): every gossip replica stopped at its next step and swapped its final parameters (this one after %d local steps); gossip keeps no checkpoint: a restart begins afresh", who, s.Step)
	}
	where := "no checkpoint (no --checkpoint-dir): a restart begins afresh"
	if s.Checkpoint != "" {
		where = "the chief wrote " + s.Checkpoint + ": a restart resumes there"
	}
	return fmt.Sprintf("%s asked to stop (SIGTERM): every peer stopped after step %d; %s", who, s.Step, where)
}
