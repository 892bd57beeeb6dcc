package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// Prefix starts the name of every namespace this package creates.
	Prefix = "mtn"
	// Subnet is the hosts' /24: host i is Subnet.(i+1).
	Subnet = "10.77.0"
	// DisableEnv set to "off" makes Available report the harness as
	// unavailable, so the tests that need it skip (e.g. to check, as
	// root, what a machine without namespaces sees).
	DisableEnv = "MESHTRAIN_NETNS"
	// MaxHosts bounds a cluster's size (addresses .1 to .MaxHosts).
	MaxHosts = 64
	// cmdTimeout bounds each ip or tc command.
	cmdTimeout = 10 * time.Second
)

// Hosts is a running cluster of emulated hosts. Down removes it.
type Hosts struct {
	// Tag names the cluster: its namespaces are Prefix+Tag+"-br" and
	// Prefix+Tag+"-h<i>".
	Tag string
	// N is the number of hosts.
	N int
	// Rate caps each host's egress and, separately, its ingress.
	Rate Rate

	mu     sync.Mutex
	made   []string   // namespaces created so far, the bridge's first
	downMu sync.Mutex // held by Down throughout: a second Down waits
}

// tagRE is what a tag may hold: it becomes part of namespace file names.
var tagRE = regexp.MustCompile(`^[a-z0-9]{1,20}$`)

// processTagRE matches TagForProcess's tags: the creating process's ID,
// "x", a sequence number.
var processTagRE = regexp.MustCompile(`^(\d+)x\d+$`)

var tagSeq atomic.Int64

// TagForProcess returns a fresh tag naming this process, so RemoveStale in
// a later process can tell when the cluster's creator is gone.
func TagForProcess() string {
	return fmt.Sprintf("%dx%d", os.Getpid(), tagSeq.Add(1))
}

// Namespace is host i's namespace.
func (h *Hosts) Namespace(i int) string { return Prefix + h.Tag + "-h" + strconv.Itoa(i) }

// bridge is the namespace holding the bridge.
func (h *Hosts) bridge() string { return Prefix + h.Tag + "-br" }

// IP is host i's address.
func (h *Hosts) IP(i int) string { return fmt.Sprintf("%s.%d", Subnet, i+1) }

// Command returns name with args to run on host i (`ip netns exec`). It is
// killed when ctx ends or when the process that started it dies.
func (h *Hosts) Command(ctx context.Context, i int, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Namespace(i), name}, args...)...)
	// ip execs name in place, so the signal reaches name itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Up creates n hosts (tag names them; see TagForProcess) on one bridge,
// each link shaped to rate in both directions. On error it has removed
// whatever it created. Until Down, an interrupt (SIGINT, SIGTERM, SIGHUP)
// removes the cluster before the process dies of it.
func Up(ctx context.Context, tag string, n int, rate Rate) (*Hosts, error) {
	if !tagRE.MatchString(tag) {
		return nil, fmt.Errorf("netns: tag %q: want 1 to 20 lower-case letters and digits", tag)
	}
	if n < 1 || n > MaxHosts {
		return nil, fmt.Errorf("netns: %d hosts: want 1 to %d", n, MaxHosts)
	}
	h := &Hosts{Tag: tag, N: n, Rate: rate}
	track(h)
	if err := h.build(ctx); err != nil {
		return nil, errors.Join(err, h.Down())
	}
	return h, nil
}

