package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/meshtrain/meshtrain/collective/cost"
	"github.com/meshtrain/meshtrain/mirrored"
)

// Resources a verdict may name.
const (
	Input     = "input pipeline"
	Straggler = "straggler"
	Shared    = "peers sharing CPU cores"
	Others    = "other processes on the host"
	Cipher    = "the cipher's CPU"
	Latency   = "network latency"
	Bandwidth = "network bandwidth"
	Compute   = "compute"
)

// Rules are the thresholds of the rules (see the package doc).
var Rules = struct {
	InputShare, StragglerRatio, StragglerWait, BusyShare, CommShare, ComputeShare, OthersShare float64
	SmallStep                                                                                  int64
}{
	InputShare:     0.20,
	StragglerRatio: 1.3,
	StragglerWait:  0.15,
	BusyShare:      0.75,
	CommShare:      0.40,
	ComputeShare:   0.50,
	OthersShare:    0.25,
	SmallStep:      64 << 10,
}

// Figures is what a verdict is drawn from.
type Figures struct {
	// Peers are the peers' figures, indexed by rank (nil: no figures,
	// e.g. a peer that failed).
	Peers []*mirrored.PeerStats
	// WallSeconds is the run's training time (the longest peer's, if 0).
	WallSeconds float64
	// Security is the links' security (tls, noise, quic, plaintext; ""
	// for no links).
	Security string
	// Cores is the logical CPUs of one host; PeersPerHost the most peers
	// that ran on one host (1 if each had its own).
	Cores, PeersPerHost int
	// LinkBytesPerSec is the link rate a measurement gave (meshtrain bench
	// link, or the cost model's β), 0 if unknown.
	LinkBytesPerSec float64
	// PredictedStepSeconds is the cost model's step time for this run, 0
	// if there is no calibration; with Cost and GradientBytes set instead,
	// VerdictOf predicts it: the median peer's compute and an all-reduce of
	// GradientBytes among the peers (the ring's dense exchange).
	PredictedStepSeconds float64
	Cost                 *cost.Params
	GradientBytes        float64
	// Sparse, for sparse logistic regression with the dense exchange, is
	// the bytes per step the sparse exchange would send (0: not known or
	// not applicable).
	SparseBytesPerStep float64
}

// Verdict is the resource that bounds the step, why, and what to try.
type Verdict struct {
	Resource string `json:"resource"`
	// Rank is the straggler (-1 for the other verdicts).
	Rank     int    `json:"rank"`
	Evidence string `json:"evidence"`
	Next     string `json:"next"`
	// StepSeconds is the measured step (the median peer's); Predicted the
	// cost model's, 0 if none.
	StepSeconds          float64 `json:"step_seconds"`
	PredictedStepSeconds float64 `json:"predicted_step_seconds,omitempty"`
	// Topology is the peers' hosts and the all-reduce (Result.Topology), which
	// a network verdict depends on.
	Topology string `json:"topology,omitempty"`
}

func (v Verdict) String() string {
	s := fmt.Sprintf("bottleneck: %s — %s", v.Resource, v.Evidence)
	if v.PredictedStepSeconds > 0 {
		s += fmt.Sprintf("; the cost model predicted %s a step, measured %s", dur(v.PredictedStepSeconds), dur(v.StepSeconds))
	}
	if v.Topology != "" {
		s += "; " + v.Topology
	}
	if v.Next != "" {
		s += " (" + v.Next + ")"
	}
	return s
}

// peer is one peer's figures per step.
type peer struct {
	rank                                int
	steps                               float64
	compute, comm, wait, input, barrier float64 // seconds per step
	sent                                float64 // bytes per step
	cpu, train                          float64 // seconds in all
	host                                string  // host and process: who shares CPUSeconds
	machine                             string  // host alone
	hostCPU, life, load                 float64 // the machine's busy CPU seconds over life, its load average
	cores                               float64 // the process's mean cores busy over its samples (-1: none)
}

func (p peer) step() float64 { return p.compute + p.comm + p.wait }

