package sweep

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/report"
)

// Figure is a measured number that may be missing (NaN: not measured, or
// not reached), null in JSON.
type Figure float64

// MarshalJSON writes NaN and infinities as null.
func (f Figure) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

// UnmarshalJSON reads null as NaN.
func (f *Figure) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = Figure(math.NaN())
		return nil
	}
	return json.Unmarshal(b, (*float64)(f))
}

// Row is a point's line of the report's table (see the package doc for
// what each figure is).
type Row struct {
	// CPUCores is the cores each peer's process kept busy while it
	// trained (user + system), averaged over the run and then over the
	// processes; CPUSeconds the CPU time per process over the same
	// span. Processes counts them (replicas in one process share one).
	CPUCores   Figure `json:"cpu_cores"`
	CPUSeconds Figure `json:"cpu_seconds_per_process"`
	Processes  int    `json:"processes"`
	// PeakRSSBytes is the largest process's peak resident memory.
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	// ReceivedBytes and SentBytes are per peer (the mean of the peers).
	ReceivedBytes int64 `json:"bytes_received_per_peer"`
	SentBytes     int64 `json:"bytes_sent_per_peer"`
	// TestLoss and TestAccuracy are the final model's (under gossip the
	// survivors' average model).
	TestLoss     Figure `json:"test_loss"`
	TestAccuracy Figure `json:"test_accuracy"`
	// TrainSeconds is the training time (the slowest peer's, evaluation
	// excluded); ExamplesPerSec all peers' examples over it.
	TrainSeconds   Figure `json:"train_seconds"`
	ExamplesPerSec Figure `json:"global_examples_per_sec"`
	// TimeToTarget is the training time at the first evaluation that
	// reached the target accuracy (null: not reached), EpochsToTarget
	// the epochs of work by then.
	TimeToTarget   Figure `json:"time_to_target_seconds"`
	EpochsToTarget Figure `json:"epochs_to_target"`
	// Verdict is the bottleneck (report.Of), Rank its rank (a
	// straggler's; -1 otherwise), VerdictText the whole line.
	Verdict     string `json:"verdict,omitempty"`
	Rank        int    `json:"verdict_rank"`
	VerdictText string `json:"verdict_text,omitempty"`
	// Errors are the run's and its peers' errors ("" if none).
	Errors string `json:"errors,omitempty"`
}

// bottleneck is the verdict's resource, with the straggler's rank.
func (r Row) bottleneck() string {
	switch {
	case r.Verdict == "":
		return "—"
	case r.Verdict == report.Straggler && r.Rank >= 0:
		return fmt.Sprintf("%s (rank %d)", r.Verdict, r.Rank)
	}
	return r.Verdict
}

// rowOf is the table's row of r.
func rowOf(r *Result, res *Results) Row {
	m := measure(r.Peers, res.Target)
	row := Row{CPUCores: nan(), CPUSeconds: nan(), TestLoss: Figure(m.FinalLoss), TestAccuracy: Figure(m.FinalAccuracy),
		TrainSeconds: nan(), ExamplesPerSec: nan(), TimeToTarget: Figure(m.TimeToTarget), EpochsToTarget: Figure(m.EpochsToTarget),
		Rank: -1, Errors: m.Errors}
	if r.Error != "" {
		if row.Errors != "" {
			row.Errors = r.Error + "; " + row.Errors
		} else {
			row.Errors = r.Error
		}
	}
	var stats []*mirrored.PeerStats
	type proc struct{ cores, cpu float64 }
	procs := map[string]proc{}
	var sent, recv, examples int64
	var n int
	train := 0.0
	for _, p := range r.Peers {
		if p.Summary == nil {
			stats = append(stats, nil)
			continue
		}
		s := p.Summary
		stats = append(stats, &s.Peer)
		n++
		sent += s.Peer.BytesSent
		recv += s.Peer.BytesReceived
		examples += int64(s.Peer.Examples)
		if s.Run != nil {
			train = max(train, s.Run.TrainSeconds)
		}
		key := fmt.Sprintf("%s/%d", s.Peer.Host, s.Peer.PID)
		if s.Peer.PID == 0 {
			key = fmt.Sprintf("rank %d", p.Rank)
		}
		if _, seen := procs[key]; seen {
			continue // replicas in one process: its CPU once
		}
		cores, cpu, peak := usage(s, res.Runner == KindInProcess)
		procs[key] = proc{cores, cpu}
		row.PeakRSSBytes = max(row.PeakRSSBytes, peak)
	}
	if n > 0 {
		row.SentBytes, row.ReceivedBytes = sent/int64(n), recv/int64(n)
	}
	if len(procs) > 0 {
		var cores, cpu float64
		for _, p := range procs {
			cores += p.cores
			cpu += p.cpu
		}
		row.CPUCores, row.CPUSeconds, row.Processes = Figure(cores/float64(len(procs))), Figure(cpu/float64(len(procs))), len(procs)
	}
	if train > 0 {
		row.TrainSeconds, row.ExamplesPerSec = Figure(train), Figure(float64(examples)/train)
	}
	if v, ok := report.VerdictOf(report.FromPeers(stats, res.Security)); ok {
		row.Verdict, row.Rank, row.VerdictText = v.Resource, v.Rank, v.String()
	}
	return row
}

