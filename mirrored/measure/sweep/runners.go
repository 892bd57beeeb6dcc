package sweep

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/launch"
	"github.com/meshtrain/meshtrain/mirrored/observe"
	"github.com/meshtrain/meshtrain/mirrored/report"
)

// The runners' kinds.
const (
	KindInProcess = "in-process"
	KindProcesses = "processes"
)

// InProcess runs each point as its workers in this process, each replica
// with its own libp2p host on 127.0.0.1: the links, framing and security
// are the real ones, while the replicas share this process (its CPU time
// and memory) and the machine's cores.
type InProcess struct {
	Security p2p.Security
	Timeout  time.Duration
	// Join brings a replica up (p2p.Join if nil; tests make it fail).
	Join   func(context.Context, p2p.Config, collective.Options) (*collective.Member, *p2p.Transport, error)
	Logger *zap.Logger
	// LogEvery is the steps between the replicas' per-step TensorBoard
	// scalars (0: observe.DefaultLogEvery).
	LogEvery int

	once  sync.Once
	mnist *data.MNIST
	err   error
}

// Kind is KindInProcess.
func (*InProcess) Kind() string { return KindInProcess }

// Run runs job as p.Workers replicas in this process (MNIST loaded once
// for every point, unless job has it).
func (r *InProcess) Run(ctx context.Context, p Point, job mirrored.Job, logdir string) Outcome {
	if r.Logger == nil {
		r.Logger = zap.NewNop()
	}
	if r.Join == nil {
		r.Join = p2p.Join
	}
	if r.Timeout <= 0 {
		r.Timeout = collective.DefaultTimeout
	}
	if job.MNIST == nil && job.Sparse == nil {
		r.once.Do(func() { r.mnist, r.err = data.OpenImages(ctx, job.Data, job.ImageOptions(r.Logger.Named("data"))) })
		if r.err != nil {
			return Outcome{Err: r.err.Error()}
		}
		job.MNIST = r.mnist
	}
	n := p.Workers
	peers := make([]PeerRun, n)
	addrs, err := p2p.LocalAddrs(n, r.Security == p2p.SecurityQUIC)
	secret := make([]byte, 32)
	if err == nil {
		_, err = rand.Read(secret)
	}
	if err != nil {
		for rank := range peers {
			peers[rank] = PeerRun{Rank: rank, Err: fmt.Sprintf("rank %d: %v", rank, err)}
		}
		return Outcome{Peers: peers}
	}
	var wg sync.WaitGroup
	for rank := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			peers[rank] = r.peer(ctx, job, rank, addrs, secret, logdir)
		}()
	}
	wg.Wait()
	return Outcome{Peers: peers}
}

func (r *InProcess) peer(ctx context.Context, job mirrored.Job, rank int, addrs []string, secret []byte, logdir string) PeerRun {
	out := PeerRun{Rank: rank}
	log := r.Logger.With(zap.String("strategy", job.Strategy.Name()), zap.Int("workers", len(addrs)), zap.Int("batch", job.BatchSize), zap.Int("rank", rank))
	job.Logger = log
	// This replica's own observers, after the caller's (a copy: the
	// replicas share the caller's slice).
	job.Observers = append(job.Observers[:len(job.Observers):len(job.Observers)], observe.NewLog(log, nil))
	if logdir != "" {
		job.Observers = append(job.Observers, observe.NewTensorBoard(observe.Dir(logdir, rank, nil), r.LogEvery))
	}
	if job.Resources == nil { // the verdict reads the peers' CPU
		job.Resources = observe.Resources(0)
	}
	m, _, err := r.Join(ctx, p2p.Config{Rank: rank, Peers: addrs, Security: r.Security, ClusterSecret: secret,
		Timeout: r.Timeout, Logger: log.Named("p2p")}, collective.Options{Timeout: r.Timeout, Logger: log.Named("collective")})
	if err != nil {
		out.Err = err.Error()
		return out
	}
	sum, err := mirrored.Run(ctx, job, mirrored.NewGroup(m.Comm))
	// Leave together, as the worker does.
	if err = m.Leave(ctx, err, !mirrored.IsGossip(job.Strategy)); err != nil {
		out.Err = err.Error()
	} else {
		sum.Peer.BytesSent, sum.Peer.BytesReceived = m.Traffic()
		sum.Peer.Links = m.Links()
		out.Gossip = sum.Gossip
	}
	out.Summary = sum
	return out
}

