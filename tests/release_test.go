package tests

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/internal/longtest"
)

// releaseCommand is the README's release build, writing OUT: static
// (CGO_ENABLED=0: no libc, the Go DNS resolver and os/user), reproducible
// (-trimpath: no build directory inside), stamped from git (-buildvcs=true,
// which overrides a GOFLAGS=-buildvcs=false and fails outside a checkout).
const releaseCommand = "CGO_ENABLED=0 go build -trimpath -buildvcs=true -o OUT ./cmd/meshtrain"

// releaseBuild runs releaseCommand in the module root src with out for
// OUT and extra environment.
func releaseBuild(t *testing.T, ctx context.Context, src, out string, env ...string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(src, "README.md"))
	if err != nil || !strings.Contains(string(readme), "\n"+strings.Replace(releaseCommand, "OUT", "meshtrain", 1)+"\n") {
		t.Fatalf("README.md does not show the release build %q (%v)", releaseCommand, err)
	}
	f := strings.Fields(strings.Replace(releaseCommand, "OUT", out, 1))
	cmd := exec.CommandContext(ctx, f[1], f[2:]...)
	cmd.Dir = src
	cmd.Env = append(append(os.Environ(), f[0]), env...)
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			dl, _ := ctx.Deadline()
			t.Fatalf("%s in %s: stopped after %v: the test's 20-minute deadline for both builds (%v of it left when this one started) expired (%v); a busy machine builds slowly\n%s",
				releaseCommand, src, time.Since(start).Round(time.Second), dl.Sub(start).Round(time.Second), err, b)
		}
		t.Fatalf("%s in %s: %v\n%s", releaseCommand, src, err, b)
	}
}

// cleanClone clones this checkout's HEAD into dir (sharing its objects):
// the release build's stamp comes from git, which Go finds only in a .git
// directory, not in a linked worktree's .git file (golang/go#58218).
func cleanClone(t *testing.T, ctx context.Context, rev, dir string) {
	t.Helper()
	for _, args := range [][]string{{"clone", "-q", "--shared", "--no-checkout", "..", dir}, {"-C", dir, "checkout", "-q", "--detach", rev}} {
		if b, err := exec.CommandContext(ctx, "git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, b)
		}
	}
}

// TestLongReleaseBuild builds with the README's release command in two clean
// clones of HEAD at different paths and checks that the binary is
// statically linked (no program interpreter, no dynamic section), that the
// two builds are byte-identical (the second compiles everything again in
// an empty build cache, unless -short), that --version prints the module
// version git gives the commit and the commit, and that it trains on a
// cluster named by host name.
func TestLongReleaseBuild(t *testing.T) {
	longtest.Require(t, "two release builds from clean clones, one with a cold build cache")
	head, err := exec.Command("git", "-C", "..", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): the release build stamps the version from git", err)
	}
	rev := strings.TrimSpace(string(head))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bins := []string{filepath.Join(dir, "a.out"), filepath.Join(dir, "b.out")}
	for i, bin := range bins {
		src := filepath.Join(dir, fmt.Sprintf("src%d", i))
		cleanClone(t, ctx, rev, src)
		var env []string
		if i == 1 && !testing.Short() {
			env = append(env, "GOCACHE="+filepath.Join(dir, "cache"))
		}
		releaseBuild(t, ctx, src, bin, env...)
	}
	checkStatic(t, bins[0])
	a, err := os.ReadFile(bins[0])
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bins[1])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("two release builds differ (%d and %d bytes): not reproducible", len(a), len(b))
	}
	checkVersion(t, ctx, bins[0], rev)
	checkResolves(t, ctx, bins[0])
}

// checkResolves: the static binary, whose name lookups go through Go's own
// resolver (no libc), trains as two workers whose TF_CONFIG names
// localhost instead of giving addresses.
func checkResolves(t *testing.T, ctx context.Context, bin string) {
	t.Helper()
	addrs := freePorts(t, 2)
	for i, a := range addrs {
		addrs[i] = strings.Replace(a, "127.0.0.1:", "localhost:", 1)
	}
	results := make([]result, len(addrs))
	var wg sync.WaitGroup
	for r := range addrs {
		wg.Go(func() {
			results[r] = runBinary(ctx, bin, []string{e2eSecret, "TF_CONFIG=" + tfConfig(addrs, r)}, quickWorker()...)
		})
	}
	wg.Wait()
	for r, res := range results {
		if res.err != nil || !strings.Contains(res.stdout, fmt.Sprintf("rank %d done: ", r)) {
			t.Errorf("static binary, rank %d of %q:\n%s", r, addrs, res)
		}
	}
}

// checkStatic fails unless path is an ELF executable with neither a
// PT_INTERP nor a PT_DYNAMIC program header nor a .dynamic section.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s has a %v program header: dynamically linked", path, p.Type)
		}
	}
	if f.Section(".dynamic") != nil {
		t.Errorf("%s has a .dynamic section: dynamically linked", path)
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs %v", path, libs)
	}
}

// checkVersion: --version prints the module version the build recorded
// (from git: the commit's tag, or a pseudo-version of it) and the commit
// rev; the build recorded the release settings.
func checkVersion(t *testing.T, ctx context.Context, path, rev string) {
	t.Helper()
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" || settings["vcs.revision"] != rev || settings["vcs.modified"] != "false" {
		t.Errorf("build settings %v: want CGO_ENABLED=0, -trimpath=true, vcs.revision=%s, vcs.modified=false", settings, rev)
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" || !strings.HasPrefix(v, "v") {
		t.Fatalf("module version %q: want one from git", v)
	}
	want := "meshtrain version " + v + " (rev " + rev[:12] + ")\n"
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil || string(out) != want {
		t.Errorf("%s --version: %q (%v), want %q", path, out, err, want)
	}
	t.Logf("--version: %s", out)
}
