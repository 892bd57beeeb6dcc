package mirrored

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/nn"
)

func TestMergeSamples(t *testing.T) {
	a := ResourceSample{Seconds: 1, Interval: 1, Step: 10, CPUUser: 1, RSSBytes: 100, Sent: 10, Links: []LinkRate{{Peer: 1, Sent: 10}}}
	b := ResourceSample{Seconds: 4, Interval: 3, Step: 40, CPUUser: 2, RSSBytes: 200, Sent: 30, Links: []LinkRate{{Peer: 1, Sent: 30}}}
	m := mergeSamples(a, b)
	if m.Seconds != 4 || m.Interval != 4 || m.Step != 40 || m.CPUUser != 1.75 || m.RSSBytes != 200 || m.Sent != 25 || m.Links[0].Sent != 25 {
		t.Fatalf("merged %+v", m)
	}
}

// TestSamplerBounded: a full history halves instead of growing.
func TestSamplerBounded(t *testing.T) {
	s := &sampler{}
	for i := range MaxResourceSamples + 10 {
		s.add(ResourceSample{Seconds: float64(i + 1), Interval: 1, CPUUser: 1})
	}
	if n := len(s.samples); n >= MaxResourceSamples || n < MaxResourceSamples/2 {
		t.Fatalf("%d samples kept, want between %d and %d", n, MaxResourceSamples/2, MaxResourceSamples)
	}
	if last := s.samples[len(s.samples)-1]; last.Seconds != float64(MaxResourceSamples+10) {
		t.Fatalf("the newest sample is at %v s", last.Seconds)
	}
}

// TestRunRecordsResources: every replica's summary holds its resource
// history, with its CPU, memory and the bytes per link, and TensorBoard
// gets the system/ scalars.
func TestRunRecordsResources(t *testing.T) {
	defer func(d time.Duration) { sampleEvery = d }(sampleEvery)
	sampleEvery = 5 * time.Millisecond
	job := testJob(t, nn.LeNet5, synthMNIST(480, 60, 3), 16, 1)
	job.LogDir = t.TempDir()
	sums, errs := runGroup(t, same(2, job))
	for r, s := range sums {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		res := s.Peer.Resources
		if len(res) == 0 {
			t.Fatalf("rank %d: no resource samples", r)
		}
		var cpu, sent float64
		for _, x := range res {
			cpu += x.CPUUser + x.CPUSystem
			sent += x.Sent
			if x.RSSBytes <= 0 || x.Interval <= 0 {
				t.Fatalf("rank %d: sample %+v", r, x)
			}
		}
		if cpu <= 0 || sent <= 0 || len(res[len(res)-1].Links) != 1 || res[len(res)-1].Links[0].Peer != 1-r {
			t.Fatalf("rank %d: CPU %v, sent %v, links %+v", r, cpu, sent, res[len(res)-1].Links)
		}
	}
	var found bool
	filepath.WalkDir(job.LogDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			found = found || strings.Contains(string(b), "system/cpu_user")
		}
		return nil
	})
	if !found {
		t.Fatal("no system/cpu_user scalar in the TensorBoard files")
	}
}
