package launch

import (
	"context"
	"io"
	"net/http"
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
