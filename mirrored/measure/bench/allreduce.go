package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/half"
	"github.com/meshtrain/meshtrain/internal/hostid"
	"github.com/meshtrain/meshtrain/internal/rusage"
)

// AllReduceConfig configures `meshtrain bench allreduce`.
type AllReduceConfig struct {
	Cluster
	Sizes      []int64
	Algo       collective.Algo
	ChunkBytes int           // 0: collective.DefaultChunkBytes
	SmallBytes int           // 0: collective.DefaultSmallBytes
	MinTime    time.Duration // per size and placement; iterations are chosen to last about this long
	JSON       bool
	// Wire is the format the values travel in: half.BF16 or half.FP16
	// time collective.Comm.AllReduceFloat32Half (a ring whatever Algo
	// says), half.FP32 (the zero value) AllReduceFloat32.
	Wire half.Format
}

// DefaultMinTime is how long each size is timed (in place, and again out
// of place).
const DefaultMinTime = 500 * time.Millisecond

// Reps is how many timed repetitions each size gets; the row reports the
// median repetition's time per all-reduce.
const Reps = 5

// AllReduceFormat names the layout of AllReduceResult's JSON.
const AllReduceFormat = "meshtrain-bench-allreduce/2"

// AllReduceResult is what bench allreduce reports (its JSON).
type AllReduceResult struct {
	Header
	Algo string `json:"algo"`
	Rows []Row  `json:"rows"`
	// AvgBusBW is nccl-tests' "Avg bus bandwidth": the mean of every
	// row's out-of-place and in-place busbw.
	AvgBusBW float64 `json:"avg_busbw_gb_per_s"`
}

// Row is one size, with nccl-tests' columns. Bandwidths are in GB/s
// (10^9 bytes per second).
type Row struct {
	N     int    `json:"n"`
	Bytes int64  `json:"bytes"`
	Count int    `json:"count"`
	Type  string `json:"type"`  // element type: float (float32)
	RedOp string `json:"redop"` // sum
	Algo  string `json:"algo"`
	Iters int    `json:"iters"` // per placement: Reps repetitions of Iters/Reps
	// OutOfPlace reduces a send buffer into a separate receive buffer
	// (here: a copy, then the in-place all-reduce, timed together);
	// InPlace reduces the buffer onto itself.
	OutOfPlace Timing  `json:"out_of_place"`
	InPlace    Timing  `json:"in_place"`
	CPUUS      float64 `json:"cpu_us"` // CPU time of all peers per in-place all-reduce
}

// Timing is one placement's figures.
type Timing struct {
	TimeUS float64 `json:"time_us"` // median repetition, per all-reduce
	AlgBW  float64 `json:"algbw_gb_per_s"`
	BusBW  float64 `json:"busbw_gb_per_s"`
	// Wrong counts the result elements (over all ranks) that differ from
	// the exact sum, nccl-tests' #wrong.
	Wrong int64 `json:"wrong"`
}

// AllReduce runs the benchmark and writes the table (or JSON) to w: the
// table's header at once and each size's row, both placements, as soon as
// it is measured. In a child peer process, or on a rank other than 0
// across hosts, it only takes part and writes nothing.
func AllReduce(ctx context.Context, cfg AllReduceConfig, w io.Writer) error {
	if cfg.MinTime <= 0 {
		cfg.MinTime = DefaultMinTime
	}
	start := time.Now()
	var out *table // nil: JSON, or a process that does not report
	if cfg.reports() && !cfg.JSON {
		var err error
		if out, err = cfg.allReduceTable(w); err != nil {
			return err
		}
	}
	var res *AllReduceResult
	opts := collective.Options{Algo: cfg.Algo, ChunkBytes: cfg.ChunkBytes, SmallBytes: cfg.SmallBytes}
	err := cfg.run(ctx, opts, func(ctx context.Context, c *collective.Comm, addrs []string) error {
		// As a worker does: with several benches on some of several hosts,
		// auto is the hierarchical all-reduce.
		if err := c.LearnHosts(ctx, hostid.Self()); err != nil {
			return err
		}
		var rows []Row
		for _, size := range cfg.Sizes {
			row, err := measure(ctx, c, size, cfg.MinTime, cfg.InProcess, cfg.Wire)
			if err != nil {
				return fmt.Errorf("all-reduce of %d bytes: %w", size, err)
			}
			rows = append(rows, row) // every rank measured the same row
			if c.Rank() == 0 && out != nil {
				o, i := row.OutOfPlace, row.InPlace
				if err := out.row(row.Bytes, row.Count, row.Type, row.RedOp, row.Algo, row.Iters,
					o.TimeUS, o.AlgBW, o.BusBW, o.Wrong, i.TimeUS, i.AlgBW, i.BusBW, i.Wrong, row.CPUUS); err != nil {
					return err
				}
			}
		}
		if c.Rank() == 0 {
			res = &AllReduceResult{Header: cfg.header(AllReduceFormat, start, addrs), Algo: cfg.Algo.String(), Rows: rows}
		}
		return nil
	})
	if err != nil || res == nil {
		return err // res is nil on the other ranks: rank 0 reports
	}
	bad := 0
	for _, r := range res.Rows {
		res.AvgBusBW += (r.OutOfPlace.BusBW + r.InPlace.BusBW) / float64(2*len(res.Rows))
		if r.OutOfPlace.Wrong > 0 || r.InPlace.Wrong > 0 {
			bad++
		}
	}
	if cfg.JSON {
		err = writeJSON(w, res)
	} else {
		_, err = fmt.Fprintf(w, "# Avg bus bandwidth    : %.3f GB/s\n", res.AvgBusBW)
	}
	if err != nil {
		return err
	}
	if bad > 0 {
		return fmt.Errorf("bench: %d of %d sizes gave a wrong result", bad, len(res.Rows))
	}
	return nil
}

