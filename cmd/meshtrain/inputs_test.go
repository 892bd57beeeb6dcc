package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFIFOInputsRefused: a FIFO (or a pipe) given as --train-files,
// --test-files, eval's --checkpoint or --tf-config is refused at once,
// naming it, instead of blocking in open for ever, deaf to SIGTERM (issue
// 24 item 1).
func TestFIFOInputsRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	train := filepath.Join(dir, "train.libsvm")
	if err := os.WriteFile(train, []byte("+1 1:1\n-1 2:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TF_CONFIG", "")
	t.Setenv("MESHTRAIN_CLUSTER_SECRET", strings.Repeat("ab", 32))
	for _, args := range [][]string{
		{"train", "--model", "sparse-lr", "--features", "10", "--train-files", fifo},
		{"train", "--model", "sparse-lr", "--features", "10", "--train-files", train, "--test-files", fifo},
		{"launch", "-n", "2", "--model", "sparse-lr", "--features", "10", "--train-files", fifo},
		{"eval", "--checkpoint", fifo},
		{"worker", "--tf-config", fifo, "--model", "softmax"},
	} {
		t.Run(strings.Join(args[:1], " ")+" "+args[len(args)-2], func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				done <- newApp().RunContext(context.Background(), append([]string{"meshtrain", "--log-level", "error"}, args...))
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), fifo+" is a pipe or FIFO") {
					t.Fatalf("got %v, want the FIFO refused by name", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("blocked on the FIFO for 10 s")
			}
		})
	}
}
