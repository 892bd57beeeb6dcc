package report

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meshtrain/meshtrain/collective/half"
	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/mirrored"
)

// WriteTable prints one row per peer: steps, examples/s, test accuracy,
// bytes sent and received, CPU seconds, peak RSS, and the shares of step
// time spent computing, communicating and waiting; then whether the
// replicas ended identical, and who asked to stop if the run stopped early.
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
	writeLinks(w, rep)
	var first *mirrored.Summary
	for _, p := range rep.Peers {
		if p.Summary != nil && p.Summary.Peer.Left == "" { // an elastic peer that left has no final figures
			first = p.Summary
			break
		}
	}
	if first != nil {
		writeMembership(w, first.Run.Membership)
	}
	for _, p := range rep.Peers {
		if p.Summary == nil && slices.Contains(rep.Lost, p.Rank) {
			fmt.Fprintf(w, "rank %d failed (the others carried on without it): %s\n", p.Rank, p.Err)
		}
	}
	if first != nil && (rep.Peers[0].Summary != nil || rep.Gossip || len(first.Run.Membership) > 0) {
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
		after := fmt.Sprintf("%d steps (global batch %d)", run.Steps, run.BatchSize*run.Replicas)
		if len(run.Membership) > 0 { // its steps are numbered anew at each change
			after = fmt.Sprintf("%d epoch(s) (the last global batch %d, over %d peers)", len(run.EpochResults), run.BatchSize*run.Replicas, run.Replicas)
		}
		fmt.Fprintf(w, "final test accuracy %.2f%% after %s, %.1fs training, %.1fs wall; parameters %s (sha256 %.16s…)\n",
			100*run.FinalAccuracy, after, run.TrainSeconds, rep.WallSeconds, verdict, run.ParamsSHA256)
		if len(run.Membership) > 0 {
			writeElasticRan(w, rep)
		}
		if run.Stopped != nil {
			fmt.Fprintf(w, "stopped early: %s\n", run.Stopped)
		}
	}
	if line := hostLine(rep); line != "" {
		fmt.Fprintln(w, line)
	}
	if v, ok := rep.Verdict(); ok { // the verdict names the topology
		fmt.Fprintln(w, v)
	} else if topo := rep.topology(); topo != "" {
		fmt.Fprintln(w, topo)
	}
}

// hostLine says how loaded the peers' machines were: the load average at
// the end and the cores other processes kept busy, which every figure
// above depends on; "" where the peers did not record them.
func hostLine(rep *Report) string {
	peers := make([]*mirrored.PeerStats, 0, len(rep.Peers))
	for _, p := range rep.Peers {
		if p.Summary != nil {
			peers = append(peers, &p.Summary.Peer)
		}
	}
	fig := FromPeers(peers, "")
	share, load := fig.OthersLoad()
	if fig.Cores <= 0 || load <= 0 {
		return ""
	}
	return fmt.Sprintf("host: %d cores, load average %.2f at the end; other processes kept %.1f cores busy (%s) while the peers ran",
		fig.Cores, load, share*float64(fig.Cores), pct(share))
}

// Verdict names the run's bottleneck from the peers' figures (package
// report's rules: VerdictOf); ok is false when no peer has any.
func (rep *Report) Verdict() (Verdict, bool) {
	peers := make([]*mirrored.PeerStats, len(rep.Peers))
	for i := range rep.Peers {
		if s := rep.Peers[i].Summary; s != nil {
			peers[i] = &s.Peer
		}
	}
	run := FromPeers(peers, rep.security())
	for _, p := range rep.Peers {
		// The ring's dense exchange of an nn model's gradient is what the
		// cost model prices here.
		if s := p.Summary; s != nil && rep.Cost != nil && !rep.Gossip && s.Run.Model != mirrored.SparseModel {
			run.Cost, run.GradientBytes = rep.Cost, bytesPerValue(rep.Info.Wire)*float64(s.Run.Params)
			break
		}
	}
	v, ok := VerdictOf(run)
	v.Topology = rep.topology()
	return v, ok
}

// security is the run's link security as the workers found it: with
// --intra-host auto, peers on one host link through shared memory, so a
// run whose every link did says so (no cipher to blame), and a run where
// some did names how many.
func (rep *Report) security() string {
	local, links := 0, 0
	for _, p := range rep.Peers {
		if s := p.Summary; s != nil {
			local += s.Peer.SameHostLinks
			links += len(s.Peer.Links)
		}
	}
	switch {
	case local == 0:
		return rep.Info.Security
	case local == links:
		return SameHostSecurity
	}
	return fmt.Sprintf("%s (%d of the peers' %d links on a host: shared memory, no cipher)", rep.Info.Security, local, links)
}

// topology is the peers' hosts and all-reduce as the first peer with a
// summary recorded them (only the workers know their hosts).
func (rep *Report) topology() string {
	for _, p := range rep.Peers {
		if p.Summary != nil && p.Summary.Run != nil && p.Summary.Run.Topology != "" {
			return p.Summary.Run.Topology
		}
	}
	return ""
}

