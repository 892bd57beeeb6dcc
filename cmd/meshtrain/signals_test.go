package main

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestGracefulSIGTERM: with a command stopping gracefully, the first
// SIGTERM closes its stop channel and cancels the root context only
// --stop-timeout later; a second SIGTERM cancels it at once. Without one,
// SIGTERM cancels at once, and so does Ctrl-C with one. The process then
// exits 128 + the signal: 143 after SIGTERM (also past --stop-timeout),
// 130 after Ctrl-C.
func TestGracefulSIGTERM(t *testing.T) {
	within := func(what string, ch <-chan struct{}, d time.Duration) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(d):
			t.Fatalf("%s not within %v", what, d)
		}
	}
	defer gracefulStop.Store(nil)
	run := func(graceful time.Duration) (context.Context, chan<- os.Signal, <-chan struct{}) {
		gracefulStop.Store(nil)
		var stopping <-chan struct{}
		if graceful > 0 {
			stopping = stopGracefully(graceful)
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		t.Cleanup(func() { cancel(nil) })
		sigs := make(chan os.Signal)
		go handleSignals(ctx, cancel, sigs)
		return ctx, sigs, stopping
	}

	ctx, sigs, stopping := run(300 * time.Millisecond)
	start := time.Now()
	sigs <- syscall.SIGTERM
	within("stop channel closed", stopping, 5*time.Second)
	if ctx.Err() != nil {
		t.Fatal("the first SIGTERM cancelled the root context at once")
	}
	within("cancelled after --stop-timeout", ctx.Done(), 5*time.Second)
	if c := context.Cause(ctx); c != errTerminated || exitCode(ctx, c) != 143 {
		t.Errorf("cancelled past --stop-timeout by %v, exit %d: want terminated, 143", c, exitCode(ctx, c))
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("cancelled after %v, before --stop-timeout", d)
	}

	ctx, sigs, _ = run(time.Hour)
	sigs <- syscall.SIGTERM
	sigs <- syscall.SIGTERM
	within("cancelled at the second SIGTERM", ctx.Done(), 5*time.Second)

	ctx, sigs, _ = run(time.Hour)
	sigs <- os.Interrupt
	within("cancelled at Ctrl-C", ctx.Done(), 5*time.Second)
	if c := context.Cause(ctx); c != errInterrupted || exitCode(ctx, c) != 130 {
		t.Errorf("cancelled at Ctrl-C by %v, exit %d: want interrupted, 130", c, exitCode(ctx, c))
	}

	ctx, sigs, _ = run(0)
	sigs <- syscall.SIGTERM
	within("cancelled at SIGTERM without a graceful command", ctx.Done(), 5*time.Second)
	if c := context.Cause(ctx); c != errTerminated || exitCode(ctx, c) != 143 {
		t.Errorf("cancelled at SIGTERM by %v, exit %d: want terminated, 143 (128 + SIGTERM)", c, exitCode(ctx, c))
	}
}
