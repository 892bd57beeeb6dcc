package mirrored

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/replica"
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
	out := []setting{{Name: "cluster", Value: j.Cluster}, {Name: "allreduce_algo", Value: j.AllReduceAlgo}, {Name: "timeline", Value: tl}}
	if cb := j.Callbacks.String(); cb != "" { // unset: as before the callbacks
		out = append(out, setting{Name: "callbacks", Value: cb})
	}
	return out
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

// compareParamHashes fails, naming the ranks, if the replicas' parameter
// hashes differ (replica.CompareHashes).
var compareParamHashes = replica.CompareHashes
