package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"github.com/meshtrain/meshtrain/collective/p2p"
)

// ChildEnv carries a child peer's role (JSON) from the parent.
const ChildEnv = "MESHTRAIN_BENCH_CHILD"

// role is what one peer of a run needs; a child peer process gets it as
// JSON in ChildEnv.
type role struct {
	Rank   int      `json:"rank"`
	Peers  []string `json:"peers"`
	Secret []byte   `json:"secret"`
	// The sparse benchmark's run: its exchange and steps.
	Exchange string `json:"exchange,omitempty"`
	Steps    int    `json:"steps,omitempty"`
}

// childRole returns this process's role if its parent started it as a
// peer (ChildEnv is set), else nil. A child re-runs its parent's command
// line, so every benchmark asks before doing anything else.
func childRole() (*role, error) {
	raw := os.Getenv(ChildEnv)
	if raw == "" {
		return nil, nil
	}
	var ro role
	if err := json.Unmarshal([]byte(raw), &ro); err != nil {
		return nil, fmt.Errorf("bench: bad %s: %w", ChildEnv, err)
	}
	return &ro, nil
}

// peerProcs is each peer process's GOMAXPROCS: set, or else NumCPU/n (at
// least 1), so n peers on one machine do not oversubscribe its cores.
func peerProcs(set, n int) int {
	if set > 0 {
		return set
	}
	return max(1, runtime.NumCPU()/n)
}

// runPeers runs one cluster of n peers on 127.0.0.1 with a fresh cluster
// secret: rank 0 in this goroutine, the others as goroutines of this
// process (inProcess) or as child processes re-running this command line
// with GOMAXPROCS procs (this process too, until runPeers returns).
// extend, if set, adds the run's part to each role; runRank runs a rank
// of this process. A failing peer other than rank 0 cancels the run, so
// that rank 0 does not wait out its timeout. It returns every peer's error
// joined.
func runPeers(ctx context.Context, n int, sec p2p.Security, inProcess bool, procs int, extend func(*role), runRank func(context.Context, role) error) error {
	addrs, err := p2p.LocalAddrs(n, sec == p2p.SecurityQUIC)
	if err != nil {
		return err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	roleOf := func(r int) role {
		ro := role{Rank: r, Peers: addrs, Secret: secret}
		if extend != nil {
			extend(&ro)
		}
		return ro
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	if inProcess {
		for r := 1; r < n; r++ {
			wg.Go(func() {
				if errs[r] = runRank(ctx, roleOf(r)); errs[r] != nil {
					cancel()
				}
			})
		}
	} else {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		if err := startPeers(ctx, &wg, errs, procs, roleOf, cancel); err != nil {
			cancel() // the children started so far
			return err
		}
	}
	errs[0] = runRank(ctx, roleOf(0))
	wg.Wait()
	return errors.Join(errs...)
}

// startPeers starts ranks 1..len(errs)-1 as child processes re-running
// this binary's command line, each with roleOf(rank) as JSON in ChildEnv
// and GOMAXPROCS=procs. Children discard stdout, share stderr, and are
// killed if this process dies or ctx ends. A child's exit error goes into
// errs[rank], and then failed is called. wg counts the children until they
// exit.
func startPeers(ctx context.Context, wg *sync.WaitGroup, errs []error, procs int, roleOf func(rank int) role, failed func()) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: finding this binary to start peers: %w", err)
	}
	for r := 1; r < len(errs); r++ {
		js, err := json.Marshal(roleOf(r))
		if err != nil {
			return fmt.Errorf("bench: encoding peer %d's role: %w", r, err)
		}
		cmd := exec.CommandContext(ctx, exe, os.Args[1:]...)
		cmd.Env = append(os.Environ(), ChildEnv+"="+string(js), "GOMAXPROCS="+strconv.Itoa(procs))
		cmd.Stdout = io.Discard
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("bench: starting peer %d: %w", r, err)
		}
		wg.Go(func() {
			if err := cmd.Wait(); err != nil {
				errs[r] = fmt.Errorf("peer process %d: %w", r, err)
				failed()
			}
		})
	}
	return nil
}
