package inputfile

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpen: a regular file opens; a FIFO (without a writer), a pipe, a
// character device and a directory are refused at once, named.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(file); err != nil || string(b) != "x" {
		t.Fatalf("a regular file: %q, %v", b, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	pipe := "/dev/fd/" + strconv.Itoa(int(r.Fd()))
	for path, kind := range map[string]string{fifo: "a pipe or FIFO", pipe: "a pipe or FIFO", "/dev/null": "a character device", dir: "a directory"} {
		start := time.Now()
		_, err := Open(path)
		var nr *NotRegularError
		if !errors.As(err, &nr) || nr.Kind != kind || !strings.HasPrefix(err.Error(), path+" is ") || !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s: %v, want it refused as %s", path, err, kind)
		}
		if err := Check(path); err == nil {
			t.Errorf("Check(%s) passed", path)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: took %v", path, d)
		}
	}
	if err := Check(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("Check of a missing file: %v, want it left to the open", err)
	}
}
