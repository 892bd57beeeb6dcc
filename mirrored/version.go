package mirrored

import (
	"runtime/debug"
	"sync"
)

// Version is this binary's module version and VCS revision (from
// debug.ReadBuildInfo), e.g. "v0.3.0 (rev 1a2b3c4d5e6f, modified)" or
// "(devel) (rev 1a2b3c4d5e6f)"; "unknown" when the build recorded none.
// Summaries and checkpoints record it.
var Version = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev != "" {
		v += " (rev " + rev[:min(12, len(rev))] + modified + ")"
	}
	return v
})
