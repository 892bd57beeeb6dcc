package tests

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/internal/tensorboard"
)

var (
	e2eSecret   = "MESHTRAIN_CLUSTER_SECRET=" + hex.EncodeToString([]byte("a start-up e2e secret, 32 bytes."))
	otherSecret = "MESHTRAIN_CLUSTER_SECRET=" + hex.EncodeToString([]byte("ANOTHER start-up secret, 32 byte"))
)

// spec is a TF_CONFIG of cluster for task (typ, index).
func spec(cluster map[string][]string, typ string, index int) string {
	b, _ := json.Marshal(map[string]any{"cluster": cluster, "task": map[string]any{"type": typ, "index": index}})
	return string(b)
}

// quickWorker is a worker's command line for a short softmax run.
func quickWorker(extra ...string) []string {
	return append([]string{"worker", "--model", "softmax", "--epochs", "1", "--batch", "32", "--train-examples", "3000",
		"--test-examples", "500", "--collective-timeout", "40s"}, extra...)
}

// TestEvaluatorTask runs a chief, a worker and an evaluator as TensorFlow
// lays them out: the evaluator joins no collective (the chief and the
// worker are the run's only ranks), evaluates the chief's checkpoints,
// writes TensorBoard scalars under evaluator/validation and stops after
// the run's last checkpoint, with the run's final accuracy.
func TestEvaluatorTask(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	addrs := freePorts(t, 3)
	cluster := map[string][]string{"chief": addrs[:1], "worker": addrs[1:2], "evaluator": addrs[2:]}
	dir, logdir, reports := t.TempDir(), t.TempDir(), t.TempDir()
	tasks := []string{"chief", "worker", "evaluator"}
	results := make([]result, len(tasks))
	var wg sync.WaitGroup
	for i, typ := range tasks {
		wg.Go(func() {
			env := []string{e2eSecret, "TF_CONFIG=" + spec(cluster, typ, 0)}
			if typ == "evaluator" {
				env[0] = "MESHTRAIN_CLUSTER_SECRET=" // it needs none
			}
			results[i] = meshtrain(ctx, env, quickWorker("--epochs", "2", "--checkpoint-dir", dir, "--logdir", logdir,
				"--report", filepath.Join(reports, typ+".json"), "--evaluator-timeout", "60s")...)
		})
	}
	wg.Wait()
	for i, res := range results {
		if res.err != nil {
			t.Fatalf("%s: %s", tasks[i], res)
		}
	}
	for r, typ := range tasks[:2] {
		if !strings.Contains(results[r].stdout, fmt.Sprintf("rank %d done: 92 steps", r)) { // 2 epochs of 1500/32 steps
			t.Errorf("%s:\n%s", typ, results[r])
		}
	}
	var chief struct {
		Run struct {
			Steps         int     `json:"steps"`
			FinalAccuracy float64 `json:"final_test_accuracy"`
		} `json:"run"`
	}
	if b, err := os.ReadFile(filepath.Join(reports, "chief.json")); err != nil || json.Unmarshal(b, &chief) != nil {
		t.Fatalf("chief's report: %s %v", b, err)
	}
	want := fmt.Sprintf("evaluator: step %d (epoch 2): ", chief.Run.Steps)
	if !strings.Contains(results[2].stdout, want) || !strings.Contains(results[2].stdout, fmt.Sprintf("accuracy %.2f%% on 500 examples", 100*chief.Run.FinalAccuracy)) {
		t.Errorf("the evaluator did not end with the run's last checkpoint (%q, accuracy %.4f):\n%s", want, chief.Run.FinalAccuracy, results[2])
	}
	files, _ := filepath.Glob(filepath.Join(logdir, "evaluator", "validation", "events.out.tfevents.*"))
	if len(files) != 1 {
		t.Fatalf("evaluator event files %q", files)
	}
	events, err := tensorboard.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]int64{}
	for _, e := range events {
		for _, v := range e.Values {
			tags[v.Tag] = max(tags[v.Tag], e.Step)
		}
	}
	if tags["epoch_accuracy"] != int64(chief.Run.Steps) || tags["epoch_loss"] != int64(chief.Run.Steps) {
		t.Errorf("evaluator scalars (tag: last step) %v, want epoch_accuracy and epoch_loss at step %d", tags, chief.Run.Steps)
	}
}

