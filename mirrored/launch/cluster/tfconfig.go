package cluster

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/meshtrain/meshtrain/internal/inputfile"
)

// Env is the environment variable holding the cluster spec when no file
// is given, as in TensorFlow.
const Env = "TF_CONFIG"

// MaxPeers is the most training peers a cluster may have, from any
// source: a count from the environment (MESHTRAIN_NUM_WORKERS, srun's
// task counts) beyond it is refused before anything is allocated for it,
// so a typo cannot make the runtime die out of memory. 65,536 is Slurm's
// bound on a node list here too, and far beyond what a ring of
// all-reduces over one link per peer trains well on (the cost model's
// extrapolation goes to 1,000).
const MaxPeers = 1 << 16

// Task types a TF_CONFIG task may have.
const (
	TaskWorker = "worker"
	TaskChief  = "chief"
	// TaskEvaluator is TensorFlow's side task: it follows the chief's
	// checkpoints and evaluates them, outside the training collectives.
	TaskEvaluator = "evaluator"
)

// Cluster is a validated TF_CONFIG: the addresses of every peer in rank
// order and this process's rank.
//
// An "evaluator" entry is not a peer: it is not in Peers, and the
// evaluator's own Cluster has Rank -1 (see IsEvaluator).
//
// Ranks: with no "chief" entry, worker i is rank i and worker 0 is the
// chief. With a chief, the chief is rank 0 and worker i is rank i+1 (as in
// TensorFlow, the chief is an extra worker that also trains). The chief
// (rank 0) broadcasts the initial state and writes checkpoints.
type Cluster struct {
	// Peers has one address per rank: "host:port" or a multiaddr,
	// possibly ending in /p2p/<peer-id>.
	Peers []string
	// Rank is this process's rank in Peers; -1 for the evaluator.
	Rank int
	// TaskType and TaskIndex are this process's task as written.
	TaskType  string
	TaskIndex int
	// HasChief says whether the spec listed a separate chief.
	HasChief bool
	// Scheduler names the scheduler the cluster came from: SchedulerSlurm
	// (srun's environment), else "" (a spec, an Indexed Job).
	Scheduler string
	// ListenHint, if set, is what to tell a user whose peer cannot listen
	// because its port is taken (where the port came from and how to
	// choose another), instead of the default guess that the same task
	// was started twice (see p2p.Config.ListenHint).
	ListenHint string
	// Slots are the addresses of the workers a growing elastic run may
	// still admit after Peers (a Kubernetes Indexed Job's next pods:
	// MaxWorkersEnv); Joining says this worker is one of those, listed
	// last in Peers: it joins the running run.
	Slots   []string
	Joining bool
}

// IsEvaluator says whether this process is the cluster's evaluator, which
// joins no collective.
func (c *Cluster) IsEvaluator() bool { return c.TaskType == TaskEvaluator }

// Digest identifies the training peers' endpoints as every peer must list
// them: their number and a hash of their normalised addresses in rank
// order ("3 peers 1a2b3c4d"), so two spellings of one endpoint
// (localhost and 127.0.0.1, port 07101 and 7101) digest alike.
func (c *Cluster) Digest() string {
	h := sha256.New()
	for _, p := range c.Peers {
		key, id, _ := normaliseAddr(p) // validated by Parse
		fmt.Fprintf(h, "%s/%s\n", key, id)
	}
	return fmt.Sprintf("%d peers %x", len(c.Peers), h.Sum(nil)[:4])
}

// AllPeerIDs says whether every peer is listed with its /p2p/ peer ID (so
// no cluster secret is needed to know the peers' identities).
func (c *Cluster) AllPeerIDs() bool {
	for _, p := range c.Peers {
		if _, id, err := normaliseAddr(p); err != nil || id == "" {
			return false
		}
	}
	return true
}

// tfConfig is the JSON shape, TensorFlow's: {"cluster": {"worker": [...],
// "chief": [...]}, "task": {"type": "worker", "index": 0}}.
type tfConfig struct {
	Cluster map[string][]string `json:"cluster"`
	Task    *struct {
		Type  string `json:"type"`
		Index *int   `json:"index"`
	} `json:"task"`
	// Accepted for compatibility with TensorFlow's TF_CONFIG; unused.
	Environment string `json:"environment"`
	RPCLayer    string `json:"rpc_layer"`
}

