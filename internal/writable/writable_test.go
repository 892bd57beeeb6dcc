package writable

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFileAndDir(t *testing.T) {
	dir := t.TempDir()
	readOnly := filepath.Join(dir, "ro")
	if err := os.Mkdir(readOnly, 0o555); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(dir, "summary.json")
	if err := os.WriteFile(existing, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	rootCanWriteAnything := os.Geteuid() == 0
	for _, tc := range []struct {
		name, path string
		dir        bool
		want       string // "" for no error
		asRoot     bool   // the case holds for root too
	}{
		{"new file", filepath.Join(dir, "new.json"), false, "", true},
		{"existing file", existing, false, "", true},
		{"missing directory", filepath.Join(dir, "nope", "s.json"), false, "does not exist", true},
		{"a directory", dir, false, "is a directory", true},
		{"under a file", filepath.Join(existing, "s.json"), false, "is not a directory", true},
		{"under a missing file's directory", filepath.Join(dir, "nope", "deeper", "s.json"), false, "does not exist", true},
		{"read-only directory", filepath.Join(readOnly, "s.json"), false, "cannot be written", false},
		{"new dir", filepath.Join(dir, "a", "b"), true, "", true},
		{"dir under a file", filepath.Join(existing, "logs"), true, "cannot be created", true},
		{"read-only dir", readOnly, true, "not writable", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if rootCanWriteAnything && !tc.asRoot {
				t.Skip("root writes anywhere")
			}
			check := File
			if tc.dir {
				check = Dir
			}
			err := check(tc.path)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("%s: %v", tc.path, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path)):
				t.Fatalf("%s: err %v, want one naming the path and saying %q", tc.path, err, tc.want)
			}
		})
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep" {
		t.Errorf("the existing file was modified: %q", b)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".meshtrain-probe-*")); len(m) > 0 {
		t.Errorf("probe files left: %v", m)
	}
}

// TestFileNonRegular: the start-up check never blocks and never modifies
// what is there: a FIFO with no reader and a socket are refused by name,
// a FIFO with a reader and a character device (made by the test, never
// the machine's) are accepted.
func TestFileNonRegular(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
		want string // "" for no error
	}{
		{"FIFO with no reader", func(t *testing.T, p string) { mkfifo(t, p) }, "is a FIFO with no reader"},
		{"FIFO with a reader", func(t *testing.T, p string) {
			mkfifo(t, p)
			r, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
		}, ""},
		{"character device", func(t *testing.T, p string) {
			if os.Geteuid() != 0 {
				t.Skip("making a device node needs root")
			}
			var st syscall.Stat_t
			if err := syscall.Stat("/dev/null", &st); err != nil {
				t.Skip(err)
			}
			if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, int(st.Rdev)); err != nil {
				t.Skip(err)
			}
		}, ""},
		{"socket", func(t *testing.T, p string) {
			l, err := net.Listen("unix", p)
			if err != nil {
				t.Skip(err)
			}
			t.Cleanup(func() { l.Close() })
		}, "is a socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out")
			tc.make(t, path)
			before, _ := os.Lstat(path)
			done := make(chan error, 1)
			go func() { done <- File(path) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("File blocked")
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path)):
				t.Fatalf("err %v, want one naming %s and saying %q", err, path, tc.want)
			}
			if after, err := os.Lstat(path); err != nil || !os.SameFile(before, after) || after.Mode() != before.Mode() {
				t.Fatalf("%s changed: %v, then %v (%v)", path, before.Mode(), after, err)
			}
		})
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
}
