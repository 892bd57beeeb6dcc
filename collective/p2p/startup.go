package p2p

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/core/sec"
)

// Start-up checks: each rank, having connected to a peer, asks for the
// peer's view of the cluster before opening its collective stream, so that
// peers started with different cluster lists fail at once, naming the
// difference, instead of waiting for a peer that will never come.
const (
	// ClusterProtocolID answers with the peer's view of the cluster.
	ClusterProtocolID  protocol.ID = "/meshtrain/cluster/1.0.0"
	maxClusterView                 = 64 << 10
	clusterViewTimeout             = 10 * time.Second
)

// clusterView is what a rank says about its cluster: every rank's peer ID,
// in rank order.
type clusterView struct {
	Peers []string `json:"peers"`
	// IntraHost is the rank's --intra-host, compared; Host, UID, PID and
	// Local say where its same-host link listens, if it has one
	// (samehost.go): peers on the same host, as the same user, link there.
	IntraHost IntraHost `json:"intra_host,omitempty"`
	Host      string    `json:"host,omitempty"`
	UID       int       `json:"uid,omitempty"`
	PID       int       `json:"pid,omitempty"`
	Local     string    `json:"local,omitempty"`
}

func (t *Transport) view() clusterView {
	v := clusterView{Peers: make([]string, len(t.ids)), IntraHost: t.cfg.IntraHost}
	for r, id := range t.ids {
		v.Peers[r] = id.String()
	}
	t.localView(&v)
	return v
}

// handleClusterView answers a peer's ClusterProtocolID stream with this
// rank's view.
func (t *Transport) handleClusterView(s network.Stream) {
	_ = s.SetDeadline(time.Now().Add(clusterViewTimeout))
	if err := json.NewEncoder(s).Encode(t.view()); err != nil {
		_ = s.Reset()
		return
	}
	_ = s.Close()
}

// checkView asks rank r (connected) for its view of the cluster and
// compares it with this rank's: a difference is a permanent error. It
// returns the view.
func (t *Transport) checkView(ctx context.Context, r int) (clusterView, error) {
	var theirs clusterView
	s, err := t.host.NewStream(network.WithAllowLimitedConn(ctx, "meshtrain"), t.ids[r], t.viewProto)
	if err != nil {
		return theirs, err
	}
	_ = s.SetDeadline(time.Now().Add(clusterViewTimeout))
	err = json.NewDecoder(io.LimitReader(s, maxClusterView)).Decode(&theirs)
	if err != nil {
		_ = s.Reset()
		return theirs, fmt.Errorf("reading rank %d's view of the cluster: %w", r, err)
	}
	_ = s.Close()
	return theirs, t.compareView(r, theirs)
}

func (t *Transport) compareView(r int, theirs clusterView) error {
	mine := t.view()
	if len(theirs.Peers) != len(mine.Peers) {
		return permanent(fmt.Errorf("rank %d's cluster list has %d peers, this rank's has %d: start every peer with the same cluster list (TF_CONFIG's \"cluster\")", r, len(theirs.Peers), len(mine.Peers)))
	}
	for k := range mine.Peers {
		if theirs.Peers[k] != mine.Peers[k] {
			return permanent(fmt.Errorf("rank %d's cluster list has peer %s as rank %d, this rank's has %s: start every peer with the same cluster list (TF_CONFIG's \"cluster\") and the same cluster secret", r, theirs.Peers[k], k, mine.Peers[k]))
		}
	}
	if theirs.IntraHost == "" {
		theirs.IntraHost = IntraHostTLS // a build before the same-host link
	}
	if theirs.IntraHost != mine.IntraHost {
		return permanent(fmt.Errorf("rank %d runs with --intra-host %s, this rank with --intra-host %s: start every peer with the same", r, theirs.IntraHost, mine.IntraHost))
	}
	return nil
}

// permanentError is a start-up failure that retrying cannot mend: New
// stops dialling and reports it at once.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks the error as one that retrying cannot mend (for callers
// outside the package, such as elastic runs that re-form).
func (e permanentError) Permanent() bool { return true }

func permanent(err error) error { return permanentError{err} }

// dialError explains a failed dial to rank r: a peer that answers with
// another identity was most likely started with another secret (or key).
func (t *Transport) dialError(r int, err error) error {
	var mm sec.ErrPeerIDMismatch
	// QUIC's carries only the text, and plaintext's says it its own way.
	if msg := err.Error(); !errors.As(err, &mm) && !strings.Contains(msg, "peer id mismatch") && !strings.Contains(msg, "sent unexpected peer ID") {
		return err
	}
	hint := "was it started with a different cluster secret (MESHTRAIN_CLUSTER_SECRET)?"
	if !strings.HasPrefix(t.cfg.Peers[r], "/") || !strings.Contains(t.cfg.Peers[r], "/p2p/") {
		return permanent(fmt.Errorf("rank %d's identity does not match: %s (%w)", r, hint, err))
	}
	return permanent(fmt.Errorf("rank %d's identity does not match the /p2p/ peer ID listed for it: was it started with another key (--identity), or is another process on its address? (%w)", r, err))
}

// listenError explains why this rank's host could not start: an address
// in use most likely means a second process started as the same rank.
func (t *Transport) listenError(addr fmt.Stringer, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use") {
		if t.cfg.ListenHint != "" {
			return fmt.Errorf("p2p: rank %d cannot listen on %s: the address is in use: %s (%w)", t.cfg.Rank, addr, t.cfg.ListenHint, err)
		}
		return fmt.Errorf("p2p: rank %d cannot listen on %s: the address is in use; is another process already running as rank %d (the same task index started twice), or another program on that port? (%w)", t.cfg.Rank, addr, t.cfg.Rank, err)
	}
	return fmt.Errorf("p2p: starting rank %d's host on %s: %w", t.cfg.Rank, addr, err)
}

// timeoutHint is what to add to a start-up that timed out: a peer with
// another private-network key hangs in the handshake, with nothing to tell
// it from a slow peer.
func (t *Transport) timeoutHint(errs []error) string {
	if len(t.cfg.PSK) == 0 {
		return ""
	}
	for _, err := range errs {
		if err != nil && !strings.Contains(err.Error(), "connection refused") {
			return " (a peer started with a different private-network key (MESHTRAIN_PSK) cannot complete the handshake: check that every peer has the same)"
		}
	}
	return ""
}

// firstPermanent returns the first permanent error among errs.
func firstPermanent(errs []error) error {
	for _, err := range errs {
		var p permanentError
		if errors.As(err, &p) {
			return err
		}
	}
	return nil
}
