package tests

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// exitCode is a finished command's exit status (-1: it did not exit).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// TestCLIConventions runs the binary as a user would and checks the exit
// codes and messages shells, CI and torchrun users rely on.
func TestCLIConventions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stream string // "stdout" or "stderr"
		want   string
	}{
		{"command typo", []string{"lanch"}, 2, "stderr", `Did you mean "launch"?`},
		{"flag typo", []string{"train", "--epoch", "2"}, 2, "stderr", "unknown flag -epoch: did you mean --epochs?"},
		{"bad flag value", []string{"train", "--epochs", "two"}, 2, "stderr", "invalid value"},
		{"version", []string{"--version"}, 0, "stdout", "meshtrain version "},
		{"global flag after the command", []string{"train", "--model", "softmax", "--epochs", "1", "--train-examples", "640", "--test-examples", "100", "--log-format", "json"}, 0, "stderr", `{"level":"info"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := meshtrain(ctx, nil, tc.args...)
			out := r.stdout
			if tc.stream == "stderr" {
				out = r.stderr
			}
			if got := exitCode(r.err); got != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, want %d; %s should contain %q\n%s", got, tc.code, tc.stream, tc.want, r)
			}
		})
	}
}

// TestInterruptExitCode: Ctrl-C ends a run with exit code 130 and one
// line saying so.
func TestInterruptExitCode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "train", "--model", "lenet", "--epochs", "50", "--log-level", "warn")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once training has started (the header line is out).
	buf := make([]byte, 4096)
	if _, err := stdout.Read(buf); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	for {
		if _, err := stdout.Read(buf); err != nil {
			break
		}
	}
	err = cmd.Wait()
	if got := exitCode(err); got != 130 {
		t.Fatalf("exit %d after Ctrl-C, want 130; stderr:\n%s", got, stderr.String())
	}
	if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 1 || lines[0] != "meshtrain: interrupted" {
		t.Errorf("stderr after Ctrl-C:\n%s\nwant the one line \"meshtrain: interrupted\"", stderr.String())
	}
}
