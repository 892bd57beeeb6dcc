package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/internal/stats"
)

// LinkConfig configures `meshtrain bench link`.
type LinkConfig struct {
	Cluster          // N peers, 2 if unset; every pair is measured
	Bytes      int64 // volume each direction carries, per measurement
	FrameBytes int   // payload per frame
	Pings      int   // round trips timed per pair
	PingBytes  int   // round-trip payload
	JSON       bool
}

// LinkFormat names the layout of LinkResult's JSON.
const LinkFormat = "meshtrain-bench-link/2"

// LinkResult is what bench link reports (its JSON). Rates are in GB/s
// (10^9 bytes per second).
type LinkResult struct {
	Header
	Bytes      int64      `json:"bytes_each_way"`
	FrameBytes int        `json:"frame_bytes"`
	PingBytes  int        `json:"ping_bytes"`
	Pings      int        `json:"pings"`
	Pairs      []LinkPair `json:"pairs"`
	// Slowest is the slowest direction measured alone ("1→2"), and its
	// rate over the fastest one's: a slow link stands out here instead of
	// being averaged away.
	Slowest          string  `json:"slowest"`
	SlowestGBps      float64 `json:"slowest_gb_per_s"`
	FastestGBps      float64 `json:"fastest_gb_per_s"`
	SlowestVsFastest float64 `json:"slowest_vs_fastest"`
	MedianAloneGBps  float64 `json:"median_alone_gb_per_s"`
	MinBothGBps      float64 `json:"min_both_gb_per_s"` // the slowest direction of any pair running both at once
	MedianRTTMicros  float64 `json:"median_rtt_us"`     // the median of the pairs' median round trips
	Measure          string  `json:"measure"`
}

// LinkPair is the link between ranks A < B: each direction alone, both
// at once, and the round trip.
type LinkPair struct {
	A        int     `json:"a"`
	B        int     `json:"b"`
	AToB     float64 `json:"a_to_b_gb_per_s"`
	BToA     float64 `json:"b_to_a_gb_per_s"`
	BothAToB float64 `json:"both_a_to_b_gb_per_s"`
	BothBToA float64 `json:"both_b_to_a_gb_per_s"`
	RTTP10   float64 `json:"rtt_p10_us"`
	RTTP50   float64 `json:"rtt_median_us"`
	RTTP90   float64 `json:"rtt_p90_us"`
}

// figures per pair in the vector the ranks reduce, in LinkPair's order.
const pairFigures = 7

// linkMeasure says how bench link measures, for its JSON and table.
const linkMeasure = "pairs one at a time, the others idle: A→B alone, B→A alone, both at once, then round trips A→B→A; each rate is what the receiver got over the time from the start barrier to its last frame"

// Link measures every pair of peers in turn (the others idle): each
// direction alone, both at once, then round trips. Frames go through the
// same framing and inbox collectives use. The table's header is written at
// once, each pair's rates as soon as they are measured, its round trips
// after them.
func Link(ctx context.Context, cfg LinkConfig, w io.Writer) error {
	if cfg.N == 0 {
		cfg.N = 2
	}
	if cfg.Bytes <= 0 {
		cfg.Bytes = 1 << 30
	}
	if cfg.FrameBytes <= 0 {
		cfg.FrameBytes = collective.DefaultChunkBytes
	}
	if cfg.Pings <= 0 {
		cfg.Pings = 2000
	}
	if cfg.PingBytes <= 0 {
		cfg.PingBytes = 4096
	}
	if cfg.size() < 2 {
		return fmt.Errorf("bench link: %d peers: want at least 2", cfg.size())
	}
	start := time.Now()
	frames := (cfg.Bytes + int64(cfg.FrameBytes) - 1) / int64(cfg.FrameBytes)
	var out *table // nil: JSON, or a process that does not report
	if cfg.reports() && !cfg.JSON {
		var err error
		if out, err = cfg.linkTable(w, frames*int64(cfg.FrameBytes)); err != nil {
			return err
		}
	}
	var res *LinkResult
	err := cfg.run(ctx, collective.Options{}, func(ctx context.Context, c *collective.Comm, addrs []string) error {
		show := out
		if c.Rank() != 0 {
			show = nil
		}
		pairs, err := linkPairs(ctx, c, cfg, show)
		if err == nil && c.Rank() == 0 {
			res = &LinkResult{Header: cfg.header(LinkFormat, start, addrs), Bytes: frames * int64(cfg.FrameBytes), FrameBytes: cfg.FrameBytes,
				PingBytes: cfg.PingBytes, Pings: cfg.Pings, Pairs: pairs, Measure: linkMeasure}
		}
		return err
	})
	if err != nil || res == nil {
		return err
	}
	res.summarize()
	if cfg.JSON {
		return writeJSON(w, res)
	}
	return res.writeSummary(w)
}

