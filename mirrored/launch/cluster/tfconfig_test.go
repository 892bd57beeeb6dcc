package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	const id0 = "12D3KooWGC6TvWhfapngNqQcRswsEotfB4Bwv5pnFqXP9Y4ZbW1Z"
	const id1 = "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo"
	tests := []struct {
		name     string
		json     string
		peers    []string
		rank     int
		hasChief bool
	}{
		{"workers only, worker 0 is chief", `{"cluster": {"worker": ["a:1", "b:2", "c:3"]}, "task": {"type": "worker", "index": 0}}`,
			[]string{"a:1", "b:2", "c:3"}, 0, false},
		{"workers only, last", `{"cluster": {"worker": ["a:1", "b:2", "c:3"]}, "task": {"type": "worker", "index": 2}}`,
			[]string{"a:1", "b:2", "c:3"}, 2, false},
		{"chief is rank 0", `{"cluster": {"chief": ["c:9"], "worker": ["a:1", "b:2"]}, "task": {"type": "chief", "index": 0}}`,
			[]string{"c:9", "a:1", "b:2"}, 0, true},
		{"workers follow the chief", `{"cluster": {"worker": ["a:1", "b:2"], "chief": ["c:9"]}, "task": {"type": "worker", "index": 1}}`,
			[]string{"c:9", "a:1", "b:2"}, 2, true},
		{"chief alone", `{"cluster": {"chief": ["c:9"]}, "task": {"type": "chief", "index": 0}}`,
			[]string{"c:9"}, 0, true},
		{"multiaddrs with peer IDs", `{"cluster": {"worker": ["/ip4/10.0.0.1/tcp/7000/p2p/` + id0 + `", "/ip4/10.0.0.2/tcp/7000/p2p/` + id1 + `"]}, "task": {"type": "worker", "index": 1}}`,
			[]string{"/ip4/10.0.0.1/tcp/7000/p2p/" + id0, "/ip4/10.0.0.2/tcp/7000/p2p/" + id1}, 1, false},
		{"quic multiaddr, ipv6 and dns", `{"cluster": {"worker": ["/ip4/10.0.0.1/udp/7000/quic-v1", "[::1]:7000", "node-3.example:7000"]}, "task": {"type": "worker", "index": 0}}`,
			[]string{"/ip4/10.0.0.1/udp/7000/quic-v1", "[::1]:7000", "node-3.example:7000"}, 0, false},
		{"evaluator is no peer", `{"cluster": {"chief": ["c:9"], "worker": ["a:1"], "evaluator": ["e:5"]}, "task": {"type": "worker", "index": 0}}`,
			[]string{"c:9", "a:1"}, 1, true},
		{"the evaluator itself", `{"cluster": {"chief": ["c:9"], "worker": ["a:1"], "evaluator": ["e:5"]}, "task": {"type": "evaluator", "index": 0}}`,
			[]string{"c:9", "a:1"}, -1, true},
		{"tensorflow extras accepted", `{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}, "environment": "cloud", "rpc_layer": "grpc"}`,
			[]string{"a:1"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.json), "test")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Peers, tt.peers) || c.Rank != tt.rank || c.HasChief != tt.hasChief {
				t.Errorf("got peers %q rank %d chief %v, want %q rank %d chief %v", c.Peers, c.Rank, c.HasChief, tt.peers, tt.rank, tt.hasChief)
			}
		})
	}
}

