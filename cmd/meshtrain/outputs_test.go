package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tinyTrain is a sparse run of a few milliseconds on a file of its own,
// with extra arguments (the outputs under test).
func tinyTrain(t *testing.T, extra ...string) []string {
	t.Helper()
	train := filepath.Join(t.TempDir(), "train.libsvm")
	if err := os.WriteFile(train, []byte("+1 1:1\n-1 2:1\n+1 1:1 3:1\n-1 2:1 3:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return append([]string{"meshtrain", "--log-level", "error", "train", "--model", "sparse-lr", "--features", "10", "--epochs", "1", "--batch", "2",
		"--train-files", train}, extra...)
}

// runWithin runs the app with args and fails the test if it has not
// returned within 20 s: an output must never block a run.
func runWithin(t *testing.T, args []string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- newApp().RunContext(context.Background(), args) }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("blocked for 20 s")
		return nil
	}
}

// TestOutputsRefusedWithoutBlocking: a FIFO with no reader or a socket
// given as --timeline or --summary is refused at start-up by name (exit
// 2), at once: the FIFO hung in open for ever, deaf to SIGTERM.
func TestOutputsRefusedWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Skip(err)
	}
	defer l.Close()
	for _, tc := range []struct{ flag, path, want string }{
		{"--timeline", fifo, "is a FIFO with no reader"},
		{"--summary", fifo, "is a FIFO with no reader"},
		{"--timeline", sock, "is a socket"},
		{"--summary", sock, "is a socket"},
	} {
		t.Run(tc.flag+" "+filepath.Base(tc.path), func(t *testing.T) {
			err := runWithin(t, tinyTrain(t, tc.flag, tc.path))
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.flag+": "+tc.path+" "+tc.want) {
				t.Fatalf("got %v, want a usage error (exit 2) saying %s: %s %s", err, tc.flag, tc.path, tc.want)
			}
		})
	}
}

// TestOutputsOnDevicesAndFIFOs: a character device (a /dev/null made by
// the test in its own directory, never the machine's) given as
// --timeline and --summary is written into and stays a device, with no
// figure created beside it; a FIFO with a reader receives the summary.
// Before, the device was renamed over: --timeline /dev/full, as root,
// replaced the machine's /dev/full with a regular file.
func TestOutputsOnDevicesAndFIFOs(t *testing.T) {
	t.Run("device", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("making a device node needs root")
		}
		var st syscall.Stat_t
		if err := syscall.Stat("/dev/null", &st); err != nil {
			t.Skip(err)
		}
		dir := t.TempDir()
		tl, sum := filepath.Join(dir, "tl"), filepath.Join(dir, "sum")
		for _, p := range []string{tl, sum} {
			if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, int(st.Rdev)); err != nil {
				t.Skip(err)
			}
		}
		if err := runWithin(t, tinyTrain(t, "--timeline", tl, "--summary", sum)); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{tl, sum} {
			if fi, err := os.Lstat(p); err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
				t.Errorf("%s is no longer a device: %v %v", p, fi.Mode(), err)
			}
		}
		if es, _ := os.ReadDir(dir); len(es) != 2 {
			t.Errorf("files written beside the devices: %v", es)
		}
	})
	t.Run("FIFO with a reader", func(t *testing.T) {
		fifo := filepath.Join(t.TempDir(), "sum")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Skip(err)
		}
		r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if err := runWithin(t, tinyTrain(t, "--summary", fifo)); err != nil {
			t.Fatal(err)
		}
		// Read after the run: a FIFO with no writer yet reads as empty, and
		// a summary this small fits in the pipe's buffer.
		b, _ := io.ReadAll(r)
		var sum struct{ Model string }
		if json.Unmarshal(b, &sum) != nil || sum.Model == "" {
			t.Fatalf("the reader got %.200q", b)
		}
	})
}
