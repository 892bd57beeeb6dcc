package p2p

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p/intrahost"
	"github.com/meshtrain/meshtrain/internal/hostid"
)

// The same-host link (issue 31): with IntraHostAuto, a rank listens on an
// abstract Unix socket (package intrahost) and says where in its view of
// the cluster, which peers fetch over their authenticated libp2p links
// before they open a stream. A peer that finds the rank on its own host
// (hostid.Self: machine, boot and network namespace) and user sends to it
// over that socket and a shared ring instead of a libp2p stream: no
// cipher, one copy. The collective algorithms do not know: it is one more
// kind of link under the same Transport, feeding the same Inbox with the
// same frame bound.
//
// Who may link: the listener takes a connection only from a process of
// its own uid (the kernel's SO_PEERCRED, not a claim), whose pid is the one
// it claims, that then proves it holds the cluster secret and says which
// rank it is, in a mutual challenge (auth.go's, keyed by a key of its own
// and labelled for this link); the dialer checks in turn that the socket
// belongs to the pid and uid the rank's authenticated view gave. A process
// without the secret, or of another user, is refused and logged. A link
// that cannot be made stays on the security's link, with a warning.
const (
	localInfo     = "intra-host-challenge"
	localDialer   = "meshtrain/intra-host/v1 dialer"
	localListener = "meshtrain/intra-host/v1 listener"
	localMagic    = 0x4d54_4948 // "MTIH", the hello's first bytes
	localHello    = 12          // magic, rank, pid: 3 × uint32
	// localPending bounds the handshakes under way at once: a local
	// process that opens connections and says nothing holds a slot each
	// for at most authTimeout, and the rest are closed at once.
	localPending = 16
)

// IntraHost is how links between peers on one host go.
type IntraHost string

// IntraHost settings.
const (
	IntraHostTLS  IntraHost = "tls"
	IntraHostAuto IntraHost = "auto"
)

// ParseIntraHost parses auto or tls ("" means tls, the library's
// default; the commands default to auto).
func ParseIntraHost(s string) (IntraHost, error) {
	if s == "" {
		return IntraHostTLS, nil
	}
	if h := IntraHost(s); h == IntraHostTLS || h == IntraHostAuto {
		return h, nil
	}
	return "", fmt.Errorf("p2p: unknown --intra-host %q: want auto (peers on one host, as one user, link over shared memory) or tls (every link over --security)", s)
}

// localSide is a Transport's same-host listener and its inbound links,
// guarded by the Transport's mu.
type localSide struct {
	ln      *intrahost.Listener
	key     []byte
	host    string
	slots   chan struct{}
	pending map[*net.UnixConn]bool // in their handshake
	in      map[int]*intrahost.Receiver
}

// listenLocal starts the same-host listener when cfg.IntraHost is auto
// and the link can be had (Linux, a cluster secret to prove membership
// with); otherwise it says why at Info, and every link stays libp2p's.
func (t *Transport) listenLocal() {
	if t.cfg.IntraHost != IntraHostAuto {
		return
	}
	why := ""
	var key []byte
	var ln *intrahost.Listener
	var err error
	switch {
	case !intrahost.Supported:
		why = "this system has no same-host link (it needs Linux)"
	case len(t.cfg.ClusterSecret) == 0:
		why = "no cluster secret to prove a local peer's membership with (peers listed by /p2p/ ID alone)"
	default:
		if key, err = deriveKey(t.cfg.ClusterSecret, localInfo); err == nil {
			ln, err = intrahost.Listen()
		}
		if err != nil {
			why = err.Error()
		}
	}
	if why != "" {
		t.log.Info("--intra-host auto: links to peers on this host stay on "+string(t.cfg.Security), zap.String("reason", why))
		return
	}
	t.local = &localSide{ln: ln, key: key, host: hostid.Self(), slots: make(chan struct{}, localPending),
		pending: map[*net.UnixConn]bool{}, in: map[int]*intrahost.Receiver{}}
	go t.acceptLocal(t.local)
}

// localView adds this rank's same-host listener, if any, to its view.
func (t *Transport) localView(v *clusterView) {
	if lo := t.local; lo != nil {
		v.Host, v.UID, v.PID, v.Local = lo.host, os.Getuid(), os.Getpid(), lo.ln.Name()
	}
}

// dialLocal returns a same-host link to rank r if r's view says it is on
// this host, as this user, with a listener; nil means use a stream. A
// link that fails is logged, and the stream used instead.
func (t *Transport) dialLocal(ctx context.Context, r int, theirs clusterView) *intrahost.Sender {
	lo := t.local
	if lo == nil || theirs.Local == "" || theirs.Host != lo.host || theirs.UID != os.Getuid() {
		return nil
	}
	s, err := t.linkLocal(ctx, r, theirs)
	if err != nil {
		t.log.Warn("the link to a peer on this host stays on "+string(t.cfg.Security)+": the same-host link failed", zap.Int("to", r), zap.Error(err))
		return nil
	}
	return s
}

