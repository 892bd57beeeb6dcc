package tests

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// elasticLaunch is a 3-worker elastic launch of LeNet at a constant
// learning rate (so the rate each generation runs at is the policy's
// alone), rank 2 killed by the fault injection at its 40th step and
// restarted once.
func elasticLaunch(summary string, extra ...string) []string {
	return append([]string{"launch", "-n", "3", "--elastic", "--max-restarts", "1", "--model", "lenet", "--epochs", "2", "--batch", "16",
		"--lr", "0.05", "--lr-schedule", "constant", "--warmup-epochs", "0", "--train-examples", "3000", "--test-examples", "300",
		"--commit-every", "5", "--collective-timeout", "4s", "--log-every", "5", "--summary", summary}, extra...)
}

var (
	progressRE   = regexp.MustCompile(`^\[launch\] epoch (\d+) +(\d+)%  loss`)
	changeRE     = regexp.MustCompile(`go on from epoch \d+ \(\d+% done\)`)
	stderrRankRE = regexp.MustCompile(`^\[rank (\d+)\] `)
	jsonRankRE   = regexp.MustCompile(`"rank": (\d+)`)
)

// TestElasticOutputReadable: an elastic launch with a kill and a restart
// prints what a person can follow (issue 33): the progress by epoch,
// never renumbered (it goes back at most the steps a loss rolls back);
// one line per change of membership, naming who left and why in words
// and who rejoined, with the global batch and the learning rate before
// and after (--elastic-lr scale: 0.05 → 0.03333 on 2 of 3 peers, and
// back); the lost peer's error chain nowhere on stdout and once in each
// peer's log; every log line prefixed [rank N] labelled "rank": N; what
// each peer ran at the end. The replicas end identical, and a second
// launch replaying the record (--membership-schedule) ends with the
// same parameters.
func TestElasticOutputReadable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	sum := filepath.Join(dir, "summary.json")
	r := meshtrain(ctx, nil, elasticLaunch(sum, "--kill-rank", "2", "--kill-after", "40")...)
	if r.err != nil {
		t.Fatalf("%v", r)
	}
	s := readSummary(t, sum)
	if !s.ParamsIdentical || s.Run == nil || len(s.Run.Membership) != 2 {
		t.Fatalf("identical %v, record %+v: want identical replicas, a loss and a rejoin\n%v", s.ParamsIdentical, s.Run, r)
	}

	var changes []string
	last := 0.0
	for line := range strings.Lines(r.stdout) {
		line = strings.TrimRight(line, "\n")
		if changeRE.MatchString(line) {
			changes = append(changes, line)
		}
		if m := progressRE.FindStringSubmatch(line); m != nil {
			e, _ := strconv.Atoi(m[1])
			p, _ := strconv.Atoi(m[2])
			at := float64(e) + float64(p)/100
			if at < last-0.2 { // a loss rolls back at most 5 of 62-93 steps an epoch
				t.Errorf("progress went back from epoch %.2f to %.2f: %q", last, at, line)
			}
			last = max(last, at)
		}
		if regexp.MustCompile(`step \d+/\d+|step \d+ of \d+|in-memory commit`).MatchString(line) {
			t.Errorf("a line counts steps, which changes renumber: %q", line)
		}
		if strings.Contains(line, "collective: ") || strings.Contains(line, "generation 0 (ranks") {
			t.Errorf("stdout has an error chain: %q", line)
		}
	}
	if len(changes) != 2 {
		t.Fatalf("%d change lines, want one per change (2):\n%s", len(changes), r.stdout)
	}
	for i, want := range []string{
		"[launch] rank 2 died: killed by fault injection (--kill-rank/--kill-after): 2 peer(s) [0 1] go on",
		"[launch] rank 2 rejoined: 3 peer(s) [0 1 2] go on",
	} {
		if !strings.HasPrefix(changes[i], want) {
			t.Errorf("change %d: %q\nwant it to start %q", i+1, changes[i], want)
		}
	}
	for i, want := range []string{"global batch 48 → 32; learning rate 0.05 → 0.03333 (--elastic-lr scale)", "global batch 32 → 48; learning rate 0.03333 → 0.05 (--elastic-lr scale)"} {
		if !strings.Contains(changes[i], want) {
			t.Errorf("change %d: %q\nwant it to state %q", i+1, changes[i], want)
		}
	}
	for _, want := range []string{"(restart 1 of --max-restarts 1: it rejoins at the next commit)", "[launch] epoch 1 of 2", "[launch] epoch 2 of 2  loss",
		"after 2 epoch(s) (the last global batch 48, over 3 peers)", "each peer ran, over every generation of its process"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Count(r.stdout, "[launch] lenet:") != 1 {
		t.Errorf("the run's header %d times, want once:\n%s", strings.Count(r.stdout, "[launch] lenet:"), r.stdout)
	}

	chains := map[int]int{}
	for line := range strings.Lines(r.stderr) {
		m := stderrRankRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rank, _ := strconv.Atoi(m[1])
		if j := jsonRankRE.FindStringSubmatch(line); j != nil && j[1] != m[1] {
			t.Errorf("a line of [rank %s] says \"rank\": %s: %s", m[1], j[1], line)
		}
		if strings.Contains(line, "collective: ") || strings.Contains(line, "generation 0 (ranks") {
			chains[rank]++
		}
	}
	for rank := range 3 {
		if chains[rank] != 1 {
			t.Errorf("rank %d's log has the error chain %d times, want once:\n%s", rank, chains[rank], r.stderr)
		}
	}

	replay := filepath.Join(dir, "replay.json")
	rr := meshtrain(ctx, nil, elasticLaunch(replay, "--membership-schedule", sum)...)
	if rr.err != nil {
		t.Fatalf("replay: %v", rr)
	}
	if rs := readSummary(t, replay); !rs.ParamsIdentical || rs.Run.ParamsSHA256 != s.Run.ParamsSHA256 {
		t.Errorf("the replay ended with %s (identical %v), the run with %s\n%v", rs.Run.ParamsSHA256, rs.ParamsIdentical, s.Run.ParamsSHA256, rr)
	}
}

