// Command netbench measures one emulated host's links, run once per host
// (one process per namespace) by package netns:
//
//	netbench tcp -rank R -hosts IP0,IP1,… -port P -duration D [-tls]
//	netbench allreduce -rank R -hosts IP0,IP1,… -port P -security tls -sizes 16777216,67108864 -reps 3 [-algo ring] [-per-host K]
//	netbench gather -rank R -hosts IP0,IP1,… -port P -touched 100,1000 -reps 9
//	netbench gossip -rank R -hosts IP0,IP1,… -port P -sizes 4096,1048576 -reps 9
//
// allreduce, gather and gossip take -idle D: every timed repetition starts
// D after a barrier (so that tbf's bucket is full again).
//
// tcp sends raw TCP to the next host in the ring for D while receiving
// from the previous one, and prints what it received as one JSON object
// (netns.TCPResult); with -tls, over crypto/tls (TLS 1.3, AES-128-GCM, as
// libp2p's TLS) and nothing else: what the cipher leaves of the link when
// no framing, multiplexer or fold takes any CPU. allreduce runs float32 sum all-reduces over
// meshtrain's libp2p transport; rank 0 prints one netns.AllReduceResult a
// size. gather times the sparse gradient exchange (each rank's -touched
// random features encoded, all-gathered in one round, decoded) and gossip
// one pairwise gossip round of each size; rank 0 prints one
// netns.OpResult a size.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/internal/hostid"
	"github.com/meshtrain/meshtrain/internal/rawtls"
	"github.com/meshtrain/meshtrain/tests/netns"
)

// timeout bounds connecting and every collective.
const timeout = 60 * time.Second

// secret is the cluster secret of every measurement (a test network).
var secret = []byte("meshtrain netns measurement key!")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "netbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 || !slices.Contains([]string{"tcp", "allreduce", "gather", "gossip"}, args[0]) {
		return errors.New("usage: netbench tcp|allreduce|gather|gossip -rank R -hosts IP0,IP1,… [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	rank := fs.Int("rank", 0, "this host's index into -hosts")
	hostList := fs.String("hosts", "", "every host's IP address, comma-separated")
	port := fs.Int("port", netns.TCPPort, "port every host listens on")
	duration := fs.Duration("duration", time.Second, "tcp: how long to send")
	useTLS := fs.Bool("tls", false, "tcp: over TLS 1.3 (the raw cipher's rate)")
	security := fs.String("security", "tls", "allreduce: link security")
	intraHost := fs.String("intra-host", "auto", "links between processes on one host (-per-host above 1): auto (shared memory, no cipher) or tls (over -security)")
	sizeList := fs.String("sizes", "16777216", "allreduce: sizes in bytes, comma-separated")
	reps := fs.Int("reps", 3, "allreduce: timed repetitions per size")
	window := fs.Int("window", 0, "stream window in bytes (0: p2p's default; for experiments)")
	muxer := fs.String("muxer", "", "stream multiplexer: mesh or yamux (default p2p's)")
	algoName := fs.String("algo", "auto", "allreduce: ring, tree, star, hierarchical or auto")
	chunk := fs.Int("chunk", 0, "allreduce: ring chunk in bytes (0: collective's default)")
	perHost := fs.Int("per-host", 1, "allreduce, gather, gossip: processes on each host, listening on -port, -port+1, …; rank R is host R/per-host's")
	idle := fs.Duration("idle", 0, "allreduce, gather, gossip: how long to wait after each barrier before a timed repetition (netns.Rate.Refill: tbf's bucket refills)")
	touchedList := fs.String("touched", "1000", "gather: touched features per rank, comma-separated")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	hosts := strings.Split(*hostList, ",")
	k := *perHost
	if k < 1 || (k > 1 && args[0] == "tcp") {
		return fmt.Errorf("-per-host %d: want at least 1 (and 1 for tcp)", k)
	}
	if *rank < 0 || *rank >= len(hosts)*k || len(hosts) < 2 {
		return fmt.Errorf("rank %d of hosts %q with %d a host: want at least 2 hosts and a rank among their processes", *rank, *hostList, k)
	}
	addrs := make([]string, len(hosts)*k)
	for i := range addrs {
		addrs[i] = net.JoinHostPort(hosts[i/k], strconv.Itoa(*port+i%k))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+*duration)
	defer cancel()
	if args[0] == "tcp" {
		return rawTCP(ctx, *rank, addrs, *duration, *useTLS)
	}
	var sizes, touched []int64
	for _, s := range strings.Split(*sizeList, ",") {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 4 || v%4 != 0 {
			return fmt.Errorf("-sizes: %q is not a positive multiple of 4 bytes", s)
		}
		sizes = append(sizes, v)
	}
	for _, s := range strings.Split(*touchedList, ",") {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 1 {
			return fmt.Errorf("-touched: %q is not a positive count", s)
		}
		touched = append(touched, v)
	}
	algo, err := collective.ParseAlgo(*algoName)
	if err != nil {
		return err
	}
	tr, err := p2p.New(ctx, p2p.Config{Rank: *rank, Peers: addrs, Security: p2p.Security(*security), ClusterSecret: secret, Timeout: timeout, StreamWindow: uint32(*window), Muxer: p2p.Muxer(*muxer), IntraHost: p2p.IntraHost(*intraHost)})
	if err != nil {
		return err
	}
	defer tr.Close()
	c, err := collective.New(tr, collective.Options{Timeout: timeout, Algo: algo, ChunkBytes: *chunk})
	if err != nil {
		return err
	}
	// Each namespace is a host: with several processes on one, Auto takes
	// the hierarchical all-reduce, as a worker's would.
	if err := c.LearnHosts(ctx, hostid.Self()); err != nil {
		return err
	}
	switch args[0] {
	case "gather":
		return sparseGather(ctx, c, touched, max(*reps, 1), *idle)
	case "gossip":
		return gossipRound(ctx, c, sizes, max(*reps, 1), *idle)
	}
	return allReduce(ctx, c, tr, p2p.Security(*security), sizes, max(*reps, 1), *idle)
}

