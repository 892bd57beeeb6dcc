package observe

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/meshtrain/meshtrain/mirrored"
)

// run is the events of a short run of rank: start, two steps, an epoch,
// done.
func run(rank int) []mirrored.Event {
	ep := &mirrored.Epoch{Epoch: 1, Loss: 0.5, TestAccuracy: 0.9}
	return []mirrored.Event{
		{Kind: mirrored.EventStart, Rank: rank, Steps: 2, Replicas: 2, Info: "header"},
		{Kind: mirrored.EventStep, Rank: rank, Step: 1, Steps: 2, Train: &mirrored.StepStats{Loss: 1, Examples: 4}},
		{Kind: mirrored.EventStep, Rank: rank, Step: 2, Steps: 2, Train: &mirrored.StepStats{Loss: 1, Examples: 4}},
		{Kind: mirrored.EventEpoch, Rank: rank, Step: 2, Steps: 2, Epoch: ep},
		{Kind: mirrored.EventDone, Rank: rank, Step: 2, Steps: 2, Info: "the end"},
	}
}

// TestProgressShows: the progress shows rank 0's run, or with everyRank
// every rank's steps and epochs after "rank N "; the header and the end
// only rank 0's, as when the run itself chose the replicas that print.
func TestProgressShows(t *testing.T) {
	for _, tc := range []struct {
		name      string
		everyRank bool
		rank      int
		want      []string
		wantNot   []string
	}{
		{"chief", false, 0, []string{"header\n", "step 2/2  loss 1.0000", "epoch  1  loss 0.5000", "the end\n"}, []string{"rank 0"}},
		{"other rank", false, 1, nil, []string{"header", "step", "epoch", "the end"}},
		{"gossip chief", true, 0, []string{"header\n", "rank 0 step 2/2", "rank 0 epoch  1", "the end\n"}, nil},
		{"gossip other", true, 1, []string{"rank 1 step 2/2", "rank 1 epoch  1"}, []string{"header", "the end"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			p := NewProgress(&out, 2, tc.everyRank)
			for _, e := range run(tc.rank) {
				if err := p.Observe(e); err != nil {
					t.Fatal(err)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(out.String(), w) {
					t.Errorf("output has %q:\n%s", w, out.String())
				}
			}
			if len(tc.want) == 0 && out.Len() > 0 {
				t.Errorf("output %q, want none", out.String())
			}
		})
	}
}

// TestLogQuietWhereProgressShows: with QuietProgressLog, the start, epoch
// and end go to debug on the replicas whose progress is shown (they read
// them there) and stay at info on the others; each line names the rank.
func TestLogQuietWhereProgressShows(t *testing.T) {
	for _, tc := range []struct {
		rank int
		want zapcore.Level
	}{{0, zap.DebugLevel}, {1, zap.InfoLevel}} {
		core, logs := observer.New(zap.DebugLevel)
		obs, err := Standard(Options{Logger: zap.New(core), Progress: &bytes.Buffer{}, QuietProgressLog: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range run(tc.rank) {
			for _, o := range obs {
				if err := o.Observe(e); err != nil {
					t.Fatal(err)
				}
			}
		}
		got := logs.FilterMessage("epoch").All()
		if len(got) != 1 || got[0].Level != tc.want || got[0].ContextMap()["rank"] != int64(tc.rank) {
			t.Errorf("rank %d: epoch lines %+v, want one at %v naming the rank", tc.rank, got, tc.want)
		}
	}
}

// TestTensorBoardOpensAtFirstEvent: no event, no file (a run that fails
// before it starts); after a Close (an elastic generation's end) the next
// event opens new files beside the first.
func TestTensorBoardOpensAtFirstEvent(t *testing.T) {
	dir := t.TempDir()
	tb := NewTensorBoard(filepath.Join(dir, "worker-0"), 1)
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "worker-0")); !os.IsNotExist(err) {
		t.Fatalf("closed before any event: %v, want no directory", err)
	}
	for gen := 1; gen <= 2; gen++ {
		for _, e := range run(0) {
			if err := tb.Observe(e); err != nil {
				t.Fatal(err)
			}
		}
		if err := tb.Close(); err != nil {
			t.Fatal(err)
		}
		for _, r := range []string{"train", "validation"} {
			files, _ := filepath.Glob(filepath.Join(dir, "worker-0", r, "events.out.tfevents.*"))
			if len(files) != gen {
				t.Errorf("generation %d: %s event files %v, want %d", gen, r, files, gen)
			}
		}
	}
}

// TestStandard: the observers in the order they see each event, only
// those asked for, and a negative LogEvery refused as the flag was.
func TestStandard(t *testing.T) {
	obs, err := Standard(Options{Logger: zap.NewNop(), Progress: &bytes.Buffer{}, LogDir: t.TempDir(), OnEvent: func(mirrored.Event) {}})
	if err != nil || len(obs) != 4 {
		t.Fatalf("%d observers (%v), want 4", len(obs), err)
	}
	if _, ok := obs[0].(*Log); !ok {
		t.Errorf("first %T, want the log", obs[0])
	}
	if _, ok := obs[1].(*Progress); !ok {
		t.Errorf("second %T, want the progress", obs[1])
	}
	if _, ok := obs[2].(*TensorBoard); !ok {
		t.Errorf("third %T, want TensorBoard", obs[2])
	}
	if obs, err := Standard(Options{}); err != nil || len(obs) != 0 {
		t.Errorf("nothing asked: %d observers (%v)", len(obs), err)
	}
	if _, err := Standard(Options{LogEvery: -1}); err == nil || !strings.Contains(err.Error(), "log every -1 steps") {
		t.Errorf("LogEvery -1: %v, want refused", err)
	}
}

// TestProgressCallbackLines: what a callback did is one line of its own,
// the chief's (every replica decided the same).
func TestProgressCallbackLines(t *testing.T) {
	const line = "epoch 1: test loss did not improve for 1 epoch (best 0.5 at epoch 1): stopping"
	for rank, want := range []string{line + "\n", ""} {
		var out bytes.Buffer
		p := NewProgress(&out, 2, false)
		for _, e := range append(run(rank)[:4], mirrored.Event{Kind: mirrored.EventCallback, Rank: rank, Step: 2, Steps: 2, Info: line}) {
			if err := p.Observe(e); err != nil {
				t.Fatal(err)
			}
		}
		if got := out.String(); !strings.HasSuffix(got, want) || (want == "" && strings.Contains(got, "stopping")) {
			t.Errorf("rank %d wrote %q: want it to end with %q", rank, got, want)
		}
	}
}