func (t *Transport) linkLocal(ctx context.Context, r int, theirs clusterView) (*intrahost.Sender, error) {
	ctx, cancel := context.WithTimeout(ctx, authTimeout)
	defer cancel()
	c, err := intrahost.Dial(ctx, theirs.Local)
	if err != nil {
		return nil, err
	}
	s, err := t.dialHandshake(ctx, c, r, theirs)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return s, nil
}

// dialHandshake is the dialer's side: check who listens, say who calls,
// prove it, take the ring.
func (t *Transport) dialHandshake(ctx context.Context, c *net.UnixConn, r int, theirs clusterView) (*intrahost.Sender, error) {
	cred, err := intrahost.PeerCred(c)
	if err != nil {
		return nil, err
	}
	if cred.UID != theirs.UID || cred.PID != theirs.PID {
		return nil, fmt.Errorf("the socket %s belongs to pid %d (uid %d), not to rank %d's pid %d (uid %d)", theirs.Local, cred.PID, cred.UID, r, theirs.PID, theirs.UID)
	}
	var hello [localHello]byte
	binary.BigEndian.PutUint32(hello[0:], localMagic)
	binary.BigEndian.PutUint32(hello[4:], uint32(t.cfg.Rank))
	binary.BigEndian.PutUint32(hello[8:], uint32(os.Getpid()))
	_ = c.SetDeadline(time.Now().Add(authTimeout))
	if _, err := c.Write(hello[:]); err != nil {
		return nil, fmt.Errorf("saying hello: %w", err)
	}
	if err := mutualChallenge(ctx, c, t.local.key, t.ids[t.cfg.Rank], t.ids[r], [2]string{localDialer, localListener}, true); err != nil {
		return nil, fmt.Errorf("rank %d's same-host listener: %w", r, err)
	}
	_ = c.SetDeadline(time.Now().Add(authTimeout))
	s, err := intrahost.Take(c)
	_ = c.SetDeadline(time.Time{})
	return s, err
}

// acceptLocal takes same-host connections until the listener closes,
// each into its handshake, at most localPending at once.
func (t *Transport) acceptLocal(lo *localSide) {
	for {
		c, err := lo.ln.Accept()
		if err != nil {
			return
		}
		select {
		case lo.slots <- struct{}{}:
		default:
			t.log.Warn("refused a same-host connection: too many handshakes under way", zap.Int("max", localPending))
			_ = c.Close()
			continue
		}
		if !t.whileOpen(func() { lo.pending[c] = true; t.readers.Add(1) }) {
			_ = c.Close()
			<-lo.slots
			continue
		}
		go func() {
			defer t.readers.Done()
			r, rc, err := t.admitLocal(lo, c)
			<-lo.slots
			if err != nil {
				t.log.Warn("refused a same-host link", zap.Error(err))
				_ = c.Close()
				return
			}
			defer rc.Unmap()
			t.readLoop(r, rc)
		}()
	}
}

// whileOpen runs f under the Transport's lock unless Close is tearing
// down, and says whether it ran.
func (t *Transport) whileOpen(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	f()
	return true
}

// admitLocal is the listener's side of a handshake: the caller's
// credentials, its hello, its proof, then the ring. The link is then
// rank r's, its only inbound same-host link.
func (t *Transport) admitLocal(lo *localSide, c *net.UnixConn) (int, *intrahost.Receiver, error) {
	defer func() {
		t.mu.Lock()
		delete(lo.pending, c)
		t.mu.Unlock()
	}()
	cred, err := intrahost.PeerCred(c)
	if err != nil {
		return 0, nil, err
	}
	if cred.UID != os.Getuid() {
		return 0, nil, fmt.Errorf("process %d runs as uid %d, not this peer's uid %d: only the same user's processes may link without a cipher", cred.PID, cred.UID, os.Getuid())
	}
	_ = c.SetDeadline(time.Now().Add(authTimeout))
	var hello [localHello]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil {
		return 0, nil, fmt.Errorf("process %d said no hello: %w", cred.PID, err)
	}
	r, pid := int(binary.BigEndian.Uint32(hello[4:])), int(binary.BigEndian.Uint32(hello[8:]))
	switch {
	case binary.BigEndian.Uint32(hello[0:]) != localMagic:
		return 0, nil, fmt.Errorf("process %d sent %x, not a meshtrain same-host hello", cred.PID, hello)
	case r < 0 || r >= len(t.ids) || r == t.cfg.Rank:
		return 0, nil, fmt.Errorf("process %d claims rank %d: want another rank in [0,%d)", cred.PID, r, len(t.ids))
	case pid != cred.PID:
		return 0, nil, fmt.Errorf("process %d claims to be pid %d", cred.PID, pid)
	}
	if err := mutualChallenge(t.ctx, c, lo.key, t.ids[r], t.ids[t.cfg.Rank], [2]string{localDialer, localListener}, false); err != nil {
		return 0, nil, fmt.Errorf("process %d claiming rank %d: %w", cred.PID, r, err)
	}
	t.mu.Lock()
	_, taken := lo.in[r]
	stopped := t.stopped
	if !taken && !stopped {
		lo.in[r] = nil // reserved until the ring is offered
	}
	t.mu.Unlock()
	if taken || stopped {
		return 0, nil, fmt.Errorf("rank %d (process %d) already has a same-host link, or this transport closes", r, cred.PID)
	}
	_ = c.SetDeadline(time.Now().Add(authTimeout))
	rc, err := intrahost.Offer(c)
	_ = c.SetDeadline(time.Time{})
	t.mu.Lock()
	if err == nil {
		lo.in[r] = rc
	} else {
		delete(lo.in, r)
	}
	t.mu.Unlock()
	return r, rc, err
}