// TestElasticOutputSIGKILL: a worker killed from outside (SIGKILL, no
// word of its own) is named as the launcher saw it die: the change's
// line waits for its exit (HoldChange at most) and says "rank 1 died:
// killed"; its restart rejoins.
func TestElasticOutputSIGKILL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum := filepath.Join(t.TempDir(), "summary.json")
	killed := false
	r, _ := launchWatched(t, ctx, elasticLaunch(sum, "--epochs", "3", "--train-examples", "6000"), func(line string, _ *os.Process, pids map[int]int) {
		if m := progressRE.FindStringSubmatch(line); m != nil && !killed && m[1] == "1" {
			if p, _ := strconv.Atoi(m[2]); p >= 20 {
				killed = syscall.Kill(pids[1], syscall.SIGKILL) == nil
			}
		}
	})
	if r.err != nil || !killed {
		t.Fatalf("killed %v: %v", killed, r)
	}
	var changes []string
	for line := range strings.Lines(r.stdout) {
		if changeRE.MatchString(line) {
			changes = append(changes, strings.TrimRight(line, "\n"))
		}
	}
	if len(changes) != 2 || !strings.HasPrefix(changes[0], "[launch] rank 1 died: killed: 2 peer(s) [0 2] go on") || !strings.HasPrefix(changes[1], "[launch] rank 1 rejoined") {
		t.Errorf("changes %q: want rank 1 died: killed, then rejoined\n%s", changes, r.stdout)
	}
	if s := readSummary(t, sum); !s.ParamsIdentical {
		t.Errorf("the replicas differ at the end")
	}
}
