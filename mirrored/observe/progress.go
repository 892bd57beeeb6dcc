package observe

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/meshtrain/meshtrain/mirrored"
)

// Progress writes what a person watching the run reads: the run's header,
// the training progress inside each epoch (a StepProgress), a line per
// epoch, the resume point and the end. It shows rank 0's run, or with
// everyRank every replica's (gossip: each replica's curve is its own),
// each line after "rank N ", as plain lines (replicas sharing a terminal
// would fight over one bar); the header, resume and end only rank 0's.
type Progress struct {
	w         io.Writer
	every     int
	everyRank bool
	steps     *StepProgress // for the run since its start event
	// elastic (ByEpoch): a run of generations, each starting (and
	// resuming) anew: the lines count epochs, the clock runs on, and only
	// the first start and resume are told (a change's line says the rest).
	elastic, started bool
}

// ByEpoch shows an elastic run's progress: by epoch and the share of it
// done, which its changes of membership do not renumber.
func (p *Progress) ByEpoch() *Progress {
	p.elastic = true
	return p
}

// NewProgress writes to w; inside an epoch a line every `every` steps (0:
// DefaultLogEvery) or, on a terminal, a bar.
func NewProgress(w io.Writer, every int, everyRank bool) *Progress {
	return &Progress{w: w, every: logEvery(every), everyRank: everyRank}
}

// Shows says whether p writes the run of rank.
func (p *Progress) Shows(rank int) bool { return rank == 0 || p.everyRank }

// prefix is what starts rank's lines.
func (p *Progress) prefix(rank int) string {
	if p.everyRank {
		return fmt.Sprintf("rank %d ", rank)
	}
	return ""
}