// TestParseErrors is the table of every rejected variant with the
// message a user sees.
func TestParseErrors(t *testing.T) {
	const id0 = "12D3KooWGC6TvWhfapngNqQcRswsEotfB4Bwv5pnFqXP9Y4ZbW1Z"
	tests := []struct{ name, json, want string }{
		{"empty", ``, "src: empty: want a JSON object"},
		{"truncated", "{\"cluster\": {\"worker\": [\"a:1\"]},\n \"task\": {\"type\": \"worker\"",
			"src: malformed JSON at line 2, column 27: unexpected end of input"},
		{"syntax error line and column", "{\n  \"cluster\": {\"worker\": [\"a:1\",]},\n  \"task\": {\"type\": \"worker\", \"index\": 0}\n}",
			"src: malformed JSON at line 2, column 32: invalid character ']' looking for beginning of value"},
		{"syntax error first line", `{"cluster": {"worker": ["a:1"]} "task": {}}`,
			"src: malformed JSON at line 1, column 33: invalid character '\"' after object key:value pair"},
		{"trailing data", `{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}} {}`,
			"src: malformed JSON at line 1, column 74: unexpected data after the top-level object"},
		{"not an object", `[1, 2]`, "src: malformed TF_CONFIG at line 1, column 1: the top level must be an object, not a JSON array"},
		{"index is a string", "{\"cluster\": {\"worker\": [\"a:1\"]},\n\"task\": {\"type\": \"worker\", \"index\": \"0\"}}",
			"src: malformed TF_CONFIG at line 2, column 37: task.index must be an integer, not a JSON string"},
		{"worker is a string", `{"cluster": {"worker": "a:1"}, "task": {"type": "worker", "index": 0}}`,
			"src: malformed TF_CONFIG at line 1, column 24: each cluster entry must be an array, not a JSON string"},
		{"unknown top-level key", `{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}, "tasks": 1}`,
			`src: unknown key "tasks": want "cluster" and "task"`},
		{"no cluster", `{"task": {"type": "worker", "index": 0}}`, `src: no "cluster"`},
		{"no workers", `{"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}}`, "src: cluster.worker is empty"},
		{"parameter server", `{"cluster": {"worker": ["a:1"], "ps": ["b:2"]}, "task": {"type": "worker", "index": 0}}`,
			`src: cluster has "ps" entries: meshtrain has no parameter servers`},
		{"two evaluators", `{"cluster": {"worker": ["a:1"], "evaluator": ["b:2", "c:3"]}, "task": {"type": "worker", "index": 0}}`,
			`src: cluster.evaluator lists 2 addresses: want exactly one`},
		{"evaluator 1 without evaluator (Kubeflow leaves out evaluator 0 only)", `{"cluster": {"worker": ["a:1"]}, "task": {"type": "evaluator", "index": 1}}`,
			`src: task type "evaluator" but the cluster has no "evaluator" entries`},
		{"evaluator alone", `{"cluster": {"evaluator": ["a:1"]}, "task": {"type": "evaluator", "index": 0}}`,
			"src: cluster.worker is empty"},
		{"bad evaluator address", `{"cluster": {"worker": ["a:1"], "evaluator": ["b"]}, "task": {"type": "worker", "index": 0}}`,
			`src: cluster evaluator 0 address "b": want host:port`},
		{"repeated task key", "{\"cluster\": {\"worker\": [\"a:1\", \"b:2\"]},\n \"task\": {\"type\": \"worker\", \"index\": 0},\n \"task\": {\"type\": \"worker\", \"index\": 1}}",
			`src: duplicate key "task" in the top-level object at line 3, column 2: only the last would count; keep one`},
		{"repeated key in the cluster", `{"cluster": {"worker": ["a:1"], "worker": ["b:2"]}, "task": {"type": "worker", "index": 0}}`,
			`src: duplicate key "worker" in the "cluster" object at line 1, column 33`},
		{"repeated key in the task", `{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0, "index": 1}}`,
			`src: duplicate key "index" in the "task" object`},
		{"task in two capitals", "{\"cluster\": {\"worker\": [\"a:1\", \"b:2\"]},\n \"task\": {\"type\": \"worker\", \"index\": 0},\n \"Task\": {\"type\": \"worker\", \"index\": 1}}",
			`src: duplicate key "task" and "Task" in the top-level object at line 3, column 2: keys are matched regardless of case, so only the last would count; keep one`},
		{"index in two capitals", `{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0, "INDEX": 1}}`,
			`src: duplicate key "index" and "INDEX" in the "task" object`},
		{"type and the Kelvin sign's kin", `{"cluster": {"worker": ["a:1", "b:2"]}, "tas\u212a": {"type": "worker", "index": 1}, "task": {"type": "worker", "index": 0}}`,
			"src: duplicate key \"tas\u212a\" and \"task\" in the top-level object"},
		{"unknown cluster task type", `{"cluster": {"worker": ["a:1"], "trainer": ["b:2"]}, "task": {"type": "worker", "index": 0}}`,
			`src: cluster has unknown task type "trainer": want "worker" and optionally "chief"`},
		{"two chiefs", `{"cluster": {"worker": ["a:1"], "chief": ["b:2", "c:3"]}, "task": {"type": "worker", "index": 0}}`,
			"src: cluster.chief lists 2 addresses: want exactly one"},
		{"no task", `{"cluster": {"worker": ["a:1"]}}`, `src: no "task"`},
		{"no task type", `{"cluster": {"worker": ["a:1"]}, "task": {"index": 0}}`, "src: task.type is missing"},
		{"unknown task type", `{"cluster": {"worker": ["a:1"]}, "task": {"type": "ps", "index": 0}}`,
			`src: unknown task type "ps": want "worker", "chief" or "evaluator"`},
		{"no index", `{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker"}}`, "src: task.index is missing"},
		{"index out of range", `{"cluster": {"worker": ["a:1", "b:2", "c:3"]}, "task": {"type": "worker", "index": 3}}`,
			"src: task index 3 out of range: cluster.worker has 3 entries (indices 0 to 2)"},
		{"negative index", `{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": -1}}`,
			"src: task index -1 out of range: cluster.worker has 2 entries (indices 0 to 1)"},
		{"chief task without chief", `{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}`,
			`src: task type "chief" but the cluster has no "chief" entries`},
		{"duplicate workers", `{"cluster": {"worker": ["a:1", "b:2", "a:1"]}, "task": {"type": "worker", "index": 0}}`,
			"src: duplicate address: worker 0 and worker 2 are both a:1; each peer needs its own host:port"},
		{"duplicate chief and worker", `{"cluster": {"worker": ["A:1"], "chief": ["a:1"]}, "task": {"type": "worker", "index": 0}}`,
			"src: duplicate address: chief 0 (a:1) and worker 0 (A:1) are the same endpoint spelled differently"},
		{"duplicate in two spellings", `{"cluster": {"worker": ["10.0.0.1:7000", "/ip4/10.0.0.1/tcp/7000/p2p/` + id0 + `"]}, "task": {"type": "worker", "index": 0}}`,
			"src: duplicate address: worker 0 (10.0.0.1:7000) and worker 1 (/ip4/10.0.0.1/tcp/7000/p2p/" + id0 + ") are the same endpoint spelled differently"},
		{"localhost is 127.0.0.1", `{"cluster": {"worker": ["localhost:7101", "127.0.0.1:7101"]}, "task": {"type": "worker", "index": 0}}`,
			"src: duplicate address: worker 0 (localhost:7101) and worker 1 (127.0.0.1:7101) are the same endpoint spelled differently"},
		{"port with a leading zero", `{"cluster": {"worker": ["10.0.0.1:7101", "10.0.0.1:07101"]}, "task": {"type": "worker", "index": 0}}`,
			"src: duplicate address: worker 0 (10.0.0.1:7101) and worker 1 (10.0.0.1:07101) are the same endpoint spelled differently"},
		{"ipv6 spellings", `{"cluster": {"worker": ["[::1]:7101", "/ip6/0:0::1/tcp/7101"]}, "task": {"type": "worker", "index": 0}}`,
			"src: duplicate address: worker 0 ([::1]:7101) and worker 1 (/ip6/0:0::1/tcp/7101) are the same endpoint"},
		{"localhost multiaddr", `{"cluster": {"worker": ["/dns/LOCALHOST/tcp/7101", "127.0.0.1:7101"]}, "task": {"type": "worker", "index": 0}}`,
			"src: duplicate address: worker 0 (/dns/LOCALHOST/tcp/7101) and worker 1 (127.0.0.1:7101) are the same endpoint"},
		{"duplicate peer id", `{"cluster": {"worker": ["/ip4/10.0.0.1/tcp/7000/p2p/` + id0 + `", "/ip4/10.0.0.2/tcp/7000/p2p/` + id0 + `"]}, "task": {"type": "worker", "index": 0}}`,
			"src: duplicate peer ID: worker 0 and worker 1 both have /p2p/" + id0},
		{"no port", `{"cluster": {"worker": ["a"]}, "task": {"type": "worker", "index": 0}}`,
			`src: cluster worker 0 address "a": want host:port or a multiaddr`},
		{"bad port", `{"cluster": {"worker": ["a:http"]}, "task": {"type": "worker", "index": 0}}`,
			`src: cluster worker 0 address "a:http": port "http": want a number in 1..65535`},
		{"port zero", `{"cluster": {"worker": ["a:1", "b:0"]}, "task": {"type": "worker", "index": 0}}`,
			`src: cluster worker 1 address "b:0": port "0": want a number in 1..65535`},
		{"no host", `{"cluster": {"worker": [":7000"]}, "task": {"type": "worker", "index": 0}}`,
			`src: cluster worker 0 address ":7000": no host`},
		{"empty address", `{"cluster": {"worker": [""]}, "task": {"type": "worker", "index": 0}}`,
			`src: cluster worker 0 address "": empty`},
		{"malformed multiaddr", `{"cluster": {"worker": ["/ip4/300.0.0.1/tcp/7000"]}, "task": {"type": "worker", "index": 0}}`,
			`src: cluster worker 0 address "/ip4/300.0.0.1/tcp/7000": malformed multiaddr`},
		{"multiaddr without port", `{"cluster": {"worker": ["/ip4/10.0.0.1"]}, "task": {"type": "worker", "index": 0}}`,
			`src: cluster worker 0 address "/ip4/10.0.0.1": want an address with a host`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.json), "src")
			if err == nil {
				t.Fatalf("accepted %s", tt.json)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error\n  %v\nwant it to start with\n  %s", err, tt.want)
			}
		})
	}
}

