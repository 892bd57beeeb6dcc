package cost

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/meshtrain/meshtrain/collective"
)

// PayloadShare is the share of a shaped Ethernet link's rate left for TCP
// payload: 1448 bytes of a 1514-byte frame (a 1500-byte MTU, 20 bytes of
// IP, 32 of TCP with timestamps, 14 of Ethernet header, which is what tc
// counts). What raw TCP reaches on the emulated hosts is in BENCHMARKS.md
// ("Figures behind the code": payload share).
const PayloadShare = 1448.0 / 1514.0

// Params are the measured parameters of a cluster (see the package doc).
type Params struct {
	Alpha float64 `json:"alpha_s"`
	Beta  float64 `json:"beta_bytes_per_s"`
	Gamma float64 `json:"gamma_cpu_s_per_byte"`
	Fixed float64 `json:"fixed_s"`
	// Message is the CPU seconds one message costs beyond its bytes, both
	// ends together (the frame, the TLS record, the system calls, waking
	// the receiver): what makes many small messages on few cores slow.
	Message float64 `json:"message_cpu_s"`
	// Pair is the CPU seconds to encode or to decode one sparse (index,
	// value) pair of a sparse gradient exchange.
	Pair float64 `json:"pair_cpu_s"`
	// RankCores is how many cores one rank's work can use at once (≥ 1).
	RankCores float64 `json:"rank_cores"`
	// SharedCores is how many cores all ranks share; 0: every rank has its
	// own host.
	SharedCores float64 `json:"shared_cores,omitempty"`
	// Burst is the bytes a link direction passes at once, at no cost in
	// time, when the operation starts on it idle: a token-bucket shaper's
	// bucket (tc tbf's burst), paid once per leg of the operation (see
	// Traffic.Legs). Real links have none (0); the emulated hosts set it
	// to the bucket they configure, so that their shaper's artefact stays
	// out of the fitted parameters.
	Burst float64 `json:"burst_bytes,omitempty"`
	// BurstRate is the rate of the bytes within Burst, bytes/s: the
	// unshaped path's (0: they take no time).
	BurstRate float64 `json:"burst_bytes_per_s,omitempty"`
}

// Validate reports the first parameter the model cannot use.
func (p Params) Validate() error {
	switch {
	case !(p.Alpha >= 0) || !(p.Fixed >= 0) || !(p.Gamma >= 0) || !(p.Message >= 0) || !(p.Pair >= 0):
		return fmt.Errorf("cost: α %g s, fixed %g s, γ %g s/B, %g s a message, %g s a pair: want ≥ 0 (recalibrate)", p.Alpha, p.Fixed, p.Gamma, p.Message, p.Pair)
	case !(p.Beta > 0) || math.IsInf(p.Beta, 0):
		return fmt.Errorf("cost: β %g B/s: want a positive link rate (give --rate or recalibrate)", p.Beta)
	case !(p.RankCores >= 1):
		return fmt.Errorf("cost: %g cores per rank: want ≥ 1", p.RankCores)
	case !(p.Burst >= 0) || !(p.BurstRate >= 0):
		return fmt.Errorf("cost: a burst of %g bytes at %g B/s: want ≥ 0 (0: no token bucket)", p.Burst, p.BurstRate)
	case !(p.SharedCores >= 0):
		return fmt.Errorf("cost: %g shared cores: want ≥ 0 (0: a host per rank)", p.SharedCores)
	}
	return nil
}

// Bound names the term that sets an estimate's time.
type Bound int

// The bounds.
const (
	Bandwidth Bound = iota // the busiest link direction's bytes ÷ β
	Latency                // Fixed + rounds × α + the messages' CPU
	CPU                    // γ × bytes, over the cores that do the work
	Compute                // a step's computation
)

func (b Bound) String() string { return [...]string{"bandwidth", "latency", "cpu", "compute"}[b] }

// Traffic is what one operation moves: the input of every estimate.
type Traffic struct {
	Rounds float64 // one-way message latencies on the critical path
	Link   float64 // bytes the busiest link direction carries, in sequence
	// Legs is how many times Link finds a shaper's bucket full: a rank's
	// link directions each have one, used by every partner, so an
	// operation whose links all start at once has 1; recursive doubling
	// with hand-ins and a one-frame star have 2 (a rank's way in, then its
	// way out, idle until then). 0 counts as 1.
	Legs  float64
	Rank  float64 // bytes the busiest rank sends
	Total float64 // bytes all ranks send together
	Ranks int     // ranks taking part
	// RankMessages is the busiest rank's share of the messages (what it
	// sends plus what it receives, halved: a message costs Message at
	// both ends together), Messages what all ranks send.
	RankMessages, Messages float64
	// RankPairs and Pairs are the sparse pairs the busiest rank and all
	// ranks encode and decode.
	RankPairs, Pairs float64
	// Serial says the CPU work does not overlap the transfer: each message
	// is built whole before it is sent and merged whole after it arrives.
	Serial bool
}

