package launch

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"

	"github.com/meshtrain/meshtrain/mirrored"
)

// WriteTable prints one row per peer: steps, examples/s, test accuracy,
// bytes sent and received, CPU seconds, peak RSS, and the shares of step
// time spent computing, communicating and waiting; then whether the
// replicas ended identical.
func WriteTable(w io.Writer, rep *Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rank\tsteps\texamples/s\ttest acc\tsent\treceived\tCPU s\tpeak RSS\tcompute\tcomm\twait\t")
	for _, p := range rep.Peers {
		if p.Summary == nil {
			fmt.Fprintf(tw, "%d\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", p.Rank)
			continue
		}
		s := p.Summary.Peer
		fmt.Fprintf(tw, "%d\t%d\t%.0f\t%.2f%%\t%s\t%s\t%.1f\t%s\t%.0f%%\t%.0f%%\t%.0f%%\t\n",
			p.Rank, s.Steps, s.ExamplesPerSec, 100*s.TestAccuracy, bytesIEC(s.BytesSent), bytesIEC(s.BytesReceived),
			s.CPUSeconds, bytesIEC(s.PeakRSSBytes), 100*s.ComputeShare, 100*s.CommShare, 100*s.WaitShare)
	}
	tw.Flush()
	var first *mirrored.Summary
	for _, p := range rep.Peers {
		if p.Summary != nil {
			first = p.Summary
			break
		}
	}
	for _, p := range rep.Peers {
		if p.Summary == nil && slices.Contains(rep.Lost, p.Rank) {
			fmt.Fprintf(w, "rank %d failed (the others carried on without it): %s\n", p.Rank, p.Err)
		}
	}
	if first != nil && (rep.Peers[0].Summary != nil || rep.Gossip) {
		run := first.Run
		verdict := "identical on every peer"
		switch {
		case rep.Gossip && !rep.Identical:
			verdict = "different on each gossip replica, as expected"
		case !rep.Identical:
			verdict = "NOT identical across peers"
		}
		if n := len(run.EpochResults); n > 0 && run.EpochResults[n-1].TestAUC > 0 { // sparse-lr
			fmt.Fprintf(w, "final test AUC %.4f, log-loss %.4f\n", run.EpochResults[n-1].TestAUC, run.EpochResults[n-1].TestLoss)
		}
		fmt.Fprintf(w, "final test accuracy %.2f%% after %d steps (global batch %d), %.1fs training, %.1fs wall; parameters %s (sha256 %.16s…)\n",
			100*run.FinalAccuracy, run.Steps, run.BatchSize*run.Replicas, run.TrainSeconds, rep.WallSeconds, verdict, run.ParamsSHA256)
	}
}

func bytesIEC(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// SummaryJSON is the --summary file: the run (as every peer saw it) and
// each peer's own figures, final parameter hash and per-epoch accuracy.
type SummaryJSON struct {
	Workers           int              `json:"workers"`
	ParamsIdentical   bool             `json:"params_identical"`
	LaunchWallSeconds float64          `json:"launch_wall_seconds"`
	Run               *mirrored.Result `json:"run"`
	Peers             []PeerJSON       `json:"peers"`
}

// PeerJSON is one peer in SummaryJSON.
type PeerJSON struct {
	mirrored.PeerStats
	Addr             string    `json:"addr"`
	PerEpochAccuracy []float64 `json:"per_epoch_accuracy"`
	Error            string    `json:"error,omitempty"`
}

// WriteSummary writes rep as SummaryJSON to path.
func WriteSummary(path string, rep *Report) error {
	out := SummaryJSON{Workers: len(rep.Peers), ParamsIdentical: rep.Identical, LaunchWallSeconds: rep.WallSeconds}
	for _, p := range rep.Peers {
		pj := PeerJSON{Addr: p.Addr, Error: p.Err}
		pj.Rank = p.Rank
		if p.Summary != nil {
			pj.PeerStats = p.Summary.Peer
			if out.Run == nil {
				out.Run = p.Summary.Run
			}
			for _, e := range p.Summary.Run.EpochResults {
				pj.PerEpochAccuracy = append(pj.PerEpochAccuracy, e.TestAccuracy)
			}
		}
		out.Peers = append(out.Peers, pj)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the summary: %w", err)
	}
	return nil
}