// writeLinks prints the bytes each peer sent over each link, one row per
// sender, if the peers counted them: a slow or overloaded link shows as
// the one that carried more.
func writeLinks(w io.Writer, rep *Report) {
	n := len(rep.Peers)
	counted := false
	for _, p := range rep.Peers {
		counted = counted || (p.Summary != nil && len(p.Summary.Peer.Links) > 0)
	}
	if !counted {
		return
	}
	fmt.Fprintln(w, "\nbytes sent per link (row: from rank, column: to rank)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "from \\ to\t")
	for r := range n {
		fmt.Fprintf(tw, "%d\t", r)
	}
	fmt.Fprintln(tw)
	for _, p := range rep.Peers {
		cells := make([]string, n)
		for r := range cells {
			cells[r] = "-"
		}
		if p.Summary != nil {
			for _, l := range p.Summary.Peer.Links {
				if l.Peer >= 0 && l.Peer < n {
					cells[l.Peer] = bytesIEC(l.Sent)
				}
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t\n", p.Rank, strings.Join(cells, "\t"))
	}
	tw.Flush()
}

// BytesIEC is n bytes as the table shows them: "220.9 MiB".
func BytesIEC(n int64) string { return bytesIEC(n) }

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

// SummaryFormat names the layout of SummaryJSON.
const SummaryFormat = "meshtrain-summary/2"

// SummaryJSON is the --summary file: what ran (format, version, start,
// strategy, security, all-reduce algorithm, link faults, the cluster's
// addresses), the run (as every peer saw it) and each peer's own figures,
// final parameter hash, per-epoch accuracy and bytes per link.
type SummaryJSON struct {
	Format  string `json:"format"`
	Version string `json:"meshtrain_version"`
	Started string `json:"started"` // RFC 3339
	RunInfo
	Cluster           []string         `json:"cluster"`
	Workers           int              `json:"workers"`
	ParamsIdentical   bool             `json:"params_identical"`
	LaunchWallSeconds float64          `json:"launch_wall_seconds"`
	Run               *mirrored.Result `json:"run"`
	// Verdict is the run's bottleneck, with its evidence (VerdictOf).
	Verdict *Verdict   `json:"verdict,omitempty"`
	Peers   []PeerJSON `json:"peers"`
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
	out := SummaryJSON{Format: SummaryFormat, Version: mirrored.Version(), Started: rep.Started.UTC().Format(time.RFC3339), RunInfo: rep.Info,
		Workers: len(rep.Peers), ParamsIdentical: rep.Identical, LaunchWallSeconds: rep.WallSeconds}
	for _, p := range rep.Peers {
		out.Cluster = append(out.Cluster, p.Addr)
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
	if out.Run != nil && out.Run.Version != "" {
		out.Version = out.Run.Version // the workers' build
	}
	if v, ok := rep.Verdict(); ok {
		out.Verdict = &v
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the summary: %w", err)
	}
	if kind, err := atomicfile.Classify(path); err != nil || kind != atomicfile.Replace {
		return err // a summary on a device or FIFO (/dev/stdout) has no file beside it for the figure
	}
	var peers []mirrored.PeerStats
	for _, p := range out.Peers {
		peers = append(peers, p.PeerStats)
	}
	opt := ResourcePlot{Label: runLabel(out)}
	if r := out.Run; r != nil && len(r.EpochResults) > 0 && r.Steps > 0 {
		opt.StepsPerEpoch = r.Steps / len(r.EpochResults)
	}
	if err := PlotResources(ResourcesPath(path), peers, opt); err != nil {
		return fmt.Errorf("drawing the peers' resources: %w", err)
	}
	return nil
}

// runLabel names a run in one line for its figures: the model, the
// peers, the batch, the strategy and when it started.
func runLabel(out SummaryJSON) string {
	s := fmt.Sprintf("%d peer(s)", out.Workers)
	if r := out.Run; r != nil {
		s = fmt.Sprintf("%s, %d peer(s) × batch %d", r.Model, out.Workers, r.BatchSize)
	}
	if out.Strategy != "" {
		s += ", " + out.Strategy
	}
	if out.Security != "" {
		s += ", " + out.Security
	}
	return s + ", started " + out.Started
}

// ResourcesPath is where WriteSummary draws the peers' resource history
// (PlotResources) beside a summary at path: summary.json gives
// summary-resources.png.
func ResourcesPath(summary string) string {
	return strings.TrimSuffix(summary, filepath.Ext(summary)) + "-resources.png"
}

// writeMembership lists an elastic run's changes of membership, in order.
func writeMembership(w io.Writer, changes []mirrored.MembershipChange) {
	if len(changes) == 0 {
		return
	}
	fmt.Fprintln(w, "\nmembership (elastic): the peers from each change on, by cluster index")
	for _, c := range changes {
		what := ""
		if len(c.Left) > 0 {
			what += fmt.Sprintf(", lost %s", joinInts(c.Left))
		}
		if len(c.Joined) > 0 {
			what += fmt.Sprintf(", admitted %s", joinInts(c.Joined))
		}
		reason := c.Reason
		if len(reason) > 160 {
			reason = reason[:160] + "…"
		}
		fmt.Fprintf(w, "  from step %d: peers %s%s; paused %.2fs, %d step(s) rolled back (%s)\n", c.Step, joinInts(c.Members), what, c.PauseSeconds, c.RolledBack, reason)
	}
}

// writeElasticRan says what each peer of an elastic run ran, over every
// generation of its process (the steps redone after a loss included).
func writeElasticRan(w io.Writer, rep *Report) {
	var each []string
	for _, p := range rep.Peers {
		if s := p.Summary; s != nil && s.Peer.ElasticSteps > 0 {
			each = append(each, fmt.Sprintf("rank %d %d steps (%d examples)", p.Rank, s.Peer.ElasticSteps, s.Peer.ElasticExamples))
		}
	}
	if len(each) > 0 {
		fmt.Fprintf(w, "each peer ran, over every generation of its process (steps redone after a loss included): %s\n", strings.Join(each, ", "))
	}
}

// joinInts is v as "1, 2, 3".
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// bytesPerValue is what a gradient value costs on the wire (RunInfo.Wire).
func bytesPerValue(wire string) float64 {
	if f, err := half.ParseFormat(wire); err == nil && f.Half() {
		return 2
	}
	return 4
}