// VerdictOf is the verdict on run, or ok false when no peer took a step.
func VerdictOf(run Figures) (v Verdict, ok bool) {
	var ps []peer
	for r, s := range run.Peers {
		if s == nil || s.Steps <= 0 {
			continue
		}
		n := float64(s.Steps)
		ps = append(ps, peer{rank: r, steps: n, compute: s.ComputeSeconds / n, comm: s.CommSeconds / n, wait: s.WaitSeconds / n,
			input: s.InputSeconds / n, barrier: max(0, s.WaitSeconds-s.InputSeconds) / n, sent: float64(s.BytesSent) / n,
			cpu: s.CPUSeconds, train: s.ComputeSeconds + s.CommSeconds + s.WaitSeconds, host: s.Host, machine: s.Host, cores: meanCores(s.Resources),
			hostCPU: s.HostCPUSeconds, life: s.ProcessSeconds, load: s.Load1})
		if s.PID != 0 {
			ps[len(ps)-1].host += fmt.Sprintf("/%d", s.PID)
		}
	}
	if len(ps) == 0 {
		return Verdict{}, false
	}
	wall := run.WallSeconds
	if wall <= 0 {
		for _, p := range ps {
			wall = max(wall, p.train)
		}
	}
	var step, compute, comm, input, sent float64
	for _, p := range ps {
		step += p.step()
		compute += p.compute
		comm += p.comm
		input += p.input
		sent += p.sent
	}
	share := func(x float64) float64 { return x / math.Max(step, 1e-12) }
	v = Verdict{Rank: -1, StepSeconds: median(ps, peer.step), PredictedStepSeconds: run.PredictedStepSeconds}
	if v.PredictedStepSeconds == 0 && run.Cost != nil && run.GradientBytes > 0 {
		compute := median(ps, func(p peer) float64 { return p.compute })
		if len(run.Peers) == 1 {
			v.PredictedStepSeconds = compute
		} else {
			_, t := cost.AllReduce(len(run.Peers), run.GradientBytes)
			v.PredictedStepSeconds = run.Cost.Step(compute, t).Seconds
		}
	}
	busy := busyShare(ps, wall, run.Cores, run.PeersPerHost)
	others, load := othersShare(ps, run.Cores)
	loaded := others >= Rules.OthersShare
	// othersNote is said beside another verdict when other processes took
	// a real part of the cores: it colours every figure of the run.
	othersNote := func() {
		if loaded {
			v.Evidence += "; " + othersEvidence(others, load, run.Cores)
		}
	}

	switch strag, ratio, othersWait := straggler(ps); {
	case share(input) >= Rules.InputShare:
		v.Resource = Input
		v.Evidence = fmt.Sprintf("the peers wait for their next batch %s of the step (%s a step)", pct(share(input)), dur(input/float64(len(ps))))
		v.Next = "read faster: data on local disk or in memory, uncompressed, more prefetch, or fewer peers per file system"
	case run.Cores > 0 && run.PeersPerHost > run.Cores && (busy >= Rules.BusyShare || share(compute) >= Rules.ComputeShare):
		v.Resource = Shared
		v.Evidence = fmt.Sprintf("%d peers ran on a host with %d cores and computed %s of their step; the cores were %s busy with them", run.PeersPerHost, run.Cores, pct(share(compute)), pct(busy))
		v.Next = "run at most one peer per core (fewer peers per host, or more hosts)"
		othersNote()
	case strag >= 0:
		v.Resource, v.Rank = Straggler, strag
		v.Evidence = fmt.Sprintf("rank %d computes %.1f× as long a step as the median of the others (%s against %s), and they wait %s of their step for it",
			strag, ratio, dur(ps[slices.IndexFunc(ps, func(p peer) bool { return p.rank == strag })].compute), dur(medianOthers(ps, strag)), pct(othersWait))
		v.Next = fmt.Sprintf("find what slows rank %d (a busy, throttled or smaller host), or train with --strategy gossip, which does not wait for it", strag)
		othersNote()
	case loaded && share(compute) >= Rules.ComputeShare:
		// The peers computed for most of their step while other processes
		// took the cores: the batch, the model or the peers per host are
		// not what to change.
		v.Resource = Others
		v.Evidence = fmt.Sprintf("computing is %s of the step, and %s", pct(share(compute)), othersEvidence(others, load, run.Cores))
		v.Next = "measure on a quiet machine or on hosts of meshtrain's own; these figures understate what it does alone"
	case share(comm) >= Rules.CommShare:
		v.comm(run, ps, share(comm), busy, sent/float64(len(ps)), comm/float64(len(ps)))
		othersNote()
	default:
		v.Resource = Compute
		v.Evidence = fmt.Sprintf("computing is %s of the step (communication %s)", pct(share(compute)), pct(share(comm)))
		if busy > 0 {
			v.Evidence += fmt.Sprintf("; the cores were %s busy", pct(busy))
		}
		switch {
		case run.Cores > 0 && run.PeersPerHost >= run.Cores:
			v.Next = fmt.Sprintf("each of the host's %d cores has a peer: more hosts (not more peers on this one) split the work of a global batch; a larger batch per peer uses the cores better", run.Cores)
		case run.Cores > 0:
			v.Next = fmt.Sprintf("more peers, up to one per core (%d here), split the work of a global batch; a larger batch per peer uses the cores better", run.Cores)
		default:
			v.Next = "more peers split the work of a global batch; a larger batch per peer uses the cores better"
		}
	}
	if v.Resource == Input {
		othersNote()
	}
	return v, true
}