// Estimate is a predicted time and how it splits.
type Estimate struct {
	Seconds  float64 `json:"seconds"`
	Latency  float64 `json:"latency_s"`
	Transfer float64 `json:"transfer_s"`
	CPU      float64 `json:"cpu_s"`
	Compute  float64 `json:"compute_s,omitempty"` // a step's computation
	Bound    Bound   `json:"-"`
	Traffic  Traffic `json:"-"`
}

// Estimate prices t with p.
func (p Params) Estimate(t Traffic) Estimate {
	e := Estimate{Traffic: t, Transfer: p.transfer(t)}
	e.Latency = p.Fixed + t.Rounds*p.Alpha + p.Message*p.spread(t.RankMessages, t.Messages)
	e.CPU = p.Gamma*p.spread(t.Rank, t.Total) + p.Pair*p.spread(t.RankPairs, t.Pairs)
	net := e.Latency + e.Transfer
	e.Seconds = max(net, p.Fixed+e.CPU)
	if t.Serial {
		e.Seconds = net + e.CPU
	}
	switch {
	case p.Fixed+e.CPU > net, t.Serial && e.CPU > max(e.Latency, e.Transfer):
		e.Bound = CPU
	case e.Latency >= e.Transfer:
		e.Bound = Latency
	default:
		e.Bound = Bandwidth
	}
	return e
}

// transfer is the time t's busiest link direction takes: the bytes beyond
// each leg's bucket at β, those within at BurstRate.
func (p Params) transfer(t Traffic) float64 {
	bucket := min(t.Link, max(t.Legs, 1)*p.Burst)
	s := (t.Link - bucket) / p.Beta
	if p.BurstRate > 0 {
		s += bucket / p.BurstRate
	}
	return s
}

// spread is the time of work of which the busiest rank does rank and all
// ranks together all: the busiest rank's on its cores, or, when the ranks
// share cores, everyone's on those, whichever is longer.
func (p Params) spread(rank, all float64) float64 {
	t := rank / max(p.RankCores, 1)
	if p.SharedCores > 0 {
		t = max(t, all/p.SharedCores)
	}
	return t
}

// Ring is the pipelined ring all-reduce of m bytes among n ranks: 2(n−1)
// steps, each passing m/n to the next rank while receiving from the last.
func Ring(n int, m float64) Traffic {
	if n < 2 {
		return Traffic{Ranks: max(n, 1)}
	}
	per := 2 * float64(n-1) / float64(n) * m
	steps := 2 * float64(n-1)
	return Traffic{Rounds: steps, Link: per, Rank: per, Total: float64(n) * per, Ranks: n, RankMessages: steps, Messages: float64(n) * steps}
}

// RecursiveDoubling is collective's Tree: with p the largest power of two
// ≤ n, log2 p rounds exchanging all m bytes, plus a hand-in and a
// hand-back round when n is not a power of two. With an odd number of
// hand-ins, one receiving rank's first partner has none and sends at once:
// its m and the hand-in's m converge on that rank's link, which then
// carries 2m before the rank can start sending (n=3: 4m in all, not 3m,
// as the emulated hosts showed: BENCHMARKS.md, "Figures behind the code":
// recursive doubling's hand-in).
func RecursiveDoubling(n int, m float64) Traffic {
	if n < 2 {
		return Traffic{Ranks: max(n, 1)}
	}
	lg := bits.Len(uint(n)) - 1
	p, rem := 1<<lg, n-1<<lg
	rounds := float64(lg)
	rank, msgs := rounds*m, rounds
	link, legs := rounds*m, 1.0
	if rem > 0 {
		rounds += 2
		rank += m // an odd rank hands the result back
		msgs++    // its partner takes one in and hands one back
		link, legs = rounds*m, 2
		if rem%2 == 1 {
			link += m
		}
	}
	all := float64(p*lg + 2*rem)
	return Traffic{Rounds: rounds, Link: link, Legs: legs, Rank: rank, Total: all * m, Ranks: n, RankMessages: msgs, Messages: all}
}

