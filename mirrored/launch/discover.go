package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective/p2p"
)

// Grow lets workers outside the cluster's list join an elastic run, as
// Horovod's --host-discovery-script and torchrun's --nnodes MIN:MAX do:
// the cluster has Max slots, the listed workers the first; every Every
// the running peers run Cmd, which prints the workers' host:port, one a
// line, and give each address they do not know the next free slot. A
// worker at a slot is the slot's identity, derived from the cluster
// secret: one without the secret cannot answer there, and is never
// admitted. Every peer must see the new workers in the same order (the
// command prints them in a stable order, new ones after the old: a
// Kubernetes Indexed Job's pods by index, a Slurm job's steps).
type Grow struct {
	// Max is the most workers the run may have (--max-workers); 0: the
	// listed ones.
	Max int
	// Cmd is the discovery command (--discover-cmd), run with sh -c.
	Cmd string
	// Every is the time between two runs of Cmd (DefaultDiscoverEvery);
	// each run must finish within it, or it is killed and named.
	Every time.Duration
	// Join says this worker is a newcomer (--join): it joins the running
	// run at its slot, and never starts one of its own.
	Join bool
	// Slots, if set, are the addresses of the slots after the listed
	// workers, known up front (a Kubernetes Indexed Job's next pods): no
	// command is needed for them.
	Slots []string
}

// DefaultDiscoverEvery is Grow.Every's default.
const DefaultDiscoverEvery = 5 * time.Second

// maxDiscoverOutput bounds what the discovery command may print: a
// thousand workers' addresses take a few tens of kilobytes.
const maxDiscoverOutput = 1 << 20

// Check reports a Grow that cannot work with listed workers.
func (g Grow) Check(listed int) error {
	switch {
	case g.Join && g.Max == 0:
		return errors.New("--join without --max-workers: a newcomer joins a run that may grow; give the run's --max-workers")
	case g.Max == 0 && g.Cmd == "":
		return nil
	case g.Max < listed:
		return fmt.Errorf("--max-workers %d is fewer than the %d workers listed: give at least %d", g.Max, listed, listed)
	case g.Cmd == "" && listed+len(g.Slots) < g.Max:
		return fmt.Errorf("--max-workers %d without --discover-cmd: the running peers would never learn the new workers' addresses: give a command that prints them, host:port a line", g.Max)
	case g.Every < 0:
		return fmt.Errorf("--discover-every %v: want a positive interval", g.Every)
	case g.Max > p2p.MaxPeers:
		return fmt.Errorf("--max-workers %d: at most %d", g.Max, p2p.MaxPeers)
	}
	return nil
}

// ParseDiscovered reads the discovery command's output: host:port a line
// (blank lines and lines starting with # are skipped). Each bad line is a
// problem naming the line; the good ones are returned in order, once.
func ParseDiscovered(out []byte) (addrs []string, problems []string) {
	seen := map[string]bool{}
	for i, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		host, port, err := net.SplitHostPort(line)
		n, perr := strconv.Atoi(port)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("line %d %q: want host:port (%v)", i+1, line, err))
			continue
		case host == "" || strings.ContainsAny(host, " \t/"):
			problems = append(problems, fmt.Sprintf("line %d %q: want a host name or IP address before the port", i+1, line))
			continue
		case perr != nil || n < 1 || n > 65535:
			problems = append(problems, fmt.Sprintf("line %d %q: port %q is not a number from 1 to 65535", i+1, line, port))
			continue
		}
		if !seen[line] {
			seen[line] = true
			addrs = append(addrs, line)
		}
	}
	return addrs, problems
}

// discovery is a running peer's side of Grow: it runs the command and
// gives new workers their slots on the host.
type discovery struct {
	g   Grow
	h   *p2p.Host
	log *zap.Logger

	// mu serialises the runs (the ticker's, and Form's when a member is
	// not known here yet) and guards what they keep.
	mu    sync.Mutex
	slots map[string]int  // address → slot
	full  map[string]bool // told there was no slot for it
	warn  string          // the last run's problem, told once until it changes
}

func newDiscovery(g Grow, h *p2p.Host, listed []string, log *zap.Logger) *discovery {
	d := &discovery{g: g, h: h, log: log, slots: map[string]int{}, full: map[string]bool{}}
	for i, a := range listed {
		if a != "" {
			d.slots[a] = i
		}
	}
	return d
}

// run discovers every Every until ctx ends.
func (d *discovery) run(ctx context.Context) {
	t := time.NewTicker(d.g.Every)
	defer t.Stop()
	for {
		d.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// once runs the command once and takes in what it lists; a problem is
// logged (once while it stays the same), never fatal: the run goes on
// with the workers it has.
func (d *discovery) once(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out, err := runDiscover(ctx, d.g.Cmd, d.g.Every)
	addrs, problems := ParseDiscovered(out)
	if err != nil {
		problems = append([]string{err.Error()}, problems...)
	}
	if msg := strings.Join(problems, "; "); msg != d.warn {
		d.warn = msg
		if msg != "" {
			d.log.Warn("--discover-cmd: "+msg, zap.String("command", d.g.Cmd))
		}
	}
	for _, a := range addrs {
		if _, ok := d.slots[a]; ok || d.full[a] {
			continue
		}
		slot := d.freeSlot()
		if slot < 0 {
			d.full[a] = true
			d.log.Warn("--discover-cmd lists a worker beyond --max-workers: it is not admitted", zap.String("worker", a), zap.Int("max_workers", d.g.Max))
			continue
		}
		if err := d.h.SetAddr(slot, a); err != nil {
			d.full[a] = true
			d.log.Warn("--discover-cmd lists a worker whose address cannot be used", zap.String("worker", a), zap.Error(err))
			continue
		}
		d.slots[a] = slot
		d.log.Info(fmt.Sprintf("worker %s listed by --discover-cmd: it may join as rank %d", a, slot), zap.String("worker", a), zap.Int("slot", slot))
	}
}

// freeSlot is the first slot without an address, or -1.
func (d *discovery) freeSlot() int {
	for i := range d.h.Size() {
		if i != d.h.Self() && !d.h.Known(i) {
			return i
		}
	}
	return -1
}

// runDiscover runs cmd with sh -c, its output bounded, killed (with
// everything it started) at the deadline.
func runDiscover(ctx context.Context, cmd string, deadline time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	c := exec.CommandContext(ctx, "sh", "-c", cmd)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = time.Second
	out := &limitedBuffer{max: maxDiscoverOutput}
	var stderr limitedBuffer
	stderr.max = 4 << 10
	c.Stdout, c.Stderr = out, &stderr
	err := c.Run()
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return out.Bytes(), fmt.Errorf("the command %q did not finish within %v (--discover-every): killed; it must print the workers and exit", cmd, deadline)
	case out.over:
		return out.Bytes(), fmt.Errorf("the command %q printed more than %d bytes: only the first are read", cmd, maxDiscoverOutput)
	case err != nil:
		return out.Bytes(), fmt.Errorf("the command %q failed: %v: %s", cmd, err, strings.TrimSpace(stderr.String()))
	}
	return out.Bytes(), nil
}

// limitedBuffer keeps the first max bytes written to it. It embeds no
// bytes.Buffer: io.Copy would use the buffer's ReadFrom, without limit.
type limitedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := b.max - b.buf.Len(); n > room {
		b.over = true
		p = p[:max(room, 0)]
	}
	b.buf.Write(p)
	return n, nil // the rest is dropped, not an error that stops the command
}

func (b *limitedBuffer) Bytes() []byte  { return b.buf.Bytes() }
func (b *limitedBuffer) String() string { return b.buf.String() }