// OthersLoad is the share of a host's cores that processes other than
// the peers kept busy while they ran, and the largest load average the
// peers saw (see othersShare): what the verdict names as Others when it
// reaches Rules.OthersShare.
func (f Figures) OthersLoad() (share, load float64) {
	var ps []peer
	for _, s := range f.Peers {
		if s != nil {
			ps = append(ps, peer{cpu: s.CPUSeconds, host: fmt.Sprintf("%s/%d", s.Host, s.PID), machine: s.Host,
				hostCPU: s.HostCPUSeconds, life: s.ProcessSeconds, load: s.Load1})
		}
	}
	return othersShare(ps, f.Cores)
}

// othersShare is the share of a host's cores that processes other than
// the peers kept busy while they ran, on the host where it is largest,
// and the largest load average the peers saw; 0, 0 where the peers did
// not record the machine's figures. A host's busy time is its peers'
// largest (they span about the same life), less the CPU time of its
// peers' processes, each counted once.
func othersShare(ps []peer, cores int) (share, load float64) {
	if cores <= 0 {
		return 0, 0
	}
	type machine struct {
		busy, life, own float64
		procs           map[string]bool
	}
	hosts := map[string]*machine{}
	for _, p := range ps {
		if p.hostCPU <= 0 || p.life <= 0 || p.machine == "" {
			continue
		}
		m := hosts[p.machine]
		if m == nil {
			m = &machine{procs: map[string]bool{}}
			hosts[p.machine] = m
		}
		m.busy, m.life = max(m.busy, p.hostCPU), max(m.life, p.life)
		if !m.procs[p.host] {
			m.procs[p.host] = true
			m.own += p.cpu
		}
		load = max(load, p.load)
	}
	for _, m := range hosts {
		share = max(share, math.Min(1, max(0, m.busy-m.own)/(m.life*float64(cores))))
	}
	return share, load
}

// othersEvidence words the load of other processes.
func othersEvidence(share, load float64, cores int) string {
	s := fmt.Sprintf("other processes kept %.1f of the host's %d cores busy (%s)", share*float64(cores), cores, pct(share))
	if load > 0 {
		s += fmt.Sprintf(", load average %.1f", load)
	}
	return s
}

// comm fills a verdict on a run whose step is mostly communication: the
// cipher, latency or bandwidth. sent and comm are per peer per step.
func (v *Verdict) comm(run Figures, ps []peer, share, busy, sent, comm float64) {
	rate := sent / math.Max(comm, 1e-12)
	encrypted := run.Security != "" && run.Security != "plaintext" && run.Security != SameHostSecurity
	switch {
	case encrypted && busy >= Rules.BusyShare && (run.LinkBytesPerSec == 0 || rate < 0.8*run.LinkBytesPerSec):
		v.Resource = Cipher
		v.Evidence = fmt.Sprintf("communication is %s of the step over %s links and the cores were %s busy: each peer moved %s a second while communicating, below what the wire carries",
			pct(share), run.Security, pct(busy), rateStr(rate))
		v.Next = "more cores per peer, or --security plaintext on a network you trust"
	case int64(sent) < Rules.SmallStep:
		v.Resource = Latency
		v.Evidence = fmt.Sprintf("communication is %s of the step, but each step sends only %s per peer (%s of communication): the cost per message, not the bytes, sets the pace",
			pct(share), bytesStr(sent), dur(comm))
		v.Next = "fewer, larger messages: a larger batch per step, or --allreduce-algo tree or star at small sizes"
	default:
		v.Resource = Bandwidth
		v.Evidence = fmt.Sprintf("communication is %s of the step; each peer sent %s a step, %s while communicating", pct(share), bytesStr(sent), rateStr(rate))
		if run.LinkBytesPerSec > 0 {
			v.Evidence += fmt.Sprintf(", of the %s the link measured", rateStr(run.LinkBytesPerSec))
		}
		v.Next = "send fewer bytes: a larger batch (fewer steps), a smaller model, or gossip"
		if run.SparseBytesPerStep > 0 && sent > 0 {
			v.Next = fmt.Sprintf("the sparse exchange would send 1/%.0f of the bytes (try --exchange sparse)", sent/run.SparseBytesPerStep)
		}
	}
}

