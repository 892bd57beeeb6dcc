package cost

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/collective"
)

// base: α 100 µs, β 100 MB/s, γ 2 ns/B, 50 µs fixed, one core per rank,
// a host per rank.
var base = Params{Alpha: 100e-6, Beta: 1e8, Gamma: 2e-9, Fixed: 50e-6, RankCores: 1}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12+1e-9*math.Abs(b) }

// tr is a Traffic with its message counts (no sparse pairs).
func tr(rounds, link, rank, total float64, ranks int, serial bool, rankMsgs, msgs float64) Traffic {
	return Traffic{Rounds: rounds, Link: link, Rank: rank, Total: total, Ranks: ranks, Serial: serial, RankMessages: rankMsgs, Messages: msgs}
}

// legs is t crossing n link directions one after another.
func legs(t Traffic, n float64) Traffic {
	t.Legs = n
	return t
}

// TestEstimate checks each operation against times worked out by hand.
func TestEstimate(t *testing.T) {
	shared := base
	shared.SharedCores, shared.Gamma = 2, 2e-8
	msg := base
	msg.SharedCores, msg.Message = 2, 10e-6
	pairs := base
	pairs.SharedCores, pairs.Pair = 2, 20e-9
	sparse := SparseAllGather(4, 10000, 6)
	bucket := base
	bucket.Burst = 1e6
	halfMB := base
	halfMB.Burst, halfMB.BurstRate = 0.5e6, 1e9
	for _, tc := range []struct {
		name    string
		p       Params
		tr      Traffic
		want    Traffic
		seconds float64
		bound   Bound
	}{
		// 2·3/4·4 MB = 6 MB per rank in 6 rounds: 50+600 µs + 60 ms.
		{"ring n4 4MB", base, Ring(4, 4e6), tr(6, 6e6, 6e6, 24e6, 4, false, 6, 24), 0.06065, Bandwidth},
		// γ·24 MB over 2 shared cores = 240 ms, above the ring's 60.65 ms.
		{"ring n4 4MB shared cores", shared, Ring(4, 4e6), tr(6, 6e6, 6e6, 24e6, 4, false, 6, 24), 50e-6 + 0.24, CPU},
		// 2 rounds of 1000 B: 250 µs + 20 µs.
		{"tree n4 1KB", base, RecursiveDoubling(4, 1000), legs(tr(2, 2000, 2000, 8000, 4, false, 2, 8), 1), 270e-6, Latency},
		// 8 messages on 2 shared cores at 10 µs outweigh the busiest rank's
		// 2: 50 + 200 + 40 µs of latency, 81.92 µs of transfer (CPU
		// 2e-9·32768/2 = 32.8 µs is hidden).
		{"tree n4 4KiB messages", msg, RecursiveDoubling(4, 4096), legs(tr(2, 8192, 8192, 32768, 4, false, 2, 8), 1), 371.92e-6, Latency},
		// n=3: one exchange round plus hand-in and hand-back, the hand-in
		// and rank 2's part converging on rank 1: 350 µs + 40 µs.
		{"tree n3 1KB", base, RecursiveDoubling(3, 1000), legs(tr(3, 4000, 2000, 4000, 3, false, 2, 4), 2), 390e-6, Latency},
		// n=6: two hand-ins, whose receivers exchange with each other
		// first: no fan-in, 4 rounds: 450 µs + 40 µs.
		{"tree n6 1KB", base, RecursiveDoubling(6, 1000), legs(tr(4, 4000, 3000, 12000, 6, false, 3, 12), 2), 490e-6, Latency},
		// The root's link: 3 MB in while 3 MB go out, the last 64 KiB
		// frame of each rank out after it came in (196,608 B), and half of
		// the other 934,464 B for each of the second and third flows into
		// it: 250 µs + 41.31072 ms.
		{"star n4 1MB", base, Star(4, 1e6), legs(tr(2, 4131072, 3e6, 6e6, 4, false, 3, 6), 1), 0.04156072, Bandwidth},
		// A 1 MB bucket passes the first 1 MB: 31.31072 ms.
		{"star n4 1MB bucket", bucket, Star(4, 1e6), legs(tr(2, 4131072, 3e6, 6e6, 4, false, 3, 6), 1), 0.03156072, Bandwidth},
		// One frame each: in, then out (2·2·65,536 B): 250 µs + 2.62144 ms.
		{"star n3 one frame", base, Star(3, 65536), legs(tr(2, 262144, 131072, 262144, 3, false, 2, 4), 2), 0.00287144, Bandwidth},
		// One round, 3 × 1000 B out: 150 µs + 30 µs.
		{"gather n4 1KB", base, AllGatherDirect(4, 1000), tr(1, 3000, 3000, 12000, 4, false, 3, 12), 180e-6, Latency},
		// 1000 pairs × 7 B + 8: 150 µs + 70.08 µs, then γ·7008 B = 14.016
		// µs of coding that does not overlap.
		{"sparse n2 k1000", base, SparseAllGather(2, 1000, 7), Traffic{Rounds: 1, Link: 7008, Rank: 7008, Total: 14016, Ranks: 2,
			RankMessages: 1, Messages: 2, RankPairs: 2000, Pairs: 4000, Serial: true}, 234.096e-6, Latency},
		// 160,000 pairs coded on 2 cores at 20 ns: 1.6 ms, plus γ·720,096/2
		// B = 720.096 µs, after 150 µs + 3·60,008 B at 1e8 = 1,800.24 µs.
		{"sparse n4 k10000 pairs", pairs, sparse, Traffic{Rounds: 1, Link: 180024, Rank: 180024, Total: 720096, Ranks: 4,
			RankMessages: 3, Messages: 12, RankPairs: 40000, Pairs: 160000, Serial: true}, 150e-6 + 1800.24e-6 + 2320.096e-6, CPU},
		// Request and reply of 1 MB: 250 µs + 20 ms, then γ·2 MB = 4 ms
		// of CPU that does not overlap.
		{"gossip 1MB", base, GossipRound(4, 1e6), legs(tr(2, 2e6, 2e6, 8e6, 4, true, 2, 8), 1), 0.02425, Bandwidth},
		// The link's first 0.5 MB pass in its bucket at 1 GB/s: 15 + 0.5
		// ms of transfer instead of 20.
		{"gossip 1MB bucket", halfMB, GossipRound(4, 1e6), legs(tr(2, 2e6, 2e6, 8e6, 4, true, 2, 8), 1), 0.01975, Bandwidth},
		// With γ 20 ns/B the 40 ms of CPU exceed the 20 ms transfer.
		{"gossip 1MB cpu", shared, GossipRound(4, 1e6), legs(tr(2, 2e6, 2e6, 8e6, 4, true, 2, 8), 1), 250e-6 + 0.02 + 0.08, CPU},
		{"one rank", base, Ring(1, 1e6), Traffic{Ranks: 1}, 50e-6, Latency},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tr != tc.want {
				t.Errorf("traffic %+v, want %+v", tc.tr, tc.want)
			}
			e := tc.p.Estimate(tc.tr)
			if !near(e.Seconds, tc.seconds) || e.Bound != tc.bound {
				t.Errorf("%.9g s, %v bound; want %.9g s, %v", e.Seconds, e.Bound, tc.seconds, tc.bound)
			}
		})
	}
}

