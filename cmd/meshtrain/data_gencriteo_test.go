package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/data/criteo"
)

func TestDataGenCriteo(t *testing.T) {
	dir := t.TempDir()
	args := []string{"meshtrain", "--log-level", "error", "data", "gen-criteo", "--examples", "600", "--files", "3", "--format", "libsvm", "--out", dir, "--seed", "5"}
	if err := newApp().RunContext(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, criteo.InfoFile))
	if err != nil {
		t.Fatal(err)
	}
	var info criteo.Info
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	if info.Seed != 5 || info.TrainExamples != 400 || info.TestExamples != 200 || info.Format != "libsvm" || len(info.TrainFiles) != 2 {
		t.Fatalf("criteo.json: %+v", info)
	}
	for _, f := range append(info.TrainFiles, info.TestFiles...) {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	bad := []string{"meshtrain", "--log-level", "error", "data", "gen-criteo", "--files", "1", "--out", dir}
	if err := newApp().RunContext(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "--files 1") {
		t.Fatalf("--files 1: %v, want an error naming the flag", err)
	}
}
