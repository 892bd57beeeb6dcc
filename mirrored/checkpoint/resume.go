package checkpoint

import (
	"errors"
	"fmt"
	"strings"
)

// Resumable is the checkpoint a run resumes from, and why: the one named
// by restore if set, else the newest intact one in dir, falling back past
// damaged ones (each a warning), after removing the half-written files a
// killed run left in dir (their paths in removed, for the caller to log;
// removed may be non-empty with an error). It returns a nil Checkpoint
// when there is none. A damaged restore is an error, since the user named
// that one; so is a directory of damaged checkpoints only. The messages
// name the command-line flags (--restore, --checkpoint-dir) the caller's
// dir and restore come from.
func Resumable(dir, restore string) (ck *Checkpoint, path string, warnings, removed []string, err error) {
	if dir != "" {
		if removed, err = RemoveTemps(dir); err != nil {
			return nil, "", nil, removed, err
		}
	}
	if restore != "" {
		ck, err := Read(restore)
		if errors.Is(err, ErrDamaged) {
			err = fmt.Errorf("%w: it was named by --restore, so no other is used instead: name an intact checkpoint, or leave out --restore to resume from the newest intact one in --checkpoint-dir", err)
		}
		if err != nil {
			return nil, "", nil, removed, err
		}
		return ck, restore, UnverifiedWarning(ck, restore), removed, nil
	}
	if dir == "" {
		return nil, "", nil, removed, nil
	}
	all, err := List(dir)
	if err != nil {
		return nil, "", nil, removed, err
	}
	var skipped []string
	for i := len(all) - 1; i >= 0; i-- {
		ck, err := Read(all[i])
		if err == nil {
			for k := range skipped {
				skipped[k] += "; falling back to " + all[i]
			}
			return ck, all[i], append(skipped, UnverifiedWarning(ck, all[i])...), removed, nil
		}
		if !errors.Is(err, ErrDamaged) {
			return nil, "", nil, removed, fmt.Errorf("%w (move it away, or pass --restore with an older checkpoint)", err)
		}
		skipped = append(skipped, err.Error())
	}
	if len(skipped) > 0 {
		return nil, "", nil, removed, fmt.Errorf("no intact checkpoint in %s: %s: move them away to start afresh", dir, strings.Join(skipped, "; "))
	}
	return nil, "", nil, removed, nil
}

// UnverifiedWarning is the warning for a checkpoint from before digests
// (Unverified), if ck is one, naming it by path.
func UnverifiedWarning(ck *Checkpoint, path string) []string {
	if !ck.Unverified {
		return nil
	}
	return []string{fmt.Sprintf("checkpoint %s: no digest: unverified (format %s, written before meshtrain verified checkpoints)", path, FormatV1)}
}
