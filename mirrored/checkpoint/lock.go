package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LockFileName is the file in a checkpoint directory that the run
// writing checkpoints there holds locked (flock(2)) for as long as it
// runs, with the holder's host, pid and start time in it. List ignores it.
const LockFileName = ".meshtrain.lock"

// Lock is a checkpoint directory held by this process.
type Lock struct {
	f    *os.File
	path string
}

// LockedError says a checkpoint directory is held by another run.
type LockedError struct {
	Dir, Path string
	// Holder is what the holder wrote in the lock file ("host h, pid 1,
	// started …"); "" when it could not be read.
	Holder string
}

func (e *LockedError) Error() string {
	holder := e.Holder
	if holder == "" {
		holder = "its holder did not say who it is"
	}
	return fmt.Sprintf("checkpoint directory %s is in use by another run (%s): two runs writing one directory would prune and overwrite each other's checkpoints; give this run its own --checkpoint-dir, or stop the other first (the lock %s frees itself when its holder exits)",
		e.Dir, holder, e.Path)
}

// LockDir takes dir (created if missing) for the run that writes
// checkpoints there: at most one process at a time holds it. A second
// gets a *LockedError naming the holder. The lock is the kernel's
// (flock(2) on LockFileName, also over NFS, where Linux maps it onto the
// file server's locks), so it ends with its holder however that ends: a
// lock file left by a run that died is taken over, its contents replaced.
// On a file system that has no locks, the directory is used unlocked and
// warning says so.
func LockDir(dir string) (l *Lock, warning string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("checkpoint directory: %w", err)
	}
	path := filepath.Join(dir, LockFileName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("checkpoint directory %s: opening its lock: %w", dir, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	switch {
	case errors.Is(err, unix.EWOULDBLOCK):
		f.Close()
		b, _ := os.ReadFile(path)
		return nil, "", &LockedError{Dir: dir, Path: path, Holder: strings.TrimSpace(string(b))}
	case errors.Is(err, unix.ENOLCK) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS):
		f.Close()
		return nil, fmt.Sprintf("checkpoint directory %s: its file system has no locks (%v): a second run on it would not be refused", dir, err), nil
	case err != nil:
		f.Close()
		return nil, "", fmt.Errorf("checkpoint directory %s: locking %s: %w", dir, path, err)
	}
	host, _ := os.Hostname()
	holder := fmt.Sprintf("host %s, pid %d, started %s\n", host, os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(holder), 0) // who holds it is for the message; the lock is the flock
	}
	return &Lock{f: f, path: path}, "", nil
}

// Unlock releases the directory (nil: nothing to release). The lock file
// stays, for the next holder.
func (l *Lock) Unlock() error {
	if l == nil {
		return nil
	}
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	return l.f.Close()
}
