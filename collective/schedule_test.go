package collective

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

func TestSegments(t *testing.T) {
	for _, tc := range []struct{ length, n int }{{0, 1}, {0, 3}, {1, 4}, {7, 3}, {10, 5}, {1000003, 8}} {
		segs := segments(tc.length, tc.n)
		off := 0
		for _, s := range segs {
			if s.off != off || s.n < tc.length/tc.n || s.n > tc.length/tc.n+1 {
				t.Fatalf("segments(%d,%d) = %v: not contiguous and balanced", tc.length, tc.n, segs)
			}
			off += s.n
		}
		if off != tc.length {
			t.Fatalf("segments(%d,%d) cover %d elements", tc.length, tc.n, off)
		}
	}
}

// simulateLinear runs every rank's linear plan against FIFO links, firing
// any transfer whose dependency is met, until nothing moves. It fails if a
// rank is left with work (a deadlocking schedule) and returns the buffers.
func simulateLinear(t *testing.T, plans []linearPlan, bufs [][]float64) {
	t.Helper()
	n := len(plans)
	type msg struct {
		sp   span
		data []float64
	}
	links := map[[2]int][]msg{}
	si, ri := make([]int, n), make([]int, n)
	for moved := true; moved; {
		moved = false
		for r, p := range plans {
			for si[r] < len(p.sends) {
				s := p.sends[si[r]]
				if s.dep >= ri[r] {
					break
				}
				k := [2]int{r, p.to}
				links[k] = append(links[k], msg{s.span, slices.Clone(bufs[r][s.span.off : s.span.off+s.span.n])})
				si[r]++
				moved = true
			}
			for ri[r] < len(p.recvs) {
				rv := p.recvs[ri[r]]
				k := [2]int{p.from, r}
				if rv.dep >= si[r] || len(links[k]) == 0 {
					break
				}
				m := links[k][0]
				links[k] = links[k][1:]
				if m.sp != rv.span {
					t.Fatalf("rank %d expected %v from %d, got %v", r, rv.span, p.from, m.sp)
				}
				for i, v := range m.data {
					if rv.reduce {
						bufs[r][m.sp.off+i] += v
					} else {
						bufs[r][m.sp.off+i] = v
					}
				}
				ri[r]++
				moved = true
			}
		}
	}
	for r, p := range plans {
		if si[r] != len(p.sends) || ri[r] != len(p.recvs) {
			t.Fatalf("rank %d stuck at send %d/%d recv %d/%d", r, si[r], len(p.sends), ri[r], len(p.recvs))
		}
	}
	for k, q := range links {
		if len(q) != 0 {
			t.Fatalf("link %v has %d unread frames", k, len(q))
		}
	}
}

func TestPlanRingAllReduce(t *testing.T) {
	for n := 1; n <= 8; n++ {
		for _, length := range []int{0, 1, n - 1, n + 1, 37, 1000} {
			for _, chunk := range []int{1, 3, 1 << 20} {
				t.Run(fmt.Sprintf("n%d/len%d/chunk%d", n, length, chunk), func(t *testing.T) {
					plans := make([]linearPlan, n)
					bufs := make([][]float64, n)
					want := make([]float64, length)
					for r := range plans {
						plans[r] = planRing(n, r, segments(length, n), chunk, true)
						bufs[r] = make([]float64, length)
						for i := range bufs[r] {
							bufs[r][i] = float64((r + 1) * (i + 7))
							want[i] += bufs[r][i]
						}
					}
					simulateLinear(t, plans, bufs)
					for r := range bufs {
						if !slices.Equal(bufs[r], want) {
							t.Fatalf("rank %d: %v, want %v", r, bufs[r], want)
						}
					}
				})
			}
		}
	}
}

func TestPlanRingAllGatherUneven(t *testing.T) {
	lens := []int{0, 5, 1, 0, 9}
	n := len(lens)
	var segs []span
	off := 0
	for _, l := range lens {
		segs = append(segs, span{off, l})
		off += l
	}
	plans := make([]linearPlan, n)
	bufs := make([][]float64, n)
	for r := range plans {
		plans[r] = planRing(n, r, segs, 2, false)
		bufs[r] = make([]float64, off)
		for i := segs[r].off; i < segs[r].off+segs[r].n; i++ {
			bufs[r][i] = float64(100*r + i)
		}
	}
	simulateLinear(t, plans, bufs)
	for r := range bufs {
		for q, s := range segs {
			for i := s.off; i < s.off+s.n; i++ {
				if bufs[r][i] != float64(100*q+i) {
					t.Fatalf("rank %d element %d = %v, want %v", r, i, bufs[r][i], 100*q+i)
				}
			}
		}
	}
}

