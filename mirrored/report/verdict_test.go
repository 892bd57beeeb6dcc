package report

import (
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/cost"
	"github.com/meshtrain/meshtrain/mirrored"
)

// stats is a peer's figures for 100 steps of the given per-step seconds.
func stats(compute, comm, input, barrier float64, sentPerStep int64, cpu float64) *mirrored.PeerStats {
	const n = 100
	return &mirrored.PeerStats{Steps: n, ComputeSeconds: compute * n, CommSeconds: comm * n, WaitSeconds: (input + barrier) * n,
		InputSeconds: input * n, BytesSent: sentPerStep * n, CPUSeconds: cpu}
}

func TestVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		run      Figures
		resource string
		rank     int
		mention  []string
	}{
		{"one worker computing", Figures{Peers: []*mirrored.PeerStats{stats(0.020, 0, 0.0005, 0, 0, 2)}, Cores: 2, PeersPerHost: 1},
			Compute, -1, []string{"computing is 98%"}},
		{"input throttled", Figures{Peers: []*mirrored.PeerStats{stats(0.010, 0.002, 0.010, 0, 1e6, 1), stats(0.010, 0.002, 0.012, 0, 1e6, 1)}},
			Input, -1, []string{"wait for their next batch"}},
		{"rank 2 slow, barrier measured", Figures{Peers: []*mirrored.PeerStats{
			stats(0.010, 0.002, 0, 0.020, 1e6, 1), stats(0.010, 0.002, 0, 0.020, 1e6, 1), stats(0.030, 0.002, 0, 0, 1e6, 3)}},
			Straggler, 2, []string{"rank 2 computes 3.0×", "rank 2"}},
		{"rank 0 slow, waiting shows as exchange", Figures{Peers: []*mirrored.PeerStats{
			stats(0.040, 0.001, 0, 0, 1e6, 4), stats(0.010, 0.031, 0, 0, 1e6, 1), stats(0.010, 0.031, 0, 0, 1e6, 1)}},
			Straggler, 0, []string{"rank 0 computes 4.0×"}},
		{"uneven but nobody waits", Figures{Peers: []*mirrored.PeerStats{stats(0.013, 0.001, 0, 0.001, 1e6, 1), stats(0.010, 0.001, 0, 0.001, 1e6, 1)}},
			Compute, -1, nil},
		{"four peers on two cores", Figures{Peers: []*mirrored.PeerStats{
			stats(0.020, 0.005, 0, 0.001, 1e6, 2), stats(0.020, 0.005, 0, 0.001, 1e6, 2), stats(0.020, 0.005, 0, 0.001, 1e6, 2), stats(0.020, 0.005, 0, 0.001, 1e6, 2)},
			WallSeconds: 2.6, Cores: 2, PeersPerHost: 4},
			Shared, -1, []string{"4 peers ran on a host with 2 cores"}},
		{"dense bytes over a slow link", Figures{Peers: []*mirrored.PeerStats{stats(0.005, 0.100, 0, 0.001, 12e6, 1), stats(0.005, 0.100, 0, 0.001, 12e6, 1)},
			Security: "plaintext", LinkBytesPerSec: 125e6, WallSeconds: 11, Cores: 2, PeersPerHost: 1},
			Bandwidth, -1, []string{"120 MB/s", "125 MB/s"}},
		{"sparse would send less", Figures{Peers: []*mirrored.PeerStats{stats(0.005, 0.100, 0, 0.001, 12e6, 1), stats(0.005, 0.100, 0, 0.001, 12e6, 1)},
			Security: "plaintext", SparseBytesPerStep: 12e6 / 900},
			Bandwidth, -1, []string{"1/900", "--exchange sparse"}},
		{"many small messages", Figures{Peers: []*mirrored.PeerStats{stats(0.0005, 0.002, 0, 0, 8000, 0.1), stats(0.0005, 0.002, 0, 0, 8000, 0.1)},
			Security: "plaintext"},
			Latency, -1, []string{"8 KB per peer"}},
		{"TLS with busy cores", Figures{Peers: []*mirrored.PeerStats{stats(0.005, 0.100, 0, 0.001, 12e6, 10), stats(0.005, 0.100, 0, 0.001, 12e6, 10)},
			Security: "tls", WallSeconds: 10.6, Cores: 1, PeersPerHost: 1, LinkBytesPerSec: 1e9},
			Cipher, -1, []string{"over tls links"}},
		{"shared memory with busy cores is not the cipher", Figures{Peers: []*mirrored.PeerStats{stats(0.005, 0.100, 0, 0.001, 12e6, 10), stats(0.005, 0.100, 0, 0.001, 12e6, 10)},
			Security: SameHostSecurity, WallSeconds: 10.6, Cores: 1, PeersPerHost: 1, LinkBytesPerSec: 1e9},
			Bandwidth, -1, nil},
		{"TLS at the link's rate is bandwidth", Figures{Peers: []*mirrored.PeerStats{stats(0.005, 0.100, 0, 0.001, 12e6, 10), stats(0.005, 0.100, 0, 0.001, 12e6, 10)},
			Security: "tls", WallSeconds: 10.6, Cores: 1, PeersPerHost: 1, LinkBytesPerSec: 125e6},
			Bandwidth, -1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := VerdictOf(tc.run)
			if !ok {
				t.Fatal("no verdict")
			}
			if v.Resource != tc.resource || v.Rank != tc.rank {
				t.Fatalf("verdict %q rank %d, want %q rank %d: %s", v.Resource, v.Rank, tc.resource, tc.rank, v)
			}
			s := v.String()
			for _, m := range append(tc.mention, "bottleneck: "+tc.resource) {
				if !strings.Contains(s, m) {
					t.Errorf("%q does not mention %q", s, m)
				}
			}
			if v.Next == "" || v.Evidence == "" || v.StepSeconds <= 0 {
				t.Errorf("incomplete verdict %+v", v)
			}
		})
	}
}

