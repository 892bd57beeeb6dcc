// Package calibrate measures the cost model's parameters (package cost) on
// this machine: α and β with `bench link` (one libp2p stream between two
// peers on 127.0.0.1), and γ and the fixed cost per operation from two
// short `bench allreduce` runs. Its peers run in this process (over libp2p
// on loopback all the same), so a command can call it more than once.
package calibrate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/data/atomicfile"
	"github.com/meshtrain/meshtrain/mirrored/bench"
	"github.com/meshtrain/meshtrain/mirrored/cost"
)

// Sizes of the calibration runs: a latency-bound all-reduce (recursive
// doubling, one round at N=2) and a bandwidth-bound one (the ring).
const (
	SmallBytes = 4 << 10
	LargeBytes = 16 << 20
)

// Config is how to calibrate.
type Config struct {
	Security  p2p.Security
	LinkBytes int64         // volume of the link measurement each way (0: 256 MiB)
	MinTime   time.Duration // per all-reduce size (0: 300 ms)
	Logger    *zap.Logger
}

// Measure runs the measurements and returns them.
func Measure(ctx context.Context, cfg Config) (cost.Measured, error) {
	if cfg.LinkBytes <= 0 {
		cfg.LinkBytes = 256 << 20
	}
	if cfg.MinTime <= 0 {
		cfg.MinTime = 300 * time.Millisecond
	}
	cl := bench.Cluster{N: 2, Security: cfg.Security, InProcess: true, Logger: cfg.Logger}
	var link bench.LinkResult
	if err := runJSON(&link, func(b *bytes.Buffer) error {
		return bench.Link(ctx, bench.LinkConfig{Cluster: cl, Bytes: cfg.LinkBytes, Pings: 1000, PingBytes: 64, JSON: true}, b)
	}); err != nil {
		return cost.Measured{}, fmt.Errorf("calibrate: bench link: %w", err)
	}
	m := cost.Measured{RTT: link.RTTMedian * 1e-6, LinkRate: link.GBps * 1e9, Cores: float64(runtime.NumCPU())}
	for _, s := range []struct {
		dst   *cost.Sample
		algo  collective.Algo
		bytes int64
	}{{&m.Small, collective.Tree, SmallBytes}, {&m.Large, collective.Ring, LargeBytes}} {
		var rows []bench.Row
		if err := runJSON(&rows, func(b *bytes.Buffer) error {
			return bench.AllReduce(ctx, bench.AllReduceConfig{Cluster: cl, Sizes: []int64{s.bytes}, Algo: s.algo, MinTime: cfg.MinTime, JSON: true}, b)
		}); err != nil || len(rows) != 1 {
			return cost.Measured{}, fmt.Errorf("calibrate: bench allreduce of %d bytes (%v): %d rows, %w", s.bytes, s.algo, len(rows), err)
		}
		r := rows[0]
		*s.dst = cost.Sample{Algo: s.algo, N: r.N, Bytes: float64(r.Bytes), Seconds: r.TimeUS * 1e-6, CPUSeconds: r.CPUUS * 1e-6}
	}
	return m, nil
}

// runJSON runs a benchmark that writes JSON and decodes it into dst.
func runJSON(dst any, run func(*bytes.Buffer) error) error {
	var b bytes.Buffer
	if err := run(&b); err != nil {
		return err
	}
	if err := json.Unmarshal(b.Bytes(), dst); err != nil {
		return fmt.Errorf("reading its JSON %q: %w", b.String(), err)
	}
	return nil
}

// File is what `meshtrain model calibrate` writes: the fitted parameters
// and the measurements they came from.
type File struct {
	Params   cost.Params   `json:"params"`
	Measured cost.Measured `json:"measured"`
	Security string        `json:"security"`
	// Load is the load average when the measurements ran.
	Load string `json:"load_average,omitempty"`
}

// Save writes f as indented JSON to path.
func Save(path string, f File) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o644)
}

// Load reads a File written by Save and checks its parameters.
func Load(path string) (File, error) {
	var f File
	b, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("calibrate: %w (run `meshtrain model calibrate --out %s` first)", err, path)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("calibrate: %s is not a calibration file: %w", path, err)
	}
	if err := f.Params.Validate(); err != nil {
		return f, fmt.Errorf("calibrate: %s: %w", path, err)
	}
	return f, nil
}
