package calibrate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/cost"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/data/criteo"
	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/mirrored/measure/bench"
	"github.com/meshtrain/meshtrain/sparse"
)

// Sizes of the calibration runs: a latency-bound all-reduce (recursive
// doubling, one round at N=2, two at N=4) and a bandwidth-bound one (the
// ring).
const (
	SmallBytes = 4 << 10
	LargeBytes = 16 << 20
	// ManyRanks runs the small all-reduce a second time on more ranks than
	// most machines' cores per rank: the messages' CPU then queues.
	ManyRanks = 4
	// PairCount is the size of the sparse gradient MeasurePairs codes:
	// what 10 batches of 100 Criteo-like examples touch.
	PairCount = 10000
)

// Config is how to calibrate.
type Config struct {
	// Meshtrain is the meshtrain binary whose bench commands measure.
	Meshtrain string
	Security  p2p.Security
	LinkBytes int64         // volume of the link measurement each way (0: 256 MiB)
	MinTime   time.Duration // per all-reduce size (0: 300 ms)
}

// Measure runs the measurements and returns them.
func Measure(ctx context.Context, cfg Config) (cost.Measured, error) {
	if cfg.LinkBytes <= 0 {
		cfg.LinkBytes = 256 << 20
	}
	if cfg.MinTime <= 0 {
		cfg.MinTime = 300 * time.Millisecond
	}
	sec := "--security=" + string(cfg.Security)
	var link bench.LinkResult
	if err := cfg.runJSON(ctx, &link, "link", sec, "--bytes", strconv.FormatInt(cfg.LinkBytes, 10), "--pings", "1000", "--ping-bytes", "64"); err != nil {
		return cost.Measured{}, err
	}
	// Both directions at once, as a ring's links run.
	m := cost.Measured{RTT: link.MedianRTTMicros * 1e-6, LinkRate: link.MinBothGBps * 1e9, Cores: float64(runtime.NumCPU())}
	for _, s := range []struct {
		dst   *cost.Sample
		algo  collective.Algo
		n     int
		bytes int64
	}{{&m.Small, collective.Tree, 2, SmallBytes}, {&m.Many, collective.Tree, ManyRanks, SmallBytes}, {&m.Large, collective.Ring, 2, LargeBytes}} {
		var res bench.AllReduceResult
		if err := cfg.runJSON(ctx, &res, "allreduce", sec, "-n", strconv.Itoa(s.n), "--algo", s.algo.String(), "--sizes", strconv.FormatInt(s.bytes, 10), "--min-time", cfg.MinTime.String()); err != nil {
			return cost.Measured{}, err
		}
		if len(res.Rows) != 1 {
			return cost.Measured{}, fmt.Errorf("calibrate: bench allreduce of %d bytes (%v) gave %d rows, want 1", s.bytes, s.algo, len(res.Rows))
		}
		r := res.Rows[0]
		// In place, as training all-reduces its gradients.
		*s.dst = cost.Sample{Algo: s.algo, N: r.N, Bytes: float64(r.Bytes), Seconds: r.InPlace.TimeUS * 1e-6, CPUSeconds: r.CPUUS * 1e-6}
	}
	m.PairSeconds = MeasurePairs(cfg.MinTime)
	return m, nil
}

// MeasurePairs times encoding and decoding a sparse gradient of PairCount
// pairs of Criteo's width (sparse.AppendVector, sparse.DecodeVector) for
// at least d, and returns the seconds per pair encoded or decoded.
func MeasurePairs(d time.Duration) float64 {
	rng := rand.New(rand.NewPCG(1, 2))
	v := sparse.Vector{Values: make([]float32, PairCount)}
	for i := range PairCount {
		v.Indices = append(v.Indices, int32(i*(criteo.Features/PairCount)+rng.IntN(criteo.Features/PairCount)))
		v.Values[i] = rng.Float32()
	}
	var enc []byte
	var got sparse.Vector
	start, coded := time.Now(), 0
	for time.Since(start) < d || coded == 0 {
		enc = sparse.AppendVector(enc[:0], v)
		if err := sparse.DecodeVector(&got, enc, criteo.Features); err != nil {
			panic(err) // AppendVector's output always decodes
		}
		coded += 2 * PairCount
	}
	return time.Since(start).Seconds() / float64(coded)
}

// runJSON runs `meshtrain bench CMD --json ARGS…` and decodes its output
// into dst.
func (cfg Config) runJSON(ctx context.Context, dst any, cmd string, args ...string) error {
	// The model is of peers on hosts of their own: their links have the
	// security's cost, not the same-host link's (--intra-host).
	c := exec.CommandContext(ctx, cfg.Meshtrain, append([]string{"bench", cmd, "--json", "--intra-host=tls"}, args...)...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return fmt.Errorf("calibrate: meshtrain bench %s: %w\n%s", cmd, err, stderr.Bytes())
	}
	if err := json.Unmarshal(out, dst); err != nil {
		return fmt.Errorf("calibrate: meshtrain bench %s printed %q, not its JSON: %w", cmd, out, err)
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
