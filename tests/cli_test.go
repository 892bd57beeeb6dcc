package tests

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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
// codes and messages shells, CI and torchrun users rely on: every usage
// error exits 2 naming the valid choices, with nothing on stdout (help
// goes there only when asked for).
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
		{"unknown model", []string{"train", "--model", "foo"}, 2, "stderr", `model "foo": want one of [lenet softmax sparse-lr]`},
		{"unknown optimizer", []string{"train", "--optimizer", "adamw"}, 2, "stderr", `optimizer "adamw": want one of [sgd momentum nesterov adam]`},
		{"unknown schedule", []string{"launch", "--lr-schedule", "exp"}, 2, "stderr", `learning-rate schedule "exp": want one of`},
		{"no workers", []string{"launch", "-n", "0"}, 2, "stderr", "-n 0: want at least 1 worker"},
		{"eval without a checkpoint", []string{"eval"}, 2, "stderr", "eval needs --checkpoint FILE"},
		{"gossip alone", []string{"train", "--strategy", "gossip"}, 2, "stderr", "--strategy gossip needs several replicas: use launch -n N --strategy gossip"},
		{"sweep without --out", []string{"sweep"}, 2, "stderr", "sweep: --out DIR is required"},
		{"sweep: a strategy", []string{"sweep", "--strategies", "ring,ps", "--out", "x"}, 2, "stderr", `--strategies: "ps": want some of ring, gossip`},
		{"sweep: no point can run", []string{"sweep", "--workers", "1", "--strategies", "gossip", "--out", "x"}, 2, "stderr", "no point of the grid can run"},
		{"help asked for", []string{"eval", "--help"}, 0, "stdout", "--checkpoint"},
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
			if tc.code == 2 && r.stdout != "" { // help only when asked for
				t.Errorf("a usage error wrote on stdout:\n%s", r)
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

// TestCLIHelp: help groups the flags by category and starts with an
// example.
func TestCLIHelp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, args := range [][]string{{"launch", "--help"}, {"help", "worker"}, {"bench", "--help"}, {"--help"}} {
		r := meshtrain(ctx, nil, args...)
		if r.err != nil || !strings.HasPrefix(r.stdout, "EXAMPLE:\n   ") || !strings.Contains(strings.SplitN(r.stdout, "\n", 3)[1], "meshtrain ") {
			t.Errorf("%q: want help starting with an example\n%s", args, r)
		}
	}
	r := meshtrain(ctx, nil, "launch", "--help")
	for _, cat := range []string{"training", "sparse-lr", "gossip", "cluster", "fault injection"} {
		if !strings.Contains(r.stdout, "\n   "+cat+"\n\n   --") {
			t.Errorf("launch --help has no category %q:\n%s", cat, r.stdout)
		}
	}
}

// TestCLIChecksBeforeWork: a flag that does not apply, or an output path
// that cannot be written, fails at once with exit 2, before any output
// of a run; a flag the model ignores is warned about and the run goes on.
func TestCLIChecksBeforeWork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	unwritable := filepath.Join(file, "summary.json") // under a file: even root cannot write it
	fifo := filepath.Join(filepath.Dir(file), "tf_config.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	gz := filepath.Join(filepath.Dir(file), "train.libsvm.gz")
	if err := os.WriteFile(gz, []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	short := []string{"--model", "softmax", "--epochs", "1", "--train-examples", "640", "--test-examples", "100"}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"fault flag on train", []string{"train", "--slow-peer", "1:3"}, 2, "--slow-peer needs several replicas"},
		{"unwritable train summary", append([]string{"train", "--summary", unwritable}, short...), 2, unwritable},
		{"unwritable launch summary", append([]string{"launch", "-n", "2", "--summary", unwritable}, short...), 2, unwritable},
		{"logdir under a file", append([]string{"train", "--logdir", unwritable}, short...), 2, unwritable},
		{"sparse flag with softmax", append([]string{"train", "--train-files", "x.tfrecord"}, short...), 0, "--train-files is ignored: it applies only to --model sparse-lr"},
		{"missing training file", []string{"train", "--model", "sparse-lr", "--features", "100", "--train-files", filepath.Join(filepath.Dir(file), "missing.libsvm")}, 2, "--train-files: input file: open " + filepath.Join(filepath.Dir(file), "missing.libsvm") + ": no such file"},
		{"gzip training file", []string{"train", "--model", "sparse-lr", "--features", "100", "--train-files", gz}, 2, "is gzip-compressed: decompress it first"},
		{"TF_CONFIG a FIFO", []string{"worker", "--tf-config", fifo}, 2, fifo + " is a pipe or FIFO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := meshtrain(ctx, nil, tc.args...)
			if got := exitCode(r.err); got != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, want %d; stderr should contain %q\n%s", got, tc.code, tc.want, r)
			}
			if tc.code != 0 && r.stdout != "" { // a run prints its header (launch: its workers' pids) first
				t.Errorf("work started before the check:\n%s", r)
			}
		})
	}
}
