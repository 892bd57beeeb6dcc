package observe

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/meshtrain/meshtrain/mirrored"
)

// TestElasticLabels: under elastic, the log labels every line with the
// cluster index (Standard with Elastic), whatever the generation's rank
// in the event; without, with the event's rank.
func TestElasticLabels(t *testing.T) {
	for _, tc := range []struct {
		elastic *mirrored.Elastic
		want    int64
	}{{&mirrored.Elastic{}, 2}, {nil, 1}} {
		core, logs := observer.New(zap.DebugLevel)
		obs, err := Standard(Options{Logger: zap.New(core), Rank: 2, Elastic: tc.elastic})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range []mirrored.Event{{Kind: mirrored.EventStart, Rank: 1}, {Kind: mirrored.EventMembership, Rank: 1, Info: "rank 0 lost"}} {
			if err := obs[0].Observe(e); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range logs.All() {
			if got := l.ContextMap()["rank"]; got != tc.want {
				t.Errorf("elastic %v: %q has rank %v, want %d", tc.elastic != nil, l.Message, got, tc.want)
			}
		}
	}
}

// TestStepProgressByEpoch: by epoch, a line names the epoch and the share
// of it done, not the steps, which a new generation numbers anew.
func TestStepProgressByEpoch(t *testing.T) {
	var b bytes.Buffer
	p := NewStepProgress(&b, false, 1, 3, "[launch] ")
	p.ByEpoch(62, 3)
	p.Step(mirrored.Event{Kind: mirrored.EventStep, Step: 93, Steps: 124, Train: &mirrored.StepStats{Loss: 1, Examples: 16, Seconds: 0.01}})
	p.ByEpoch(93, 2) // a generation of 2: the same share of the run
	p.Step(mirrored.Event{Kind: mirrored.EventStep, Step: 140, Steps: 186, Train: &mirrored.StepStats{Loss: 1, Examples: 16, Seconds: 0.01}})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	for i, want := range []string{"[launch] epoch 2   50%  loss", "[launch] epoch 2   51%  loss"} {
		if i >= len(lines) || !strings.HasPrefix(lines[i], want) || strings.Contains(lines[i], "step") {
			t.Errorf("line %d of %q: want it to start %q, with no steps", i, lines, want)
		}
	}
}

// TestProgressElastic: a worker's own progress under elastic tells the
// first start only, no resume of a later generation (its change's line
// says where), each change's line, and counts by epoch across them.
func TestProgressElastic(t *testing.T) {
	var b bytes.Buffer
	obs, err := Standard(Options{Progress: &b, LogEvery: 1, Elastic: &mirrored.Elastic{}})
	if err != nil {
		t.Fatal(err)
	}
	step := func(s, steps int) mirrored.Event {
		return mirrored.Event{Kind: mirrored.EventStep, Step: s, Steps: steps, Train: &mirrored.StepStats{Loss: 1, Examples: 16, Seconds: 0.01}}
	}
	for _, e := range []mirrored.Event{
		{Kind: mirrored.EventStart, Info: "lenet: 3 replicas", StepsPerEpoch: 62, Steps: 124, Replicas: 3}, step(31, 124),
		{Kind: mirrored.EventResumed, Path: "the in-memory commit of step 30", Step: 45},
		{Kind: mirrored.EventStart, Info: "lenet: 2 replicas", StepsPerEpoch: 93, Steps: 186, Replicas: 2},
		{Kind: mirrored.EventMembership, Info: "rank 2 lost: …"}, step(47, 186),
	} {
		if err := obs[0].Observe(e); err != nil {
			t.Fatal(err)
		}
	}
	want := "lenet: 3 replicas\nepoch 1   50%"
	if got := b.String(); !strings.HasPrefix(got, want) || strings.Contains(got, "resumed") || strings.Contains(got, "2 replicas") ||
		!strings.Contains(got, "rank 2 lost: …\nepoch 1   51%") || strings.Contains(got, "step") {
		t.Errorf("progress:\n%s\nwant it to start %q, then the change and epoch 1 51%%, no resume, no second header, no steps", got, want)
	}
}
