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

// HealthLimits bound what the probe server holds, so that nobody who can
// reach --health-addr can take the worker's file descriptors (and with
// them its libp2p listener): at most MaxConns connections at once (when
// they are all held, the one that has waited longest without a request
// under way is closed for the next: reservingListener), each closed once idle for Idle between requests or if its
// request's header takes longer than ReadHeader, its whole request longer
// than Read or its answer longer than Write. Probes are one short request
// each (kubelet opens a connection per probe), so none of these is near.
type HealthLimits struct {
	MaxConns                      int
	ReadHeader, Read, Write, Idle time.Duration
	MaxHeaderBytes                int
}

// DefaultHealthLimits are ServeHealth's limits.
var DefaultHealthLimits = HealthLimits{MaxConns: 32, ReadHeader: 5 * time.Second, Read: 5 * time.Second, Write: 5 * time.Second,
	Idle: 10 * time.Second, MaxHeaderBytes: 8 << 10}

// healthLimits are the limits ServeHealth uses (a test's shorter ones).
var healthLimits = DefaultHealthLimits

// Health serves a pod's probes over HTTP, as Kubernetes' httpGet probes
// read them (no shell or client needed in the image):
//
//   - /healthz: 200 while the process runs (liveness).
//   - /readyz: 200 once this peer listens, so the others can dial it; 503
//     before, and once it is stopping (readiness). Not "once the cluster
//     formed": Kubernetes publishes a pod's DNS name (the training
//     operator's per-pod headless Services, any Service without
//     publishNotReadyAddresses) only once the pod is ready, so peers that
//     waited for each other to be ready would never find each other.
//   - /readyz/cluster: 200 once the cluster has formed (every peer
//     connected and the start-up handshake passed), 503 before and once
//     stopping: for monitoring and scripts.
type Health struct {
	listening, formed, stopping atomic.Bool
	srv                         *http.Server
	addr                        net.Addr
}

// ServeHealth listens on addr (":8080") and serves the probes until ctx
// ends or Close.
func ServeHealth(ctx context.Context, addr string, log *zap.Logger) (*Health, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--health-addr %s: %w (another process on that port? pick another in the flag and the pod's probes)", addr, err)
	}
	lim := healthLimits
	h := &Health{addr: ln.Addr()}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", h.probe(&h.listening, "listening", "not listening yet"))
	mux.HandleFunc("/readyz/cluster", h.probe(&h.formed, "the cluster formed", "the cluster has not formed"))
	rl := newReservingListener(ln, lim.MaxConns)
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: lim.ReadHeader, ReadTimeout: lim.Read, WriteTimeout: lim.Write,
		IdleTimeout: lim.Idle, MaxHeaderBytes: lim.MaxHeaderBytes, ConnState: rl.connState}
	go func() {
		if err := h.srv.Serve(rl); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("health server stopped", zap.Error(err))
		}
	}()
	context.AfterFunc(ctx, func() { _ = h.Close() })
	return h, nil
}

// probe answers 200 "ready: yes" while cond holds and the peer is not
// stopping, else 503 saying why.
func (h *Health) probe(cond *atomic.Bool, yes, no string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case h.stopping.Load():
			http.Error(w, "not ready: stopping", http.StatusServiceUnavailable)
		case !cond.Load():
			http.Error(w, "not ready: "+no, http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ready: "+yes)
		}
	}
}

// Addr is where the probes are served.
func (h *Health) Addr() net.Addr { return h.addr }

// Listening marks the peer as listening (/readyz).
func (h *Health) Listening() { h.listening.Store(true) }

// Formed marks the cluster as formed (/readyz/cluster).
func (h *Health) Formed() { h.formed.Store(true) }

// Stopping makes both readiness probes answer 503 from now on.
func (h *Health) Stopping() { h.stopping.Store(true) }

// Close stops serving.
func (h *Health) Close() error { return h.srv.Close() }
