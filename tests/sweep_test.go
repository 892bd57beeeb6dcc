package tests

import (
	"bufio"
	"context"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/measure/sweep"
)

// sweepArgs is a tiny sweep: 2 × 2 points of softmax on a sliver of MNIST.
func sweepArgs(out string, extra ...string) []string {
	return append([]string{"--log-level", "warn", "sweep", "--model", "softmax", "--workers", "1,2", "--batch", "50,100", "--epochs", "1",
		"--train-examples", "2000", "--test-examples", "500", "--out", out}, extra...)
}

// TestSweepCommand: a sweep writes a table with a row per point and every
// column, results.json, and plots that decode; the same command again
// resumes (and skips every point); other settings in the same --out are
// refused (exit 2), naming the difference.
func TestSweepCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := t.TempDir()
	r := meshtrain(ctx, nil, sweepArgs(out)...)
	if r.err != nil {
		t.Fatal(r)
	}
	for i := 1; i <= 4; i++ {
		if !regexp.MustCompile(`(?m)^point ` + strconv.Itoa(i) + `/4: done in `).MatchString(r.stdout) {
			t.Errorf("no progress line for point %d/4:\n%s", i, r.stdout)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	cols := sweep.Columns(0.90) // softmax's default target
	if header := "| " + strings.Join(cols, " | ") + " |"; !strings.Contains(string(md), header) {
		t.Fatalf("report.md has no table headed\n%s\n%s", header, md)
	}
	rows := regexp.MustCompile(`(?m)^\| \d+ \|.*\|$`).FindAllString(string(md), -1)
	if len(rows) != 4 {
		t.Errorf("%d rows, want one per point (4):\n%s", len(rows), md)
	}
	for _, row := range rows {
		cells := strings.Split(strings.Trim(row, "|"), "|")
		if len(cells) != len(cols) {
			t.Errorf("row %q: %d cells, want %d", row, len(cells), len(cols))
			continue
		}
		for i, c := range cells {
			c = strings.TrimSpace(c)
			// "—": the CPU of a run under 0.2 s (these may be), a time
			// to target not reached.
			if c == "" || (c == "—" && cols[i] != "CPU (cores)" && !strings.HasPrefix(cols[i], "time to")) {
				t.Errorf("row %q: no %s", row, cols[i])
			}
		}
	}
	res, err := sweep.Load(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Points) != 4 || res.Total != 4 || res.Runner != sweep.KindProcesses {
		t.Fatalf("results.json: %d of %d points, runner %q", len(res.Points), res.Total, res.Runner)
	}
	for _, p := range res.Points {
		row := p.Row
		if row.Errors != "" || row.PeakRSSBytes <= 0 || row.TestAccuracy < 0.5 || row.TrainSeconds <= 0 || row.Verdict == "" || len(p.Peers) != p.Workers {
			t.Errorf("point %s: %+v", p.Point, row)
		}
		if p.Workers == 2 && (row.SentBytes <= 0 || row.ReceivedBytes <= 0 || row.Processes != 2) {
			t.Errorf("point %s: sent %d, received %d per peer over %d processes", p.Point, row.SentBytes, row.ReceivedBytes, row.Processes)
		}
	}
	for _, name := range []string{"time_vs_workers.png", "throughput_vs_workers.png", "cpu_vs_workers.png", "network_vs_workers.png",
		"accuracy_vs_time_baseline.png", "accuracy_vs_epochs_baseline.png"} {
		if !strings.Contains(string(md), "("+name+")") {
			t.Errorf("report.md does not show %s", name)
		}
		f, err := os.Open(filepath.Join(out, name))
		if err != nil {
			t.Error(err)
			continue
		}
		if _, err := png.Decode(f); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		f.Close()
	}

	// Again: every point is there already.
	r = meshtrain(ctx, nil, sweepArgs(out)...)
	if r.err != nil {
		t.Fatal(r)
	}
	if n := strings.Count(r.stdout, "already in "+filepath.Join(out, "results.json")); n != 4 || strings.Contains(r.stdout, "done in") {
		t.Errorf("the same sweep again: %d points skipped, want all 4 and none run:\n%s", n, r.stdout)
	}

	// Other settings are refused, naming the difference.
	r = meshtrain(ctx, nil, sweepArgs(out, "--lr", "0.5")...)
	if exitCode(r.err) != 2 || !strings.Contains(r.stderr, "lr: 0.02 there, 0.5 here") || !strings.Contains(r.stderr, "--fresh") {
		t.Errorf("a sweep with another --lr in the same --out: want exit 2 naming lr and --fresh\n%s", r)
	}
}

// TestSweepInterrupt: Ctrl-C after the first point stops the sweep (exit
// 130) with that point saved; the same command again runs only the rest.
func TestSweepInterrupt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, binary, sweepArgs(out)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		lines.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "point 1/4: done in ") {
			_ = cmd.Process.Signal(syscall.SIGINT)
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	if got := exitCode(err); got != 130 {
		t.Fatalf("exit %d after Ctrl-C, want 130\n%s\n%s", got, lines.String(), stderr.String())
	}
	if !strings.HasSuffix(strings.TrimSpace(stderr.String()), "meshtrain: interrupted") {
		t.Errorf("stderr after Ctrl-C:\n%s\nwant it to end with \"meshtrain: interrupted\"", stderr.String())
	}
	res, err := sweep.Load(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The signal lands while point 2 runs (its workers take longer to
	// start than a signal to arrive), so point 1 alone is saved.
	done := len(res.Points)
	if done != 1 {
		t.Errorf("%d points saved after Ctrl-C during point 2, want 1:\n%s", done, lines.String())
	}
	r := meshtrain(ctx, nil, sweepArgs(out)...)
	if r.err != nil {
		t.Fatal(r)
	}
	if n := strings.Count(r.stdout, "already in"); n != done {
		t.Errorf("the re-run skipped %d points, want the %d saved:\n%s", n, done, r.stdout)
	}
	if n := strings.Count(r.stdout, ": done in "); n != 4-done {
		t.Errorf("the re-run ran %d points, want the remaining %d:\n%s", n, 4-done, r.stdout)
	}
	if res, err := sweep.Load(filepath.Join(out, "results.json")); err != nil || len(res.Points) != 4 {
		t.Errorf("after the re-run: %v", err)
	}
}

// TestSweepPassesFlags: a sweep given a model file (with its compile
// settings), a data set, a link delay and --elastic runs every point on
// them, and records them in results.json and the report; an elastic
// setting that does not fit every point, or a sweep with no ring point
// to make elastic, exits 2.
func TestSweepPassesFlags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	mnist, err := data.LoadMNIST(ctx, data.MNISTOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	set := filepath.Join(dir, "sliver.npz")
	if err := data.WriteNPZ(set, &data.ImageSet{Train: mnist.Train.Head(1200), Test: mnist.Test.Head(300)}); err != nil {
		t.Fatal(err)
	}
	const delay = 20 * time.Millisecond
	model := kerasFile(t, "compile_adam_tfjs_model.json")
	out := filepath.Join(dir, "out")
	args := []string{"--log-level", "warn", "sweep", "--model-file", model, "--data", set, "--link-delay", delay.String(), "--elastic",
		"--workers", "1,2", "--batch", "100", "--epochs", "1", "--out", out}
	r := meshtrain(ctx, nil, args...)
	if r.err != nil {
		t.Fatal(r)
	}
	if !strings.Contains(r.stdout, "optimizer: adam lr 0.002, constant schedule; loss categorical_crossentropy (the model file's compile settings") {
		t.Errorf("the sweep does not say the model file's settings:\n%s", r.stdout)
	}
	res, err := sweep.Load(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"model-file": model, "data": set, "link-delay": delay.String(), "elastic": "true", "model": "keras", "optimizer": "adam", "lr": "0.002"} {
		if res.Settings[k] != v {
			t.Errorf("results.json's setting %s is %q, want %q", k, res.Settings[k], v)
		}
	}
	if len(res.Settings["architecture"]) != 16 {
		t.Errorf("results.json's architecture %q, want the model's digest", res.Settings["architecture"])
	}
	if len(res.Points) != 2 {
		t.Fatalf("%d points, want 2", len(res.Points))
	}
	for _, p := range res.Points {
		if p.Row.Errors != "" || len(p.Peers) != p.Workers {
			t.Fatalf("point %s: %+v", p.Point, p.Row)
		}
		for _, peer := range p.Peers {
			run := peer.Summary.Run
			if run.Model != "keras" || run.Params != 7850 || run.TrainExamples != 1200 || run.TestExamples != 300 || run.Optimizer != "adam" || run.LR != 0.002 {
				t.Errorf("point %s rank %d ran %s (%d parameters) on %d/%d examples with %s at %v; want the file's model, optimizer and rate on the sliver",
					p.Point, peer.Rank, run.Model, run.Params, run.TrainExamples, run.TestExamples, run.Optimizer, run.LR)
			}
			// Every step waits for frames over a link that delays each by
			// 20 ms (the gradient's all-reduce overlaps the backward
			// pass: the step, not its combine, takes the delay).
			ps := peer.Summary.Peer
			step := ps.ComputeSeconds + ps.CommSeconds + ps.WaitSeconds
			t.Logf("point %s rank %d: %d steps in %.3f s", p.Point, peer.Rank, ps.Steps, step)
			if min := time.Duration(ps.Steps) * delay; p.Workers == 2 && time.Duration(step*1e9) < min {
				t.Errorf("point %s rank %d: %d steps in %.3f s, under the %v the link delay adds", p.Point, peer.Rank, ps.Steps, step, min)
			}
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := "Every point trains the model of `" + model + "` (architecture " + res.Settings["architecture"] + "); the data set `" + set + "`; " +
		"over links with injected faults (--link-delay " + delay.String() + ": each peer's outgoing frames); the ring's points elastic. "
	if !strings.Contains(string(md), want) {
		t.Errorf("report.md does not say what every point was given:\n%s\nwant %q", md, want)
	}

	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--min-workers", "2"}, "--min-workers 2: want 1 to the cluster's 1 workers"},
		{[]string{"--strategies", "gossip", "--workers", "2,3"}, "--elastic with --strategies gossip: the elastic mode is the ring's"},
	} {
		r := meshtrain(ctx, nil, append(slices.Clone(args[:len(args)-2]), append(tc.extra, "--out", t.TempDir())...)...)
		if exitCode(r.err) != 2 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stdout, "point 1/") {
			t.Errorf("sweep %v: exit %d, want 2 naming %q before any point\n%s", tc.extra, exitCode(r.err), tc.want, r)
		}
	}
}
