// Package p2p is the libp2p Transport of package collective.
//
// Each rank runs one libp2p host. Between every pair of ranks there is one
// connection and, on it, one long-lived stream per direction (protocol
// ProtocolID), opened once by New and reused by every collective; a reader
// goroutine per inbound stream feeds a collective.Inbox. NewOnHost builds
// the same transport on a host the caller already has (tests use
// go-libp2p's in-process mocknet hosts); Join brings a rank up as a
// collective.Member.
//
// Security: TCP with TLS 1.3 by default, streams multiplexed by package
// mux (which moves bodies without copying them; go-yamux on request); Noise or QUIC on request;
// plaintext only when asked for explicitly (SecurityPlaintext, for trusted
// networks: peer IDs are then claimed, not proven, and frames carry no
// MAC). An optional pnet pre-shared key (TCP only) keeps non-members from
// even completing a handshake. Over plaintext without one, every
// connection's handshake ends with a mutual challenge keyed by the cluster
// secret (auth.go, security protocol PlaintextID), since nothing else would
// prove membership: a peer that cannot answer gets no multiplexer and no
// stream of any protocol. Plaintext with neither is refused, and plaintext
// warns at start-up. Inbound handshakes that fail (an identity not proven,
// a secret not held) are logged with the reason, except under QUIC, whose
// TLS libp2p runs inside its transport.
//
// Resources: the resource manager keeps libp2p's default limits for
// everyone but sets them for cluster peers (two connections each way, any
// number of streams, the peer's memory budget), cluster peers are protected
// in the connection manager, the collective stream gets a 64 MiB window
// once it is negotiated and checked (every other stream keeps package
// mux's 256 KiB) and carries frames of up to 1 MiB (identical on every
// rank; see streamWindow), and a connection whose peer does not take a
// write, or finish a frame, within Timeout is closed. What a peer can make
// a rank hold unread is committed before it is buffered, against a budget
// per connection (connBudget: 68 MiB) and per peer (peerBudget: 72 MiB, in
// the resource manager); a peer that goes over is disconnected and logged.
//
// Membership is cryptographic: a connection gater admits only the peer IDs
// of the cluster (proven by TLS, Noise and QUIC; over plaintext, by the
// challenge, before the gater sees it), and a stranger's connection or stream is refused and logged,
// so it can never inject a frame. At start-up each rank also asks every
// peer for its list of peer IDs (ClusterProtocolID), so that peers started
// with different cluster lists, or a peer with another identity, fail at
// once naming the mistake instead of timing out. Peer IDs come either from /p2p/ components in
// the peer addresses or, for plain host:port entries (a TF_CONFIG), from the
// cluster secret (see DeriveIdentity).
//
// Same-host links (Config.IntraHost auto, samehost.go): a rank's view of
// the cluster also says which host it is on (package hostid), its uid and
// pid, and the abstract Unix socket it listens on; a peer on the same host,
// as the same user, sends to it through a shared-memory ring (package
// intrahost) instead of a stream, after the kernel's peer credentials and
// a challenge keyed by the cluster secret admitted it. It is one more kind
// of link under the same Inbox, frame bound and failure rules; Crash cuts
// it as a dying process would.
//
// Failure and shutdown: a link is either whole or down for good. An inbound
// frame longer than Config.MaxFrame is refused from its header, before any
// of it is buffered, and takes the link down; a write that fails or whose
// ctx ends resets its stream, so a partial frame is never followed by
// another. A link that ends without a goodbye aborts every collective (see
// collective.Inbox). Close sends a goodbye on every outbound stream, then
// waits up to 2 s for every peer's goodbye or link failure before closing
// the host, so a rank that leaves right after its last message does not
// reset a link a slower peer is still reading.
package p2p