// Star is collective's Star: every rank sends m bytes to the root, which
// reduces and sends the result back, in frames of StarFrameBytes. The
// root's link carries (n−1)m each way; it folds and returns frame i while
// the next arrives, so the two directions overlap but for the last frame,
// which goes out only after it came in (as the emulated hosts showed:
// BENCHMARKS.md, "Figures behind the code": the star's overlap). A message
// of one frame goes in, then out: 2(n−1)m, a bucket each way.
//
// Fan-in: the n−1 flows into the root share its link unevenly (a shaper's
// queue serves them in the order their congestion windows send, and at
// 100 Mbit it overflows and drops), and the root sends frame i only once
// every rank's frame i is in, so its way out lags the slowest flow:
// FanInQueue·(m − a frame) more for each flow beyond the first.
func Star(n int, m float64) Traffic {
	if n < 2 {
		return Traffic{Ranks: max(n, 1)}
	}
	in, last := float64(n-1)*m, min(m, StarFrameBytes)
	link := in + float64(n-1)*last + FanInQueue*float64(n-2)*(m-last)
	legs := 1.0
	if m <= StarFrameBytes {
		legs = 2
	}
	return Traffic{Rounds: 2, Link: link, Legs: legs, Rank: in, Total: 2 * in, Ranks: n, RankMessages: float64(n - 1), Messages: 2 * float64(n-1)}
}

// StarFrameBytes is the frame of collective's star and recursive doubling
// (at most 64 KiB).
const StarFrameBytes = 64 << 10

// FanInQueue is what each flow beyond the first adds to a fan-in, in
// messages at β (Star), fitted to 1 MiB stars on the emulated hosts,
// which took longer than (n−1)(m + a frame)/β even where the root's
// shaper dropped nothing: not loss but the uneven shares (BENCHMARKS.md,
// "Figures behind the code": the star's fan-in).
const FanInQueue = 0.5

// AllReduce is the algorithm collective's Auto picks for m bytes on n
// ranks (with the default thresholds) and its traffic.
func AllReduce(n int, m float64) (collective.Algo, Traffic) {
	switch {
	case m > collective.DefaultSmallBytes:
		return collective.Ring, Ring(n, m)
	case n >= 3 && n <= collective.StarMaxRanks && m <= collective.DefaultStarBytes:
		return collective.Star, Star(n, m)
	}
	return collective.Tree, RecursiveDoubling(n, m)
}

// AllGatherDirect is collective's one-round all-gather: each rank sends
// its b bytes to each of the n−1 others, all at once.
func AllGatherDirect(n int, b float64) Traffic {
	if n < 2 {
		return Traffic{Ranks: max(n, 1)}
	}
	out := float64(n-1) * b
	return Traffic{Rounds: 1, Link: out, Rank: out, Total: float64(n) * out, Ranks: n, RankMessages: float64(n - 1), Messages: float64(n * (n - 1))}
}

// SparseBytesPerPair is what one touched feature costs on the wire in
// sparse.AppendVector's encoding: a float32 value and a varint index gap
// (1 to 3 bytes for the head-heavy gradients of Criteo-like data; the
// constant takes the mean gap `meshtrain bench sparse` measured:
// BENCHMARKS.md, "Figures behind the code": bytes per sparse pair).
const SparseBytesPerPair = 7.4

// SparseAllGather is the sparse gradient exchange of a step: a direct
// all-gather of k touched features per rank at bytesPerPair each. Each
// rank encodes its k pairs and decodes the (n−1)k of the others; a rank's
// part is encoded whole before it leaves and decoded after it arrives, so
// that work adds to the transfer (Serial).
func SparseAllGather(n int, k, bytesPerPair float64) Traffic {
	t := AllGatherDirect(n, k*bytesPerPair+8) // + the pair count and frame header
	if n >= 2 {
		t.RankPairs, t.Pairs, t.Serial = float64(n)*k, float64(n*n)*k, true
	}
	return t
}

// GossipRound is one pairwise average of b bytes (the dense vector, or the
// changed coordinates): a request, then the reply. Every rank starts one
// and, on average, answers one, so each sends 2b a round, its request and
// the reply it owes sharing its link from the start (one leg). Messages are
// encoded whole before they leave and averaged whole when they arrive, so
// its CPU work adds to the transfer (Serial).
func GossipRound(n int, b float64) Traffic {
	return Traffic{Rounds: 2, Link: 2 * b, Legs: 1, Rank: 2 * b, Total: float64(max(n, 1)) * 2 * b, Ranks: max(n, 2), Serial: true,
		RankMessages: 2, Messages: 2 * float64(max(n, 2))}
}

// Step is one synchronous training step: compute seconds measured on one
// rank with a core to itself, then the exchange. When more ranks compute
// at once than there are shared cores, they take turns.
func (p Params) Step(compute float64, exchange Traffic) Estimate {
	if p.SharedCores > 0 {
		compute *= max(1, float64(exchange.Ranks)/p.SharedCores)
	}
	e := p.Estimate(exchange)
	if compute > e.Seconds {
		e.Bound = Compute
	}
	e.Compute = compute
	e.Seconds += compute
	return e
}