// IsTerminal says whether w is a terminal (golang.org/x/term), or says
// it is one (an IsTerminal method: a writer that shares the terminal with
// the log, as the CLI's does).
func IsTerminal(w io.Writer) bool {
	if t, ok := w.(interface{ IsTerminal() bool }); ok {
		return t.IsTerminal()
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Observe implements mirrored.Observer.
func (p *Progress) Observe(e mirrored.Event) error {
	if !p.Shows(e.Rank) {
		return nil
	}
	later := p.elastic && p.started // a later generation of an elastic run
	switch {
	case p.steps == nil || e.Kind == mirrored.EventStart && !p.elastic:
		// A new bar for every start of a plain run.
		p.steps = NewStepProgress(p.w, IsTerminal(p.w) && !p.everyRank, p.every, max(e.Replicas, 1), p.prefix(e.Rank))
	}
	if p.elastic && e.Kind == mirrored.EventStart {
		p.steps.ByEpoch(e.StepsPerEpoch, max(e.Replicas, 1)) // each generation its own steps and replicas, one clock
	}
	if e.Kind != mirrored.EventEpoch && e.Kind != mirrored.EventStep && e.Rank != 0 {
		return nil // the run's header, resume and end are the chief's
	}
	switch e.Kind {
	case mirrored.EventStart:
		p.started = true
		if !later {
			fmt.Fprintln(p.w, e.Info)
		}
	case mirrored.EventResumed:
		if later {
			break
		}
		fmt.Fprintf(p.w, "resumed from %s: step %d\n", e.Path, e.Step)
		for _, w := range strings.Split(e.Info, "\n") {
			if w != "" {
				fmt.Fprintf(p.w, "warning: %s\n", w)
			}
		}
	case mirrored.EventMembership, mirrored.EventCallback:
		p.steps.Clear()
		fmt.Fprintln(p.w, e.Info)
	case mirrored.EventStep:
		p.steps.Step(e)
	case mirrored.EventEpoch:
		p.steps.Clear()
		p.epoch(e)
	case mirrored.EventDone:
		p.steps.Clear()
		if e.Info != "" {
			fmt.Fprintln(p.w, e.Info)
		}
	}
	return nil
}

// StepProgress shows the training progress inside a run. On a terminal it
// is a Keras-style bar redrawn in place (step/steps, loss, examples/s,
// elapsed and ETA); elsewhere (a log file, CI) one plain line every
// `every` steps, with no escape codes. It is fed step events whose Train
// may cover several steps (Train.Steps), as a launcher receives them from
// its workers. Its methods are not safe for concurrent use.
type StepProgress struct {
	w        io.Writer
	every    int
	replicas int    // whose examples the throughput counts
	prefix   string // before each plain line
	tty      bool
	bar      *progressbar.ProgressBar // tty only; nil until the first step
	// The steps since the last progress line.
	win struct {
		steps, examples int
		loss            float64
		since           time.Time
		// seconds is the steps' own time where the events carry it
		// (StepStats.Seconds), summed over all of them; timed is false once
		// one did not.
		seconds float64
		timed   bool
	}
	start time.Time
	// perEpoch, if set (ByEpoch), shows the position as an epoch and the
	// share of it done instead of step/steps.
	perEpoch int
}

// ByEpoch shows the position from now on as an epoch and the share of it
// done, at stepsPerEpoch steps of replicas replicas' batches: an elastic
// run's generations number their steps anew at every change of
// membership, the epochs they do not.
func (p *StepProgress) ByEpoch(stepsPerEpoch, replicas int) {
	p.perEpoch, p.replicas = stepsPerEpoch, replicas
}

// where is the position of step of steps: "step s/S", or by epoch.
func (p *StepProgress) where(step, steps int) string {
	if p.perEpoch <= 0 {
		return fmt.Sprintf("step %d/%d", step, steps)
	}
	return fmt.Sprintf("epoch %d  %3.0f%%", step/p.perEpoch+1, 100*float64(step%p.perEpoch)/float64(p.perEpoch))
}

// NewStepProgress writes to w, as a bar if tty, else a line (after
// prefix) every `every` steps; the examples/s shown count the examples
// of one replica times replicas.
func NewStepProgress(w io.Writer, tty bool, every, replicas int, prefix string) *StepProgress {
	p := &StepProgress{w: w, every: max(every, 1), replicas: replicas, prefix: prefix, tty: tty}
	p.Restart()
	return p
}

// Restart starts the clock of elapsed time and ETA (at the run's start).
func (p *StepProgress) Restart() { p.start = time.Now(); p.resetWindow(p.start) }

// Step adds e's steps and redraws the bar, or writes a line every p.every
// steps.
func (p *StepProgress) Step(e mirrored.Event) {
	if e.Train == nil {
		return
	}
	n := max(e.Train.Steps, 1)
	w := &p.win
	w.steps += n
	w.examples += e.Train.Examples
	w.loss += e.Train.Loss * float64(n)
	w.seconds += e.Train.Seconds
	w.timed = w.timed && e.Train.Seconds > 0
	if p.tty {
		p.drawBar(e)
		return
	}
	if e.Step%p.every != 0 {
		return
	}
	now := time.Now()
	elapsed := now.Sub(p.start)
	eta := "?"
	if e.Step > 0 && e.Steps >= e.Step {
		eta = (time.Duration(float64(elapsed) * float64(e.Steps-e.Step) / float64(e.Step))).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "%s%s  loss %.4f  %.0f examples/s  elapsed %s  ETA %s\n", p.prefix, p.where(e.Step, e.Steps),
		w.loss/float64(w.steps), p.rate(now), elapsed.Round(time.Second), eta)
	p.resetWindow(now)
}

// resetWindow starts the next window of steps at now.
func (p *StepProgress) resetWindow(now time.Time) {
	w := &p.win
	w.steps, w.examples, w.loss, w.since, w.seconds, w.timed = 0, 0, 0, now, 0, true
}

// rate is the examples per second of all counted replicas since the last
// line: over the steps' own time where the events carry it, else over the
// time between the lines (which a burst of events makes absurd).
func (p *StepProgress) rate(now time.Time) float64 {
	if p.win.timed && p.win.seconds > 0 {
		return float64(p.win.examples*p.replicas) / p.win.seconds
	}
	if d := now.Sub(p.win.since).Seconds(); d > 0 {
		return float64(p.win.examples*p.replicas) / d
	}
	return 0
}

// drawBar redraws the bar (progressbar throttles the redraws); the loss
// and rate it shows are over the steps since the last description update.
func (p *StepProgress) drawBar(e mirrored.Event) {
	total, at := e.Steps, e.Step
	if p.perEpoch > 0 { // a share of the run, which no generation renumbers
		total, at = 1000, 1000*e.Step/max(e.Steps, 1)
	}
	if p.bar == nil {
		count := progressbar.OptionShowCount()
		if p.perEpoch > 0 {
			count = func(*progressbar.ProgressBar) {}
		}
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetTheme(progressbar.Theme{Saucer: "=", SaucerHead: ">", SaucerPadding: ".", BarStart: "[", BarEnd: "]"}),
			progressbar.OptionSetWidth(30),
			count,
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionThrottle(100*time.Millisecond),
		)
	}
	if now := time.Now(); now.Sub(p.win.since) >= 200*time.Millisecond {
		desc := fmt.Sprintf("loss %.4f  %.0f examples/s", p.win.loss/float64(p.win.steps), p.rate(now))
		if p.perEpoch > 0 {
			desc = p.where(e.Step, e.Steps) + "  " + desc
		}
		p.bar.Describe(desc)
		p.resetWindow(now)
	}
	_ = p.bar.Set(at) // writes to p.w; a failed write is not the run's failure
}

// Clear wipes the bar's line so that a full line can be printed; the
// next step draws it again.
func (p *StepProgress) Clear() {
	if p.bar != nil {
		_ = p.bar.Clear()
	}
}

// epoch writes the epoch's line.
func (p *Progress) epoch(e mirrored.Event) {
	ep := e.Epoch
	fmt.Fprintf(p.w, "%sepoch %2d", p.prefix(e.Rank), ep.Epoch)
	if g := e.Gossip; g != nil {
		fmt.Fprintf(p.w, " (cluster work %.2f epochs, own %.2f passes)", g.ClusterEpochs, g.LocalPasses)
	}
	fmt.Fprintf(p.w, "  loss %.4f  test loss %.4f  test accuracy %6.2f%%", ep.Loss, ep.TestLoss, 100*ep.TestAccuracy)
	if ep.TestAUC > 0 {
		fmt.Fprintf(p.w, "  AUC %.4f", ep.TestAUC)
	}
	fmt.Fprintf(p.w, "  %8.0f examples/s  lr %.4g  train %.1fs", ep.ExamplesPerSec, ep.LR, ep.TrainSeconds)
	if e.Info != "" {
		fmt.Fprintf(p.w, "  %s", e.Info)
	}
	fmt.Fprintln(p.w)
}