// build creates the bridge namespace, then each host and its link.
func (h *Hosts) build(ctx context.Context) error {
	br := h.bridge()
	if err := h.addNamespace(ctx, br); err != nil {
		return err
	}
	steps := [][]string{
		{"ip", "-n", br, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", br, "link", "set", "br0", "up"},
	}
	for i := range h.N {
		ns, veth := h.Namespace(i), "h"+strconv.Itoa(i)
		if err := h.addNamespace(ctx, ns); err != nil {
			return err
		}
		steps = append(steps,
			// Created in the bridge's namespace with its peer moved at once
			// into the host's: neither end ever exists in the root one.
			[]string{"ip", "-n", br, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"ip", "-n", br, "link", "set", veth, "master", "br0", "up"},
			[]string{"ip", "-n", ns, "addr", "add", h.IP(i) + "/24", "dev", "eth0"},
			[]string{"ip", "-n", ns, "link", "set", "eth0", "up"},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
			// Egress at the host's end; ingress as the bridge's egress
			// into the host (tbf shapes only what leaves a device).
			append([]string{"tc", "-n", ns, "qdisc", "add", "dev", "eth0", "root"}, h.Rate.tbf()...),
			append([]string{"tc", "-n", br, "qdisc", "add", "dev", veth, "root"}, h.Rate.tbf()...),
		)
		if err := run(ctx, steps...); err != nil {
			return err
		}
		steps = nil
	}
	return nil
}

// addNamespace creates ns and records it for Down.
func (h *Hosts) addNamespace(ctx context.Context, ns string) error {
	if err := run(ctx, []string{"ip", "netns", "add", ns}); err != nil {
		return err
	}
	h.mu.Lock()
	h.made = append(h.made, ns)
	h.mu.Unlock()
	return nil
}

// Down kills every process left in the cluster's namespaces and deletes
// them (hosts first, the bridge last), which removes every link and the
// bridge with them. It may be called more than once, and at once (a test's
// cleanup and the interrupt handler): each returns once all is removed.
func (h *Hosts) Down() error {
	untrack(h)
	h.downMu.Lock()
	defer h.downMu.Unlock()
	h.mu.Lock()
	made := h.made
	h.made = nil
	h.mu.Unlock()
	var errs []error
	for i := len(made) - 1; i >= 0; i-- {
		errs = append(errs, removeNamespace(made[i]))
	}
	return errors.Join(errs...)
}

// removeNamespace kills the processes in ns (all started by this package's
// users) and deletes it, with its names (SetNames).
func removeNamespace(ns string) error {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	return errors.Join(run(ctx, []string{"ip", "netns", "del", ns}), removeNames(ns))
}

// run runs each command in turn, stopping at the first failure.
func run(ctx context.Context, cmds ...[]string) error {
	for _, c := range cmds {
		cctx, cancel := context.WithTimeout(ctx, cmdTimeout)
		out, err := exec.CommandContext(cctx, c[0], c[1:]...).CombinedOutput()
		cancel()
		if err != nil {
			return fmt.Errorf("netns: %s: %w: %s", strings.Join(c, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// Namespaces lists the namespaces whose name starts with Prefix.
func Namespaces() ([]string, error) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("netns: ip netns list: %w", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], Prefix) {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// tagOf returns the tag of one of this package's namespace names.
func tagOf(ns string) string {
	tag, _, _ := strings.Cut(strings.TrimPrefix(ns, Prefix), "-")
	return tag
}

// Remove deletes every namespace of the cluster tagged tag (e.g. one the
// hosts command brought up).
func Remove(tag string) error {
	return removeWhere(func(t string) bool { return t == tag })
}

// RemoveStale deletes the clusters whose creating process (see
// TagForProcess) no longer exists: left behind by a run that was killed.
func RemoveStale() error {
	return removeWhere(func(tag string) bool {
		m := processTagRE.FindStringSubmatch(tag)
		if m == nil {
			return false
		}
		pid, _ := strconv.Atoi(m[1])
		return syscall.Kill(pid, 0) == syscall.ESRCH
	})
}

// removeWhere deletes this package's namespaces whose tag matches; hosts
// before bridges.
func removeWhere(match func(tag string) bool) error {
	names, err := Namespaces()
	if err != nil {
		return err
	}
	var errs []error
	for _, last := range []bool{false, true} {
		for _, ns := range names {
			if match(tagOf(ns)) && strings.HasSuffix(ns, "-br") == last {
				errs = append(errs, removeNamespace(ns))
			}
		}
	}
	return errors.Join(errs...)
}

// live holds the clusters up in this process, for the signal handler.
var live struct {
	sync.Mutex
	hosts map[*Hosts]bool
	once  sync.Once
}

func track(h *Hosts) {
	live.once.Do(watchSignals)
	live.Lock()
	defer live.Unlock()
	if live.hosts == nil {
		live.hosts = map[*Hosts]bool{}
	}
	live.hosts[h] = true
}

func untrack(h *Hosts) {
	live.Lock()
	defer live.Unlock()
	delete(live.hosts, h)
}

// watchSignals removes every live cluster on an interrupt, then dies of
// the same signal as it would have without the handler.
func watchSignals() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-ch
		live.Lock()
		hosts := make([]*Hosts, 0, len(live.hosts))
		for h := range live.hosts {
			hosts = append(hosts, h)
		}
		live.Unlock()
		for _, h := range hosts {
			if err := h.Down(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
	}()
}

var (
	availOnce sync.Once
	availErr  error
)

// Available says why emulated hosts cannot run here, or returns nil. The
// first call tries a one-host cluster (namespaces, veth, bridge, tbf).
func Available() error {
	availOnce.Do(func() { availErr = probe() })
	return availErr
}

func probe() error {
	if v := os.Getenv(DisableEnv); v == "off" {
		return fmt.Errorf("%s=off", DisableEnv)
	}
	if os.Geteuid() != 0 {
		return errors.New("emulated hosts need root (network namespaces, tc): run the tests as root")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("emulated hosts need %s(8) (iproute2): %w", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*cmdTimeout)
	defer cancel()
	h, err := Up(ctx, TagForProcess(), 1, Gbit)
	if err != nil {
		return fmt.Errorf("cannot create a namespace with a shaped veth link on a bridge: %w", err)
	}
	return h.Down()
}

// Isolate cuts host i off the others (its port on the bridge goes down):
// a network partition, host i on one side. Heal reconnects it.
func (h *Hosts) Isolate(ctx context.Context, i int) error {
	return run(ctx, []string{"ip", "-n", h.bridge(), "link", "set", "h" + strconv.Itoa(i), "down"})
}

// Heal reconnects a host Isolate cut off.
func (h *Hosts) Heal(ctx context.Context, i int) error {
	return run(ctx, []string{"ip", "-n", h.bridge(), "link", "set", "h" + strconv.Itoa(i), "up"})
}
