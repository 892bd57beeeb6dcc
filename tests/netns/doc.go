// Package netns emulates a cluster of hosts on one Linux machine: N network
// namespaces, each with one shaped link into a bridge, so meshtrain's peers
// can be measured and tested across links slower than their cores.
//
// Layout of a cluster with tag T (every name starts with Prefix):
//
//	mtnT-br   a namespace holding only the bridge br0 and the bridge-side
//	          veth ends h0..h(N-1), each shaped by tbf (host i's ingress)
//	mtnT-h<i> host i: lo and eth0 (the host-side veth end, shaped by tbf:
//	          host i's egress), address Subnet.(i+1)/24, no other route
//
// Nothing is created in the root namespace: no link, address, route or
// NAT. The subnet exists only on the bridge, so traffic from a host can
// reach the other hosts and nothing else. Deleting the namespaces (Down)
// destroys the veth pairs and the bridge with them.
//
// Tests name their clusters after their process ID (TagForProcess), so a
// later run can tell a cluster left behind by a killed run (its process is
// gone) from one still in use, and RemoveStale deletes the former.
//
// Everything here needs root, ip(8) and tc(8) with the tbf qdisc; Available
// says why it cannot run when it cannot.
//
// The programs run on and against the hosts are not here but in
// tests/tools: netbench, the measuring program on every host
// (NetbenchPackage), and hosts, which brings hosts up by hand and runs the
// experiments (bench, validate, course). The harness imports no benchmark
// package: its medians and spreads come from internal/stats.
package netns