// TestStep: compute plus exchange; ranks beyond the shared cores take
// turns computing.
func TestStep(t *testing.T) {
	shared := base
	shared.SharedCores = 2
	for _, tc := range []struct {
		name    string
		p       Params
		compute float64
		seconds float64
		bound   Bound
	}{
		// 4 ranks on 2 cores: 10 ms of compute takes 20; CPU of the ring
		// γ·24 MB/2 = 24 ms is below its 60.65 ms of network.
		{"shared", shared, 0.01, 0.02 + 0.06065, Bandwidth},
		{"own hosts", base, 0.01, 0.01 + 0.06065, Bandwidth},
		{"compute-bound", base, 1, 1.06065, Compute},
	} {
		e := tc.p.Step(tc.compute, Ring(4, 4e6))
		if !near(e.Seconds, tc.seconds) || e.Bound != tc.bound {
			t.Errorf("%s: %.9g s, %v bound; want %.9g s, %v", tc.name, e.Seconds, e.Bound, tc.seconds, tc.bound)
		}
	}
}

// TestAllReducePicks follows collective's Auto.
func TestAllReducePicks(t *testing.T) {
	for _, tc := range []struct {
		n    int
		m    float64
		want collective.Algo
	}{{4, 4096, collective.Star}, {2, 4096, collective.Tree}, {16, 4096, collective.Tree}, {4, 1 << 20, collective.Ring}, {4, 128 << 10, collective.Tree}} {
		if got, _ := AllReduce(tc.n, tc.m); got != tc.want {
			t.Errorf("n %d, %g B: %v, want %v", tc.n, tc.m, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Params{{Beta: 0, RankCores: 1}, {Beta: 1, RankCores: 0}, {Beta: 1, RankCores: 1, Alpha: -1}, {Beta: 1, RankCores: 1, Gamma: math.NaN()}, {Beta: 1, RankCores: 1, SharedCores: -2}, {Beta: 1, RankCores: 1, Burst: -1}, {Beta: 1, RankCores: 1, BurstRate: math.Inf(-1)}} {
		if bad.Validate() == nil {
			t.Errorf("%+v: valid, want an error", bad)
		}
	}
}

func TestSizes(t *testing.T) {
	if got, want := Sizes(12), []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 12}; !slices.Equal(got, want) {
		t.Errorf("Sizes(12) = %v, want %v", got, want)
	}
	if got := Sizes(1000); got[len(got)-1] != 1000 || !slices.IsSorted(got) {
		t.Errorf("Sizes(1000) = %v: want sorted, ending at 1000", got)
	}
}

// TestWins: for M = 1 MB the ring's rounds grow with N and gossip's two
// do not, so gossip wins from some N on; worked out by hand.
func TestWins(t *testing.T) {
	p := Params{Alpha: 1e-3, Beta: 1e8, RankCores: 1}
	// Ring: 2(N−1)·1 ms + 2(N−1)/N·10 ms; gossip: 2 ms + 20 ms.
	// N=2: 2+10=12 < 22; N=6: 10+16.7=26.7 > 22; N=5: 8+16=24 > 22;
	// N=4: 6+15=21 < 22.
	pts := p.Extrapolate([]int{2, 3, 4, 5, 6}, 1e6, 1e6, 100)
	spans := Wins(pts, "ring", func(pt Point) float64 { return pt.Ring.Seconds }, "gossip", func(pt Point) float64 { return pt.Gossip.Seconds })
	want := []Span{{"ring", 2, 4, 22.0 / 21}, {"gossip", 5, 6, (10 + 2*5*1e6/6/1e8*1e3) / 22}}
	if len(spans) != 2 || spans[0].Winner != want[0].Winner || spans[0].To != 4 || spans[1].From != 5 || spans[1].To != 6 || !near(spans[0].Ratio, want[0].Ratio) || !near(spans[1].Ratio, want[1].Ratio) {
		t.Errorf("spans %+v, want %+v", spans, want)
	}
	if got := Describe(spans); got != "ring wins for N = 2–4 (1.05× at 4); gossip wins for N = 5–6 (1.21× at 6)" {
		t.Errorf("Describe: %q", got)
	}
}

// TestFit: α 100 µs from a 200 µs round trip; a 4 KiB tree all-reduce on
// 2 ranks (1 round) of 400 µs leaves 400−100−4096/1e8 s = 259.04 µs fixed;
// a 16 MB ring on 2 ranks moves 2·16 MB, so 64 ms of CPU is 2 ns/B.
func TestFit(t *testing.T) {
	p, err := Fit(Measured{RTT: 200e-6, LinkRate: 1e8,
		Small: Sample{Algo: collective.Tree, N: 2, Bytes: 4096, Seconds: 400e-6},
		Large: Sample{Algo: collective.Ring, N: 2, Bytes: 16e6, Seconds: 0.2, CPUSeconds: 0.064}})
	if err != nil {
		t.Fatal(err)
	}
	want := Params{Alpha: 100e-6, Beta: 1e8, Gamma: 2e-9, Fixed: 259.04e-6, RankCores: 1}
	if !near(p.Alpha, want.Alpha) || p.Beta != want.Beta || !near(p.Gamma, want.Gamma) || !near(p.Fixed, want.Fixed) || p.RankCores != 1 {
		t.Errorf("Fit = %+v, want %+v", p, want)
	}
	// With Many on 2 shared cores: the 4 KiB tree on 4 ranks (2 rounds,
	// 8192 B, 800 µs) leaves 800−200−81.92 = 518.08 µs for Fixed and the
	// busiest core's 8/2 messages; the 2-rank one 259.04 µs for Fixed and
	// max(1, 2/2) message: Message = (518.08−259.04)/3 µs, Fixed the rest.
	p, err = Fit(Measured{RTT: 200e-6, LinkRate: 1e8, Cores: 2, PairSeconds: 15e-9,
		Small: Sample{Algo: collective.Tree, N: 2, Bytes: 4096, Seconds: 400e-6},
		Many:  Sample{Algo: collective.Tree, N: 4, Bytes: 4096, Seconds: 800e-6},
		Large: Sample{Algo: collective.Ring, N: 2, Bytes: 16e6, Seconds: 0.2, CPUSeconds: 0.064}})
	if err != nil {
		t.Fatal(err)
	}
	if m := 259.04e-6 / 3; !near(p.Message, m) || !near(p.Fixed, 259.04e-6-m) || p.Pair != 15e-9 {
		t.Errorf("Fit with Many = %+v, want Message %g s, Fixed %g s, Pair 15 ns", p, m, 259.04e-6-m)
	}
	if _, err := Fit(Measured{RTT: 1e-4}); err == nil {
		t.Error("Fit without a link rate: no error")
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"100mbit": 1e8, "1.8gbit": 1.8e9, " 1GBit ": 1e9, "500kbit": 5e5} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %g, %v; want %g", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "1g", "gbit", "-1gbit", "fast"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q): no error", bad)
		}
	}
	// 1 Gbit/s is 125 MB/s on the wire, 119.55 MB/s of TCP payload.
	if got := LinkBeta(1e9); !near(got, 125e6*1448/1514) {
		t.Errorf("LinkBeta(1gbit) = %g", got)
	}
}

