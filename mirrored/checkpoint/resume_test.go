package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/internal/atomicfile"
)

// TestResumable: the checkpoint a run resumes from, in each case a
// directory can be in.
func TestResumable(t *testing.T) {
	// write puts checkpoints of the given steps in dir; damage flips a bit
	// in the last one's.
	write := func(t *testing.T, dir string, damage bool, steps ...int) string {
		t.Helper()
		var path string
		for _, s := range steps {
			c := testCheckpoint()
			c.Step = s
			var err error
			if path, err = Write(dir, c, 0); err != nil {
				t.Fatal(err)
			}
		}
		if damage {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)-1] ^= 1
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return path
	}
	for _, tc := range []struct {
		name     string
		setup    func(t *testing.T, dir string) (restore string)
		noDir    bool
		step     int    // the chosen checkpoint's step, 0 for none
		warning  string // in a warning, if any
		removed  int
		errorHas string
	}{
		{"no directory", func(*testing.T, string) string { return "" }, true, 0, "", 0, ""},
		{"an empty directory", func(*testing.T, string) string { return "" }, false, 0, "", 0, ""},
		{"the newest", func(t *testing.T, dir string) string { write(t, dir, false, 5, 100); return "" }, false, 100, "", 0, ""},
		{"past a damaged newest", func(t *testing.T, dir string) string { write(t, dir, true, 5, 100); return "" }, false, 5, "falling back to", 0, ""},
		{"only damaged", func(t *testing.T, dir string) string { write(t, dir, true, 5); return "" }, false, 0, "", 0, "no intact checkpoint"},
		{"restore wins", func(t *testing.T, dir string) string {
			old := write(t, t.TempDir(), false, 7)
			write(t, dir, false, 100)
			return old
		}, false, 7, "", 0, ""},
		{"a damaged restore", func(t *testing.T, dir string) string {
			write(t, dir, false, 5)
			return write(t, t.TempDir(), true, 7)
		}, false, 0, "", 0, "named by --restore"},
		{"a half-written file removed", func(t *testing.T, dir string) string {
			write(t, dir, false, 5)
			if err := os.WriteFile(filepath.Join(dir, atomicfile.TempPrefix(FileName(9))+"1"), []byte("half"), 0o600); err != nil {
				t.Fatal(err)
			}
			return ""
		}, false, 5, "", 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			restore := tc.setup(t, dir)
			if tc.noDir {
				dir = ""
			}
			ck, path, warnings, removed, err := Resumable(dir, restore)
			if tc.errorHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errorHas) {
					t.Fatalf("%v, want an error saying %q", err, tc.errorHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := 0; ck != nil {
				got = ck.Step
				if got != tc.step || filepath.Base(path) != FileName(tc.step) {
					t.Fatalf("step %d from %s, want %d", got, path, tc.step)
				}
			} else if tc.step != 0 {
				t.Fatalf("no checkpoint, want step %d", tc.step)
			}
			if joined := strings.Join(warnings, "\n"); (tc.warning == "") != (joined == "") || !strings.Contains(joined, tc.warning) {
				t.Fatalf("warnings %q, want %q", warnings, tc.warning)
			}
			if len(removed) != tc.removed {
				t.Fatalf("removed %q, want %d", removed, tc.removed)
			}
		})
	}
}
