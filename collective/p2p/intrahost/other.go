//go:build !linux

package intrahost

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/meshtrain/meshtrain/collective"
)

// Supported says whether this system has the same-host link: not this
// one (it needs Linux's memfd, seals and abstract Unix sockets), so
// package p2p keeps every link on its security.
const Supported = false

var errUnsupported = errors.New("intrahost: the same-host link needs Linux")

// RingBytes is the shared memory of one direction of a link.
const RingBytes = 4 << 20

// ErrClosed is returned by a Send on a link Close ended.
var ErrClosed = errors.New("intrahost: link closed")

// Listener is unavailable here.
type Listener struct{}

// Listen fails: see Supported.
func Listen() (*Listener, error)                   { return nil, errUnsupported }
func (l *Listener) Name() string                   { return "" }
func (l *Listener) Accept() (*net.UnixConn, error) { return nil, errUnsupported }
func (l *Listener) Close() error                   { return nil }

// Dial fails: see Supported.
func Dial(context.Context, string) (*net.UnixConn, error) { return nil, errUnsupported }

// Cred is the process at the other end of a Unix socket.
type Cred struct{ PID, UID int }

// PeerCred fails: see Supported.
func PeerCred(*net.UnixConn) (Cred, error) { return Cred{}, errUnsupported }

// Receiver is unavailable here.
type Receiver struct{}

// Offer fails: see Supported.
func Offer(*net.UnixConn) (*Receiver, error) { return nil, errUnsupported }
func (r *Receiver) Next(uint32) (collective.Header, io.Reader, error) {
	return collective.Header{}, nil, errUnsupported
}
func (r *Receiver) Held(collective.Header) bool { return false }
func (r *Receiver) Done()                       {}
func (r *Receiver) Reset()                      {}
func (r *Receiver) Unmap()                      {}

// Sender is unavailable here.
type Sender struct{}

// Take fails: see Supported.
func Take(*net.UnixConn) (*Sender, error) { return nil, errUnsupported }
func (s *Sender) Send(context.Context, collective.Header, []byte) error {
	return errUnsupported
}
func (s *Sender) Reset()      {}
func (s *Sender) CloseWrite() {}
func (s *Sender) Close()      {}
