package mirrored

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/settings"
)

func f64(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// settings lists everything the replicas must agree on, in a fixed order.
func (j *Job) settings(model string, params, replicas int, dataDigest string) []setting {
	c := &j.Config
	math := func(name, v string) setting { return setting{Name: name, Value: v, Resume: true} }
	proto := func(name, v string) setting { return setting{Name: name, Value: v} }
	return slices.Concat([]setting{
		math("model", model),
		math("params", strconv.Itoa(params)),
		math("replicas", strconv.Itoa(replicas)),
		math("batch_size", strconv.Itoa(c.BatchSize)),
		math("epochs", strconv.Itoa(c.Epochs)),
		math("optimizer", c.Optimizer),
		math("lr", f64(c.LR)),
		math("momentum", f64(c.Momentum)),
		math("weight_decay", f64(c.WeightDecay)),
		math("lr_schedule", c.Schedule),
		math("lr_gamma", f64(c.LRGamma)),
		math("lr_decay_epochs", f64(c.LRDecayEpochs)),
		math("warmup_epochs", f64(c.WarmupEpochs)),
		math("min_lr", f64(c.MinLR)),
		math("seed", strconv.FormatInt(c.Seed, 10)),
		math("data", dataDigest),
		math("train_examples", strconv.Itoa(c.TrainExamples)),
		math("shard_policy", data.ShardAuto.String()),
		math("shuffle", strconv.FormatBool(!j.NoShuffle)),
		proto("test_examples", strconv.Itoa(c.TestExamples)),
		proto("target_accuracy", f64(c.TargetAccuracy)),
		proto("target_loss", f64(c.TargetLoss)),
		proto("hash_every", strconv.Itoa(j.HashEvery)),
		proto("checkpoint_every", strconv.Itoa(j.CheckpointEvery)),
		proto("measure_wait", strconv.FormatBool(j.MeasureWait)),
	}, j.bucketSettings(), j.combinerSettings(), j.driverSettings())
}

// bucketSettings are the gradient buckets' setting: compared only where
// they apply, a dense model under the ring.
func (j *Job) bucketSettings() []setting {
	if j.Sparse != nil || !j.strategy().Lockstep() {
		return nil
	}
	return []setting{{Name: "gradient_bucket", Value: gradientBucket(j.GradientBucket)}}
}

// gradientBucket is Config.GradientBucket as the replicas compare it.
func gradientBucket(b int) string {
	switch {
	case b < 0:
		return "off"
	case b == 0:
		b = DefaultGradientBucket
	}
	return strconv.Itoa(b)
}

// driverSettings are the Job's settings from its driver (see Job.Cluster).
func (j *Job) driverSettings() []setting {
	tl := "off"
	if j.Timeline != nil {
		tl = fmt.Sprintf("last %d steps", j.Timeline.Steps()) // the peers gather their spans at the end
	}
	return []setting{{Name: "cluster", Value: j.Cluster}, {Name: "allreduce_algo", Value: j.AllReduceAlgo}, {Name: "timeline", Value: tl}}
}

// The settings' judging lives in mirrored/settings; these names keep the
// root's many call sites (every builder and strategy states settings).
type (
	setting = settings.Setting
	// MismatchError says which settings differ between replicas (or
	// between a run and its checkpoint): see settings.MismatchError.
	MismatchError = settings.MismatchError
)

func fingerprint(s []setting) string                      { return settings.Fingerprint(s) }
func settingsJSON(s []setting) string                     { return settings.JSON(s) }
func compareSettings(who []string, all [][]setting) error { return settings.Compare(who, all) }

// dataDigest identifies the training and test examples a run uses, so that
// replicas with different copies of the data set are caught at start-up.
func dataDigest(train, test *data.Images) string {
	h := sha256.New()
	for _, im := range []*data.Images{train, test} {
		im.WriteDigest(h)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// compareParamHashes all-gathers the SHA-256 of every replica's parameters
// (sum: this replica's, paramsSum) and fails, naming the ranks, if they
// differ.
func compareParamHashes(ctx context.Context, g Group, sum [32]byte, what string) error {
	all, err := g.AllGather(ctx, sum[:])
	if err != nil {
		return fmt.Errorf("comparing parameter hashes at %s: %w", what, err)
	}
	var order []string
	ranks := map[string][]string{}
	for r, h := range all {
		k := hex.EncodeToString(h)
		if _, ok := ranks[k]; !ok {
			order = append(order, k)
		}
		ranks[k] = append(ranks[k], fmt.Sprintf("rank %d", r))
	}
	if len(order) == 1 {
		return nil
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%s %s sha256 %.16s…", settings.JoinParties(ranks[k]), haveHas(len(ranks[k])), k)
	}
	return fmt.Errorf("replicas diverged at %s: %s: their parameters should be bitwise identical (a bug, or memory corruption on a peer)", what, strings.Join(parts, ", "))
}

func haveHas(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}
