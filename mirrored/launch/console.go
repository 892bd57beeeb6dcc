package launch

import (
	"io"
	"sync"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/observe"
)

// console is the launcher's output, written from several goroutines: the
// workers' lines, the status lines and the cluster's training progress
// (rank 0's, drawn as train draws its own: observe.StepProgress). Writes
// are serialised, and on a terminal the progress bar stays on the last
// line: any other line first clears it, and the next progress event draws
// it again.
type console struct {
	mu             sync.Mutex
	progress       *observe.StepProgress
	elasticStarted bool
}

// newConsole draws the progress on stdout: a bar if it is a terminal,
// else a line every `every` steps; its examples/s count rank 0's examples
// times replicas.
func newConsole(stdout io.Writer, every, replicas int) *console {
	return &console{progress: observe.NewStepProgress(stdout, observe.IsTerminal(stdout), every, replicas, "[launch] ")}
}

// writer returns w written through the console.
func (c *console) writer(w io.Writer) io.Writer { return consoleWriter{c, w} }

type consoleWriter struct {
	c *console
	w io.Writer
}

func (cw consoleWriter) Write(p []byte) (int, error) {
	cw.c.mu.Lock()
	defer cw.c.mu.Unlock()
	cw.c.progress.Clear()
	return cw.w.Write(p)
}

// step shows a step event of rank 0.
func (c *console) step(e mirrored.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.progress.Step(e)
}

// started: rank 0 started training (e, its start event). The progress
// clock starts, except at an elastic run's later generations, whose
// progress goes on counting epochs (their steps are numbered anew).
func (c *console) started(e mirrored.Event, elastic bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !elastic {
		c.progress.Restart()
		return
	}
	if !c.elasticStarted {
		c.progress.Restart()
	}
	c.elasticStarted = true
	c.progress.ByEpoch(e.StepsPerEpoch, max(e.Replicas, 1))
}

// clear wipes the bar at the end.
func (c *console) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.progress.Clear()
}
