package intrahost

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Supported says whether this system has the same-host link (Linux: memfd,
// seals, abstract Unix sockets).
const Supported = true

// Listener accepts the same-host links of one transport on an abstract
// Unix socket with a random name, which the peers learn over their
// authenticated links. The name is no secret (/proc/net/unix lists it to
// every local user, and an abstract socket has no permissions): any local
// process can connect, and only the peer's credentials and the cluster
// secret admit it. Random, it cannot be squatted in advance, and nobody
// can take it from under a running listener.
type Listener struct {
	ln   *net.UnixListener
	name string
}

// Listen opens a listener on a fresh abstract name.
func Listen() (*Listener, error) {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	name := "@meshtrain-" + hex.EncodeToString(b[:])
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("intrahost: listening on the abstract Unix socket %s: %w", name, err)
	}
	return &Listener{ln: ln, name: name}, nil
}

// Name is the socket's name, for Dial.
func (l *Listener) Name() string { return l.name }

// Accept waits for the next connection.
func (l *Listener) Accept() (*net.UnixConn, error) { return l.ln.AcceptUnix() }

// Close stops accepting.
func (l *Listener) Close() error { return l.ln.Close() }

// Dial connects to a listener's name within ctx.
func Dial(ctx context.Context, name string) (*net.UnixConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", name)
	if err != nil {
		return nil, fmt.Errorf("intrahost: dialling %s: %w", name, err)
	}
	return c.(*net.UnixConn), nil
}

// Cred is the process at the other end of a Unix socket, as the kernel
// vouches for it (SO_PEERCRED: the peer's credentials when it connected,
// or listened).
type Cred struct {
	PID int
	UID int
}

// PeerCred returns the credentials of c's other end.
func PeerCred(c *net.UnixConn) (Cred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Cred{}, fmt.Errorf("intrahost: peer credentials: %w", err)
	}
	var u *unix.Ucred
	var uerr error
	if err := raw.Control(func(fd uintptr) { u, uerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return Cred{}, fmt.Errorf("intrahost: peer credentials: %w", err)
	}
	if uerr != nil {
		return Cred{}, fmt.Errorf("intrahost: peer credentials (SO_PEERCRED): %w", uerr)
	}
	return Cred{PID: int(u.Pid), UID: int(u.Uid)}, nil
}

// sendFD writes size (8 bytes) with fd attached.
func sendFD(c *net.UnixConn, fd, size int) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(size))
	n, oobn, err := c.WriteMsgUnix(b[:], unix.UnixRights(fd), nil)
	if err == nil && (n != len(b) || oobn == 0) {
		err = errors.New("short write")
	}
	if err != nil {
		return fmt.Errorf("intrahost: passing the ring: %w", err)
	}
	return nil
}

// recvFD reads what sendFD wrote: the announced size and the one file
// descriptor. Anything else (no descriptor, several, a truncated control
// message) is an error, and any descriptor received is then closed.
func recvFD(c *net.UnixConn) (fd, size int, err error) {
	var b [8]byte
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, flags, _, err := c.ReadMsgUnix(b[:], oob)
	if err != nil {
		return -1, 0, fmt.Errorf("intrahost: receiving the ring: %w", err)
	}
	var fds []int
	if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for _, m := range msgs {
			if got, rerr := unix.ParseUnixRights(&m); rerr == nil {
				fds = append(fds, got...)
			}
		}
	}
	if n != len(b) || len(fds) != 1 || flags&unix.MSG_CTRUNC != 0 {
		for _, f := range fds {
			unix.Close(f)
		}
		return -1, 0, fmt.Errorf("intrahost: the peer passed %d bytes and %d descriptors for the ring, want 8 bytes and 1", n, len(fds))
	}
	return fds[0], int(binary.LittleEndian.Uint64(b[:])), nil
}