// Load reads the cluster spec from file, or from the TF_CONFIG environment
// variable when file is "".
func Load(file string) (*Cluster, error) {
	return load(file, os.LookupEnv)
}

// load is Load reading the environment through lookup.
func load(file string, lookup func(string) (string, bool)) (*Cluster, error) {
	if file != "" {
		b, err := inputfile.ReadFile(file) // a FIFO is refused, not waited on
		if err != nil {
			return nil, fmt.Errorf("reading the cluster spec: %w", err)
		}
		return Parse(b, "TF_CONFIG file "+file)
	}
	s, ok := lookup(Env)
	if !ok || strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("no cluster spec: set %s to a JSON like {\"cluster\": {\"worker\": [\"host1:7000\", \"host2:7000\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}} or pass --tf-config FILE", Env)
	}
	return Parse([]byte(s), Env+" (environment)")
}

// Parse validates a TF_CONFIG JSON. source names where it came from and
// starts every error.
func Parse(b []byte, source string) (*Cluster, error) {
	c, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return c, nil
}

func parse(b []byte) (*Cluster, error) {
	var tc tfConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tc); err != nil {
		return nil, jsonError(b, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		line, col := lineCol(b, dec.InputOffset())
		return nil, fmt.Errorf("malformed JSON at line %d, column %d: unexpected data after the top-level object", line, col)
	}
	if err := duplicateKey(b); err != nil {
		return nil, err
	}
	if len(tc.Cluster) == 0 {
		return nil, errors.New(`no "cluster": want {"cluster": {"worker": ["host:port", ...]}, "task": {...}}`)
	}
	if err := checkTaskTypes(tc.Cluster); err != nil {
		return nil, err
	}
	chief, workers := tc.Cluster[TaskChief], tc.Cluster[TaskWorker]
	if n := len(chief) + len(workers); n > MaxPeers {
		return nil, fmt.Errorf("cluster lists %d peers: more than the %d meshtrain runs", n, MaxPeers)
	}
	if len(workers) == 0 && len(chief) == 0 {
		return nil, errors.New(`cluster.worker is empty: list at least one "host:port"`)
	}
	if tc.Task == nil {
		return nil, errors.New(`no "task": want "task": {"type": "worker", "index": N} saying which entry this process is`)
	}
	typ := tc.Task.Type
	switch typ {
	case TaskWorker, TaskChief, TaskEvaluator:
	case "":
		return nil, errors.New(`task.type is missing: want "worker", "chief" or "evaluator"`)
	default:
		return nil, fmt.Errorf("unknown task type %q: want \"worker\", \"chief\" or \"evaluator\"", typ)
	}
	if tc.Task.Index == nil {
		return nil, fmt.Errorf(`task.index is missing: want the index of this process in cluster.%s`, typ)
	}
	idx := *tc.Task.Index
	entries := tc.Cluster[typ]
	if typ == TaskEvaluator && len(entries) == 0 && idx == 0 {
		// Kubeflow's training operator leaves the evaluator out of the
		// cluster it writes into every replica's TF_CONFIG.
		entries = []string{""}
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("task type %q but the cluster has no %q entries", typ, typ)
	}
	if idx < 0 || idx >= len(entries) {
		return nil, fmt.Errorf("task index %d out of range: cluster.%s has %d entries (indices 0 to %d)", idx, typ, len(entries), len(entries)-1)
	}

	c := &Cluster{TaskType: typ, TaskIndex: idx, HasChief: len(chief) == 1}
	var err error
	if c.Peers, err = peerList(chief, workers); err != nil {
		return nil, err
	}
	for _, a := range tc.Cluster[TaskEvaluator] {
		if _, _, err := normaliseAddr(a); err != nil {
			return nil, fmt.Errorf("cluster evaluator 0 address %q: %w", a, err)
		}
	}
	switch {
	case typ == TaskEvaluator:
		c.Rank = -1
	case typ == TaskWorker && c.HasChief:
		c.Rank = idx + 1
	default:
		c.Rank = idx
	}
	return c, nil
}