func TestPlanChain(t *testing.T) {
	for n := 1; n <= 6; n++ {
		for root := 0; root < n; root++ {
			plans := make([]linearPlan, n)
			bufs := make([][]float64, n)
			for r := range plans {
				plans[r] = planChain(n, r, root, 10, 3)
				bufs[r] = make([]float64, 10)
			}
			for i := range bufs[root] {
				bufs[root][i] = float64(i + 1)
			}
			simulateLinear(t, plans, bufs)
			for r := range bufs {
				if !slices.Equal(bufs[r], bufs[root]) {
					t.Fatalf("n=%d root=%d: rank %d has %v", n, root, r, bufs[r])
				}
			}
		}
	}
}

// TestPlanRecDoubling runs the plan on symbolic values: each rank's value is
// the expression it folded, so the test checks both that every rank ends
// with every contribution exactly once and that all ranks computed the very
// same expression (hence the same bits).
func TestPlanRecDoubling(t *testing.T) {
	for n := 1; n <= 13; n++ {
		plans := make([][]rdStep, n)
		vals := make([]string, n)
		for r := range plans {
			plans[r] = planRecDoubling(n, r)
			vals[r] = fmt.Sprint(r)
		}
		// Execute round by round: every step's peer must have the mirror step
		// at the same position of "pending" moves.
		pos := make([]int, n)
		inflight := map[[2]int][]string{}
		for moved := true; moved; {
			moved = false
			for r := range plans {
				if pos[r] >= len(plans[r]) {
					continue
				}
				st := plans[r][pos[r]]
				switch st.move {
				case rdSend:
					inflight[[2]int{r, st.peer}] = append(inflight[[2]int{r, st.peer}], vals[r])
					pos[r]++
					moved = true
				case rdRecvFold, rdRecvCopy, rdExchange:
					k := [2]int{st.peer, r}
					if st.move == rdExchange && (len(inflight[[2]int{r, st.peer}]) == 0) {
						inflight[[2]int{r, st.peer}] = append(inflight[[2]int{r, st.peer}], vals[r])
					}
					if len(inflight[k]) == 0 {
						continue
					}
					v := inflight[k][0]
					inflight[k] = inflight[k][1:]
					switch {
					case st.move == rdRecvCopy:
						vals[r] = v
					case st.peerFirst:
						vals[r] = "(" + v + "+" + vals[r] + ")"
					default:
						vals[r] = "(" + vals[r] + "+" + v + ")"
					}
					pos[r]++
					moved = true
				}
			}
		}
		for r := range plans {
			if pos[r] != len(plans[r]) {
				t.Fatalf("n=%d: rank %d stuck at step %d of %v", n, r, pos[r], plans[r])
			}
			if vals[r] != vals[0] {
				t.Fatalf("n=%d: rank %d computed %s, rank 0 %s", n, r, vals[r], vals[0])
			}
		}
		terms := strings.FieldsFunc(vals[0], func(c rune) bool { return c == '(' || c == ')' || c == '+' })
		sort.Slice(terms, func(i, j int) bool {
			return len(terms[i]) < len(terms[j]) || len(terms[i]) == len(terms[j]) && terms[i] < terms[j]
		})
		for i, term := range terms {
			if term != fmt.Sprint(i) || len(terms) != n {
				t.Fatalf("n=%d: result %s does not hold each rank once", n, vals[0])
			}
		}
	}
}

func TestPlanDissemination(t *testing.T) {
	for n := 1; n <= 9; n++ {
		// knows[r] is the set of ranks whose arrival r has (transitively) seen.
		knows := make([]map[int]bool, n)
		for r := range knows {
			knows[r] = map[int]bool{r: true}
		}
		to0, _ := planDissemination(n, 0)
		for k := range to0 {
			next := make([]map[int]bool, n)
			for r := range knows {
				next[r] = map[int]bool{}
				for q := range knows[r] {
					next[r][q] = true
				}
			}
			for r := 0; r < n; r++ {
				to, _ := planDissemination(n, r)
				for q := range knows[r] {
					next[to[k]][q] = true
				}
			}
			knows = next
		}
		for r := range knows {
			if len(knows[r]) != n {
				t.Fatalf("n=%d: rank %d only heard from %v", n, r, knows[r])
			}
		}
	}
}