// TestStartupMistakes starts two workers by hand with one mistake each:
// both must exit at start-up naming it, not time out.
func TestStartupMistakes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tests := []struct {
		name string
		// worker returns rank r's environment and extra flags.
		worker func(addrs []string, r int) ([]string, []string)
		want   string
	}{
		{"cluster lists of 2 and 3 workers", func(addrs []string, r int) ([]string, []string) {
			return []string{e2eSecret, "TF_CONFIG=" + tfConfig(addrs[:2+r], r)}, nil
		}, "peers, this rank's has "},
		{"different all-reduce algorithms", func(addrs []string, r int) ([]string, []string) {
			return []string{e2eSecret, "TF_CONFIG=" + tfConfig(addrs[:2], r)}, []string{"--allreduce-algo", []string{"ring", "tree"}[r]}
		}, "allreduce_algo is ring on rank 0 but tree on rank 1"},
		{"different cluster secrets", func(addrs []string, r int) ([]string, []string) {
			return []string{[]string{e2eSecret, otherSecret}[r], "TF_CONFIG=" + tfConfig(addrs[:2], r)}, nil
		}, "identity does not match: was it started with a different cluster secret (MESHTRAIN_CLUSTER_SECRET)?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addrs := freePorts(t, 3)
			results := make([]result, 2)
			var wg sync.WaitGroup
			for r := range results {
				wg.Go(func() {
					env, extra := tt.worker(addrs, r)
					results[r] = meshtrain(ctx, env, quickWorker(extra...)...)
				})
			}
			wg.Wait()
			for r, res := range results {
				if res.err == nil || !strings.Contains(res.stderr, tt.want) || res.elapsed > 30*time.Second {
					t.Errorf("rank %d: want a quick failure saying %q, got (after %v)\n%s", r, tt.want, res.elapsed.Round(time.Second), res)
				}
			}
		})
	}
}

// TestSameTaskIndexTwice starts a second worker with a running one's task
// index: it must fail at once, saying so.
func TestSameTaskIndexTwice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addrs := freePorts(t, 2)
	env := []string{e2eSecret, "TF_CONFIG=" + tfConfig(addrs, 0)}
	first, firstDone := context.WithCancel(ctx)
	done := make(chan result, 1)
	go func() { done <- meshtrain(first, env, quickWorker()...) }() // waits for rank 1
	defer func() { firstDone(); <-done }()
	for {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addrs[0])
		if err == nil {
			_ = c.Close()
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the first worker never listened on %s", addrs[0])
		}
		<-time.After(50 * time.Millisecond)
	}
	second := meshtrain(ctx, env, quickWorker()...)
	want := "the address is in use; is another process already running as rank 0 (the same task index started twice)"
	if second.err == nil || !strings.Contains(second.stderr, want) || second.elapsed > 30*time.Second {
		t.Errorf("want a quick failure saying %q, got (after %v)\n%s", want, second.elapsed.Round(time.Second), second)
	}
}

// TestJSONLogsOnListenFailure: with --log-format json every line the
// process writes on stderr is a JSON log entry, libp2p's own included:
// a port that is taken makes go-libp2p's start-up (go.uber.org/fx) log
// its failure, which goes through meshtrain's logger, not as logfmt.
func TestJSONLogsOnListenFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addrs := []string{l.Addr().String(), freePorts(t, 1)[0]}
	r := meshtrain(ctx, []string{e2eSecret, "TF_CONFIG=" + tfConfig(addrs, 0)}, append([]string{"--log-format", "json"}, quickWorker()...)...)
	if exitCode(r.err) != 1 || !strings.Contains(r.stderr, "cannot listen on") || !strings.Contains(r.stderr, `"logger":"libp2p.`) {
		t.Fatalf("want exit 1, the listen failure reported, and libp2p's own record of it in the log:\n%s", r)
	}
	checkJSONLines(t, "worker", r.stderr)
}
