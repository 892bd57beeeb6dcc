package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

func TestHealth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := ServeHealth(ctx, "127.0.0.1:0", zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + h.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	steps := []struct {
		do         func()
		path, body string
		code       int
	}{
		{nil, "/healthz", "ok\n", 200},
		{nil, "/readyz", "not ready: not listening yet\n", 503},
		{nil, "/readyz/cluster", "not ready: the cluster has not formed\n", 503},
		{h.Listening, "/readyz", "ready: listening\n", 200},
		{nil, "/readyz/cluster", "not ready: the cluster has not formed\n", 503},
		{h.Formed, "/readyz/cluster", "ready: the cluster formed\n", 200},
		{nil, "/healthz", "ok\n", 200},
		{h.Stopping, "/readyz", "not ready: stopping\n", 503},
		{nil, "/readyz/cluster", "not ready: stopping\n", 503},
		{nil, "/healthz", "ok\n", 200},
	}
	for i, s := range steps {
		if s.do != nil {
			s.do()
		}
		if code, body := get(s.path); code != s.code || body != s.body {
			t.Errorf("%d: %s: %d %q, want %d %q", i, s.path, code, body, s.code, s.body)
		}
	}
	if _, err := ServeHealth(ctx, h.Addr().String(), zaptest.NewLogger(t)); err == nil {
		t.Error("a second server on the same port started")
	}
	cancel() // the server closes soon after, not at once
	for deadline := time.Now().Add(5 * time.Second); ; {
		resp, err := http.Get("http://" + h.Addr().String() + "/healthz")
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("still serving 5 s after the context ended")
		}
	}
}

// TestHealthFloodOfIdleConnections: a flood of keep-alive connections
// that go idle (or never send a request) holds at most MaxConns of the
// worker's file descriptors at once, each for a bounded time, and the
// probes answer again once the flood stops (issue 24 item 5: 1,016 idle
// connections took a worker's descriptors, and its libp2p listener with
// them).
func TestHealthFloodOfIdleConnections(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts this process's sockets in /proc")
	}
	old := healthLimits
	healthLimits = HealthLimits{MaxConns: 8, ReadHeader: 300 * time.Millisecond, Read: 300 * time.Millisecond,
		Write: 300 * time.Millisecond, Idle: 300 * time.Millisecond, MaxHeaderBytes: 1 << 10}
	defer func() { healthLimits = old }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := ServeHealth(ctx, "127.0.0.1:0", zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	port := h.Addr().(*net.TCPAddr).Port
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 80 {
		c, err := net.Dial("tcp", h.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if i%2 == 0 { // one request, then idle with the connection kept alive
			fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		} // else: connected, and never a byte
	}
	peak := 0
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		peak = max(peak, serverSockets(t, port))
	}
	if peak > 8 {
		t.Errorf("the server held %d connections at once, want at most MaxConns 8", peak)
	}
	// Every connection is closed by the server within a bounded time: the
	// client sees EOF on each, or a reset on one closed to make room for
	// another before its request was read (see reservingListener).
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("connection %d not closed by the server: %v", i, err)
		}
	}
	if n := serverSockets(t, port); n != 0 {
		t.Errorf("%d connections still held after the flood", n)
	}
	resp, err := http.Get("http://" + h.Addr().String() + "/healthz")
	if err != nil {
		t.Fatalf("no probe after the flood: %v", err)
	}
	resp.Body.Close()
}

// serverSockets counts this process's accepted TCP connections on port
// (their local port; not the listener).
func serverSockets(t *testing.T, port int) int {
	t.Helper()
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 || fs[3] == "0A" { // 0A: LISTEN
				continue
			}
			_, p, _ := strings.Cut(fs[1], ":")
			if v, err := strconv.ParseInt(p, 16, 32); err == nil && int(v) == port {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && inodes[l] {
			n++
		}
	}
	return n
}

// TestHealthAnswersWhileIdleClientsHoldEverySlot: with every connection
// slot held by clients that connected and sent nothing (and others idle
// after a request), /healthz still answers within a second, many times:
// the longest-waiting quiet connection gives its slot to the probe.
// Before, the probe waited in the accept queue until a slot's header
// timeout (5 s), and a client that kept re-opening its connections held
// the probe off for ever: a liveness probe restarted a healthy pod.
func TestHealthAnswersWhileIdleClientsHoldEverySlot(t *testing.T) {
	old := healthLimits
	healthLimits = HealthLimits{MaxConns: 8, ReadHeader: 5 * time.Second, Read: 5 * time.Second, Write: 5 * time.Second,
		Idle: 10 * time.Second, MaxHeaderBytes: 1 << 10}
	defer func() { healthLimits = old }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := ServeHealth(ctx, "127.0.0.1:0", zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	hold := func() {
		for i := range 8 {
			c, err := net.Dial("tcp", h.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			if i%2 == 0 {
				fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") // then idle, kept alive
			}
		}
		time.Sleep(50 * time.Millisecond) // the server accepts them (the probe must come after)
	}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for round := range 5 {
		hold()
		start := time.Now()
		resp, err := client.Get("http://" + h.Addr().String() + "/healthz")
		if err != nil {
			t.Fatalf("round %d: /healthz with every slot held: %v after %v", round, err, time.Since(start))
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("round %d: %s", round, resp.Status)
		}
		t.Logf("round %d: answered in %v", round, time.Since(start))
	}
}
