package p2p

import (
	"fmt"
	"io"
	"net"
)

// LocalAddrs picks n free ports on 127.0.0.1 for a cluster on one machine
// (UDP ports for QUIC, TCP otherwise), as host:port entries for
// Config.Peers. It holds every port open until all are chosen, so no two
// are the same; they are free again when it returns, and another process
// could still take one before the cluster listens on it.
func LocalAddrs(n int, quic bool) ([]string, error) {
	out := make([]string, n)
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := range out {
		if quic {
			c, err := net.ListenPacket("udp4", "127.0.0.1:0")
			if err != nil {
				return nil, fmt.Errorf("p2p: reserving UDP port %d of %d on 127.0.0.1: %w", i+1, n, err)
			}
			held = append(held, c)
			out[i] = c.LocalAddr().String()
		} else {
			l, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				return nil, fmt.Errorf("p2p: reserving TCP port %d of %d on 127.0.0.1: %w", i+1, n, err)
			}
			held = append(held, l)
			out[i] = l.Addr().String()
		}
	}
	return out, nil
}
