package launch

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// reservingListener holds at most max connections, as
// netutil.LimitListener does, but keeps a slot for the next one: when
// the table is full it closes the connection that has waited longest
// without a request under way (new and silent, or idle between
// requests), before accepting. A limit that only waits (LimitListener)
// let 32 idle clients keep /healthz from answering for as long as they
// liked, and a liveness probe restart a healthy pod; a probe sends its
// request at once, so it is never the one closed. When every connection
// is in a request (each bounded by the server's timeouts), Accept waits
// for one to end.
type reservingListener struct {
	net.Listener
	max int

	mu    sync.Mutex
	freed *sync.Cond
	conns map[net.Conn]connState
}

// connState is a held connection's state and since when.
type connState struct {
	state http.ConnState
	since time.Time
}

func newReservingListener(l net.Listener, max int) *reservingListener {
	r := &reservingListener{Listener: l, max: max, conns: map[net.Conn]connState{}}
	r.freed = sync.NewCond(&r.mu)
	return r
}

// Accept makes room (closing the longest-waiting connection with no
// request under way, or waiting for one to end), then accepts.
func (r *reservingListener) Accept() (net.Conn, error) {
	r.mu.Lock()
	for len(r.conns) >= r.max {
		if victim := r.oldestQuiet(); victim != nil {
			delete(r.conns, victim)
			_ = victim.Close() // the server sees the read fail and lets it go
			continue
		}
		r.freed.Wait()
	}
	r.mu.Unlock()
	c, err := r.Listener.Accept()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.conns[c] = connState{http.StateNew, time.Now()}
	r.mu.Unlock()
	return c, nil
}

// oldestQuiet is the held connection in no request that has been so
// longest, nil if every one is in a request: an idle one first (its
// requests were all answered, so it closes cleanly), else a new one that
// sent no request yet (closed with bytes unread, the client sees a
// reset). Called with mu held.
func (r *reservingListener) oldestQuiet() net.Conn {
	for _, want := range []http.ConnState{http.StateIdle, http.StateNew} {
		var victim net.Conn
		var since time.Time
		for c, s := range r.conns {
			if s.state == want && (victim == nil || s.since.Before(since)) {
				victim, since = c, s.since
			}
		}
		if victim != nil {
			return victim
		}
	}
	return nil
}

// connState is the server's ConnState hook: it follows each connection's
// state, and forgets it once closed or hijacked.
func (r *reservingListener) connState(c net.Conn, s http.ConnState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch s {
	case http.StateClosed, http.StateHijacked:
		delete(r.conns, c)
		r.freed.Broadcast()
	case http.StateNew:
		// Accept recorded it.
	default:
		if _, held := r.conns[c]; held {
			r.conns[c] = connState{s, time.Now()}
		}
	}
}
