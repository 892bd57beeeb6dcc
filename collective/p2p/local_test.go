package p2p

import (
	"net"
	"testing"
)

func TestLocalAddrs(t *testing.T) {
	for _, quic := range []bool{false, true} {
		addrs, err := LocalAddrs(8, quic)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, a := range addrs {
			host, port, err := net.SplitHostPort(a)
			if err != nil || host != "127.0.0.1" || port == "0" || seen[port] {
				t.Fatalf("quic %v: %q in %q: want distinct 127.0.0.1:port entries", quic, a, addrs)
			}
			seen[port] = true
			if _, err := hostPortAddr(a, map[bool]Security{false: SecurityTLS, true: SecurityQUIC}[quic]); err != nil {
				t.Fatalf("quic %v: %q is not a peer address: %v", quic, a, err)
			}
		}
	}
}
