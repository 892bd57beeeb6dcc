package membership

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the transcripts in testdata/ with this run's output")

// TestTranscripts runs each scenario in testdata/*.txt through machines
// wired by hand (one FIFO per directed link, delivered only when the
// scenario says so; no goroutines, no clock) and compares every message
// and decision that comes out with the file. A line of a file is a
// command, a comment (#) or, indented by two spaces, what the machines
// did; -rewrite writes this run's output in place of the indented lines,
// for review as a diff (go test ./mirrored/membership -run Transcripts
// -rewrite).
//
// The commands (peers are cluster indices):
//
//	peers N [commit-every C] [min M] [schedule STEP:P,P,...;...]
//	start P...                  the run begins on each
//	deliver [FROM TO]           one message on that link, or every message, lowest link first
//	deliver until KIND          every message, lowest link first, up to the first of KIND
//	fail P                      P dies: questions to it go unanswered (what it sent still arrives)
//	partition P... | P...       questions across the sides go unanswered; heal ends it
//	restart P                   a new life of P (its state lost), which starts; answers to the old life's questions are ignored
//	tick P... [late]            each driver's timer (late: its deadline passed)
//	form P...                   each formed the generation it decided on (and began forming then)
//	formfail P...               each failed to form it (a member did not come) and agrees again
//	started P... step S [fresh] each generation's loop resumed at S from its chief's commit
//	commit P... step S [stop P...]  each commits at S; joiners are the peers any of them heard ask
//	lost P... committed C last L    each one's generation failed (a peer lost) after step L
//	record P                    P's record of the membership
//
// What the test cannot show: the driver's timing (how long a peer waits
// before its next tick is the scenario's choice), the wire's encoding,
// and the training between commits.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in testdata/: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			c := &cluster{t: t, links: map[[2]int][]Msg{}}
			for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
				if strings.HasPrefix(line, "  ") {
					continue // the last run's output
				}
				c.out.WriteString(line + "\n")
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				if err := c.run(line); err != nil {
					t.Fatalf("%s:%d: %s: %v\nthe transcript so far:\n%s", path, i+1, line, err, &c.out)
				}
			}
			got := c.out.String()
			if *rewrite {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != string(b) {
				gl, wl := strings.Split(got, "\n"), strings.Split(string(b), "\n")
				for i := range max(len(gl), len(wl)) {
					var g, w string
					if i < len(gl) {
						g = gl[i]
					}
					if i < len(wl) {
						w = wl[i]
					}
					if g != w {
						t.Fatalf("%s differs from this run at line %d:\n got  %s\n want %s\nif the change is deliberate, review it and run with -rewrite", path, i+1, g, w)
					}
				}
			}
		})
	}
}

// cluster is the machines of a scenario and the links between them.
type cluster struct {
	t     *testing.T
	out   strings.Builder
	cfg   Config
	ms    []*Machine
	dead  []bool
	side  []int             // partition side per peer (all 0: none)
	links map[[2]int][]Msg  // [from, to] -> queued messages
	forms map[int]*Decision // the last generation each peer decided to form
}

func (c *cluster) printf(format string, args ...any) {
	fmt.Fprintf(&c.out, "  "+format+"\n", args...)
}