// summarize finds the slowest direction and the medians.
func (r *LinkResult) summarize() {
	var alone, rtts []float64
	r.MinBothGBps = -1
	for _, p := range r.Pairs {
		alone = append(alone, p.AToB, p.BToA)
		rtts = append(rtts, p.RTTP50)
		for _, d := range []struct {
			name string
			v    float64
		}{{fmt.Sprintf("%d→%d", p.A, p.B), p.AToB}, {fmt.Sprintf("%d→%d", p.B, p.A), p.BToA}} {
			if r.Slowest == "" || d.v < r.SlowestGBps {
				r.Slowest, r.SlowestGBps = d.name, d.v
			}
		}
		if both := min(p.BothAToB, p.BothBToA); r.MinBothGBps < 0 || both < r.MinBothGBps {
			r.MinBothGBps = both
		}
	}
	r.MedianAloneGBps, r.MedianRTTMicros = stats.Median(alone), stats.Median(rtts)
	if len(alone) > 0 {
		r.FastestGBps = slices.Max(alone)
	}
	if r.FastestGBps > 0 {
		r.SlowestVsFastest = r.SlowestGBps / r.FastestGBps
	}
}

// linkColumns are bench link's table's: a pair's rates, then its round
// trips.
var linkColumns = []column{
	{"link", "%s", 4}, {"A→B alone", "%.3f", 6}, {"B→A alone", "%.3f", 6}, {"A→B both", "%.3f", 6}, {"B→A both", "%.3f", 6},
	{"rtt Median(us)", "%.1f", 8}, {"p10", "%.1f", 8}, {"p90", "%.1f", 8},
}

// linkTable writes the text header: what runs (all known before it runs)
// and the columns.
func (cfg LinkConfig) linkTable(w io.Writer, bytes int64) (*table, error) {
	_, err := fmt.Fprintf(w, "# meshtrain link: one libp2p stream each way, security %s, %s, link faults %s\n"+
		"# %s; %d MiB each way in %d KiB frames; GB/s = 10^9 B/s; round trips of %d B over %d pings\n",
		cfg.Security, cfg.mode(), cfg.LinkFaults, linkMeasure, bytes>>20, cfg.FrameBytes>>10, cfg.PingBytes, cfg.Pings)
	if err != nil {
		return nil, err
	}
	return newTable(w, linkColumns)
}

// writeSummary writes the line after the table.
func (r *LinkResult) writeSummary(w io.Writer) error {
	_, err := fmt.Fprintf(w, "slowest direction alone: %s at %.3f GB/s, %.2f× the fastest (%.3f GB/s; median %.3f); slowest with both directions at once: %.3f GB/s each way\n",
		r.Slowest, r.SlowestGBps, r.SlowestVsFastest, r.FastestGBps, r.MedianAloneGBps, r.MinBothGBps)
	return err
}

// linkPairs measures every pair in turn on every rank and returns the
// figures (the same on every rank); show, if set, gets each pair's row as
// it is measured.
func linkPairs(ctx context.Context, c *collective.Comm, cfg LinkConfig, show *table) ([]LinkPair, error) {
	n := c.Size()
	var pairs []LinkPair
	for a := range n {
		for b := a + 1; b < n; b++ {
			pairs = append(pairs, LinkPair{A: a, B: b})
		}
	}
	figs := make([]float64, pairFigures*len(pairs))
	for i, p := range pairs {
		if err := measurePair(ctx, c, cfg, p.A, p.B, figs[pairFigures*i:pairFigures*(i+1)], show); err != nil {
			return nil, fmt.Errorf("link %d-%d: %w", p.A, p.B, err)
		}
	}
	for i := range pairs {
		f := figs[pairFigures*i:]
		p := &pairs[i]
		p.AToB, p.BToA, p.BothAToB, p.BothBToA, p.RTTP10, p.RTTP50, p.RTTP90 = f[0], f[1], f[2], f[3], f[4], f[5], f[6]
	}
	return pairs, nil
}

