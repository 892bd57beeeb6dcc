package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// etcNetns is where `ip netns exec NS` finds files to bind-mount over
// /etc/ for NS's processes: /etc/netns/NS/hosts becomes their /etc/hosts.
const etcNetns = "/etc/netns"

// SetNames makes names resolve, for processes on every host (started with
// Command), to the address of the host they map to: a pod's DNS names
// (train-0.train) as a cluster's DNS would give them. It writes each host
// namespace's own hosts file (see etcNetns); the machine's /etc/hosts is
// untouched, and the files go when the namespaces do (Down, RemoveStale).
// Calling it again replaces the names (a pod rescheduled onto another
// host).
func (h *Hosts) SetNames(names map[string]int) error {
	keys := make([]string, 0, len(names))
	for n, i := range names {
		if i < 0 || i >= h.N {
			return fmt.Errorf("netns: name %s on host %d: the cluster has hosts 0 to %d", n, i, h.N-1)
		}
		keys = append(keys, n)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n")
	for _, n := range keys {
		fmt.Fprintf(&b, "%s\t%s\n", h.IP(names[n]), n)
	}
	for i := range h.N {
		dir := filepath.Join(etcNetns, h.Namespace(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("netns: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("netns: %w", err)
		}
	}
	return nil
}

// removeNames removes ns's files under etcNetns, and etcNetns itself once
// empty (other users' namespaces may have files there).
func removeNames(ns string) error {
	err := os.RemoveAll(filepath.Join(etcNetns, ns))
	if rmErr := os.Remove(etcNetns); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) && !errors.Is(rmErr, syscall.ENOTEMPTY) {
		err = errors.Join(err, rmErr)
	}
	return err
}
