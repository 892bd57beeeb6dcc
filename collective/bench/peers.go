package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// StartPeers starts ranks 1..n-1 as child processes re-running this
// binary's command line, each with role(rank) as JSON in the environment
// variable env and GOMAXPROCS=procs. Children discard stdout, share
// stderr, and are killed if this process dies. A child's exit error goes
// into errs[rank] (errs needs n entries) and then failed, if not nil, is
// called, so the caller can cancel rank 0 rather than let it wait out its
// timeout. wg counts the children until they exit.
func StartPeers(ctx context.Context, wg *sync.WaitGroup, errs []error, n, procs int, env string, role func(rank int) any, failed func()) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: finding this binary to start peers: %w", err)
	}
	for r := 1; r < n; r++ {
		js, err := json.Marshal(role(r))
		if err != nil {
			return fmt.Errorf("bench: encoding peer %d's role: %w", r, err)
		}
		cmd := exec.CommandContext(ctx, exe, os.Args[1:]...)
		cmd.Env = append(os.Environ(), env+"="+string(js), "GOMAXPROCS="+strconv.Itoa(procs))
		cmd.Stdout = io.Discard
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("bench: starting peer %d: %w", r, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cmd.Wait(); err != nil {
				errs[r] = fmt.Errorf("peer process %d: %w", r, err)
				if failed != nil {
					failed()
				}
			}
		}()
	}
	return nil
}