// measurePair runs the pair's four measurements, every rank taking part in
// the barriers between them, and writes the pair's figures into out on
// every rank: the receivers' rates, A's round trips. show, if set, gets
// the rates as soon as they are measured, then the round trips.
func measurePair(ctx context.Context, c *collective.Comm, cfg LinkConfig, a, b int, out []float64, show *table) error {
	me := c.Rank()
	for i, dir := range []struct{ from, to int }{{a, b}, {b, a}} {
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		if me != dir.from && me != dir.to {
			continue
		}
		sendTo, recvFrom := dir.to, -1
		if me == dir.to {
			sendTo, recvFrom = -1, dir.from
		}
		rate, err := stream(ctx, c, cfg, sendTo, recvFrom)
		if err != nil {
			return err
		}
		if me == dir.to {
			out[i] = rate
		}
	}
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	if me == a || me == b {
		peer := a + b - me
		rate, err := stream(ctx, c, cfg, peer, peer) // both at once
		if err != nil {
			return err
		}
		out[2+boolInt(me == a)] = rate // a received B→A, b received A→B
	}
	// Each figure was measured on one rank, and is 0 on the others. This
	// all-reduce is also the barrier before the round trips.
	if err := c.AllReduceFloat64(ctx, out[:4], collective.Max); err != nil {
		return err
	}
	if show != nil {
		if err := show.cells(fmt.Sprintf("%d-%d", a, b), out[0], out[1], out[2], out[3]); err != nil {
			return err
		}
	}
	if me == a || me == b {
		q, err := pings(ctx, c, cfg, a, b)
		if err != nil {
			return err
		}
		copy(out[4:], q)
	}
	if err := c.AllReduceFloat64(ctx, out[4:], collective.Max); err != nil {
		return err
	}
	if show != nil {
		return show.cells(out[5], out[4], out[6]) // median, p10, p90
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// stream sends cfg.Bytes to rank sendTo and receives them from rank
// recvFrom (either may be -1: none), at once, and returns the rate
// received in GB/s.
func stream(ctx context.Context, c *collective.Comm, cfg LinkConfig, sendTo, recvFrom int) (float64, error) {
	t := c.Transport()
	frames := int((cfg.Bytes + int64(cfg.FrameBytes) - 1) / int64(cfg.FrameBytes))
	ctx, cancel := context.WithTimeout(ctx, c.Options().Timeout)
	defer cancel()
	start := time.Now()
	sendErr := make(chan error, 1)
	go func() {
		if sendTo < 0 {
			sendErr <- nil
			return
		}
		payload := make([]byte, cfg.FrameBytes)
		h := collective.Header{Kind: collective.KindP2P, DType: collective.Bytes, Tag: 1}
		for range frames {
			if err := t.Send(ctx, sendTo, h, payload); err != nil {
				sendErr <- fmt.Errorf("sending to rank %d: %w", sendTo, err)
				return
			}
		}
		sendErr <- nil
	}()
	var got int64
	for range frames * boolInt(recvFrom >= 0) {
		f, err := t.Recv(ctx, recvFrom, collective.PointToPoint)
		if err != nil {
			cancel()
			return 0, errors.Join(fmt.Errorf("receiving from rank %d: %w", recvFrom, err), <-sendErr)
		}
		got += int64(len(f.Payload))
		f.Release()
	}
	rate := float64(got) / time.Since(start).Seconds() / 1e9
	return rate, <-sendErr
}

// pings times cfg.Pings round trips (after 20 to warm up) from a to b and
// back; a returns the 10th, 50th and 90th percentiles in microseconds, b
// (which echoes) nothing.
func pings(ctx context.Context, c *collective.Comm, cfg LinkConfig, a, b int) ([]float64, error) {
	t := c.Transport()
	ctx, cancel := context.WithTimeout(ctx, c.Options().Timeout)
	defer cancel()
	ping := make([]byte, cfg.PingBytes)
	h := collective.Header{Kind: collective.KindP2P, DType: collective.Bytes, Tag: 2}
	rtts := make([]float64, 0, cfg.Pings)
	for i := range cfg.Pings + 20 {
		t0 := time.Now()
		if c.Rank() == a {
			if err := t.Send(ctx, b, h, ping); err != nil {
				return nil, fmt.Errorf("ping to rank %d: %w", b, err)
			}
		}
		f, err := t.Recv(ctx, a+b-c.Rank(), collective.PointToPoint)
		if err != nil {
			return nil, fmt.Errorf("ping from rank %d: %w", a+b-c.Rank(), err)
		}
		f.Release()
		if c.Rank() == b {
			if err := t.Send(ctx, a, h, ping); err != nil {
				return nil, fmt.Errorf("echo to rank %d: %w", a, err)
			}
		} else if i >= 20 { // warm-up
			rtts = append(rtts, time.Since(t0).Seconds()*1e6)
		}
	}
	if c.Rank() == b {
		return nil, nil
	}
	if len(rtts) == 0 {
		return nil, errors.New("no round trips timed")
	}
	slices.Sort(rtts)
	q := func(p float64) float64 { return rtts[int(p*float64(len(rtts)-1))] }
	return []float64{q(0.1), q(0.5), q(0.9)}, nil
}
