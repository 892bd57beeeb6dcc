package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// graceful is how a command that stops gracefully (worker) takes SIGTERM:
// the first SIGTERM closes stop instead of cancelling the root context,
// which is cancelled timeout later if the command has not ended by then,
// or at once on a second SIGTERM or on Ctrl-C.
type graceful struct {
	stop    chan struct{}
	timeout time.Duration
	once    sync.Once
}

// gracefulStop is set by the running command, if it stops gracefully.
var gracefulStop atomic.Pointer[graceful]

// stopGracefully makes the first SIGTERM close the returned channel (see
// graceful).
func stopGracefully(timeout time.Duration) <-chan struct{} {
	g := &graceful{stop: make(chan struct{}), timeout: timeout}
	gracefulStop.Store(g)
	return g.stop
}

// The causes of the root context's cancellation (context.Cause), by
// which the process's exit code follows the Unix convention: 128 + the
// signal's number.
var (
	errInterrupted = errors.New("interrupted")
	errTerminated  = errors.New("terminated")
)

// signalContext is the root context: cancelled by Ctrl-C and by SIGTERM,
// unless a command stops gracefully on SIGTERM (stopGracefully), with the
// signal as its cause (errInterrupted, errTerminated).
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go handleSignals(ctx, cancel, sigs)
	return ctx, func() { signal.Stop(sigs); cancel(nil) }
}

// signalCause is the cancellation cause of signal s.
func signalCause(s os.Signal) error {
	if s == syscall.SIGTERM {
		return errTerminated
	}
	return errInterrupted
}

// handleSignals acts on each signal from sigs until ctx ends: SIGTERM
// with a graceful command (gracefulStop) closes its stop channel the
// first time and cancels its timeout later; any other signal, or a
// second SIGTERM, cancels at once.
func handleSignals(ctx context.Context, cancel context.CancelCauseFunc, sigs <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-sigs:
			g := gracefulStop.Load()
			if s != syscall.SIGTERM || g == nil {
				cancel(signalCause(s))
				continue
			}
			first := false
			g.once.Do(func() { first = true; close(g.stop) })
			if !first {
				cancel(errTerminated)
				continue
			}
			time.AfterFunc(g.timeout, func() { cancel(errTerminated) })
		}
	}
}
