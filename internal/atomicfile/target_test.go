package atomicfile

import (
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

// mkfifo makes a FIFO at path, or skips the test where there are none.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
}

// mknull makes, under the test's own directory, a character device with
// /dev/null's numbers (writes vanish), so that the machine's devices are
// never touched; it skips the test unless running as root.
func mknull(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a device node needs root")
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/dev/null", &st); err != nil {
		t.Skipf("no /dev/null to copy: %v", err)
	}
	if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, int(st.Rdev)); err != nil {
		t.Skipf("mknod: %v", err)
	}
}

// within fails the test if f does not return within a few seconds: an
// output must never block on a FIFO.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s blocked", what)
	}
}

// TestCreateNonRegular: a device or a FIFO is written into, never renamed
// over (a device node made by the test stays a device); a FIFO with no
// reader and a socket are refused by name, at once.
func TestCreateNonRegular(t *testing.T) {
	for _, tc := range []struct {
		name    string
		make    func(t *testing.T, path string) (read func() string)
		want    string // the error, "" for none
		keepDev bool
	}{
		{"character device", func(t *testing.T, p string) func() string { mknull(t, p); return nil }, "", true},
		{"FIFO with a reader", func(t *testing.T, p string) func() string {
			mkfifo(t, p)
			r, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return func() string {
				b, _ := io.ReadAll(r) // the writer's close ends it
				return string(b)
			}
		}, "", false},
		{"FIFO with no reader", func(t *testing.T, p string) func() string { mkfifo(t, p); return nil }, "is a FIFO with no reader", false},
		{"socket", func(t *testing.T, p string) func() string {
			l, err := net.Listen("unix", p)
			if err != nil {
				t.Skipf("no unix sockets: %v", err)
			}
			t.Cleanup(func() { l.Close() })
			return nil
		}, "is a socket", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out")
			read := tc.make(t, path)
			before, _ := os.Lstat(path)
			var err error
			within(t, "WriteFile", func() { err = WriteFile(path, []byte("data"), 0o644) })
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path)):
				t.Fatalf("err %v, want one naming %s and saying %q", err, path, tc.want)
			}
			after, err := os.Lstat(path)
			if err != nil || after.Mode().Type() != before.Mode().Type() || !os.SameFile(before, after) {
				t.Fatalf("%s was replaced: %v before, %v after (%v)", path, before.Mode(), after.Mode(), err)
			}
			if tc.keepDev && after.Mode()&fs.ModeCharDevice == 0 {
				t.Fatalf("%s is no longer a device: %v", path, after.Mode())
			}
			if read != nil {
				if got := read(); got != "data" {
					t.Errorf("the reader got %q, want %q", got, "data")
				}
			}
			if names := entries(t, dir); len(names) != 1 {
				t.Errorf("files left: %v", names)
			}
		})
	}
}

// TestHoldKeepsTheReader: a FIFO checked at start-up (Hold) keeps its
// reader connected until the write, which then uses the held file.
func TestHoldKeepsTheReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	mkfifo(t, path)
	if err := Hold(path); err == nil || !strings.Contains(err.Error(), "no reader") {
		t.Fatalf("Hold with no reader: %v", err)
	}
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := Hold(path); err != nil {
		t.Fatal(err)
	}
	if err := Hold(path); err != nil { // twice is once
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("late"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil && !errors.Is(err, syscall.EAGAIN) {
		t.Fatal(err)
	}
	if string(b) != "late" {
		t.Fatalf("the reader got %q", b)
	}
}

// TestSymlinkKept: a link to a regular file has its target replaced and
// stays a link.
func TestSymlinkKept(t *testing.T) {
	dir := t.TempDir()
	real, link := filepath.Join(dir, "real.json"), filepath.Join(dir, "link.json")
	if err := os.WriteFile(real, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(real); string(b) != "new" {
		t.Fatalf("target holds %q", b)
	}
}