// peerList checks the training peers' addresses (well-formed, pairwise
// distinct endpoints and peer IDs) and returns them in rank order.
func peerList(chief, workers []string) ([]string, error) {
	var peers []string
	type entry struct{ name, addr string }
	var all []entry
	for i, a := range chief {
		all = append(all, entry{fmt.Sprintf("chief %d", i), a})
	}
	for i, a := range workers {
		all = append(all, entry{fmt.Sprintf("worker %d", i), a})
	}
	seenAddr, seenID := map[string]entry{}, map[string]string{}
	for _, e := range all {
		key, id, err := normaliseAddr(e.addr)
		if err != nil {
			return nil, fmt.Errorf("cluster %s address %q: %w", e.name, e.addr, err)
		}
		if prev, dup := seenAddr[key]; dup && prev.addr == e.addr {
			return nil, fmt.Errorf("duplicate address: %s and %s are both %s; each peer needs its own host:port", prev.name, e.name, e.addr)
		} else if dup {
			return nil, fmt.Errorf("duplicate address: %s (%s) and %s (%s) are the same endpoint spelled differently; each peer needs its own host:port", prev.name, prev.addr, e.name, e.addr)
		}
		seenAddr[key] = e
		if id != "" {
			if prev, dup := seenID[id]; dup {
				return nil, fmt.Errorf("duplicate peer ID: %s and %s both have /p2p/%s; each peer needs its own identity", prev, e.name, id)
			}
			seenID[id] = e.name
		}
		peers = append(peers, e.addr)
	}
	return peers, nil
}

// checkTaskTypes checks the cluster's task types and how many addresses
// the single-address ones list.
func checkTaskTypes(cluster map[string][]string) error {
	for typ := range cluster {
		switch typ {
		case TaskWorker, TaskChief, TaskEvaluator:
		case "ps":
			return errors.New(`cluster has "ps" entries: meshtrain has no parameter servers (the workers all-reduce the gradients among themselves, as TensorFlow's MultiWorkerMirroredStrategy does; "ps" belongs to ParameterServerStrategy); list every training machine under "worker"`)
		default:
			return fmt.Errorf("cluster has unknown task type %q: want \"worker\" and optionally \"chief\" and \"evaluator\"", typ)
		}
	}
	if chief, ok := cluster[TaskChief]; ok && len(chief) != 1 {
		return fmt.Errorf("cluster.chief lists %d addresses: want exactly one (or no \"chief\" key, making worker 0 the chief)", len(chief))
	}
	if ev, ok := cluster[TaskEvaluator]; ok && len(ev) != 1 {
		return fmt.Errorf("cluster.evaluator lists %d addresses: want exactly one, as in TensorFlow", len(ev))
	}
	return nil
}

// duplicateKey reports the first key repeated within one JSON object of b
// (well-formed), with its line and column: encoding/json, like TensorFlow's
// parser, silently keeps the last, so a repeated "task" would make this
// process another task than the one its author read first. Keys that
// differ only in case ("task" and "Task", "index" and "INDEX") are
// repeats too: encoding/json matches a key to a field case-insensitively,
// so the last of them would count.
func duplicateKey(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	var walk func(in string) error
	walk = func(in string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
			seen := map[string]string{} // folded key -> the key as first written
			for dec.More() {
				inner := in
				if d == '{' {
					kt, err := dec.Token()
					if err != nil {
						return err
					}
					key := kt.(string) // an object's tokens alternate key, value
					folded := foldKey(key)
					if first, dup := seen[folded]; dup {
						line, col := lineCol(b, valueStart(b, dec.InputOffset())+1)
						if first == key {
							return fmt.Errorf("duplicate key %q in %s at line %d, column %d: only the last would count; keep one", key, in, line, col)
						}
						return fmt.Errorf("duplicate key %q and %q in %s at line %d, column %d: keys are matched regardless of case, so only the last would count; keep one", first, key, in, line, col)
					}
					seen[folded], inner = key, fmt.Sprintf("the %q object", key)
				}
				if err := walk(inner); err != nil {
					return err
				}
			}
			_, err = dec.Token() // the closing delimiter
		}
		return err
	}
	return walk("the top-level object")
}

// foldKey is equal for two keys encoding/json matches to one field: equal
// under Unicode case folding (so also the Kelvin sign K and k, the long ſ
// and s).
func foldKey(k string) string { return strings.ToLower(strings.ToUpper(k)) }

// normaliseHost returns a key equal for two spellings of one host: IP
// addresses in their canonical form, names in lower case, and localhost as
// 127.0.0.1 (where it resolves on every machine this runs on).
func normaliseHost(h string) string {
	h = strings.ToLower(h)
	if h == "localhost" {
		return "127.0.0.1"
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap().String()
	}
	return h
}