// loaded is s as it ran on host in process pid, the machine busy for
// hostCPU seconds over life seconds, at load average load.
func loaded(s *mirrored.PeerStats, host string, pid int, hostCPU, life, load float64) *mirrored.PeerStats {
	s.Host, s.PID, s.Cores, s.HostCPUSeconds, s.ProcessSeconds, s.Load1 = host, pid, 2, hostCPU, life, load
	return s
}

// TestVerdictKnowsTheHost: the advice fits the host (more peers only
// while a core is free; more hosts once every core has a peer), and the
// load of other processes, measured as the machine's busy time less the
// peers' own, is named as the bottleneck of a computing run and beside
// any other verdict, counting a process's CPU time once.
func TestVerdictKnowsTheHost(t *testing.T) {
	for _, tc := range []struct {
		name     string
		run      Figures
		resource string
		mention  []string
		not      []string
	}{
		{"one peer on two cores", Figures{Peers: []*mirrored.PeerStats{stats(0.020, 0, 0.0005, 0, 0, 2)}, Cores: 2, PeersPerHost: 1},
			Compute, []string{"more peers, up to one per core (2 here)"}, []string{"other processes"}},
		{"two peers on two cores", Figures{Peers: []*mirrored.PeerStats{stats(0.020, 0.001, 0, 0, 1e5, 2), stats(0.020, 0.001, 0, 0, 1e5, 2)}, Cores: 2, PeersPerHost: 2},
			Compute, []string{"each of the host's 2 cores has a peer: more hosts"}, []string{"more peers,"}},
		{"a quiet machine", Figures{Peers: []*mirrored.PeerStats{loaded(stats(0.020, 0, 0, 0, 0, 4), "h", 1, 4.3, 3, 1.1)}, Cores: 2, PeersPerHost: 1},
			Compute, nil, []string{"other processes"}},
		{"others took the cores", Figures{Peers: []*mirrored.PeerStats{loaded(stats(0.020, 0, 0, 0, 0, 2), "h", 1, 5, 3, 4.2)}, Cores: 2, PeersPerHost: 1},
			Others, []string{"other processes kept 1.0 of the host's 2 cores busy (50%)", "load average 4.2", "quiet machine"}, nil},
		// Two replicas in one process: its 2 CPU-seconds counted once, so
		// others spent 1 of the 4 core-seconds: 25%, half a core.
		{"one process, two replicas", Figures{Peers: []*mirrored.PeerStats{loaded(stats(0.020, 0, 0, 0, 0, 2), "h", 7, 3, 2, 2.5), loaded(stats(0.020, 0, 0, 0, 0, 2), "h", 7, 3, 2, 2.5)}, Cores: 2, PeersPerHost: 2},
			Others, []string{"other processes kept 0.5 of the host's 2 cores busy (25%)"}, nil},
		{"a straggler on a loaded host", Figures{Peers: []*mirrored.PeerStats{
			loaded(stats(0.010, 0.002, 0, 0.020, 1e6, 1), "h", 1, 9, 3, 3), loaded(stats(0.010, 0.002, 0, 0.020, 1e6, 1), "h", 2, 9, 3, 3), loaded(stats(0.030, 0.002, 0, 0, 1e6, 3), "h", 3, 9, 3, 3)},
			Cores: 4, PeersPerHost: 3},
			Straggler, []string{"rank 2 computes", "; other processes kept"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := VerdictOf(tc.run)
			if !ok || v.Resource != tc.resource {
				t.Fatalf("verdict %v, want %q", v, tc.resource)
			}
			s := v.String()
			for _, m := range tc.mention {
				if !strings.Contains(s, m) {
					t.Errorf("%q does not mention %q", s, m)
				}
			}
			for _, m := range tc.not {
				if strings.Contains(s, m) {
					t.Errorf("%q mentions %q", s, m)
				}
			}
		})
	}
}