// allReduceColumns are nccl-tests' (without root), with the CPU time
// added; the out-of-place figures are columns 6-9, the in-place 10-13.
var allReduceColumns = []column{
	{"size(B)", "%d", 10}, {"count", "%d", 9}, {"type", "%s", 5}, {"redop", "%s", 3}, {"algo", "%s", 4}, {"iters", "%d", 5},
	{"time(us)", "%.1f", 9}, {"algbw(GB/s)", "%.3f", 6}, {"busbw(GB/s)", "%.3f", 6}, {"#wrong", "%d", 3},
	{"time(us)", "%.1f", 9}, {"algbw(GB/s)", "%.3f", 6}, {"busbw(GB/s)", "%.3f", 6}, {"#wrong", "%d", 3},
	{"cpu(us)", "%.0f", 8},
}

// allReduceTable writes the text header: what runs (all known before it
// runs), the placements and the columns.
func (cfg AllReduceConfig) allReduceTable(w io.Writer) (*table, error) {
	wire := ""
	if cfg.Wire.Half() {
		wire = fmt.Sprintf(", %s on the wire (bytes and GB/s: the float32 buffer's)", cfg.Wire)
	}
	if cfg.IntraHost == "auto" {
		wire += ", a shared-memory link between peers on one host"
	}
	_, err := fmt.Fprintf(w, "# meshtrain all-reduce: N=%d, security %s, algo %s, %s, link faults %s%s; time = median of %d reps; GB/s = 10^9 B/s\n",
		cfg.size(), cfg.Security, cfg.Algo, cfg.mode(), cfg.LinkFaults, wire, Reps)
	if err != nil {
		return nil, err
	}
	return newTable(w, allReduceColumns, group{6, 10, "out-of-place"}, group{10, 14, "in-place"})
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// sizedBufs are one size's buffers on one rank.
type sizedBufs struct {
	c        *collective.Comm
	src, dst []float32
	wire     half.Format
}

// allReduce sums b in the wire format. The inputs are small integers
// (fill), whose partial sums bf16 and scaled fp16 carry exactly, so the
// check stays exact.
func (s sizedBufs) allReduce(ctx context.Context, b []float32) error {
	if s.wire.Half() {
		return s.c.AllReduceFloat32Half(ctx, b, 0, len(b), s.wire)
	}
	return s.c.AllReduceFloat32(ctx, b, collective.Sum)
}

// fill writes this rank's input into b: small integers, whose sums are
// exact, so a check can be exact too.
func (s sizedBufs) fill(b []float32) {
	for i := range b {
		b[i] = float32((s.c.Rank() + 1) * (i % 13))
	}
}

// wrong counts the elements of b that are not the exact sum.
func (s sizedBufs) wrong(b []float32) int64 {
	n, bad := s.c.Size(), int64(0)
	for i, v := range b {
		if v != float32(n*(n+1)/2*(i%13)) {
			bad++
		}
	}
	return bad
}

// check runs one all-reduce in each placement and returns the wrong
// elements over all ranks: out of place (src left as it was, the result
// in dst), then in place.
func (s sizedBufs) check(ctx context.Context) (outOfPlace, inPlace int64, err error) {
	s.fill(s.src)
	copy(s.dst, s.src)
	if err := s.allReduce(ctx, s.dst); err != nil {
		return 0, 0, err
	}
	bad := s.wrong(s.dst)
	s.fill(s.dst) // what src must still hold
	for i := range s.src {
		if s.src[i] != s.dst[i] {
			bad++
		}
	}
	if err := s.allReduce(ctx, s.src); err != nil {
		return 0, 0, err
	}
	counts := []float64{float64(bad), float64(s.wrong(s.src))}
	if err := s.c.AllReduceFloat64(ctx, counts, collective.Sum); err != nil {
		return 0, 0, err
	}
	return int64(counts[0]), int64(counts[1]), nil
}

// op is one all-reduce in a placement.
func (s sizedBufs) op(ctx context.Context, inPlace bool) error {
	if inPlace {
		return s.allReduce(ctx, s.src)
	}
	copy(s.dst, s.src)
	return s.allReduce(ctx, s.dst)
}

// measure times one size on every rank; all ranks return the same row.
func measure(ctx context.Context, c *collective.Comm, size int64, minTime time.Duration, inProcess bool, wire half.Format) (Row, error) {
	n := c.Size()
	count := int(size / 4)
	s := sizedBufs{c: c, src: make([]float32, count), dst: make([]float32, count), wire: wire}
	wrongOut, wrongIn, err := s.check(ctx)
	if err != nil {
		return Row{}, err
	}
	// Warm up, then pick an iteration count every rank agrees on.
	s.fill(s.src)
	start := time.Now()
	for range 2 {
		if err := s.op(ctx, true); err != nil {
			return Row{}, err
		}
	}
	one := []float64{time.Since(start).Seconds() / 2}
	if err := c.AllReduceFloat64(ctx, one, collective.Max); err != nil {
		return Row{}, err
	}
	k := int(minTime.Seconds() / Reps / max(one[0], 1e-7))
	k = min(max(k, 1), 1000)
	row := Row{N: n, Bytes: size, Count: count, Type: "float", RedOp: "sum", Algo: c.AlgoFor(int(size)).String(), Iters: Reps * k}
	if wire.Half() {
		row.Type, row.Algo = "float/"+wire.String(), collective.Ring.String()
	}
	s.fill(s.src)
	out, _, err := timeReps(ctx, s, k, false, inProcess)
	if err != nil {
		return Row{}, err
	}
	s.fill(s.src)
	in, cpu, err := timeReps(ctx, s, k, true, inProcess)
	if err != nil {
		return Row{}, err
	}
	row.OutOfPlace, row.InPlace, row.CPUUS = timing(size, n, out, wrongOut), timing(size, n, in, wrongIn), cpu*1e6
	return row, nil
}

// timing turns a time per all-reduce into the row's figures.
func timing(size int64, n int, seconds float64, wrong int64) Timing {
	algbw := float64(size) / seconds / 1e9
	busbw := 0.0
	if n > 1 {
		busbw = algbw * 2 * float64(n-1) / float64(n)
	}
	return Timing{TimeUS: seconds * 1e6, AlgBW: algbw, BusBW: busbw, Wrong: wrong}
}

// timeReps times Reps repetitions of k back-to-back all-reduces, each after
// a barrier, and returns the median repetition's time per all-reduce (the
// anchors' method: on a shared machine one slow rep then moves the figure
// no more than one fast one; a rep lasts as long as its slowest rank) and
// the CPU seconds of all peers per all-reduce.
func timeReps(ctx context.Context, s sizedBufs, k int, inPlace, inProcess bool) (seconds, cpuSeconds float64, err error) {
	c := s.c
	reps := make([]float64, Reps)
	var cpuUsed time.Duration
	for i := range reps {
		if err := c.Barrier(ctx); err != nil {
			return 0, 0, err
		}
		cpu0 := rusage.CPUTime()
		start := time.Now()
		for range k {
			if err := s.op(ctx, inPlace); err != nil {
				return 0, 0, err
			}
		}
		reps[i] = time.Since(start).Seconds() / float64(k)
		cpuUsed += rusage.CPUTime() - cpu0
	}
	if err := c.AllReduceFloat64(ctx, reps, collective.Max); err != nil {
		return 0, 0, err
	}
	// CPU time of all peers together: a figure that, unlike wall time,
	// hardly moves when other processes share the cores. In-process, one
	// process's rusage already covers every peer.
	cpu := []float64{cpuUsed.Seconds() / float64(Reps*k)}
	cpuOp := collective.Sum
	if inProcess {
		cpuOp = collective.Max
	}
	if err := c.AllReduceFloat64(ctx, cpu, cpuOp); err != nil {
		return 0, 0, err
	}
	slices.Sort(reps)
	return reps[len(reps)/2], cpu[0], nil
}