// usage is a peer's process's CPU while it trained, in cores and in
// seconds, from its resource samples (the process's CPU time if it has
// none), and its peak resident memory: getrusage's for a process of its
// own, the largest sample's for replicas sharing this one (whose
// getrusage peak covers every run before).
func usage(s *mirrored.Summary, shared bool) (cores, cpu float64, peak int64) {
	var span float64
	for _, smp := range s.Peer.Resources {
		cpu += (smp.CPUUser + smp.CPUSystem) * smp.Interval
		span += smp.Interval
		peak = max(peak, smp.RSSBytes)
	}
	switch {
	case span >= minSpan:
		cores = cpu / span
	case span > 0: // too short for getrusage's accounting to give a rate
		cores = math.NaN()
	case s.Run != nil && s.Run.WallSeconds >= minSpan:
		cpu = s.Peer.CPUSeconds
		cores = cpu / s.Run.WallSeconds
	default:
		cpu, cores = math.NaN(), math.NaN()
	}
	if !shared && s.Peer.PeakRSSBytes > 0 {
		peak = s.Peer.PeakRSSBytes
	}
	return cores, cpu, peak
}

// minSpan is the shortest run whose CPU is given as a rate: getrusage
// misses up to a scheduler tick of each running thread's time, which over
// a few milliseconds makes several cores show on two (at 0.2 s, two
// threads' 4 ms ticks are within 4%).
const minSpan = 0.2 // seconds

func nan() Figure { return Figure(math.NaN()) }

// Curve is one evaluation of one replica.
type Curve struct {
	Seconds, Epochs, Accuracy float64
}

// Measures are the figures of one run that the report compares across
// strategies.
type Measures struct {
	// Curves has one accuracy curve per replica (one for the ring, whose
	// replicas are identical).
	Curves map[int][]Curve
	// TimeToTarget and EpochsToTarget: the ring's, or under gossip the
	// first replica's to reach the target (NaN: never). AllTimeToTarget is
	// when every surviving replica had reached it.
	TimeToTarget, EpochsToTarget, AllTimeToTarget float64
	// FinalAccuracy and FinalLoss: the ring's model's, or under gossip
	// the survivors' average model's (test accuracy and loss).
	FinalAccuracy, FinalLoss float64
	// MeanReplicaAccuracy is the mean of the replicas' own final accuracy.
	MeanReplicaAccuracy float64
	StepsPerSec         []float64 // per rank (0 for a failed one)
	BytesSent           []int64   // per rank
	Consensus           float64   // gossip: final relative consensus distance
	Errors              string
}

// Measure is the figures of a run's peers against the target accuracy.
func Measure(peers []PeerRun, target float64) Measures { return measure(peers, target) }

func measure(peers []PeerRun, target float64) Measures {
	m := Measures{Curves: map[int][]Curve{}, TimeToTarget: math.NaN(), EpochsToTarget: math.NaN(), AllTimeToTarget: math.NaN(),
		FinalAccuracy: math.NaN(), FinalLoss: math.NaN(), MeanReplicaAccuracy: math.NaN(), Consensus: math.NaN()}
	m.StepsPerSec = make([]float64, len(peers))
	m.BytesSent = make([]int64, len(peers))
	var accSum float64
	var accN int
	allTime := 0.0
	for r, p := range peers {
		if p.Err != "" { // it names the rank
			if m.Errors != "" {
				m.Errors += "; "
			}
			m.Errors += p.Err
		}
		if p.Summary == nil || p.Summary.Run == nil {
			continue
		}
		s := p.Summary
		m.BytesSent[r] = s.Peer.BytesSent
		if s.Run.TrainSeconds > 0 {
			m.StepsPerSec[r] = float64(s.Peer.Steps) / s.Run.TrainSeconds
		}
		var pts []Curve
		if p.Gossip != nil {
			for _, e := range p.Gossip.Evals {
				// At the epoch boundary it crossed, like the ring's
				// per-epoch evaluations (the final one may fall between).
				x := float64(e.Epoch)
				if e.ClusterEpochs-x > 0.05 {
					x = e.ClusterEpochs
				}
				pts = append(pts, Curve{e.TrainSeconds, x, e.TestAccuracy})
			}
			m.StepsPerSec[r] = p.Gossip.StepsPerSec
			m.FinalAccuracy, m.FinalLoss, m.Consensus = p.Gossip.AverageAccuracy, p.Gossip.AverageLoss, p.Gossip.RelConsensus
		} else {
			for _, e := range s.Run.EpochResults {
				pts = append(pts, Curve{e.TrainSeconds, float64(e.Epoch), e.TestAccuracy})
			}
			m.FinalAccuracy = s.Run.FinalAccuracy
			if eps := s.Run.EpochResults; len(eps) > 0 {
				m.FinalLoss = eps[len(eps)-1].TestLoss
			}
		}
		accSum += s.Run.FinalAccuracy
		accN++
		if p.Gossip == nil && len(m.Curves) > 0 {
			continue // ring replicas are identical: one curve
		}
		m.Curves[r] = pts
		reached := false
		for _, pt := range pts {
			if pt.Accuracy >= target {
				if math.IsNaN(m.TimeToTarget) || pt.Seconds < m.TimeToTarget {
					m.TimeToTarget, m.EpochsToTarget = pt.Seconds, pt.Epochs
				}
				allTime = max(allTime, pt.Seconds)
				reached = true
				break
			}
		}
		if !reached {
			allTime = math.Inf(1)
		}
	}
	if accN > 0 {
		m.MeanReplicaAccuracy = accSum / float64(accN)
	}
	if allTime > 0 && !math.IsInf(allTime, 1) {
		m.AllTimeToTarget = allTime
	}
	return m
}

// ranks is the sorted keys of curves.
func ranks(curves map[int][]Curve) []int {
	out := make([]int, 0, len(curves))
	for k := range curves {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
