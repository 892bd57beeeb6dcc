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
