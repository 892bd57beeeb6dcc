// Command rawring measures what a ring all-reduce could reach on this
// machine if it did nothing but move its bytes: N local processes in a
// ring over loopback TCP (or TLS 1.3 alone, -tls), each sending -mib MiB
// to the next in 1 MiB writes while it receives as much from the one
// before; no framing, no multiplexer, no fold. A ring all-reduce of S
// bytes moves 2(N-1)/N × S per rank each way, so with -mib set to that
// (N=4: 1.5 × S) the per-rank rate it prints bounds the all-reduce's
// busbw. Gloo, Open MPI and meshtrain pay these kernel copies (and
// ciphers) and more.
//
//	go run ./tests/tools/rawring -n 4 -mib 96 [-tls] [-reps 5]
//
// Each repetition starts after a token went round the ring; rank 0 prints
// its time, rate and CPU time (one process's; the others spend about
// the same).
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/meshtrain/meshtrain/internal/rawtls"
	"github.com/meshtrain/meshtrain/internal/rusage"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rawring:", err)
		os.Exit(1)
	}
}

func run() error {
	n := flag.Int("n", 4, "ranks (processes)")
	mib := flag.Int("mib", 96, "MiB each rank sends per repetition")
	reps := flag.Int("reps", 5, "timed repetitions")
	port := flag.Int("port", 39100, "rank r listens on 127.0.0.1:port+r")
	useTLS := flag.Bool("tls", false, "TLS 1.3 (AES-128-GCM, as libp2p's TLS) on every link")
	rank := flag.Int("rank", -1, "internal: this process's rank")
	flag.Parse()
	if *n < 2 || *mib < 1 || *reps < 1 {
		return errors.New("want -n ≥ 2, -mib ≥ 1 and -reps ≥ 1")
	}
	if *rank < 0 {
		return launch(*n)
	}
	return ring(*rank, *n, *mib<<20, *reps, *port, *useTLS)
}

// launch starts n copies of this program, one per rank, each on one core's
// worth of Go scheduler (GOMAXPROCS 1, as meshtrain's local peers).
func launch(n int) error {
	var procs []*exec.Cmd
	for r := range n {
		c := exec.Command(os.Args[0], append(os.Args[1:], "-rank", strconv.Itoa(r))...)
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		c.Env = append(os.Environ(), "GOMAXPROCS=1")
		if err := c.Start(); err != nil {
			return err
		}
		procs = append(procs, c)
	}
	var errs []error
	for r, c := range procs {
		if err := c.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("rank %d: %w", r, err))
		}
	}
	return errors.Join(errs...)
}

func ring(rank, n, total, reps, port int, useTLS bool) error {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+rank))
	if err != nil {
		return err
	}
	defer ln.Close()
	next := fmt.Sprintf("127.0.0.1:%d", port+(rank+1)%n)
	var out net.Conn
	for deadline := time.Now().Add(10 * time.Second); ; {
		if out, err = net.Dial("tcp", next); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dialing rank %d at %s: %w", (rank+1)%n, next, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer out.Close()
	in, err := ln.Accept()
	if err != nil {
		return err
	}
	defer in.Close()
	if useTLS {
		if in, out, err = secure(in, out); err != nil {
			return err
		}
	}
	src, dst := make([]byte, total), make([]byte, total)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // fault the pages in before timing
	token := []byte{0}
	for rep := range reps {
		// Rank 0 starts the token; the others pass it on.
		if rank == 0 {
			if _, err := out.Write(token); err != nil {
				return err
			}
		}
		if _, err := io.ReadFull(in, token); err != nil {
			return fmt.Errorf("the start token: %w", err)
		}
		if rank != 0 {
			if _, err := out.Write(token); err != nil {
				return err
			}
		}
		cpu0, start := rusage.CPUTime(), time.Now()
		sent := make(chan error, 1)
		go func() {
			for off := 0; off < total; off += 1 << 20 {
				if _, err := out.Write(src[off:min(total, off+1<<20)]); err != nil {
					sent <- err
					return
				}
			}
			sent <- nil
		}()
		if _, err := io.ReadFull(in, dst); err != nil {
			return fmt.Errorf("receiving: %w", err)
		}
		if err := <-sent; err != nil {
			return fmt.Errorf("sending: %w", err)
		}
		took, cpu := time.Since(start), rusage.CPUTime()-cpu0
		if rank == 0 {
			fmt.Printf("rep %d: %.3f GB/s per rank (%v), rank0 cpu %v\n", rep, float64(total)/took.Seconds()/1e9,
				took.Round(time.Millisecond), cpu.Round(time.Millisecond))
		}
	}
	return nil
}

// secure runs TLS 1.3 over both links: this rank serves the one before and
// is the client of the one after.
func secure(in, out net.Conn) (net.Conn, net.Conn, error) {
	srvCfg, cliCfg, err := rawtls.Configs()
	if err != nil {
		return nil, nil, err
	}
	srv, cli := tls.Server(in, srvCfg), tls.Client(out, cliCfg)
	done := make(chan error, 1)
	go func() { done <- srv.Handshake() }()
	if err := cli.Handshake(); err != nil {
		return nil, nil, fmt.Errorf("TLS handshake with the next rank: %w", err)
	}
	if err := <-done; err != nil {
		return nil, nil, fmt.Errorf("TLS handshake with the rank before: %w", err)
	}
	return srv, cli, nil
}
