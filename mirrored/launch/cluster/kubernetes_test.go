package cluster

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestKubeflowTFConfig parses the TF_CONFIG Kubeflow's training operator
// writes into each replica of a TFJob, byte for byte as it marshals it.
func TestKubeflowTFConfig(t *testing.T) {
	chief := map[string]int{"Chief": 1, "Worker": 2, "Evaluator": 1}
	tests := []struct {
		name     string
		replicas map[string]int
		domain   string
		typ      string
		index    int
		rank     int
		peers    []string
	}{
		{"worker 0 of workers only is the chief", map[string]int{"Worker": 3}, "", "Worker", 0, 0,
			[]string{"mnist-worker-0.ml.svc:2222", "mnist-worker-1.ml.svc:2222", "mnist-worker-2.ml.svc:2222"}},
		{"worker 2 of workers only", map[string]int{"Worker": 3}, "", "Worker", 2, 2,
			[]string{"mnist-worker-0.ml.svc:2222", "mnist-worker-1.ml.svc:2222", "mnist-worker-2.ml.svc:2222"}},
		{"the chief", chief, "", "Chief", 0, 0,
			[]string{"mnist-chief-0.ml.svc:2222", "mnist-worker-0.ml.svc:2222", "mnist-worker-1.ml.svc:2222"}},
		{"a worker beside a chief", chief, "", "Worker", 1, 2,
			[]string{"mnist-chief-0.ml.svc:2222", "mnist-worker-0.ml.svc:2222", "mnist-worker-1.ml.svc:2222"}},
		{"the evaluator, listed but no rank", chief, "", "Evaluator", 0, -1,
			[]string{"mnist-chief-0.ml.svc:2222", "mnist-worker-0.ml.svc:2222", "mnist-worker-1.ml.svc:2222"}},
		{"CUSTOM_CLUSTER_DOMAIN", map[string]int{"Worker": 2}, "cluster.local", "Worker", 1, 1,
			[]string{"mnist-worker-0.ml.svc.cluster.local:2222", "mnist-worker-1.ml.svc.cluster.local:2222"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := KubeflowTFConfig("mnist", "ml", tt.domain, tt.replicas, nil, tt.typ, tt.index)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(string(b), `"environment":"cloud"}`) {
				t.Errorf("not the operator's shape: %s", b)
			}
			c, err := Parse(b, "TF_CONFIG")
			if err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			if c.Rank != tt.rank || !slices.Equal(c.Peers, tt.peers) {
				t.Errorf("rank %d peers %q, want rank %d peers %q\n%s", c.Rank, c.Peers, tt.rank, tt.peers, b)
			}
		})
	}
	// The operator lists the evaluator in the cluster of every replica.
	b, _ := KubeflowTFConfig("mnist", "ml", "", chief, nil, "Worker", 0)
	if !strings.Contains(string(b), `"evaluator":["mnist-evaluator-0.ml.svc:2222"]`) {
		t.Errorf("no evaluator in the cluster: %s", b)
	}
	// The operator's exact text for one pod, as its own tests pin it.
	const literal = `{"cluster":{"chief":["mnist-chief-0.ml.svc:2222"],"worker":["mnist-worker-0.ml.svc:2222"]},"task":{"type":"worker","index":0},"environment":"cloud"}`
	if b, _ := KubeflowTFConfig("mnist", "ml", "", map[string]int{"Chief": 1, "Worker": 1}, nil, "Worker", 0); string(b) != literal {
		t.Errorf("got %s\nwant %s", b, literal)
	}
	if c, err := Parse([]byte(literal), "TF_CONFIG"); err != nil || c.Rank != 1 {
		t.Errorf("rank %v, %v", c, err)
	}
}

