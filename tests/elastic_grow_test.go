package tests

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/mirrored"
)

// waitChanges waits until peer p emitted n membership events.
func (c *elasticCluster) waitChanges(p *elasticPeer, n int) {
	c.t.Helper()
	for {
		p.mu.Lock()
		got := 0
		for _, e := range p.events {
			if e.Kind == mirrored.EventMembership {
				got++
			}
		}
		p.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-p.done:
			c.t.Fatalf("peer %d exited (%v) after %d of %d changes:\n%s", p.index, p.err, got, n, p.stderrText())
		case <-c.ctx.Done():
			c.t.Fatalf("peer %d saw %d of %d changes: %v\n%s", p.index, got, n, c.ctx.Err(), p.stderrText())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// writeDiscovered writes the discovery command's answer: the addresses,
// one a line, and extra lines.
func writeDiscovered(t *testing.T, path string, addrs []string, extra ...string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(strings.Join(append(slices.Clone(addrs), extra...), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// TestElasticGrows is issue 33's "done when": an elastic run of 3 listed
// workers with --max-workers 5 and --discover-cmd loses worker 1
// (SIGKILL), takes its restart back, and admits worker 3, a newcomer
// that --discover-cmd starts listing mid-run; a fifth process with
// another secret, also listed, is never admitted: nobody answers it, and
// it gives up waiting to be admitted. Each
// survivor's log has one readable line per change ("rank 1 lost: …",
// "rank 1 rejoined", "rank 3 joined"), the discovery's bad line is named
// in a warning, the four members end identical, and a second cluster
// replaying the record ends with the same parameters.
func TestElasticGrows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	list := filepath.Join(dir, "workers.txt")
	grow := []string{"--epochs", "3", "--max-workers", "5", "--discover-cmd", "cat " + list, "--discover-every", "300ms"}
	run := func(extra ...string) (*elasticCluster, []string) {
		c := newElasticCluster(t, ctx, 5, elasticRun(append(slices.Clone(grow), extra...)...))
		all := c.addrs
		c.addrs = all[:3] // the listed workers
		return c, all
	}
	c, all := run()
	writeDiscovered(t, list, all[:3], "not-an-address")
	ps := []*elasticPeer{c.start(0, nil), c.start(1, nil), c.start(2, nil)}
	c.waitStep(ps[1], 12)
	_ = ps[1].cmd.Process.Kill()
	c.waitChanges(ps[0], 1)
	ps[1] = c.start(1, nil)
	c.waitChanges(ps[0], 2)

	writeDiscovered(t, list, all[:5])
	c.addrs = all[:4] // the newcomer lists the cluster and itself
	ps = append(ps, c.start(3, nil, "--join"))
	c.addrs = all[:5]
	stranger := c.start(4, []string{"MESHTRAIN_CLUSTER_SECRET=" + hex.EncodeToString([]byte("not the cluster's secret, 32 b.."))}, "--join")
	s := finished(t, c, ps...)
	if err := c.wait(stranger); err == nil || !strings.Contains(stranger.stderrText(), "to be admitted") {
		t.Errorf("the worker without the secret: %v, want it refused (never admitted):\n%s", err, stranger.stderrText())
	}

	ms := s.Run.Membership
	t.Logf("membership %+v", ms)
	if len(ms) != 3 || !slices.Equal(ms[0].Left, []int{1}) || !slices.Equal(ms[1].Joined, []int{1}) || !slices.Equal(ms[2].Joined, []int{3}) ||
		!slices.Equal(ms[2].Members, []int{0, 1, 2, 3}) || s.Run.Replicas != 4 {
		t.Fatalf("record %+v on %d replicas: want 1 lost, 1 back, 3 joined, 4 at the end", ms, s.Run.Replicas)
	}
	log0 := ps[0].stderrText()
	var lines []string
	for line := range strings.Lines(log0) {
		if strings.Contains(line, "membership changed") {
			lines = append(lines, line)
		}
	}
	if len(lines) != 3 {
		t.Fatalf("peer 0 logged %d change lines, want 3:\n%s", len(lines), log0)
	}
	for i, want := range []string{"rank 1 lost: its connection closed", "rank 1 rejoined: 3 peer(s) [0 2 1]", "rank 3 joined: 4 peer(s) [0 1 2 3]"} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], "(--elastic-lr scale)") {
			t.Errorf("change %d: %s\nwant %q and the rate", i+1, lines[i], want)
		}
	}
	for _, want := range []string{`line 4 "not-an-address": want host:port`, fmt.Sprintf("worker %s listed by --discover-cmd: it may join as rank 3", all[3])} {
		if !strings.Contains(log0, want) {
			t.Errorf("peer 0's log lacks %q:\n%s", want, log0)
		}
	}

	record := filepath.Join(dir, "record.json")
	b, _ := json.Marshal(s)
	if err := os.WriteFile(record, b, 0o644); err != nil {
		t.Fatal(err)
	}
	replay, rall := run("--membership-schedule", record)
	writeDiscovered(t, list, rall[:4])
	rs := []*elasticPeer{replay.start(0, nil), replay.start(1, nil), replay.start(2, nil)}
	replay.addrs = rall[:4]
	rs = append(rs, replay.start(3, nil, "--join"))
	r := finished(t, replay, rs...)
	if r.Run.ParamsSHA256 != s.Run.ParamsSHA256 {
		t.Errorf("the replay ended with %s, the run with %s", r.Run.ParamsSHA256, s.Run.ParamsSHA256)
	}
}

// TestElasticIndexedJobScaledUp: the pods of a Kubernetes Indexed Job
// (JOB_COMPLETION_INDEX, MESHTRAIN_PEER_PATTERN, MESHTRAIN_NUM_WORKERS=3
// and MESHTRAIN_MAX_WORKERS=4, emulated as processes on loopback
// addresses) run elastic; the Job scaled up starts pod 3, which joins the
// running run with no discovery command (the pattern gives the next
// pods' addresses); the four end identical, and the record says pod 3
// joined.
func TestElasticIndexedJobScaledUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	port := strings.Split(freePorts(t, 1)[0], ":")[1]
	pattern := "127.0.2{index}.1:" + port
	c := newElasticCluster(t, ctx, 4, elasticRun("--epochs", "3"))
	c.noSpec = true
	pod := func(i int) *elasticPeer {
		return c.start(i, []string{"JOB_COMPLETION_INDEX=" + fmt.Sprint(i), "MESHTRAIN_PEER_PATTERN=" + pattern, "MESHTRAIN_NUM_WORKERS=3", "MESHTRAIN_MAX_WORKERS=4"})
	}
	ps := []*elasticPeer{pod(0), pod(1), pod(2)}
	c.waitStep(ps[0], 10)
	ps = append(ps, pod(3))
	s := finished(t, c, ps...)
	ms := s.Run.Membership
	if len(ms) != 1 || !slices.Equal(ms[0].Joined, []int{3}) || s.Run.Replicas != 4 {
		t.Fatalf("record %+v on %d replicas: want pod 3 to join, 4 replicas at the end", ms, s.Run.Replicas)
	}
	if log := ps[0].stderrText(); !strings.Contains(log, "rank 3 joined: 4 peer(s) [0 1 2 3]") {
		t.Errorf("pod 0's log has no line for the join:\n%s", log)
	}
}
