package writable

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