func TestFromIndexedJob(t *testing.T) {
	c, ok, err := FromIndexedJob(envOf(JobIndexEnv, "2", PeerPatternEnv, "train-{index}.train:7000", NumWorkersEnv, "3"))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	want := []string{"train-0.train:7000", "train-1.train:7000", "train-2.train:7000"}
	if c.Rank != 2 || c.TaskType != TaskWorker || !slices.Equal(c.Peers, want) {
		t.Errorf("got %+v, want rank 2 of %q", c, want)
	}
	if c, ok, err := FromIndexedJob(envOf(PeerPatternEnv, "x-{index}:1")); c != nil || ok || err != nil {
		t.Errorf("no JOB_COMPLETION_INDEX: got %v %v %v, want no cluster and no error", c, ok, err)
	}
	errs := []struct{ name, index, pattern, n, want string }{
		{"no pattern", "0", "", "2", "no peer pattern: set MESHTRAIN_PEER_PATTERN (or --peer-pattern)"},
		{"no placeholder", "0", "train.train:7000", "2", `peer pattern "train.train:7000" has no {index}`},
		{"no count", "0", "t-{index}:7000", "", "no worker count: set MESHTRAIN_NUM_WORKERS"},
		{"bad count", "0", "t-{index}:7000", "zero", `MESHTRAIN_NUM_WORKERS="zero": want a number from 1 to 65536`},
		{"index past the count", "3", "t-{index}:7000", "3", "index 3 out of range: MESHTRAIN_NUM_WORKERS=3"},
		{"bad index", "-1", "t-{index}:7000", "3", "Indexed Job (JOB_COMPLETION_INDEX=-1): want a number ≥ 0"},
		{"bad address", "0", "t-{index}", "2", `peer pattern "t-{index}": cluster worker 0 address "t-0"`},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, ok, err := FromIndexedJob(envOf(JobIndexEnv, tt.index, PeerPatternEnv, tt.pattern, NumWorkersEnv, tt.n))
			if !ok || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestFromIndexedJobGrows: with MESHTRAIN_MAX_WORKERS, a pod of the
// first NUM_WORKERS lists them and knows the next pods' addresses as
// slots; a pod past them (the Job scaled up) is a newcomer listing the
// pods before it and itself; a maximum below the count, or an index
// past the maximum, is refused naming both.
func TestFromIndexedJobGrows(t *testing.T) {
	pat := "train-{index}.train:7000"
	addr := func(i int) string { return strings.ReplaceAll(pat, IndexPlaceholder, strconv.Itoa(i)) }
	for _, tc := range []struct {
		index, max string
		peers      int
		slots      []int
		joining    bool
		err        string
	}{
		{"1", "5", 3, []int{3, 4}, false, ""},
		{"3", "5", 4, []int{4}, true, ""},
		{"4", "5", 5, nil, true, ""},
		{"2", "", 3, nil, false, ""},
		{"5", "5", 0, nil, false, "index 5 out of range: MESHTRAIN_NUM_WORKERS=5"},
		{"0", "2", 0, nil, false, `MESHTRAIN_MAX_WORKERS="2": want a number from MESHTRAIN_NUM_WORKERS (3)`},
	} {
		c, _, err := FromIndexedJob(envOf(JobIndexEnv, tc.index, PeerPatternEnv, pat, NumWorkersEnv, "3", MaxWorkersEnv, tc.max))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("index %s of max %s: %v, want %q", tc.index, tc.max, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("index %s of max %s: %v", tc.index, tc.max, err)
		}
		var slots []string
		for _, i := range tc.slots {
			slots = append(slots, addr(i))
		}
		if len(c.Peers) != tc.peers || c.Peers[len(c.Peers)-1] != addr(tc.peers-1) || !slices.Equal(c.Slots, slots) || c.Joining != tc.joining {
			t.Errorf("index %s of max %s: peers %q, slots %q, joining %v; want %d peers, slots %q, joining %v", tc.index, tc.max, c.Peers, c.Slots, c.Joining, tc.peers, slots, tc.joining)
		}
	}
}