// straggler is the rank that computes StragglerRatio× longer than the
// median of the others while they wait for it, the ratio and the
// others' waiting share; -1 if there is none.
func straggler(ps []peer) (int, float64, float64) {
	if len(ps) < 2 {
		return -1, 0, 0
	}
	slow := ps[0]
	for _, p := range ps[1:] {
		if p.compute > slow.compute {
			slow = p
		}
	}
	others := medianOthers(ps, slow.rank)
	if others <= 0 {
		return -1, 0, 0
	}
	ratio := slow.compute / others
	// The others' wait for the slow rank: the barrier's measure of it, or,
	// without one, the exchange they sit in until it arrives.
	var wait, step float64
	for _, p := range ps {
		if p.rank != slow.rank {
			wait += p.barrier + max(0, p.comm-slow.comm)
			step += p.step()
		}
	}
	share := wait / math.Max(step, 1e-12)
	// The slow rank's extra computing must also be a real part of the
	// step: a rank 1.5× slower at a millisecond of a 10 ms step bounds
	// nothing.
	gap := (slow.compute - others) / math.Max(median(ps, peer.step), 1e-12)
	if ratio < Rules.StragglerRatio || share < Rules.StragglerWait || gap < Rules.StragglerWait {
		return -1, ratio, share
	}
	return slow.rank, ratio, share
}

// busyShare is the share of a host's cores the peers on it kept busy
// over wall seconds: their processes' CPU time (counted once for peers
// that share a process) over the cores of the busiest host; when the
// peers did not say where they ran, perHost peers share each host.
func busyShare(ps []peer, wall float64, cores, perHost int) float64 {
	if cores <= 0 || wall <= 0 {
		return 0
	}
	known := true
	for _, p := range ps {
		known = known && p.host != ""
	}
	if !known {
		var cpu float64
		for _, p := range ps {
			cpu += p.cpu
		}
		return math.Min(1, cpu/float64(len(ps))*float64(max(1, min(perHost, len(ps))))/(wall*float64(cores)))
	}
	// Each process's cores busy while it ran: from its resource samples
	// (taken over the run alone), else its CPU time over the run's wall
	// time (which also counts its start-up and evaluation).
	procs := map[string]float64{} // host/pid → cores busy
	for _, p := range ps {
		if p.cores >= 0 {
			procs[p.host] = p.cores
		} else {
			procs[p.host] = p.cpu / wall
		}
	}
	hosts := map[string]float64{}
	for hp, c := range procs {
		host, _, _ := strings.Cut(hp, "/")
		hosts[host] += c
	}
	var busiest float64
	for _, c := range hosts {
		busiest = max(busiest, c)
	}
	return math.Min(1, busiest/float64(cores))
}

// meanCores is the mean cores busy (user and system) over samples,
// weighted by their intervals; -1 without samples.
func meanCores(samples []mirrored.ResourceSample) float64 {
	var cpu, t float64
	for _, s := range samples {
		cpu += (s.CPUUser + s.CPUSystem) * s.Interval
		t += s.Interval
	}
	if t <= 0 {
		return -1
	}
	return cpu / t
}

func median(ps []peer, f func(peer) float64) float64 {
	xs := make([]float64, len(ps))
	for i, p := range ps {
		xs[i] = f(p)
	}
	slices.Sort(xs)
	if n := len(xs); n%2 == 1 {
		return xs[n/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

func medianOthers(ps []peer, rank int) float64 {
	var rest []peer
	for _, p := range ps {
		if p.rank != rank {
			rest = append(rest, p)
		}
	}
	if len(rest) == 0 {
		return 0
	}
	return median(rest, func(p peer) float64 { return p.compute })
}

func pct(x float64) string { return fmt.Sprintf("%.0f%%", 100*x) }

func dur(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.1f ms", s*1e3)
	}
	return fmt.Sprintf("%.0f µs", s*1e6)
}

func bytesStr(b float64) string {
	units := []string{"B", "KB", "MB", "GB"}
	i := 0
	for b >= 1000 && i < len(units)-1 {
		b /= 1000
		i++
	}
	return strings.TrimSuffix(fmt.Sprintf("%.3g %s", b, units[i]), " ")
}

func rateStr(r float64) string { return bytesStr(r) + "/s" }

// SameHostSecurity is a run's security when every link of the chief's
// went through shared memory (--intra-host auto on one host): no cipher.
const SameHostSecurity = "shared memory (one host, no cipher)"

// FromPeers is the Figures of the peers' figures, with the cores and peers per
// host they recorded (PeerStats.Host, Cores).
func FromPeers(peers []*mirrored.PeerStats, security string) Figures {
	run := Figures{Peers: peers, Security: security, PeersPerHost: 1}
	perHost := map[string]int{}
	for _, p := range peers {
		if p == nil {
			continue
		}
		run.Cores = max(run.Cores, p.Cores)
		if p.Host != "" {
			perHost[p.Host]++
			run.PeersPerHost = max(run.PeersPerHost, perHost[p.Host])
		}
	}
	return run
}