// TestPredict: the rows a question asks for, the dense step on Auto's
// algorithm (the ring above 128 KiB), the sparse step on the all-gather.
func TestPredict(t *testing.T) {
	rows := base.Predict(Question{N: 4, Bytes: 4e6, Touched: 1000, Compute: 0.01})
	var names []string
	for _, r := range rows {
		names = append(names, r.Name)
	}
	want := []string{"ring all-reduce", "recursive doubling", "star", "gossip round (dense)", "sparse all-gather (k=1000)",
		"gossip round (k=1000 changed)", "step, dense exchange (ring)", "step, sparse exchange"}
	if !slices.Equal(names, want) {
		t.Fatalf("rows %q, want %q", names, want)
	}
	// 10 ms + the ring's 60.65 ms; 10 ms + 150 µs + 3·(1000·7.4+8)/1e8 s
	// + the sending rank's γ·3·7408 B of serial CPU.
	if got := rows[6].Seconds; !near(got, 0.07065) {
		t.Errorf("dense step %.9g s, want 0.07065", got)
	}
	if got, want := rows[7].Seconds, 0.01+150e-6+3*7408/1e8+2e-9*3*7408; !near(got, want) {
		t.Errorf("sparse step %.9g s, want %.9g", got, want)
	}
	if n := len(base.Predict(Question{N: 2, Bytes: 1e6})); n != 4 {
		t.Errorf("%d rows without touched features or compute, want 4", n)
	}
	var b strings.Builder
	if err := WriteRows(&b, rows); err != nil || !strings.Contains(b.String(), "60.6 ms  bandwidth") {
		t.Errorf("table %v:\n%s", err, b.String())
	}
}