func TestNoVerdictWithoutSteps(t *testing.T) {
	if _, ok := VerdictOf(Figures{Peers: []*mirrored.PeerStats{nil, {Steps: 0}}}); ok {
		t.Fatal("a verdict on a run without steps")
	}
}

func TestPredictionShown(t *testing.T) {
	v, _ := VerdictOf(Figures{Peers: []*mirrored.PeerStats{stats(0.020, 0, 0, 0, 0, 2)}, PredictedStepSeconds: 0.018})
	if s := v.String(); !strings.Contains(s, "predicted 18.0 ms a step, measured 20.0 ms") {
		t.Fatalf("%s", s)
	}
}

// TestBusyCountsAProcessOnce: replicas in one process share its CPU time,
// so two of them on two cores are not "sharing cores" unless the process
// kept both busy; two processes on one core are.
func TestBusyCountsAProcessOnce(t *testing.T) {
	peer := func(host string, pid int, cpu float64) *mirrored.PeerStats {
		s := stats(0.002, 0.010, 0, 0.001, 1e6, cpu) // mostly exchanging: only the CPU can say they share
		s.Host, s.PID, s.Cores = host, pid, 2
		return s
	}
	// 3 replicas in one process, 0.7 s of CPU over 1.3 s on 2 cores: 27%.
	one := FromPeers([]*mirrored.PeerStats{peer("a", 1, 0.7), peer("a", 1, 0.7), peer("a", 1, 0.7)}, "tls")
	one.WallSeconds = 1.3
	if v, _ := VerdictOf(one); v.Resource == Shared {
		t.Fatalf("one process's CPU counted per replica: %s", v)
	}
	// 3 processes on host a with 2 cores, 0.9 s of CPU each over 1.3 s.
	three := FromPeers([]*mirrored.PeerStats{peer("a", 1, 0.9), peer("a", 2, 0.9), peer("a", 3, 0.9)}, "tls")
	three.WallSeconds = 1.3
	if v, _ := VerdictOf(three); v.Resource != Shared || three.PeersPerHost != 3 || three.Cores != 2 {
		t.Fatalf("3 busy processes on 2 cores: %s (peers per host %d, cores %d)", v, three.PeersPerHost, three.Cores)
	}
}