// Sample is one measured all-reduce.
type Sample struct {
	Algo       collective.Algo `json:"algo"`
	N          int             `json:"n"`
	Bytes      float64         `json:"bytes"`
	Seconds    float64         `json:"seconds"`
	CPUSeconds float64         `json:"cpu_seconds"` // all ranks together
}

// Traffic is the sample's traffic under the model.
func (s Sample) Traffic() Traffic {
	switch s.Algo {
	case collective.Ring:
		return Ring(s.N, s.Bytes)
	case collective.Star:
		return Star(s.N, s.Bytes)
	}
	return RecursiveDoubling(s.N, s.Bytes)
}

// FitLatency fits α and Message, by least squares, to latency-bound
// samples whose rounds and messages grow differently (ring, recursive
// doubling and star on 2 to 4 ranks: 1 to 6 rounds, 1 to 12 messages on
// the busiest of two shared cores): what each took beyond p's Fixed and
// transfer is rounds·α + Message·(its messages on the busiest core). A
// negative term is clamped to 0 and the other refitted alone. Other
// parameters are p's.
func (p Params) FitLatency(samples ...Sample) (alpha, message float64) {
	var srr, srm, smm, sry, smy float64
	for _, s := range samples {
		q := p
		q.Alpha, q.Message = 0, 1 // Latency − Fixed is then the messages' share
		e := q.Estimate(s.Traffic())
		y, r, m := s.Seconds-p.Fixed-e.Transfer, s.Traffic().Rounds, e.Latency-p.Fixed
		srr, srm, smm, sry, smy = srr+r*r, srm+r*m, smm+m*m, sry+r*y, smy+m*y
	}
	if det := srr*smm - srm*srm; det > 0 {
		alpha, message = (sry*smm-smy*srm)/det, (smy*srr-sry*srm)/det
	}
	switch {
	case alpha <= 0 && smm > 0:
		alpha, message = 0, max(0, smy/smm)
	case message < 0 && srr > 0:
		alpha, message = max(0, sry/srr), 0
	}
	return alpha, message
}

// Measured is what calibration measures on one machine's loopback.
type Measured struct {
	// RTT is the median round trip of a small message on one stream, and
	// LinkRate one stream's payload rate with both directions busy.
	RTT, LinkRate float64
	// Small and Many are latency-bound all-reduces on few and on more
	// ranks than cores (recursive doubling on 2 and 4): what they took
	// beyond their rounds of α splits into Fixed and Message. Large is a
	// bandwidth-bound one (its CPU per byte moved sets γ).
	Small, Many, Large Sample
	// PairSeconds is the CPU time to encode or decode one sparse pair.
	PairSeconds float64 `json:",omitempty"`
	// Cores is the machine's core count: the calibration's ranks share them.
	Cores float64
}

// Fit derives the parameters from m: α is half the round trip, β the
// stream's rate, γ the large all-reduce's CPU seconds per byte moved, Pair
// the measured one. Small and Many, on ranks that share m.Cores cores,
// took their bytes at β, their rounds of α, Fixed, and Message for each
// message of theirs the busiest core handles (Estimate's spread): two
// equations for Fixed and Message (Message 0 without Many). RankCores is 1
// and SharedCores 0 (a host per rank): the caller sets them for the
// cluster it predicts.
func Fit(m Measured) (Params, error) {
	p := Params{Alpha: m.RTT / 2, Beta: m.LinkRate, RankCores: 1, Pair: m.PairSeconds}
	if t := m.Large.Traffic(); t.Total > 0 {
		p.Gamma = m.Large.CPUSeconds / t.Total
	}
	if p.Beta > 0 {
		shared := Params{RankCores: 1, SharedCores: m.Cores}
		// beyond is what s took beyond α and β, and its messages' share.
		beyond := func(s Sample) (float64, float64) {
			t := s.Traffic()
			return s.Seconds - t.Rounds*p.Alpha - t.Link/p.Beta, shared.spread(t.RankMessages, t.Messages)
		}
		small, msgs := beyond(m.Small)
		if many, more := beyond(m.Many); m.Many.N > 0 && more > msgs {
			p.Message = max(0, (many-small)/(more-msgs))
		}
		p.Fixed = max(0, small-msgs*p.Message)
	}
	if err := p.Validate(); err != nil {
		return Params{}, fmt.Errorf("cost: fitting %+v: %w", m, err)
	}
	return p, nil
}
