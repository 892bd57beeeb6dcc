package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/meshtrain/meshtrain/collective"
)

// LinkConfig configures `meshtrain bench link`.
type LinkConfig struct {
	Cluster          // N is always 2
	Bytes      int64 // volume each direction carries
	FrameBytes int   // payload per frame
	Pings      int   // round trips timed
	PingBytes  int   // round-trip payload
	JSON       bool
	// throughput, if set, is called on rank 0 with the throughput as soon
	// as it is measured (before the round trips).
	throughput func(gbps float64, bytes int64)
}

// LinkResult is what bench link reports.
type LinkResult struct {
	Security   string  `json:"security"`
	Bytes      int64   `json:"bytes_each_way"`
	FrameBytes int     `json:"frame_bytes"`
	GBps       float64 `json:"gbps_each_way"` // the slower direction, both running at once
	RTTMedian  float64 `json:"rtt_median_us"`
	RTTP10     float64 `json:"rtt_p10_us"`
	RTTP90     float64 `json:"rtt_p90_us"`
	PingBytes  int     `json:"ping_bytes"`
}

// Link measures one stream pair between two peers: both send Bytes at once
// in FrameBytes frames (through the same framing and inbox collectives use),
// then time Pings round trips of PingBytes.
func Link(ctx context.Context, cfg LinkConfig, w io.Writer) error {
	cfg.N = 2
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
	if ro, err := childRole(); err == nil && ro == nil && !cfg.JSON {
		fmt.Fprintf(w, "# meshtrain link: one libp2p stream each way, security %s, %s\n", cfg.Security, cfg.mode())
		cfg.throughput = func(gbps float64, bytes int64) {
			fmt.Fprintf(w, "both directions at once: %.3f GB/s each way (%d MiB each way in %d KiB frames)\n", gbps, bytes>>20, cfg.FrameBytes>>10)
		}
	}
	var res *LinkResult
	err := cfg.run(ctx, collective.Options{}, func(ctx context.Context, c *collective.Comm) error {
		r, err := linkRank(ctx, c, cfg)
		if c.Rank() == 0 {
			res = r
		}
		return err
	})
	if err != nil || res == nil {
		return err
	}
	res.Security = string(cfg.Security)
	if cfg.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	_, err = fmt.Fprintf(w, "round trip of %d B: median %.1f us (p10 %.1f, p90 %.1f) over %d pings\n",
		res.PingBytes, res.RTTMedian, res.RTTP10, res.RTTP90, cfg.Pings)
	return err
}

func linkRank(ctx context.Context, c *collective.Comm, cfg LinkConfig) (*LinkResult, error) {
	t := c.Transport()
	peer := 1 - c.Rank()
	payload := make([]byte, cfg.FrameBytes)
	frames := int((cfg.Bytes + int64(cfg.FrameBytes) - 1) / int64(cfg.FrameBytes))
	if err := c.Barrier(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.Options().Timeout)
	defer cancel()
	start := time.Now()
	sendErr := make(chan error, 1)
	go func() {
		h := collective.Header{Kind: collective.KindP2P, DType: collective.Bytes, Tag: 1}
		for range frames {
			if err := t.Send(ctx, peer, h, payload); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- nil
	}()
	var got int64
	for range frames {
		f, err := t.Recv(ctx, peer, collective.PointToPoint)
		if err != nil {
			return nil, fmt.Errorf("link: receiving from rank %d: %w", peer, err)
		}
		got += int64(len(f.Payload))
		f.Release()
	}
	if err := <-sendErr; err != nil {
		return nil, fmt.Errorf("link: sending to rank %d: %w", peer, err)
	}
	rate := []float64{float64(got) / time.Since(start).Seconds() / 1e9}
	if err := c.AllReduceFloat64(ctx, rate, collective.Min); err != nil {
		return nil, err
	}
	if c.Rank() == 0 && cfg.throughput != nil {
		cfg.throughput(rate[0], int64(frames)*int64(cfg.FrameBytes))
	}
	// Round trips: rank 0 sends, rank 1 echoes.
	ping := make([]byte, cfg.PingBytes)
	h := collective.Header{Kind: collective.KindP2P, DType: collective.Bytes, Tag: 2}
	rtts := make([]float64, 0, cfg.Pings)
	for range cfg.Pings + 20 {
		t0 := time.Now()
		if c.Rank() == 0 {
			if err := t.Send(ctx, peer, h, ping); err != nil {
				return nil, err
			}
		}
		f, err := t.Recv(ctx, peer, collective.PointToPoint)
		if err != nil {
			return nil, fmt.Errorf("link: ping from rank %d: %w", peer, err)
		}
		f.Release()
		if c.Rank() == 1 {
			if err := t.Send(ctx, peer, h, ping); err != nil {
				return nil, err
			}
		}
		rtts = append(rtts, time.Since(t0).Seconds()*1e6)
	}
	rtts = rtts[20:] // warm-up
	slices.Sort(rtts)
	if len(rtts) == 0 {
		return nil, errors.New("link: no round trips timed")
	}
	q := func(p float64) float64 { return rtts[int(p*float64(len(rtts)-1))] }
	return &LinkResult{Bytes: int64(frames) * int64(cfg.FrameBytes), FrameBytes: cfg.FrameBytes, GBps: rate[0], RTTMedian: q(0.5), RTTP10: q(0.1), RTTP90: q(0.9), PingBytes: cfg.PingBytes}, nil
}
