package mirrored

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/meshtrain/meshtrain/data"
)

// setting is one configuration value that every replica must share. The
// replicas compare their settings at start-up (see Job), and a checkpoint
// records the ones that shape the arithmetic (Resume), so that a run
// cannot silently resume into a different one.
type setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Resume marks settings that must also match a checkpoint being
	// resumed from (those that change the training arithmetic).
	Resume bool `json:"-"`
}

func f64(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// settings lists everything the replicas must agree on, in a fixed order.
func (j *Job) settings(model string, params, replicas int, dataDigest string) []setting {
	c := &j.Config
	math := func(name, v string) setting { return setting{name, v, true} }
	proto := func(name, v string) setting { return setting{name, v, false} }
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

// fingerprint is the SHA-256 (hex) of the settings with Resume set: equal
// fingerprints mean a checkpoint can resume the run.
func fingerprint(settings []setting) string {
	h := sha256.New()
	for _, s := range settings {
		if s.Resume {
			fmt.Fprintf(h, "%s=%s\n", s.Name, s.Value)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// settingsJSON is the Resume settings as a JSON object, for checkpoints.
func settingsJSON(settings []setting) string {
	m := map[string]string{}
	for _, s := range settings {
		if s.Resume {
			m[s.Name] = s.Value
		}
	}
	b, _ := json.Marshal(m) // a map of strings always encodes
	return string(b)
}

// compareSettings checks that every party has the same value for each
// setting; who names the parties ("rank 0", "the checkpoint"). The error
// names every differing setting and which parties hold which value.
func compareSettings(who []string, all [][]setting) error {
	var diffs []string
	names := []string{}
	values := make([]map[string]string, len(all))
	for i, ss := range all {
		values[i] = map[string]string{}
		for _, s := range ss {
			values[i][s.Name] = s.Value
			if !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	for _, name := range names {
		var order []string
		holders := map[string][]string{}
		for i := range all {
			v, ok := values[i][name]
			if !ok {
				v = "(not set)"
			}
			if _, seen := holders[v]; !seen {
				order = append(order, v)
			}
			holders[v] = append(holders[v], who[i])
		}
		if len(order) == 1 {
			continue
		}
		parts := make([]string, len(order))
		for k, v := range order {
			parts[k] = fmt.Sprintf("%s on %s", quoteIfEmpty(v), joinParties(holders[v]))
		}
		diffs = append(diffs, fmt.Sprintf("%s is %s", name, strings.Join(parts, " but ")))
	}
	if len(diffs) == 0 {
		return nil
	}
	return &MismatchError{Diffs: diffs}
}

// MismatchError says which settings differ between replicas (or between a
// run and its checkpoint).
type MismatchError struct{ Diffs []string }

func (e *MismatchError) Error() string { return strings.Join(e.Diffs, "; ") }

func quoteIfEmpty(v string) string {
	if v == "" {
		return `""`
	}
	return v
}

// joinParties turns ["rank 0", "rank 2"] into "ranks 0, 2".
func joinParties(ps []string) string {
	var ranks []string
	var other []string
	for _, p := range ps {
		if r, ok := strings.CutPrefix(p, "rank "); ok {
			ranks = append(ranks, r)
		} else {
			other = append(other, p)
		}
	}
	var out []string
	switch len(ranks) {
	case 0:
	case 1:
		out = append(out, "rank "+ranks[0])
	default:
		out = append(out, "ranks "+strings.Join(ranks, ", "))
	}
	return strings.Join(append(out, other...), " and ")
}

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
		parts[i] = fmt.Sprintf("%s %s sha256 %.16s…", joinParties(ranks[k]), haveHas(len(ranks[k])), k)
	}
	return fmt.Errorf("replicas diverged at %s: %s: their parameters should be bitwise identical (a bug, or memory corruption on a peer)", what, strings.Join(parts, ", "))
}

func haveHas(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}