// run carries out one command.
func (c *cluster) run(line string) error {
	f := strings.Fields(line)
	cmd, args := f[0], f[1:]
	if cmd == "partition" {
		side := 0
		for _, a := range args {
			p, err := strconv.Atoi(a)
			switch {
			case a == "|":
				side++
			case err != nil || p < 0 || p >= len(c.side):
				return fmt.Errorf("want partition P... | P...")
			default:
				c.side[p] = side
			}
		}
		return nil
	}
	peers, rest, err := leadingInts(args)
	if err != nil {
		return err
	}
	opts, err := options(rest)
	if err != nil {
		return err
	}
	if cmd != "peers" && c.ms == nil {
		return fmt.Errorf("no peers yet")
	}
	for _, p := range peers {
		if cmd != "peers" && (p < 0 || p >= len(c.ms)) {
			return fmt.Errorf("no peer %d", p)
		}
	}
	switch cmd {
	case "peers":
		if len(peers) != 1 {
			return fmt.Errorf("want peers N")
		}
		c.cfg = Config{Size: peers[0], MinWorkers: opts.int("min", 1), CommitEvery: opts.int("commit-every", 0)}
		if s := opts["schedule"]; len(s) > 0 {
			if c.cfg.Schedule, err = parseSchedule(s[0]); err != nil {
				return err
			}
		}
		c.ms, c.dead, c.side, c.forms = make([]*Machine, peers[0]), make([]bool, peers[0]), make([]int, peers[0]), map[int]*Decision{}
		for p := range c.ms {
			c.ms[p] = c.machine(p)
		}
	case "start":
		for _, p := range peers {
			c.do(p, c.ms[p].Start())
		}
	case "deliver":
		switch len(peers) {
		case 0:
			var until Kind // deliver until KIND: stop before the first message of that kind
			if i := slices.Index(rest, "until"); i >= 0 && i+1 < len(rest) {
				until = Kind(rest[i+1])
			}
			c.drain(until)
		case 2:
			if !c.deliver(peers[0], peers[1]) {
				return fmt.Errorf("no message from %d to %d", peers[0], peers[1])
			}
		default:
			return fmt.Errorf("want deliver or deliver FROM TO")
		}
	case "fail":
		for _, p := range peers {
			c.dead[p] = true
			c.printf("%d dies", p)
		}
	case "heal":
		clear(c.side)
	case "restart":
		for _, p := range peers {
			c.dead[p], c.ms[p] = false, c.machine(p)
			delete(c.forms, p)
			c.printf("%d restarts", p)
			c.do(p, c.ms[p].Start())
		}
	case "tick":
		_, late := opts["late"]
		for _, p := range peers {
			c.do(p, c.ms[p].Tick(late))
		}
	case "form":
		for _, p := range peers {
			d := c.forms[p]
			if d == nil {
				return fmt.Errorf("peer %d decided on no generation", p)
			}
			delete(c.forms, p)
			n := len(c.ms[p].Record())
			c.ms[p].Formed(d.Gen, d.Members)
			c.printf("%d formed generation %d over %v", p, d.Gen, d.Members)
			if r := c.ms[p].Record(); len(r) > n {
				c.printf("%d records %s", p, change(r[len(r)-1]))
			}
		}
	case "formfail":
		for _, p := range peers {
			d := c.forms[p]
			if d == nil {
				return fmt.Errorf("peer %d decided on no generation", p)
			}
			delete(c.forms, p)
			m := c.ms[p]
			again := m.FormFailed()
			c.printf("%d could not form generation %d over %v (agree again: %v)", p, d.Gen, d.Members, again)
			if again {
				c.do(p, m.Reform(Why{Reason: "forming failed"}, 0, 0))
			}
		}
	case "started":
		step := opts.int("step", -1)
		_, fresh := opts["fresh"]
		for _, p := range peers {
			m := c.ms[p]
			if len(m.Members()) == 0 {
				return fmt.Errorf("peer %d is in no generation", p)
			}
			chief := c.ms[m.Members()[0]]
			d, announce := m.Started(!fresh, slices.Clone(chief.Record()), chief.NextChange(), step)
			if announce != nil {
				c.printf("%d announces %s", p, change(*announce))
			}
			c.decided(p, d, step)
		}
	case "commit":
		step := opts.int("step", -1)
		var joining []int
		for _, p := range peers {
			joining = append(joining, c.ms[p].Joins()...)
		}
		joining = slices.Compact(slices.Sorted(slices.Values(joining)))
		stopping, _, err := leadingInts(opts["stop"])
		if err != nil {
			return err
		}
		for _, p := range peers {
			d := c.ms[p].AtCommit(step, joining, stopping)
			if d == nil {
				c.printf("%d goes on", p)
			}
			c.decided(p, d, step)
		}
	case "lost":
		for _, p := range peers {
			c.do(p, c.ms[p].Reform(Why{Reason: "collective: a peer failed"}, opts.int("committed", 0), opts.int("last", 0)))
		}
	case "record":
		for _, p := range peers {
			r := c.ms[p].Record()
			c.printf("%d's record: %d change(s)", p, len(r))
			for _, ch := range r {
				c.printf("  %s", change(ch))
			}
		}
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
	return nil
}

// machine is a new life of peer p.
func (c *cluster) machine(p int) *Machine {
	cfg := c.cfg
	cfg.Self = p
	return New(cfg, zaptest.NewLogger(c.t).Named(fmt.Sprint("peer ", p)))
}

// decided carries out, as the driver would, a decision taken at step.
func (c *cluster) decided(p int, d *Decision, step int) {
	if d == nil {
		return
	}
	c.decision(p, d)
	m := c.ms[p]
	switch {
	case d.Kind == Reform:
		c.do(p, m.Reform(d.Why, step, step))
	case d.Kind == Leave && d.Rejoin:
		c.do(p, m.Rejoin())
	case d.Kind == Leave:
		m.End()
		c.printf("%d ends", p)
	}
}

// answer queues p's answer to peer to's question of kind q, and shows it.
func (c *cluster) answer(p, to int, q Kind, e Effects) {
	if len(e.Sends) != 1 || e.Sends[0].To != to || e.Sends[0].Msg.Kind != Answer {
		c.t.Fatalf("peer %d's effects on a question from %d: %+v, want one answer to it", p, to, e)
	}
	c.links[[2]int{p, to}] = append(c.links[[2]int{p, to}], e.Sends[0].Msg)
	c.printf("%d → %d answers %s: %s", p, to, q, msg(e.Sends[0].Msg))
	e.Sends = nil
	c.do(p, e)
}

// do queues e's sends and shows what p did.
func (c *cluster) do(p int, e Effects) {
	for _, s := range e.Sends {
		c.links[[2]int{p, s.To}] = append(c.links[[2]int{p, s.To}], s.Msg)
		c.printf("%d → %d %s", p, s.To, msg(s.Msg))
	}
	if e.Wake {
		c.printf("%d wakes", p)
	}
	if e.Decision != nil {
		c.decision(p, e.Decision)
	}
	switch e.Wait {
	case WaitProposal:
		c.printf("%d waits for a proposal", p)
	case WaitRetry:
		c.printf("%d waits a moment: a proposal was refused or missed", p)
	case WaitAdmission:
		c.printf("%d waits to be admitted (heard from a running peer: %v)", p, e.Heard)
	}
}

func (c *cluster) decision(p int, d *Decision) {
	var s string
	switch d.Kind {
	case Form: // the driver starts forming it at once
		s = fmt.Sprintf("form generation %d over %v", d.Gen, d.Members)
		c.forms[p] = d
		c.ms[p].Forming(d.Gen, d.Members)
	case Halt:
		s = "halt: " + d.Reason
		if d.Coordinator {
			s = "halt as the coordinator (write the last commit): " + d.Reason
		}
	case LeftBySchedule:
		s = "not a member at any step of the schedule"
	case GaveUp:
		s = "give up waiting to be admitted"
		if d.Members != nil {
			s = fmt.Sprintf("give up agreeing on the generation after %d of %v", d.Gen, d.Members)
		}
	case Reform:
		s = fmt.Sprintf("end the generation at step %d: %s", d.Why.Step, why(d.Why))
	case Leave:
		s = "leave: " + d.Reason
		if d.Rejoin {
			s = fmt.Sprintf("leave at step %d until the schedule names it again", d.Why.Step)
		}
	case StopAll:
		s = fmt.Sprintf("stop the run after this step (asked: %v)", d.Leaving)
	}
	c.printf("%d decides: %s", p, s)
}

// deliver hands the oldest message on from → to to peer to; false if
// there is none.
func (c *cluster) deliver(from, to int) bool {
	k := [2]int{from, to}
	q := c.links[k]
	if len(q) == 0 {
		return false
	}
	c.links[k] = q[1:]
	m := q[0]
	cut := c.dead[to] || c.side[from] != c.side[to]
	switch {
	case cut && m.Kind == Answer:
		c.printf("%d ↛ %d the answer is lost", from, to)
	case cut:
		c.printf("%d ↛ %d %s: no answer", from, to, m.Kind)
		c.do(from, c.ms[from].Unanswered(to, fmt.Sprintf("peer %d does not answer", to)))
	case m.Kind == Answer:
		c.do(to, c.ms[to].Receive(from, m))
	default:
		c.answer(to, from, m.Kind, c.ms[to].Receive(from, m))
	}
	return true
}

// drain delivers every queued message, lowest link first, until none is
// left or the next is of kind until.
func (c *cluster) drain(until Kind) {
	for {
		var next [][2]int
		for k, q := range c.links {
			if len(q) > 0 {
				next = append(next, k)
			}
		}
		if len(next) == 0 {
			return
		}
		slices.SortFunc(next, func(a, b [2]int) int { return (a[0]-b[0])*1000 + a[1] - b[1] })
		if until != "" && c.links[next[0]][0].Kind == until {
			return
		}
		c.deliver(next[0][0], next[0][1])
	}
}

func msg(m Msg) string {
	s := string(m.Kind)
	switch m.Kind {
	case Status, Join:
		return s
	case Stop:
		return s + ": " + m.Reason
	case Go:
		return fmt.Sprintf("%s generation %d", s, m.Gen)
	case Propose:
		s += fmt.Sprintf(" generation %d over %v", m.Gen, m.Members)
		if m.Change != nil {
			s += fmt.Sprintf(" (from step %d, rolled back %d: %s)", m.Change.Step, m.Change.RolledBack, m.Change.Reason)
		}
		return s
	}
	s = string(m.State)
	if len(m.Members) > 0 {
		s += fmt.Sprintf(" in generation %d over %v", m.Gen, m.Members)
	}
	switch {
	case m.OK:
		s += ", ok"
	case m.Reason != "":
		s += ", refused: " + m.Reason
	default:
		s += ", not ok"
	}
	return s
}

func why(w Why) string {
	s := w.Reason
	if w.Joiners != nil {
		s += fmt.Sprintf(" (joiners %v)", w.Joiners)
	}
	if w.Want != nil {
		s += fmt.Sprintf(" (want %v)", w.Want)
	}
	return s
}

func change(c Change) string {
	s := fmt.Sprintf("generation %d: peers %v from step %d", c.Generation, c.Members, c.Step)
	if len(c.Left) > 0 {
		s += fmt.Sprintf(", left %v", c.Left)
	}
	if len(c.Joined) > 0 {
		s += fmt.Sprintf(", joined %v", c.Joined)
	}
	return s + fmt.Sprintf(", rolled back %d: %s", c.RolledBack, c.Reason)
}

// leadingInts splits fs into its leading integers and the rest.
func leadingInts(fs []string) ([]int, []string, error) {
	var out []int
	for i, f := range fs {
		n, err := strconv.Atoi(f)
		if err != nil {
			return out, fs[i:], nil
		}
		out = append(out, n)
	}
	return out, nil, nil
}

// opts are a command's keywords, each with the words up to the next.
type opts map[string][]string

func options(fs []string) (opts, error) {
	o := opts{}
	key := ""
	for _, f := range fs {
		if _, err := strconv.Atoi(f); err == nil || strings.ContainsAny(f, ":|") {
			if key == "" {
				return nil, fmt.Errorf("value %q without a keyword", f)
			}
			o[key] = append(o[key], f)
			continue
		}
		key = f
		o[key] = nil
	}
	return o, nil
}

func (o opts) int(key string, def int) int {
	if v := o[key]; len(v) > 0 {
		if n, err := strconv.Atoi(v[0]); err == nil {
			return n
		}
	}
	return def
}

// parseSchedule reads STEP:P,P,...;STEP:...
func parseSchedule(s string) ([]Change, error) {
	var out []Change
	for _, part := range strings.Split(s, ";") {
		step, members, ok := strings.Cut(part, ":")
		n, err := strconv.Atoi(step)
		if !ok || err != nil {
			return nil, fmt.Errorf("schedule %q: want STEP:P,P,...", part)
		}
		c := Change{Step: n}
		for _, m := range strings.Split(members, ",") {
			p, err := strconv.Atoi(m)
			if err != nil {
				return nil, fmt.Errorf("schedule %q: %w", part, err)
			}
			c.Members = append(c.Members, p)
		}
		out = append(out, c)
	}
	return out, nil
}
