package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/data/text"
	"github.com/meshtrain/meshtrain/mirrored"
)

// tinyCorpus writes 40 spam-like and 40 ham-like documents and returns
// their directories.
func tinyCorpus(t *testing.T) (pos, neg string) {
	t.Helper()
	dir := t.TempDir()
	pos, neg = filepath.Join(dir, "spam"), filepath.Join(dir, "ham")
	for _, d := range []string{pos, neg} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		for _, f := range []struct{ dir, text string }{
			{pos, fmt.Sprintf("Subject: WIN $%d now\n\nCLICK here for cheap pills, offer %d", i*100, i)},
			{neg, fmt.Sprintf("Subject: meeting %d\n\nThe minutes of Tuesday's meeting are attached, item %d.", i, i)},
		} {
			if err := os.WriteFile(filepath.Join(f.dir, fmt.Sprintf("%02d.txt", i)), []byte(f.text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return pos, neg
}

// TestDataTextLibSVM: the command converts a corpus, and sparse-lr trains
// on the result at its own default rate unless --lr is given.
func TestDataTextLibSVM(t *testing.T) {
	pos, neg := tinyCorpus(t)
	out := t.TempDir()
	args := []string{"meshtrain", "--log-level", "error", "data", "text-libsvm", "--pos", pos, "--neg", neg, "--out", out, "--features", "4096", "--values", "log"}
	if err := newApp().RunContext(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, text.InfoFile))
	if err != nil {
		t.Fatal(err)
	}
	var info text.Info
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	if info.TrainExamples+info.TestExamples != 80 || info.TrainPositives+info.TestPositives != 40 || info.Features != 4096 || info.Values != "log" || info.TestExamples == 0 {
		t.Fatalf("%s: %+v", text.InfoFile, info)
	}
	for _, tc := range []struct {
		lr   []string
		want float64
	}{{nil, mirrored.DefaultSparseConfig().LR}, {[]string{"--lr", "0.7"}, 0.7}} {
		sum := filepath.Join(t.TempDir(), "summary.json")
		args := append([]string{"meshtrain", "--log-level", "error", "train", "--model", "sparse-lr", "--features", "4096", "--epochs", "2", "--batch", "8",
			"--train-files", filepath.Join(out, text.TrainFile), "--test-files", filepath.Join(out, text.TestFile), "--summary", sum}, tc.lr...)
		if err := newApp().RunContext(context.Background(), args); err != nil {
			t.Fatal(err)
		}
		var res mirrored.Result
		if b, err := os.ReadFile(sum); err != nil || json.Unmarshal(b, &res) != nil {
			t.Fatalf("summary: %v", err)
		}
		if res.LR != tc.want || res.FinalAccuracy < 0.9 {
			t.Errorf("train %v: lr %v and accuracy %.2f, want lr %v and ≥ 90%%", tc.lr, res.LR, res.FinalAccuracy, tc.want)
		}
	}
}

func TestDataTextLibSVMBadInput(t *testing.T) {
	pos, neg := tinyCorpus(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", t.TempDir()}, "either --spamassassin or --pos and --neg"},
		{[]string{"--out", t.TempDir(), "--spamassassin", "--pos", pos}, "either --spamassassin or --pos and --neg"},
		{[]string{"--out", t.TempDir(), "--pos", pos}, "0 --neg"},
		{[]string{"--out", t.TempDir(), "--pos", pos, "--neg", neg, "--values", "tfidf"}, `values "tfidf"`},
		{[]string{"--out", t.TempDir(), "--pos", pos, "--neg", neg, "--features", "0"}, "bag of words of 0 features"},
		{[]string{"--out", t.TempDir(), "--pos", pos, "--neg", filepath.Join(pos, "missing")}, "no such file"},
	} {
		args := append([]string{"meshtrain", "--log-level", "error", "data", "text-libsvm"}, tc.args...)
		if err := newApp().RunContext(context.Background(), args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error mentioning %q", tc.args, err, tc.want)
		}
	}
}
