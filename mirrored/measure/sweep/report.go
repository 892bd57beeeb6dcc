package sweep

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/mirrored"
)

// ReportFile is the name of the markdown report in the output directory.
const ReportFile = "report.md"

func fmtSeconds(s float64) string {
	if math.IsNaN(s) {
		return "not reached"
	}
	return fmt.Sprintf("%.3g s", s)
}

func fmtPct(a float64) string {
	if math.IsNaN(a) {
		return "—"
	}
	return fmt.Sprintf("%.2f%%", 100*a)
}

func fmtFloat(v float64, f string) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf(f, v)
}

func fmtList[T any](vs []T, f string) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf(f, v)
	}
	return strings.Join(parts, " / ")
}

// mib is bytes in MiB for the table: "70.9 MiB", "0" for none.
func mib(b int64) string {
	if b == 0 {
		return "0"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// thousands is v rounded, with thousands separated: 25,487.
func thousands(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// cell escapes a table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// runLabel names a point among its grid's in the ring-and-gossip table
// and the progress: the workers and batch when they vary, then the
// strategy and the scenario ("ring, baseline").
func runLabel(g Grid, p Point) string {
	return strings.Join(append(axisParts(g, p, ""), p.Strategy, g.scenario(p.Straggler)), ", ")
}

// axisParts are p's workers and batch size where g varies them, except
// the axis omit ("workers", "batch").
func axisParts(g Grid, p Point, omit string) []string {
	vw, vb, _, _ := g.varies()
	var parts []string
	if vw && omit != "workers" {
		parts = append(parts, fmt.Sprintf("%d workers", p.Workers))
		if p.Workers == 1 {
			parts[len(parts)-1] = "1 worker"
		}
	}
	if vb && omit != "batch" {
		parts = append(parts, fmt.Sprintf("batch %d", p.Batch))
	}
	return parts
}

// shortLabel names p by what varies in g, except omit ("workers",
// "batch", "scenario"): for legends. With nothing left, the strategy.
func shortLabel(g Grid, p Point, omit ...string) string {
	_, _, vs, vsc := g.varies()
	parts := []string{}
	for _, a := range []string{"workers", "batch"} {
		if !slices.Contains(omit, a) {
			parts = append(parts, axisParts(g, p, otherAxis(a))...)
		}
	}
	if vs {
		parts = append(parts, p.Strategy)
	}
	if vsc && !slices.Contains(omit, "scenario") {
		parts = append(parts, g.scenario(p.Straggler))
	}
	if len(parts) == 0 {
		return p.Strategy
	}
	return strings.Join(parts, ", ")
}

func otherAxis(a string) string {
	if a == "workers" {
		return "batch"
	}
	return "workers"
}

// writeReport writes report.md and its plots into dir.
func writeReport(dir string, res *Results) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", res.Title)
	b.WriteString(intro(res))
	b.WriteString(table(res))
	b.WriteString(columns(res))
	if len(res.Skipped) > 0 {
		b.WriteString("\nNot run, as they make no sense:\n\n")
		for _, s := range res.Skipped {
			fmt.Fprintf(&b, "- %s: %s.\n", s.Point, s.Reason)
		}
	}
	var failed []string
	for _, r := range res.Points {
		if r.Row.Errors != "" {
			failed = append(failed, fmt.Sprintf("- point %d (%s): %s\n", r.Index, r.Point, r.Row.Errors))
		}
	}
	if len(failed) > 0 {
		b.WriteString("\nFailed (the figures above are what the surviving peers reported):\n\n" + strings.Join(failed, ""))
	}
	if strategiesSection(res) {
		b.WriteString(ringAndGossip(res))
	}
	plots, err := writePlots(dir, res)
	if err != nil {
		return err
	}
	b.WriteString("\n## Plots\n\n")
	for _, p := range plots {
		fmt.Fprintf(&b, "![%s](%s)\n\n", strings.TrimSuffix(p, ".png"), p)
	}
	fmt.Fprintf(&b, "Raw figures of every peer: %s.\n", ResultsFile)
	path := filepath.Join(dir, ReportFile)
	if err := atomicfile.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("sweep: writing the report: %w", err)
	}
	return nil
}

// strategiesSection says whether the report compares strategies or
// scenarios: some point is gossip or has a straggler.
func strategiesSection(res *Results) bool {
	for _, r := range res.Points {
		if r.Strategy == mirrored.StrategyGossip || !r.Straggler.None() {
			return true
		}
	}
	return false
}

func intro(res *Results) string {
	job, s := res.job, res.Settings
	var b strings.Builder
	g := res.Grid
	fmt.Fprintf(&b, "%d point(s) of workers %s × batch %s per worker × strategy %s × straggler %s, in that table's order. ",
		res.Total, join(g.Workers), join(g.Batches), join(g.Strategies), join(g.Stragglers))
	lr := fmt.Sprintf("lr %g", job.LR)
	if s["scale-lr"] == "true" {
		lr += " × workers (linear scaling rule)"
	}
	fmt.Fprintf(&b, "Each point is one full run on the same data and seed (%d): %s, %d epoch(s), optimizer %s, %s (%s schedule), %s. ",
		job.Seed, job.Model, job.Epochs, job.Optimizer, lr, job.Schedule, examplesText(job))
	switch res.Runner {
	case KindProcesses:
		fmt.Fprintf(&b, "A point's workers are `meshtrain worker` processes on 127.0.0.1, started as `meshtrain launch` starts them (a process per peer), over %s links, sharing this machine's %d cores. ",
			res.Security, res.Cores)
	default:
		fmt.Fprintf(&b, "A point's replicas run in one process, each with its own libp2p host on 127.0.0.1 (%s), sharing that process and this machine's %d cores. ",
			res.Security, res.Cores)
	}
	b.WriteString(passedText(s))
	if slices.Contains(g.Strategies, mirrored.StrategyGossip) {
		st := res.gossip
		fmt.Fprintf(&b, "Gossip: %s peer schedule, one pairwise average every %d step(s)%s, staleness bound %d. ",
			st.Schedule, st.Every, overlapText(st.WaitForAverage), st.MaxStaleness)
	}
	for _, sl := range g.Stragglers {
		if sl.None() {
			continue
		}
		if name := g.scenario(sl); name == "straggler" {
			fmt.Fprintf(&b, "Straggler: rank %d's steps take %g× as long (injected). ", sl.Rank, sl.Factor)
		} else {
			fmt.Fprintf(&b, "Scenario %q: rank %d's steps take %g× as long (injected). ", name, sl.Rank, sl.Factor)
		}
	}
	if n := len(res.Points); n > 0 {
		fmt.Fprintf(&b, "Load average (1, 5, 15 min) at the first point's start: %s", res.Points[0].Load)
		if n > 1 {
			fmt.Fprintf(&b, "; at the last's: %s", res.Points[n-1].Load)
		}
		b.WriteString(" (each point's is in results.json).")
	}
	b.WriteString("\n\n")
	if len(res.Points) < res.Total {
		fmt.Fprintf(&b, "**%d of %d points are done**; running the same command again with the same --out runs the rest.\n\n", len(res.Points), res.Total)
	}
	return b.String()
}

// passedText says what every point's workers were given beyond the
// grid and the recipe, from the settings of those flags (the caller's
// Settings): the model file, the data, the link faults, the elastic mode.
func passedText(s map[string]string) string {
	flags := func(names ...string) string {
		var out []string
		for _, n := range names {
			if v, ok := s[n]; ok {
				out = append(out, fmt.Sprintf("--%s %s", n, v))
			}
		}
		return strings.Join(out, ", ")
	}
	var parts []string
	if f := s["model-file"]; f != "" {
		parts = append(parts, fmt.Sprintf("the model of `%s` (architecture %s%s)", f, s["architecture"], ifAny(", ", flags("ignore-weights"))))
	}
	if d := s["data"]; d != "" {
		parts = append(parts, fmt.Sprintf("the data set `%s`%s", d, ifAny(" (", flags("data-format", "image-size", "color-mode", "validation-split", "label-column"), ")")))
	}
	if l := flags("link-delay", "link-rate"); l != "" {
		parts = append(parts, "over links with injected faults ("+l+": each peer's outgoing frames)")
	}
	if s["elastic"] == "true" {
		parts = append(parts, "the ring's points elastic"+ifAny(" (", flags("min-workers", "commit-every", "max-restarts"), ")"))
	}
	if len(parts) == 0 {
		return ""
	}
	return "Every point trains " + strings.Join(parts, "; ") + ". "
}

// ifAny is s between before and after (after optional), or "" if s is.
func ifAny(before, s string, after ...string) string {
	if s == "" {
		return ""
	}
	return before + s + strings.Join(after, "")
}

func examplesText(job mirrored.Job) string {
	switch {
	case job.MNIST != nil:
		return fmt.Sprintf("%d training and %d test examples", job.MNIST.Train.N, job.MNIST.Test.N)
	case job.TrainExamples > 0 && job.TestExamples > 0:
		return fmt.Sprintf("the first %d training and %d test examples", job.TrainExamples, job.TestExamples)
	case job.TrainExamples > 0:
		return fmt.Sprintf("the first %d training examples and the whole test set", job.TrainExamples)
	case job.TestExamples > 0:
		return fmt.Sprintf("the whole training set and the first %d test examples", job.TestExamples)
	}
	return "the whole training and test sets"
}

func overlapText(wait bool) string {
	if wait {
		return " (completed before the next step)"
	}
	return " (overlapped with the next step)"
}

// Columns are the table's columns, in order (the time-to column names
// the target).
func Columns(target float64) []string {
	return []string{"#", "workers", "batch", "strategy", "straggler", "CPU (cores)", "peak RSS", "received/peer", "sent/peer",
		"test loss", "test accuracy", "training time", fmt.Sprintf("time to %.1f%%", 100*target), "examples/s", "bottleneck"}
}

func table(res *Results) string {
	var b strings.Builder
	cols := Columns(res.Target)
	b.WriteString("| " + strings.Join(cols, " | ") + " |\n")
	b.WriteString(strings.Repeat("|---", len(cols)) + "|\n")
	for _, r := range res.Points {
		row := r.Row
		tt := "not reached"
		if !math.IsNaN(float64(row.TimeToTarget)) {
			tt = fmt.Sprintf("%.2f s", float64(row.TimeToTarget))
		}
		if row.Errors != "" && math.IsNaN(float64(row.TestAccuracy)) {
			tt = "—"
		}
		peak := "—"
		if row.PeakRSSBytes > 0 {
			peak = mib(row.PeakRSSBytes)
		}
		bottleneck := row.bottleneck()
		if row.Errors != "" {
			bottleneck = "failed (below)"
		}
		fmt.Fprintf(&b, "| %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Index, r.Workers, r.Batch, r.Strategy, r.Straggler.describe(), fmtFloat(float64(row.CPUCores), "%.2f"), peak,
			mib(row.ReceivedBytes), mib(row.SentBytes), fmtFloat(float64(row.TestLoss), "%.4f"), fmtPct(float64(row.TestAccuracy)),
			fmtFloat(float64(row.TrainSeconds), "%.2f s"), tt, thousands(float64(row.ExamplesPerSec)), cell(bottleneck))
	}
	return b.String()
}

func columns(res *Results) string {
	cpu := "the cores each worker process kept busy (user + system) while it trained and evaluated, from its once-a-second samples, averaged over the run and then over the point's processes"
	mem := "the largest worker process's peak resident memory (getrusage)"
	if res.Runner == KindInProcess {
		cpu = "the cores the one process holding all the point's replicas kept busy (user + system) while they trained and evaluated, from its once-a-second samples, averaged over the run: the replicas' CPU together, not each one's"
		mem = "that process's largest resident memory sampled during the point (the replicas share it, and the data set)"
	}
	return fmt.Sprintf("\n*CPU (cores)*: %s; %d would be all of this machine's cores (— for a run under 0.2 s, too short to measure). *Peak RSS*: %s. "+
		"*Received/sent per peer*: the collective frames' bytes (headers and payloads) each peer received and sent, the mean of the peers, in MiB. "+
		"*Test loss* and *test accuracy*: the final model's on the test set (under gossip, the surviving replicas' average model). "+
		"*Training time*: the slowest peer's, evaluation excluded; *examples/s*: every peer's training examples over it. "+
		"*Time to %.1f%%*: the training time at the first evaluation (at each epoch's end) that reached %.1f%% test accuracy. "+
		"*Bottleneck*: the run's verdict (README, \"Where the time goes\"), with the straggler's rank; the whole line is in %s.\n",
		cpu, res.Cores, mem, 100*res.Target, 100*res.Target, ResultsFile)
}

// ringAndGossip is the strategies' table, with the figures gossip is
// judged by, and the aims it is measured against.
func ringAndGossip(res *Results) string {
	ms := make([]Measures, len(res.Points))
	for i, r := range res.Points {
		ms[i] = measure(r.Peers, res.Target)
	}
	var b strings.Builder
	b.WriteString("\n## Ring and gossip\n\n")
	b.WriteString("Time is training time (evaluation excluded). A ring epoch is one pass over the training set by the cluster; a gossip replica's x position is the cluster's work as it knew it at that evaluation (all replicas' steps over one synchronous epoch's). " +
		"Under gossip, *time to target* is the first replica's, *all replicas* when every surviving replica had reached it, and the final accuracy is that of the survivors' average model.\n\n")
	fmt.Fprintf(&b, "| run | time to %.1f%% | all replicas | epochs to target | final accuracy | mean replica accuracy | steps/s per peer | MB sent per peer | consensus (relative) | wall s | errors |\n", 100*res.Target)
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range res.Points {
		m := ms[i]
		mb := make([]float64, len(m.BytesSent))
		for j, v := range m.BytesSent {
			mb[j] = float64(v) / 1e6
		}
		cons := "—"
		if !math.IsNaN(m.Consensus) {
			cons = fmt.Sprintf("%.2g", m.Consensus)
		}
		epochs := "—"
		if !math.IsNaN(m.EpochsToTarget) {
			epochs = fmt.Sprintf("%.2f", m.EpochsToTarget)
		}
		errs := r.Row.Errors
		if errs == "" {
			errs = "none"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %s |\n", runLabel(res.Grid, r.Point), fmtSeconds(m.TimeToTarget), fmtSeconds(m.AllTimeToTarget),
			epochs, fmtPct(m.FinalAccuracy), fmtPct(m.MeanReplicaAccuracy), fmtList(m.StepsPerSec, "%.0f"), fmtList(mb, "%.1f"), cons, r.WallSeconds, cell(errs))
	}
	b.WriteString("\n")
	b.WriteString(goals(res, ms))
	return b.String()
}

// goals states what gossip is for (ahead of the ring under a straggler,
// no more epochs without one) against what was measured, for each
// workers and batch size where both strategies ran.
func goals(res *Results, ms []Measures) string {
	find := func(w, bs int, strat string, sl Straggler) int {
		return slices.IndexFunc(res.Points, func(r *Result) bool {
			return r.Workers == w && r.Batch == bs && r.Strategy == strat && r.Straggler.String() == sl.String()
		})
	}
	type group struct{ w, b int }
	var groups []group
	for _, r := range res.Points {
		if g := (group{r.Workers, r.Batch}); !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	var b strings.Builder
	for _, gr := range groups {
		prefix := ""
		if len(groups) > 1 {
			prefix = fmt.Sprintf("%d workers, batch %d: ", gr.w, gr.b)
		}
		for _, sl := range res.Grid.Stragglers {
			if sl.None() {
				continue
			}
			g, r := find(gr.w, gr.b, mirrored.StrategyGossip, sl), find(gr.w, gr.b, mirrored.StrategyRing, sl)
			if g < 0 || r < 0 {
				continue
			}
			with := "With the straggler"
			if name := res.Grid.scenario(sl); name != "straggler" {
				with = "With the " + name
			}
			if prefix != "" {
				with = "w" + with[1:]
			}
			tg, tr := ms[g].TimeToTarget, ms[r].TimeToTarget
			switch {
			case math.IsNaN(tg) || math.IsNaN(tr):
				fmt.Fprintf(&b, "- %s%s: gossip %s, ring %s to the target; no ratio.\n", prefix, with, fmtSeconds(tg), fmtSeconds(tr))
			default:
				verdict := "met"
				if tg > 0.6*tr {
					verdict = "not met"
				}
				fmt.Fprintf(&b, "- %s%s, gossip reaches the target in %.2f× the ring's time (aim: at most 0.6×; %s).\n", prefix, with, tg/tr, verdict)
			}
			fmt.Fprintf(&b, "- %s%s, steps/s per peer: gossip %s, ring %s.\n", prefix, with, fmtList(ms[g].StepsPerSec, "%.0f"), fmtList(ms[r].StepsPerSec, "%.0f"))
		}
		g, r := find(gr.w, gr.b, mirrored.StrategyGossip, Straggler{}), find(gr.w, gr.b, mirrored.StrategyRing, Straggler{})
		if g < 0 || r < 0 {
			continue
		}
		without := "Without a straggler"
		if prefix != "" {
			without = "without a straggler"
		}
		eg, er := ms[g].EpochsToTarget, ms[r].EpochsToTarget
		if math.IsNaN(eg) || math.IsNaN(er) {
			fmt.Fprintf(&b, "- %s%s, epochs to the target: ring %s, gossip %s (not both reached).\n", prefix, without, fmtEpochs(er), fmtEpochs(eg))
			continue
		}
		verdict := "the ring needs fewer epochs"
		switch {
		case er == eg:
			verdict = "the same number of epochs"
		case er > eg:
			verdict = "the ring does not need fewer epochs here"
		}
		fmt.Fprintf(&b, "- %s%s, epochs to the target: ring %.2f, gossip %.2f: %s.\n", prefix, without, er, eg, verdict)
	}
	if b.Len() > 0 {
		return "Against what gossip is for:\n\n" + b.String()
	}
	return ""
}

func fmtEpochs(e float64) string {
	if math.IsNaN(e) {
		return "not reached"
	}
	return fmt.Sprintf("%.2f", e)
}