// sendLocal is Send over a same-host link: a write that ctx ends has
// collective.FrameGrace, as on a stream; one that fails ends the link.
func (t *Transport) sendLocal(ctx context.Context, to int, s *intrahost.Sender, h collective.Header, payload []byte) error {
	finish := collective.AfterGrace(ctx, s.Reset)
	err := s.Send(ctx, h, payload)
	if finish() && err == nil {
		err = errors.New("link reset as the write ended")
	}
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return fmt.Errorf("waiting for room in the ring to rank %d: %w", to, err) // nothing written: the link is whole
	}
	s.Reset()
	return &collective.PeerError{Rank: to, Reason: "link down", Err: err}
}

// closeWrite ends the link's sending side after the goodbye, so that the
// peer's reader sees the link end at once (its Close waits for that).
func (l *outLink) closeWrite() {
	if l.local != nil {
		l.local.CloseWrite()
		return
	}
	_ = l.s.Close()
}

// closeLocal ends the same-host side, with no goodbye: no more
// connections, the inbound links' readers stop (and unmap their rings),
// the outbound links end and their rings are unmapped once no Send is
// under way. Close calls it after the goodbyes; Crash and Host.Close
// without them, as a process that dies ends its links (and the kernel
// unmaps its rings).
func (t *Transport) closeLocal() {
	lo := t.local
	if lo == nil {
		return
	}
	_ = lo.ln.Close()
	t.mu.Lock()
	for c := range lo.pending {
		_ = c.Close()
	}
	for _, rc := range lo.in {
		if rc != nil {
			rc.Reset()
		}
	}
	t.mu.Unlock()
	for _, l := range t.out {
		if l != nil && l.local != nil {
			l.local.Close()
		}
	}
}

// Crash ends every link at once, with no goodbye, as a process that dies
// does (fault injection): the same-host links are cut and the libp2p host
// closes. Close still releases the rest.
func (t *Transport) Crash() error {
	t.closeLocal()
	return t.host.Close()
}

// isClosed says whether Close began.
func (t *Transport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// frameSource is one inbound link as its reader sees it: a libp2p stream
// or a same-host link (an intrahost.Receiver).
type frameSource interface {
	// Next reads the next frame's header, checked against maxFrame, and
	// returns the reader of its payload.
	Next(maxFrame uint32) (collective.Header, io.Reader, error)
	// Held says whether the sender's Send of h has completed whether or
	// not this side reads it, so that the reader may wait for the
	// executor's offer (collective.Inbox.Claim).
	Held(h collective.Header) bool
	// Done says the payload was read.
	Done()
	// Reset ends the link.
	Reset()
}

// streamSource is a libp2p stream's frameSource: a frame up to holdMax
// fits in the window the stream starts with.
type streamSource struct {
	s       network.Stream
	holdMax uint32
}

func (s streamSource) Next(maxFrame uint32) (collective.Header, io.Reader, error) {
	h, err := collective.ReadHeader(s.s, maxFrame)
	return h, s.s, err
}
func (s streamSource) Held(h collective.Header) bool { return h.Len <= s.holdMax }
func (s streamSource) Done()                         {}
func (s streamSource) Reset()                        { _ = s.s.Reset() }

// SameHostLinks is how many of this rank's links to the others go through
// shared memory (no cipher); the rest are on Config.Security. A summary
// that named only the security would blame a cipher nothing ran.
func (t *Transport) SameHostLinks() int {
	n := 0
	for _, l := range t.out {
		if l != nil && l.local != nil {
			n++
		}
	}
	return n
}
