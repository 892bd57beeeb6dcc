// Package intrahost is the same-host link of package p2p: frames between
// two peers on one host (package hostid) that run as the same user travel
// through a ring of shared memory, announced over a Unix-domain socket,
// with no cipher and no copy through the kernel.
//
// One link carries one direction. The sender dials the receiver's socket,
// whose name is abstract (no file, gone with the process; it does not
// cross a network namespace, as a host's identity does not). After package
// p2p has authenticated both ends on it (the kernel's peer credentials,
// and a challenge keyed by the cluster secret), the receiver creates the
// ring: a memfd_create'd file of RingBytes, sealed against shrinking and
// growing, mapped by both sides and passed to the sender as a file
// descriptor (SCM_RIGHTS). It has no name in /dev/shm or anywhere else: the
// kernel frees it when the last mapping goes, however its processes end,
// SIGKILL included.
//
// A frame is its collective header on the socket; a payload of at most
// half the ring is in the ring, the rest follows the header on the socket.
// The sender places each ring payload right after the previous one (at an
// 8-byte boundary, for folds that read it in place as float64), at
// the ring's start when it would not fit before the end, and both sides
// apply that rule, so a header says all the receiver needs. The receiver
// gives the space back by writing, after each ring frame, how far it has
// read (8 bytes); the sender waits for room, never overwriting what the
// receiver has not taken.
//
// Bounds: the ring is the receiver's and of a fixed size, so a peer cannot
// make it map more; a header is checked against the frame bound before
// anything is read, as on any link; a sender that writes garbage in the
// ring only corrupts its own frames; a credit that runs ahead of what was
// sent, or a ring the other side shrank or resized, takes the link down
// (the seals make a mapped ring impossible to shrink, so reading it can
// never fault).
package intrahost
