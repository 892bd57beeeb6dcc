package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// Proc is one process to run on one host.
type Proc struct {
	// Args is the command line; Args[0] is the program.
	Args []string
	// Env is added to this process's environment.
	Env []string
	// Delay starts the process this long after the others (a slow host).
	Delay time.Duration
}

// Result is a finished process.
type Result struct {
	// Host is the host it ran on; Rank its index among all the processes
	// (Host itself with one process a host).
	Host, Rank     int
	Stdout, Stderr string
	Err            error
	Elapsed        time.Duration
}

func (r Result) String() string {
	return fmt.Sprintf("%s: exit %v after %v\n--- stdout\n%s--- stderr\n%s", r.who(), r.Err, r.Elapsed.Round(time.Millisecond), r.Stdout, r.Stderr)
}

func (r Result) who() string {
	if r.Rank == r.Host {
		return fmt.Sprintf("host %d", r.Host)
	}
	return fmt.Sprintf("rank %d (host %d)", r.Rank, r.Host)
}

// RunOnAll runs proc(i) on every host i at once and waits for all of them.
// The first to fail stops the others (they would only wait out their
// timeouts for it); the error names every host that failed, the first
// one's output included. It also fails when ctx ends first.
func (h *Hosts) RunOnAll(ctx context.Context, proc func(i int) Proc) ([]Result, error) {
	return h.RunPerHost(ctx, 1, proc)
}

// RunPerHost is RunOnAll with perHost processes on every host (peers
// that share a host): proc(rank) runs on host rank/perHost, for rank in
// [0, N·perHost).
func (h *Hosts) RunPerHost(ctx context.Context, perHost int, proc func(rank int) Proc) ([]Result, error) {
	if perHost < 1 {
		return nil, fmt.Errorf("netns: %d processes a host: want at least 1", perHost)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make([]Result, h.N*perHost)
	first := -1
	var once sync.Once
	var wg sync.WaitGroup
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = h.runOne(ctx, i/perHost, i, proc(i))
			if res[i].Err != nil {
				once.Do(func() { first = i; cancel() })
			}
		}()
	}
	wg.Wait()
	if first < 0 {
		return res, nil
	}
	errs := []error{fmt.Errorf("first failure: %s", res[first])}
	for _, r := range res {
		if r.Err != nil && r.Rank != first {
			errs = append(errs, fmt.Errorf("%s (stopped once %s failed): %w", r.who(), res[first].who(), r.Err))
		}
	}
	return res, errors.Join(errs...)
}

// runOne runs p on host i as process rank, after p.Delay.
func (h *Hosts) runOne(ctx context.Context, i, rank int, p Proc) Result {
	r := Result{Host: i, Rank: rank}
	if p.Delay > 0 {
		select {
		case <-ctx.Done():
			r.Err = fmt.Errorf("not started: %w", ctx.Err())
			return r
		case <-time.After(p.Delay):
		}
	}
	cmd := h.Command(ctx, i, p.Args[0], p.Args[1:]...)
	cmd.Env = append(os.Environ(), p.Env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	r.Err = cmd.Run()
	r.Elapsed = time.Since(start)
	r.Stdout, r.Stderr = out.String(), errb.String()
	return r
}
