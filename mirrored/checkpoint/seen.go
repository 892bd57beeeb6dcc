package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// NewestSeen is what a replica finds newest in dir, for the replicas'
// start-up handshake to compare: "none", the file's name and size, or
// "unreadable (why)".
func NewestSeen(dir string) string {
	path, err := Latest(dir)
	if err != nil {
		return "unreadable (" + err.Error() + ")"
	}
	if path == "" {
		return "none"
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "unreadable (" + err.Error() + ")"
	}
	return fmt.Sprintf("%s (%d bytes)", filepath.Base(path), fi.Size())
}

// CompareSeen fails when the replicas (seen: each rank's NewestSeen, ""
// for one with nothing to compare) see different newest checkpoints in
// their --checkpoint-dir: it is not one shared directory, and a restart
// would resume from whatever the chief's node holds (or start afresh)
// while a newer state sits elsewhere.
func CompareSeen(seen []string) error {
	chief := seen[0]
	var differ []string
	for r, s := range seen[1:] {
		if s != "" && chief != "" && s != chief {
			differ = append(differ, fmt.Sprintf("rank %d sees %s", r+1, s))
		}
	}
	if len(differ) == 0 {
		return nil
	}
	return fmt.Errorf("--checkpoint-dir differs between the peers: rank 0 (the chief) sees %s as the newest checkpoint, %s: "+
		"it is not one shared directory, and resuming from the chief's alone could lose or mix up progress; "+
		"put --checkpoint-dir on storage every peer mounts (NFS, a ReadWriteMany PersistentVolume), or copy the newest checkpoint there and pass --restore FILE",
		chief, strings.Join(differ, ", "))
}