// Processes runs each point as `meshtrain worker` processes on
// 127.0.0.1, started and supervised by launch.Run as `meshtrain launch`
// starts them: each peer's CPU time, memory and traffic are its own
// process's, as on N machines (but the processes share this machine's
// cores).
type Processes struct {
	// Executable is the meshtrain binary.
	Executable string
	// GlobalArgs go before "worker"; WorkerArgs after it, for every point
	// (the training flags); GossipArgs too, for gossip points, and
	// RingArgs for the ring's (the elastic flags). Each point adds its own
	// (PointArgs).
	GlobalArgs, WorkerArgs, GossipArgs, RingArgs []string
	// Elastic says the ring points' workers run the elastic mode (in
	// RingArgs): launch restarts one that dies, up to MaxRestarts times.
	Elastic     bool
	MaxRestarts int
	// QUIC picks UDP ports; StopGrace is how long a worker may take to
	// stop when asked; LogEvery the workers' --log-every.
	QUIC      bool
	StopGrace time.Duration
	LogEvery  int
	// Stdout receives each epoch's status line of a point, indented;
	// Stderr the workers' logs.
	Stdout, Stderr io.Writer
	Logger         *zap.Logger
	// Info says what the workers run, for launch's records.
	Info report.RunInfo
}

// Kind is KindProcesses.
func (*Processes) Kind() string { return KindProcesses }

// PointArgs are the worker flags of point p beyond WorkerArgs: --batch,
// --strategy, the gossip flags for a gossip point and RingArgs for a
// ring point, --slow-peer for a straggler and --logdir when the point
// has one.
func (r *Processes) PointArgs(p Point, logdir string) []string {
	args := []string{"--batch=" + strconv.Itoa(p.Batch), "--strategy=" + p.Strategy}
	if p.Strategy == mirrored.StrategyGossip {
		args = append(args, r.GossipArgs...)
	} else {
		args = append(args, r.RingArgs...)
	}
	if !p.Straggler.None() {
		args = append(args, "--slow-peer="+p.Straggler.String())
	}
	if logdir != "" {
		args = append(args, "--logdir="+logdir)
	}
	return args
}

// Run launches p.Workers workers for point p and waits for them.
func (r *Processes) Run(ctx context.Context, p Point, job mirrored.Job, logdir string) Outcome {
	info := r.Info
	info.Strategy = p.Strategy
	out := &lineFilter{w: r.Stdout}
	rep, err := launch.Run(ctx, launch.Config{
		N: p.Workers, Executable: r.Executable, GlobalArgs: r.GlobalArgs,
		WorkerArgs: append(append([]string(nil), r.WorkerArgs...), r.PointArgs(p, logdir)...),
		QUIC:       r.QUIC, StopGrace: r.StopGrace, Gossip: p.Strategy == mirrored.StrategyGossip, TolerateLoss: true,
		Elastic: r.Elastic && p.Strategy != mirrored.StrategyGossip, MaxRestarts: r.MaxRestarts,
		Stdout: out, Stderr: r.Stderr, LogEvery: r.LogEvery, Logger: r.Logger, Info: info,
	})
	out.flush()
	var o Outcome
	if err != nil {
		o.Err = err.Error()
	}
	if rep == nil {
		return o
	}
	for _, lp := range rep.Peers {
		pr := PeerRun{Rank: lp.Rank, Summary: lp.Summary, Err: lp.Err}
		if lp.Summary != nil {
			pr.Gossip = lp.Summary.Gossip
		}
		o.Peers = append(o.Peers, pr)
	}
	return o
}

// lineFilter passes on launch's epoch lines ("[launch] epoch 1 …"),
// indented, and drops its other output (the workers' pids, the progress
// lines).
type lineFilter struct {
	w   io.Writer
	buf []byte
}

func (f *lineFilter) Write(p []byte) (int, error) {
	f.buf = append(f.buf, p...)
	for {
		i := strings.IndexByte(string(f.buf), '\n')
		if i < 0 {
			return len(p), nil
		}
		f.line(string(f.buf[:i]))
		f.buf = f.buf[i+1:]
	}
}

func (f *lineFilter) line(s string) {
	if f.w == nil {
		return
	}
	if rest, ok := strings.CutPrefix(s, "[launch] epoch "); ok {
		fmt.Fprintf(f.w, "    epoch %s\n", rest)
	}
}

func (f *lineFilter) flush() {
	if len(f.buf) > 0 {
		sc := bufio.NewScanner(strings.NewReader(string(f.buf)))
		for sc.Scan() {
			f.line(sc.Text())
		}
		f.buf = nil
	}
}