// normaliseAddr checks one address and returns a key equal for two
// spellings of the same endpoint (see normaliseHost; ports as numbers, so
// 07101 is 7101), and the /p2p/ peer ID if any.
func normaliseAddr(s string) (key, id string, err error) {
	if s == "" {
		return "", "", errors.New("empty: want host:port or a multiaddr")
	}
	if !strings.HasPrefix(s, "/") {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			return "", "", fmt.Errorf("want host:port or a multiaddr such as /ip4/10.0.0.1/tcp/7000/p2p/12D3Koo…: %w", err)
		}
		if host == "" {
			return "", "", errors.New("no host: want host:port")
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return "", "", fmt.Errorf("port %q: want a number in 1..65535", port)
		}
		return normaliseHost(host) + "|" + strconv.Itoa(p), "", nil
	}
	a, err := ma.NewMultiaddr(s)
	if err != nil {
		return "", "", fmt.Errorf("malformed multiaddr: %w", err)
	}
	var host, port string
	ma.ForEach(a, func(c ma.Component) bool {
		switch c.Protocol().Code {
		case ma.P_IP4, ma.P_IP6, ma.P_DNS, ma.P_DNS4, ma.P_DNS6:
			host = normaliseHost(c.Value())
		case ma.P_TCP, ma.P_UDP:
			port = c.Value()
		case ma.P_P2P:
			id = c.Value()
		}
		return true
	})
	if host == "" || port == "" {
		return "", "", errors.New("want an address with a host (/ip4/, /ip6/ or /dns/) and a port (/tcp/ or /udp/…/quic-v1)")
	}
	return host + "|" + port, id, nil
}

// jsonError turns a decoding error into one with a line and column.
func jsonError(b []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := lineCol(b, syn.Offset)
		return fmt.Errorf("malformed JSON at line %d, column %d: %v", line, col, syn)
	case errors.As(err, &typ):
		line, col := lineCol(b, valueStart(b, typ.Offset)+1)
		field, kind := typ.Field, typ.Type.Kind().String()
		switch {
		case field == "":
			field = "the top level"
		case field == "cluster" && kind == "slice":
			field = "each cluster entry" // the decoder does not say which map key
		}
		return fmt.Errorf("malformed TF_CONFIG at line %d, column %d: %s must be %s, not a JSON %s", line, col, field, jsonKind(kind), typ.Value)
	case errors.Is(err, io.EOF):
		return errors.New("empty: want a JSON object with \"cluster\" and \"task\"")
	case errors.Is(err, io.ErrUnexpectedEOF):
		line, col := lineCol(b, int64(len(b))+1) // just past the last byte
		return fmt.Errorf("malformed JSON at line %d, column %d: unexpected end of input", line, col)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("unknown key %s: want \"cluster\" and \"task\" (\"environment\" and \"rpc_layer\" are accepted and ignored)",
			strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return fmt.Errorf("malformed JSON: %w", err)
}

func jsonKind(k string) string {
	switch k {
	case "map", "struct", "ptr":
		return "an object"
	case "slice":
		return "an array"
	case "int":
		return "an integer"
	}
	return "a " + k
}

// valueStart returns the offset of the first byte of the JSON value that
// ends at off (an UnmarshalTypeError's Offset: after a scalar, or just after
// the opening bracket of an array or object).
func valueStart(b []byte, off int64) int64 {
	if off <= 0 || off > int64(len(b)) {
		return max(0, min(off, int64(len(b))))
	}
	i := off - 1
	switch b[i] {
	case '[', '{':
		return i
	case '"':
		for i--; i >= 0; i-- {
			if b[i] == '"' && (i == 0 || b[i-1] != '\\') {
				return i
			}
		}
		return 0
	}
	for i > 0 && !strings.ContainsRune(" \t\r\n,:[{", rune(b[i-1])) {
		i--
	}
	return i
}

// lineCol converts a byte offset into a 1-based line and column (columns
// count bytes). json.SyntaxError.Offset is the number of bytes read before
// the error, so the offending byte is at Offset-1.
func lineCol(b []byte, off int64) (line, col int) {
	if off > 0 {
		off-- // point at the offending byte
	}
	off = min(off, int64(len(b)))
	line, col = 1, 1
	for _, c := range b[:off] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}