// TestPredictionFromCalibration: with calibrated parameters the verdict
// prices the step itself: the median compute plus an all-reduce of the
// gradient among the peers.
func TestPredictionFromCalibration(t *testing.T) {
	p := cost.Params{Alpha: 50e-6, Beta: 1e9, Gamma: 1e-9}
	run := Figures{Peers: []*mirrored.PeerStats{stats(0.010, 0.002, 0, 0, 1e6, 1), stats(0.010, 0.002, 0, 0, 1e6, 1)}, Cost: &p, GradientBytes: 4e6}
	v, _ := VerdictOf(run)
	_, tr := cost.AllReduce(2, 4e6)
	if want := p.Step(0.010, tr).Seconds; v.PredictedStepSeconds != want || want <= 0.010 {
		t.Fatalf("predicted %v, want %v", v.PredictedStepSeconds, want)
	}
}

// TestBusyFromSamples: the resource samples, taken over the run alone,
// say how busy the cores were: three processes on two cores that mostly
// waited are not sharing them, whatever their start-up cost in CPU time.
func TestBusyFromSamples(t *testing.T) {
	peer := func(pid int, cores float64) *mirrored.PeerStats {
		s := stats(0.010, 0.002, 0, 0.020, 1e6, 5) // 5 s of CPU, mostly start-up
		s.Host, s.PID, s.Cores = "a", pid, 2
		s.Resources = []mirrored.ResourceSample{{Interval: 1, CPUUser: cores * 0.8, CPUSystem: cores * 0.2}, {Interval: 0.5, CPUUser: cores}}
		return s
	}
	idle := FromPeers([]*mirrored.PeerStats{peer(1, 0.3), peer(2, 0.3), peer(3, 0.3)}, "tls")
	idle.WallSeconds = 3.2
	if v, _ := VerdictOf(idle); v.Resource == Shared {
		t.Fatalf("0.9 of 2 cores busy: %s", v)
	}
	busy := FromPeers([]*mirrored.PeerStats{peer(1, 0.7), peer(2, 0.7), peer(3, 0.7)}, "tls")
	busy.WallSeconds = 3.2
	if v, _ := VerdictOf(busy); v.Resource != Shared {
		t.Fatalf("2.1 of 2 cores busy: %s", v)
	}
}

// TestSecurityAsTheWorkersFoundIt: a run whose every link went through
// shared memory is summarised as such, one with some as the security with
// a count, one with none as the security given.
func TestSecurityAsTheWorkersFoundIt(t *testing.T) {
	peer := func(local, links int) Peer {
		s := &mirrored.Summary{}
		s.Peer.SameHostLinks = local
		for r := range links {
			s.Peer.Links = append(s.Peer.Links, collective.LinkTraffic{Peer: r})
		}
		return Peer{Summary: s}
	}
	for _, tc := range []struct {
		name  string
		peers []Peer
		want  string
	}{
		{"all on one host", []Peer{peer(2, 2), peer(2, 2), peer(2, 2)}, SameHostSecurity},
		{"two hosts", []Peer{peer(1, 3), peer(1, 3), peer(1, 3), peer(1, 3)}, "tls (4 of the peers' 12 links on a host: shared memory, no cipher)"},
		{"none", []Peer{peer(0, 1), peer(0, 1)}, "tls"},
		{"no summaries", []Peer{{}, {}}, "tls"},
	} {
		rep := &Report{Info: RunInfo{Security: "tls"}, Peers: tc.peers}
		if got := rep.security(); got != tc.want {
			t.Errorf("%s: security %q, want %q", tc.name, got, tc.want)
		}
	}
}
