package rawtls

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
)

// TestHandshakeAndData: the two configurations talk TLS 1.3 to each other.
func TestHandshakeAndData(t *testing.T) {
	srv, cli, err := Configs()
	if err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	s, c := tls.Server(a, srv), tls.Client(b, cli)
	go func() { _, _ = c.Write([]byte("ring")); _ = c.Close() }()
	got, err := io.ReadAll(s)
	if err != nil || string(got) != "ring" {
		t.Fatalf("read %q, %v", got, err)
	}
	if v := s.ConnectionState().Version; v != tls.VersionTLS13 {
		t.Fatalf("negotiated TLS version %#x, want 1.3", v)
	}
}
