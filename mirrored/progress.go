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
// header, the training progress inside each epoch, a line per epoch, the
// resume point and the end. On a terminal the progress is a Keras-style
// bar redrawn in place (step/steps, loss, examples/s, elapsed and ETA);
// elsewhere (a log file, CI) it is one plain line every `every` steps,
// with no escape codes.
type progressObserver struct {
	w        io.Writer
	every    int
	replicas int  // whose examples the throughput counts
	prefix   bool // "rank N " before each line (gossip: every replica's own curve)
	chief    bool // rank 0 also writes the run's header, resume and end
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

func newProgressObserver(w io.Writer, every, replicas int, prefix, chief bool) *progressObserver {
	p := &progressObserver{w: w, every: every, replicas: replicas, prefix: prefix, chief: chief, start: time.Now()}
	// One bar per writer: gossip replicas sharing a terminal print lines.
	p.tty = isTerminal(w) && !prefix
	p.win.since = p.start
	return p
}

// isTerminal says whether w is a terminal (golang.org/x/term).
func isTerminal(w io.Writer) bool {
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
		p.start, p.win.since = time.Now(), time.Now()
	case EventResumed:
		fmt.Fprintf(p.w, "resumed from %s: step %d\n", e.Path, e.Step)
		for _, w := range strings.Split(e.Info, "\n") {
			if w != "" {
				fmt.Fprintf(p.w, "warning: %s\n", w)
			}
		}
	case EventStep:
		p.step(e)
	case EventEpoch:
		p.clearBar()
		p.epoch(e)
	case EventDone:
		p.clearBar()
		if e.Info != "" {
			fmt.Fprintln(p.w, e.Info)
		}
	}
	return nil
}

// step adds a step and redraws the bar, or writes a line every p.every
// steps.
func (p *progressObserver) step(e Event) {
	w := &p.win
	w.steps++
	w.examples += e.Train.Examples
	w.loss += e.Train.Loss
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
	if p.prefix {
		fmt.Fprintf(p.w, "rank %d ", e.Rank)
	}
	fmt.Fprintf(p.w, "step %d/%d  loss %.4f  %.0f examples/s  elapsed %s  ETA %s\n", e.Step, e.Steps,
		w.loss/float64(w.steps), p.rate(now), elapsed.Round(time.Second), eta)
	p.win.steps, p.win.examples, p.win.loss, p.win.since = 0, 0, 0, now
}

// rate is the examples per second of all counted replicas since the last
// line.
func (p *progressObserver) rate(now time.Time) float64 {
	if d := now.Sub(p.win.since).Seconds(); d > 0 {
		return float64(p.win.examples*p.replicas) / d
	}
	return 0
}

// drawBar redraws the bar (progressbar throttles the redraws); the loss
// and rate it shows are over the steps since the last description update.
func (p *progressObserver) drawBar(e Event) {
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

// clearBar wipes the bar's line so that a full line can be printed; the
// next step draws it again.
func (p *progressObserver) clearBar() {
	if p.bar != nil {
		_ = p.bar.Clear()
	}
}

func (p *progressObserver) epoch(e Event) {
	ep := e.Epoch
	if p.prefix {
		fmt.Fprintf(p.w, "rank %d ", e.Rank)
	}
	fmt.Fprintf(p.w, "epoch %2d", ep.Epoch)
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
