package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Health serves a pod's probes over HTTP, as Kubernetes' httpGet probes
// read them (no shell or client needed in the image): /healthz answers 200
// while the process runs (liveness), /readyz 200 once the cluster has
// formed (every peer connected and the start-up handshake passed) and 503
// before that and once the process is stopping (readiness).
type Health struct {
	ready atomic.Bool
	srv   *http.Server
	addr  net.Addr
}

// ServeHealth listens on addr (":8080") and serves the probes until ctx
// ends or Close.
func ServeHealth(ctx context.Context, addr string, log *zap.Logger) (*Health, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--health-addr %s: %w (another process on that port? pick another in the flag and the pod's probes)", addr, err)
	}
	h := &Health{addr: ln.Addr()}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !h.ready.Load() {
			http.Error(w, "not ready: the cluster has not formed", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready: the cluster formed")
	})
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := h.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("health server stopped", zap.Error(err))
		}
	}()
	context.AfterFunc(ctx, func() { _ = h.Close() })
	return h, nil
}

// Addr is where the probes are served.
func (h *Health) Addr() net.Addr { return h.addr }

// SetReady sets what /readyz answers.
func (h *Health) SetReady(ready bool) { h.ready.Store(ready) }

// Close stops serving.
func (h *Health) Close() error { return h.srv.Close() }
