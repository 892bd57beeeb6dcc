package mux

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestKeepAliveClosesSilentPeer: a peer that stops reading and writing
// altogether is found while the connection is idle, and the connection
// closed, within about KeepAlive + WriteTimeout: over TCP the ping is
// written but never answered; over a pipe without buffers the ping
// cannot even be written (then the write's deadline and the wait for an
// answer end together: either may report it).
func TestKeepAliveClosesSilentPeer(t *testing.T) {
	const keepAlive, timeout = 100 * time.Millisecond, 200 * time.Millisecond
	for _, tc := range []struct {
		name string
		pair func() (net.Conn, net.Conn)
	}{
		{"tcp", func() (net.Conn, net.Conn) { return tcpPair(t) }},
		{"pipe", net.Pipe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := New(Config{KeepAlive: keepAlive, WriteTimeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			silent, other := tc.pair()
			defer silent.Close()
			start := time.Now()
			mc, _ := tr.NewConn(other, false, nil)
			c := mc.(*Conn)
			defer c.Close()
			select {
			case <-c.done:
			case <-time.After(10 * time.Second):
				t.Fatal("a connection to a silent peer is still open after 10 s")
			}
			took := time.Since(start)
			t.Logf("closed after %v: %v", took, c.connError())
			if took < keepAlive || took > keepAlive+timeout+time.Second {
				t.Fatalf("closed %v after the peer fell silent; want about %v", took, keepAlive+timeout)
			}
			if msg := c.connError().Error(); !strings.Contains(msg, "ping") && !strings.Contains(msg, "stopped reading") {
				t.Fatalf("the error %q says neither that a ping went unanswered nor that the peer stopped reading", msg)
			}
		})
	}
}

// TestKeepAliveKeepsHealthyIdle: an idle connection to a peer that
// answers is pinged and stays open.
func TestKeepAliveKeepsHealthyIdle(t *testing.T) {
	const keepAlive = 50 * time.Millisecond
	a, b := muxPair(t, Config{KeepAlive: keepAlive, WriteTimeout: 500 * time.Millisecond})
	s, r := open(t, a, b)
	time.Sleep(30 * keepAlive) // idle on purpose: the pings are the point
	if a.IsClosed() || b.IsClosed() {
		t.Fatalf("a healthy idle connection was closed: %v", a.connError())
	}
	if n := a.pings.Load() + b.pings.Load(); n < 5 {
		t.Fatalf("%d pings in %v idle with a %v keep-alive", n, 30*keepAlive, keepAlive)
	}
	go func() { _, _ = s.Write([]byte("still here")); _ = s.CloseWrite() }()
	if got, err := io.ReadAll(r); err != nil || string(got) != "still here" {
		t.Fatalf("after the idle time: %q, %v", got, err)
	}
}

// TestKeepAliveOff: a negative KeepAlive sends no pings, and a silent
// peer is not taken for gone.
func TestKeepAliveOff(t *testing.T) {
	tr, _ := New(Config{KeepAlive: -1, WriteTimeout: 50 * time.Millisecond})
	silent, other := tcpPair(t)
	defer silent.Close()
	mc, _ := tr.NewConn(other, false, nil)
	c := mc.(*Conn)
	defer c.Close()
	if _, err := c.OpenStream(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // idle on purpose: nothing may happen
	if c.IsClosed() || c.pings.Load() != 0 {
		t.Fatalf("keep-alive off: closed %v, %d pings", c.IsClosed(), c.pings.Load())
	}
}
