package npmpack

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestDirsRefusesNonDirectory: a --data-dir that is a file or a FIFO is
// named, not passed over for the cache; a missing one is where a fetch
// will go.
func TestDirsRefusesNonDirectory(t *testing.T) {
	tmp := t.TempDir()
	file, fifo := filepath.Join(tmp, "file"), filepath.Join(tmp, "fifo")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{file, "is a file, not a directory"},
		{fifo, "is a FIFO, not a directory"},
	} {
		if _, err := Dirs(tc.dir, "mnist", "MNIST"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Dirs(%s): %v, want %q", tc.dir, err, tc.want)
		}
	}
	for _, dir := range []string{tmp, filepath.Join(tmp, "missing")} {
		dirs, err := Dirs(dir, "mnist", "MNIST")
		if err != nil || len(dirs) == 0 || dirs[0] != dir {
			t.Errorf("Dirs(%s) = %v, %v: want it first", dir, dirs, err)
		}
	}
}
