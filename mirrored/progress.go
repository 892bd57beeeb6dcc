package mirrored

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressObserver writes what a person watching the run reads: the run's
// header, the training progress inside each epoch (a StepProgress), a
// line per epoch, the resume point and the end.
type progressObserver struct {
	w      io.Writer
	prefix string // "rank N " before each line (gossip: every replica's own curve)
	chief  bool   // rank 0 also writes the run's header, resume and end
	steps  *StepProgress
}

func newProgressObserver(w io.Writer, every, replicas int, everyRank bool, rank int) *progressObserver {
	p := &progressObserver{w: w, chief: rank == 0}
	if everyRank {
		p.prefix = fmt.Sprintf("rank %d ", rank)
	}
	// One bar per writer: gossip replicas sharing a terminal print lines.
	p.steps = NewStepProgress(w, IsTerminal(w) && !everyRank, every, replicas, p.prefix)
	return p
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

func (p *progressObserver) Observe(e Event) error {
	if e.Kind != EventEpoch && e.Kind != EventStep && !p.chief {
		return nil
	}
	switch e.Kind {
	case EventStart:
		fmt.Fprintln(p.w, e.Info)
		p.steps.Restart()
	case EventResumed:
		fmt.Fprintf(p.w, "resumed from %s: step %d\n", e.Path, e.Step)
		for _, w := range strings.Split(e.Info, "\n") {
			if w != "" {
				fmt.Fprintf(p.w, "warning: %s\n", w)
			}
		}
	case EventMembership:
		p.steps.Clear()
		fmt.Fprintln(p.w, e.Info)
	case EventStep:
		p.steps.Step(e)
	case EventEpoch:
		p.steps.Clear()
		p.epoch(e)
	case EventDone:
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
	}
	start time.Time
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
func (p *StepProgress) Restart() { p.start, p.win.since = time.Now(), time.Now() }

// Step adds e's steps and redraws the bar, or writes a line every p.every
// steps.
func (p *StepProgress) Step(e Event) {
	if e.Train == nil {
		return
	}
	n := max(e.Train.Steps, 1)
	w := &p.win
	w.steps += n
	w.examples += e.Train.Examples
	w.loss += e.Train.Loss * float64(n)
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
	fmt.Fprintf(p.w, "%sstep %d/%d  loss %.4f  %.0f examples/s  elapsed %s  ETA %s\n", p.prefix, e.Step, e.Steps,
		w.loss/float64(w.steps), p.rate(now), elapsed.Round(time.Second), eta)
	p.win.steps, p.win.examples, p.win.loss, p.win.since = 0, 0, 0, now
}

// rate is the examples per second of all counted replicas since the last
// line.
func (p *StepProgress) rate(now time.Time) float64 {
	if d := now.Sub(p.win.since).Seconds(); d > 0 {
		return float64(p.win.examples*p.replicas) / d
	}
	return 0
}

// drawBar redraws the bar (progressbar throttles the redraws); the loss
// and rate it shows are over the steps since the last description update.
func (p *StepProgress) drawBar(e Event) {
	if p.bar == nil {
		p.bar = progressbar.NewOptions(e.Steps,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetTheme(progressbar.Theme{Saucer: "=", SaucerHead: ">", SaucerPadding: ".", BarStart: "[", BarEnd: "]"}),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionThrottle(100*time.Millisecond),
		)
	}
	if now := time.Now(); now.Sub(p.win.since) >= 200*time.Millisecond {
		p.bar.Describe(fmt.Sprintf("loss %.4f  %.0f examples/s", p.win.loss/float64(p.win.steps), p.rate(now)))
		p.win.steps, p.win.examples, p.win.loss, p.win.since = 0, 0, 0, now
	}
	_ = p.bar.Set(e.Step) // writes to p.w; a failed write is not the run's failure
}

// Clear wipes the bar's line so that a full line can be printed; the
// next step draws it again.
func (p *StepProgress) Clear() {
	if p.bar != nil {
		_ = p.bar.Clear()
	}
}

func (p *progressObserver) epoch(e Event) {
	ep := e.Epoch
	fmt.Fprintf(p.w, "%sepoch %2d", p.prefix, ep.Epoch)
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