// TestDigest: the digest every peer compares says how many peers there
// are and tells lists apart, but not two spellings of one list.
func TestDigest(t *testing.T) {
	digest := func(workers string) string {
		t.Helper()
		c, err := Parse([]byte(`{"cluster": {"worker": [`+workers+`]}, "task": {"type": "worker", "index": 0}}`), "test")
		if err != nil {
			t.Fatal(err)
		}
		return c.Digest()
	}
	two := digest(`"localhost:7101", "10.0.0.2:7102"`)
	if !strings.HasPrefix(two, "2 peers ") {
		t.Errorf("digest %q does not start with the number of peers", two)
	}
	if same := digest(`"127.0.0.1:07101", "/ip4/10.0.0.2/tcp/7102"`); same != two {
		t.Errorf("two spellings of one list digest differently: %q and %q", two, same)
	}
	for _, other := range []string{`"127.0.0.1:7101", "10.0.0.2:7103"`, `"10.0.0.2:7102", "127.0.0.1:7101"`, `"127.0.0.1:7101", "10.0.0.2:7102", "10.0.0.3:7103"`} {
		if d := digest(other); d == two {
			t.Errorf("%s digests as %s", other, two)
		}
	}
}

func TestLoad(t *testing.T) {
	const spec = `{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}`
	t.Setenv(Env, spec)
	c, err := Load("")
	if err != nil || c.Rank != 1 {
		t.Fatalf("from the environment: %+v, %v", c, err)
	}
	t.Setenv(Env, `{"cluster": {}`)
	if _, err := Load(""); err == nil || !strings.HasPrefix(err.Error(), "TF_CONFIG (environment): malformed JSON at line 1, column 15") {
		t.Errorf("bad environment: %v", err)
	}
	file := filepath.Join(t.TempDir(), "tf.json")
	if err := os.WriteFile(file, []byte(strings.Replace(spec, `"index": 1`, `"index": 0`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(file); err != nil || c.Rank != 0 {
		t.Fatalf("from a file (which wins over the environment): %+v, %v", c, err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "reading the cluster spec") {
		t.Errorf("missing file: %v", err)
	}
	t.Setenv(Env, "")
	if _, err := Load(""); err == nil || !strings.Contains(err.Error(), "no cluster spec: set TF_CONFIG") {
		t.Errorf("unset: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"cluster": {"worker": ["a:1", "b:2"], "chief": ["c:3"]}, "task": {"type": "worker", "index": 1}}`))
	f.Add([]byte(`{"cluster": {"worker": ["/ip4/1.2.3.4/tcp/5"]}, "task": {"type": "worker", "index": 0}}`))
	f.Add([]byte("{\n\"cluster\": [}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b, "fuzz")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz: ") {
				t.Fatalf("error without its source: %v", err)
			}
			return
		}
		if (c.Rank < 0 || c.Rank >= len(c.Peers)) && !(c.IsEvaluator() && c.Rank == -1) {
			t.Fatalf("rank %d out of range for %d peers", c.Rank, len(c.Peers))
		}
	})
}
