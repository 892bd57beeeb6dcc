package tests

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// trainArgs is a short single-worker run: 2 epochs of 40 steps.
var trainArgs = []string{"train", "--model", "softmax", "--epochs", "2", "--batch", "64", "--train-examples", "2560", "--test-examples", "500", "--log-every", "10"}

// onTerminal runs the binary with args on a pseudo-terminal (skipping the
// test where there is none) and returns what it wrote there.
func onTerminal(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer tty.Close()
	var out bytes.Buffer
	_, _ = io.Copy(&out, tty) // ends with an EIO once the child has exited
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s on a terminal: %v\n%s", args[0], err, out.String())
	}
	return out.String()
}

// TestProgressOnTerminal: on a terminal, train draws a Keras-style bar
// redrawn in place (carriage returns, the bar, step/steps and times), and
// still prints a line per epoch.
func TestProgressOnTerminal(t *testing.T) {
	s := onTerminal(t, trainArgs...)
	for _, want := range []string{"\r", "[", "=", "/80", "examples/s", "epoch  1", "epoch  2"} {
		if !strings.Contains(s, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, s)
		}
	}
}

// logLineRE finds the start of a console log line (zap's timestamp).
var logLineRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z\t(DEBUG|INFO|WARN|ERROR)\t`)

// TestTerminalOneWriter: on a terminal, the log and the progress bar share
// the screen: a log line first clears the bar's line and starts at the
// line's beginning (never after the bar's text), the bar is drawn again
// after it; and at the default level train shows each epoch once (the
// progress line, not also a log entry).
func TestTerminalOneWriter(t *testing.T) {
	s := onTerminal(t, trainArgs...)
	for _, ep := range []string{"epoch  1", "epoch  2"} {
		if n := strings.Count(s, ep); n != 1 {
			t.Errorf("%q shown %d times at the default level, want once:\n%q", ep, n, s)
		}
	}
	if logLineRE.MatchString(s) {
		t.Errorf("log lines at the default level:\n%q", s)
	}

	s = onTerminal(t, append(slices.Clone(trainArgs), "--log-level", "debug")...)
	cleared := 0
	for _, loc := range logLineRE.FindAllStringIndex(s, -1) {
		before := s[:loc[0]]
		if i := strings.LastIndexByte(before, '\n'); i >= 0 {
			before = before[i+1:]
		}
		if strings.HasSuffix(before, "\r\x1b[K") {
			cleared++
			before = strings.TrimSuffix(before, "\r\x1b[K")
			// (the terminal turns each "\n" into "\r\n")
			if _, next, _ := strings.Cut(s[loc[1]:], "\n"); !strings.HasPrefix(next, "\r") || !strings.Contains(strings.SplitN(next[1:], "\r", 2)[0], "/80)") {
				t.Errorf("the bar is not drawn again after a log line:\n%q", s[loc[0]:])
			}
		} else if before != "" {
			t.Errorf("a log line written after %q on the same line:\n%q", before, s)
		}
	}
	if cleared == 0 {
		t.Errorf("no log line cleared the bar (the epochs' debug entries come while it is drawn):\n%q", s)
	}
}

// piped runs the binary with args, its stdout a pipe, and checks that it
// holds no escape codes or carriage returns.
func piped(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := meshtrain(ctx, nil, args...)
	if r.err != nil {
		t.Fatal(r)
	}
	if strings.ContainsAny(r.stdout, "\r\x1b") {
		t.Errorf("escape codes or carriage returns in piped output:\n%q", r.stdout)
	}
	return r
}

// TestProgressNotOnTerminal: into a pipe, train writes one plain line
// every --log-every steps, with no escape codes or carriage returns.
func TestProgressNotOnTerminal(t *testing.T) {
	r := piped(t, trainArgs...)
	for _, want := range []string{"step 10/80  loss ", "step 80/80  loss ", "examples/s  elapsed ", "ETA "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("piped output lacks %q:\n%s", want, r.stdout)
		}
	}
	lines := 0
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "step ") {
			lines++
		}
	}
	if lines != 8 {
		t.Errorf("%d progress lines, want 8 (every 10 of 80 steps):\n%s", lines, r.stdout)
	}
}

// launchArgs is a short cluster run: 2 workers, 2 epochs of 20 steps.
var launchArgs = []string{"launch", "-n", "2", "--model", "softmax", "--epochs", "2", "--batch", "64", "--train-examples", "2560", "--test-examples", "500", "--log-every", "10"}

// TestLaunchProgressOnTerminal: on a terminal, launch draws the cluster's
// progress as train does, a bar redrawn in place from the workers' step
// events, besides its status lines and the table.
func TestLaunchProgressOnTerminal(t *testing.T) {
	s := onTerminal(t, launchArgs...)
	for _, want := range []string{"\r", "[=", "/40", "examples/s", "[launch] epoch 1", "[launch] epoch 2", "rank  steps"} {
		if !strings.Contains(s, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, s)
		}
	}
	if strings.Contains(s, "[launch] step ") {
		t.Errorf("plain progress lines on a terminal:\n%q", s)
	}
}

// TestLaunchProgressNotOnTerminal: into a pipe, launch writes one plain
// line every --log-every steps, with no escape codes or carriage returns.
func TestLaunchProgressNotOnTerminal(t *testing.T) {
	r := piped(t, launchArgs...)
	var steps []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if rest, ok := strings.CutPrefix(l, "[launch] step "); ok {
			steps = append(steps, strings.Fields(rest)[0])
			if !strings.Contains(l, "  loss ") || !strings.Contains(l, " examples/s  elapsed ") || !strings.Contains(l, "  ETA ") {
				t.Errorf("progress line %q lacks loss, examples/s, elapsed or ETA", l)
			}
		}
	}
	if want := []string{"10/40", "20/40", "30/40", "40/40"}; !slices.Equal(steps, want) {
		t.Errorf("progress lines at steps %v, want %v:\n%s", steps, want, r.stdout)
	}
}
