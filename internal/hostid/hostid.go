// Package hostid names the host a process runs on, as peers that may share
// memory or a Unix socket need to know it: two processes are on one host
// when they see the same kernel (boot id), the same machine (machine id)
// and the same network namespace. The namespace is part of the name because
// the emulated hosts of the tests are namespaces of one machine, and a
// Unix socket's abstract name does not cross a namespace.
package hostid

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// sources are read in order; a missing one is left out, so that the name
// is still stable on systems without it (another OS, a minimal container).
var sources = []string{
	"/etc/machine-id",
	"/proc/sys/kernel/random/boot_id",
}

// Self returns this process's host name for co-location: 16 hex digits,
// equal for every process on the same host and network namespace. It is an
// identity, not a secret: peers compare it, and trust comes from the
// cluster secret and the kernel's peer credentials.
func Self() string {
	h := sha256.New()
	for _, p := range sources {
		if b, err := os.ReadFile(p); err == nil {
			fmt.Fprintf(h, "%s=%s\n", p, strings.TrimSpace(string(b)))
		}
	}
	if ns, err := os.Readlink("/proc/self/ns/net"); err == nil {
		fmt.Fprintf(h, "netns=%s\n", ns)
	}
	if name, err := os.Hostname(); err == nil {
		fmt.Fprintf(h, "hostname=%s\n", name)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
