package netns

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/meshtrain/meshtrain/internal/rusage"
	"github.com/meshtrain/meshtrain/internal/stats"
)

// NetbenchPackage is the measuring program run on every host.
const NetbenchPackage = "github.com/meshtrain/meshtrain/tests/tools/netbench"

// Ports the measuring program listens on.
const (
	TCPPort       = 7100
	AllReducePort = 7200
)

// TCPResult is what one host received over raw TCP from the host before it
// in the ring, while it sent to the host after it.
type TCPResult struct {
	Rank    int     `json:"rank"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"bytes_per_s"`
}

// AllReduceResult is one size's float32 sum all-reduce, timed Reps times.
type AllReduceResult struct {
	N        int    `json:"n"`
	Bytes    int64  `json:"bytes"`
	Security string `json:"security"`
	Algo     string `json:"algo,omitempty"`
	// SameHostLinks is how many links, over all ranks, went through
	// shared memory (--intra-host auto between peers of one host).
	SameHostLinks int `json:"same_host_links,omitempty"`
	// BusBW is each repetition's bus bandwidth in bytes/s (nccl-tests:
	// size × 2(N−1)/N ÷ the slowest rank's time).
	BusBW []float64 `json:"busbw_bytes_per_s"`
	// CPUSeconds is the CPU time of all ranks per all-reduce.
	CPUSeconds float64 `json:"cpu_s"`
}

// Median is the median repetition's bus bandwidth.
func (r AllReduceResult) Median() float64 {
	return stats.Median(r.BusBW)
}

// Seconds is each repetition's time.
func (r AllReduceResult) Seconds() []float64 {
	secs := make([]float64, len(r.BusBW))
	for i, bw := range r.BusBW {
		secs[i] = float64(r.Bytes) * 2 * float64(r.N-1) / float64(r.N) / bw
	}
	return secs
}

// Build compiles pkg into dir and returns the binary's path.
func Build(ctx context.Context, dir, pkg string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("netns: go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// hostList is every host's address, comma-separated.
func (h *Hosts) hostList() string {
	ips := make([]string, h.N)
	for i := range ips {
		ips[i] = h.IP(i)
	}
	return strings.Join(ips, ",")
}

// MeasureTCP sends raw TCP (plaintext, 1 MiB writes) around the ring for
// d: host i to host i+1, every link busy in both directions at once, as in
// a ring all-reduce. It returns what each host received. extra goes to
// every netbench process (-tls: the same over TLS 1.3).
func MeasureTCP(ctx context.Context, h *Hosts, netbench string, d time.Duration, extra ...string) ([]TCPResult, error) {
	res, err := h.RunOnAll(ctx, func(i int) Proc {
		return Proc{Args: append([]string{netbench, "tcp", "-rank", strconv.Itoa(i), "-hosts", h.hostList(),
			"-port", strconv.Itoa(TCPPort), "-duration", d.String()}, extra...)}
	})
	if err != nil {
		return nil, err
	}
	out := make([]TCPResult, h.N)
	for i, r := range res {
		if err := json.Unmarshal([]byte(r.Stdout), &out[i]); err != nil {
			return nil, fmt.Errorf("netns: host %d's TCP result %q: %w", i, r.Stdout, err)
		}
	}
	return out, nil
}

// MeanRate is the mean of the hosts' receive rates.
func MeanRate(rs []TCPResult) float64 {
	sum := 0.0
	for _, r := range rs {
		sum += r.Rate
	}
	return sum / float64(max(len(rs), 1))
}

// MeasureAllReduce runs a float32 sum all-reduce of each size among the
// hosts over meshtrain's libp2p transport with security sec (tls, noise,
// plaintext), reps timed repetitions per size. extra goes to every
// netbench process (e.g. -window N, -muxer yamux, -algo ring).
func MeasureAllReduce(ctx context.Context, h *Hosts, netbench, sec string, sizes []int64, reps int, extra ...string) ([]AllReduceResult, error) {
	return MeasureAllReducePerHost(ctx, h, 1, netbench, sec, sizes, reps, extra...)
}

// MeasureAllReducePerHost is MeasureAllReduce with perHost peers on every
// host (listening on AllReducePort, AllReducePort+1, …): the peers learn
// each other's host (hostid: each namespace is a host), so with several
// a host netbench's -algo auto takes the hierarchical all-reduce.
func MeasureAllReducePerHost(ctx context.Context, h *Hosts, perHost int, netbench, sec string, sizes []int64, reps int, extra ...string) ([]AllReduceResult, error) {
	sz := make([]string, len(sizes))
	for i, s := range sizes {
		sz[i] = strconv.FormatInt(s, 10)
	}
	return runNetbench[AllReduceResult](ctx, h, perHost, netbench, "allreduce", len(sizes),
		append([]string{"-security", sec, "-sizes", strings.Join(sz, ","), "-reps", strconv.Itoa(reps)}, extra...)...)
}

// runNetbench runs netbench's mode with args as perHost processes on
// every host and returns the want results rank 0 printed, one JSON
// object each (every rank took part in the same timings; rank 0
// reports). Every timed repetition starts after the links idled for
// h.Rate.Refill(), with tbf's bucket full.
func runNetbench[T any](ctx context.Context, h *Hosts, perHost int, netbench, mode string, want int, args ...string) ([]T, error) {
	res, err := h.RunPerHost(ctx, perHost, func(i int) Proc {
		return Proc{Args: append([]string{netbench, mode, "-rank", strconv.Itoa(i), "-hosts", h.hostList(), "-per-host", strconv.Itoa(perHost),
			"-port", strconv.Itoa(AllReducePort), "-idle", h.Rate.Refill().String()}, args...)}
	})
	if err != nil {
		return nil, err
	}
	var out []T
	dec := json.NewDecoder(strings.NewReader(res[0].Stdout))
	for dec.More() {
		var r T
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("netns: host 0's %s results %q: %w", mode, res[0].Stdout, err)
		}
		out = append(out, r)
	}
	if len(out) != want {
		return nil, fmt.Errorf("netns: host 0 reported %d %s results, want %d:\n%s", len(out), mode, want, res[0])
	}
	return out, nil
}

// LoadAverage is the machine's load average (rusage.LoadAverage).
func LoadAverage() string { return rusage.LoadAverage() }