// TestFitLatency recovers α and Message from trees on 2 and 4 ranks and a
// star on 2 priced by the model (on ranks that share 2 cores, in a tbf
// bucket), and clamps at 0 the term the samples say is negative.
func TestFitLatency(t *testing.T) {
	p := Params{Beta: 2e8, Gamma: 2e-9, Fixed: 50e-6, RankCores: 1, SharedCores: 2, Burst: 1e5, BurstRate: 7e8}
	want := p
	want.Alpha, want.Message = 30e-6, 90e-6
	sample := func(q Params, algo collective.Algo, n int) Sample {
		s := Sample{Algo: algo, N: n, Bytes: 4096}
		s.Seconds = q.Estimate(s.Traffic()).Seconds
		return s
	}
	tree2, tree4, star2 := sample(want, collective.Tree, 2), sample(want, collective.Tree, 4), sample(want, collective.Star, 2)
	if a, m := p.FitLatency(tree2, tree4, star2); !near(a, want.Alpha) || !near(m, want.Message) {
		t.Errorf("α %g, message %g; want %g, %g", a, m, want.Alpha, want.Message)
	}
	// A star on 2 no slower than the tree on 2: its extra round costs
	// nothing, so α comes out a fraction of what it was.
	star2.Seconds = tree2.Seconds
	if a, m := p.FitLatency(tree2, tree4, star2); !(a < want.Alpha/3) || !(m > want.Message) {
		t.Errorf("α %g, message %g; want α below %g and more a message", a, m, want.Alpha/3)
	}
	// 4 ranks no slower than 2 beyond their one more round: no message cost.
	tree4.Seconds = tree2.Seconds + 1e-6
	if a, m := p.FitLatency(tree2, tree4); m != 0 || !(a > 0) {
		t.Errorf("α %g, message %g; want α > 0 and no message cost", a, m)
	}
}