// rawTCP sends to the next rank for d while receiving from the previous
// one (over TLS if useTLS), and prints the receiving side's rate.
func rawTCP(ctx context.Context, rank int, addrs []string, d time.Duration, useTLS bool) error {
	var srv, cli *tls.Config
	if useTLS {
		var err error
		if srv, cli, err = rawtls.Configs(); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", addrs[rank])
	if err != nil {
		return err
	}
	defer ln.Close()
	context.AfterFunc(ctx, func() { _ = ln.Close() })
	sent := make(chan error, 1)
	go func() { sent <- send(ctx, addrs[(rank+1)%len(addrs)], d, cli) }()
	conn, err := ln.Accept()
	if err != nil {
		return fmt.Errorf("accepting the previous rank: %w", err)
	}
	defer conn.Close()
	context.AfterFunc(ctx, func() { _ = conn.Close() })
	if srv != nil {
		tc := tls.Server(conn, srv)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("TLS handshake with the previous rank: %w", err)
		}
		conn = tc
	}
	res, err := receive(conn)
	if err != nil {
		return err
	}
	if err := <-sent; err != nil {
		return err
	}
	res.Rank = rank
	return json.NewEncoder(os.Stdout).Encode(res)
}

// send dials to (retrying while it starts) and writes 1 MiB blocks for d,
// over TLS if cli is set.
func send(ctx context.Context, to string, d time.Duration, cli *tls.Config) error {
	var conn net.Conn
	for {
		var err error
		if conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", to); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dialing %s: %w", to, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	defer conn.Close()
	context.AfterFunc(ctx, func() { _ = conn.Close() })
	var w interface {
		io.Writer
		CloseWrite() error
	} = conn.(*net.TCPConn)
	if cli != nil {
		tc := tls.Client(conn, cli)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("TLS handshake with %s: %w", to, err)
		}
		w = tc
	}
	buf := make([]byte, 1<<20)
	for end := time.Now().Add(d); time.Now().Before(end); {
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("sending to %s: %w", to, err)
		}
	}
	return w.CloseWrite()
}

// receive reads until EOF; the rate counts from the end of the first read.
func receive(conn net.Conn) (netns.TCPResult, error) {
	buf := make([]byte, 1<<20)
	var total int64
	var first time.Time
	for {
		n, err := conn.Read(buf)
		if first.IsZero() && n > 0 {
			first = time.Now()
		} else {
			total += int64(n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return netns.TCPResult{}, fmt.Errorf("receiving: %w", err)
		}
	}
	secs := time.Since(first).Seconds()
	return netns.TCPResult{Bytes: total, Seconds: secs, Rate: float64(total) / secs}, nil
}

// allReduce times each size; rank 0 prints.
func allReduce(ctx context.Context, c *collective.Comm, tr *p2p.Transport, sec p2p.Security, sizes []int64, reps int, idle time.Duration) error {
	// Every rank's count of links through shared memory, summed: the
	// report says which path the intra-host bytes took, not which was asked.
	links := []float32{float32(tr.SameHostLinks())}
	if err := c.AllReduceFloat32(ctx, links, collective.Sum); err != nil {
		return fmt.Errorf("counting the same-host links: %w", err)
	}
	for _, size := range sizes {
		r, err := timeAllReduce(ctx, c, size, reps, idle)
		if err != nil {
			return fmt.Errorf("all-reduce of %d bytes: %w", size, err)
		}
		r.Security, r.Algo, r.SameHostLinks = string(sec), c.AlgoFor(int(size)).String(), int(links[0])
		if c.Rank() == 0 {
			if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// timeAllReduce checks one all-reduce of size bytes (which also warms the
// links up), then times reps more (timeOp).
func timeAllReduce(ctx context.Context, c *collective.Comm, size int64, reps int, idle time.Duration) (netns.AllReduceResult, error) {
	n := c.Size()
	buf := make([]float32, size/4)
	for i := range buf {
		buf[i] = float32((c.Rank() + 1) * (i % 13))
	}
	secs, cpu, err := timeOp(ctx, c, reps, idle, func(rep int) error {
		if err := c.AllReduceFloat32(ctx, buf, collective.Sum); err != nil || rep >= 0 {
			return err
		}
		for i, v := range buf {
			if v != float32(n*(n+1)/2*(i%13)) {
				return fmt.Errorf("rank %d: element %d is %v, want %v", c.Rank(), i, v, n*(n+1)/2*(i%13))
			}
		}
		return nil
	})
	if err != nil {
		return netns.AllReduceResult{}, err
	}
	r := netns.AllReduceResult{N: n, Bytes: size, CPUSeconds: cpu}
	for _, s := range secs {
		r.BusBW = append(r.BusBW, float64(size)*2*float64(n-1)/float64(n)/s)
	}
	return r, nil
}
