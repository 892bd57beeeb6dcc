package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entries lists dir's names, so a test sees any temporary file left behind.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// recordSyncs replaces syncDir for the test with one that records its
// argument and returns err.
func recordSyncs(t *testing.T, err error) *[]string {
	t.Helper()
	var dirs []string
	orig := syncDir
	syncDir = func(dir string) error {
		dirs = append(dirs, dir)
		if err != nil {
			return err
		}
		return orig(dir)
	}
	t.Cleanup(func() { syncDir = orig })
	return &dirs
}

func TestCommit(t *testing.T) {
	tests := []struct {
		name  string
		old   string // "" for no existing file
		write func(path string) error
		want  string
	}{
		{"WriteFile, new file", "", func(p string) error { return WriteFile(p, []byte("hello"), 0o640) }, "hello"},
		{"WriteFile replaces", "old content", func(p string) error { return WriteFile(p, []byte("new"), 0o640) }, "new"},
		{"WriteFile, empty", "old", func(p string) error { return WriteFile(p, nil, 0o640) }, ""},
		{"streamed", "old", func(p string) error {
			f, err := Create(p, 0o640)
			if err != nil {
				return err
			}
			defer f.Abort() // a no-op after Commit
			for i := range 1000 {
				if _, err := io.WriteString(f, strings.Repeat(string(rune('a'+i%26)), 100)); err != nil {
					return err
				}
			}
			return f.Commit()
		}, func() string {
			var b strings.Builder
			for i := range 1000 {
				b.WriteString(strings.Repeat(string(rune('a'+i%26)), 100))
			}
			return b.String()
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f.bin")
			if tt.old != "" {
				if err := os.WriteFile(path, []byte(tt.old), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			syncs := recordSyncs(t, nil)
			if err := tt.write(path); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != tt.want {
				t.Fatalf("content %.40q (%d bytes), %v; want %.40q (%d bytes)", got, len(got), err, tt.want, len(tt.want))
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
				t.Errorf("mode %v, want 0640", fi.Mode().Perm())
			}
			if names := entries(t, dir); len(names) != 1 {
				t.Errorf("directory holds %q: a temporary file was left behind", names)
			}
			if len(*syncs) != 1 || (*syncs)[0] != dir {
				t.Errorf("directories synced: %q, want [%q]", *syncs, dir)
			}
		})
	}
}

func mustCreate(t *testing.T, path string) *File {
	t.Helper()
	f, err := Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFailures: every failure leaves the old file as it was and no
// temporary file, and the error names the file.
func TestFailures(t *testing.T) {
	tests := []struct {
		name string
		// fail writes something to path and fails part-way.
		fail func(t *testing.T, path string) error
		want string
	}{
		{"aborted", func(t *testing.T, path string) error {
			f := mustCreate(t, path)
			if _, err := f.Write([]byte("partial")); err != nil {
				t.Fatal(err)
			}
			f.Abort()
			f.Abort() // twice is harmless
			if _, err := f.Write([]byte("more")); err == nil {
				t.Error("Write after Abort succeeded")
			}
			return f.Commit()
		}, "committing"},
		{"write fails", func(t *testing.T, path string) error {
			f := mustCreate(t, path)
			defer f.Abort()
			_ = f.tmp.Close() // the disk goes away
			if _, err := f.Write([]byte("partial")); err != nil {
				return err
			}
			return f.Commit()
		}, "writing"},
		{"sync fails", func(t *testing.T, path string) error {
			f := mustCreate(t, path)
			_ = f.tmp.Close()
			return f.Commit()
		}, "syncing"},
		{"rename fails", func(t *testing.T, path string) error {
			// A non-empty directory, put there after Create, that rename
			// cannot replace.
			f := mustCreate(t, path+".e")
			defer f.Abort()
			if err := os.MkdirAll(filepath.Join(path+".e", "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			return f.Commit()
		}, "renaming"},
		{"a directory is refused", func(t *testing.T, path string) error {
			return WriteFile(path+".d", []byte("new"), 0o644)
		}, "is a directory"},
		{"no directory", func(t *testing.T, path string) error {
			return WriteFile(filepath.Join(filepath.Dir(path), "missing", "f.bin"), []byte("new"), 0o644)
		}, "missing/f.bin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f.bin")
			if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(path+".d", "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			err := tt.fail(t, path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
			if got, _ := os.ReadFile(path); string(got) != "old" {
				t.Errorf("the old file now holds %q", got)
			}
			for _, d := range []string{dir, path + ".d"} {
				for _, name := range entries(t, d) {
					if strings.Contains(name, ".tmp-") {
						t.Errorf("temporary file %s left behind in %s", name, d)
					}
				}
			}
		})
	}
}

// TestDirectorySyncFails: the rename has happened, so the new content is in
// place, but Commit reports that it may not survive a crash.
func TestDirectorySyncFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.bin")
	boom := errors.New("boom")
	recordSyncs(t, boom)
	if err := WriteFile(path, []byte("new"), 0o644); !errors.Is(err, boom) {
		t.Fatalf("got %v, want %v", err, boom)
	}
	if names := entries(t, dir); len(names) != 1 || names[0] != "f.bin" {
		t.Errorf("directory holds %q", names)
	}
}

func TestTempPrefix(t *testing.T) {
	dir := t.TempDir()
	f := mustCreate(t, filepath.Join(dir, "data.idx"))
	defer f.Abort()
	stale, _ := filepath.Glob(filepath.Join(dir, TempPrefix("data.idx")+"*"))
	if len(stale) != 1 || stale[0] != f.tmp.Name() {
		t.Errorf("TempPrefix finds %q, the temporary file is %s", stale, f.tmp.Name())
	}
}
