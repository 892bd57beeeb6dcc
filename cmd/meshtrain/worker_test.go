package main

import (
	"strings"
	"testing"
)

// TestClusterCommandsBadInput: bad flags of launch and worker fail at once,
// before any port, process or data is touched, naming the problem.
func TestClusterCommandsBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"launch", "--model", "vgg"}, `model "vgg"`},
		{[]string{"launch", "--batch", "0"}, "batch size 0"},
		{[]string{"launch", "--lr", "-1"}, "learning rate -1"},
		{[]string{"launch", "--checkpoint-every", "-2"}, "checkpoint every -2 steps"},
		{[]string{"launch", "--hash-every", "-1"}, "hash comparison every -1 steps"},
		{[]string{"launch", "--security", "ssl"}, `unknown security "ssl"`},
		{[]string{"launch", "--collective-timeout", "0s"}, "--collective-timeout 0s"},
		{[]string{"launch", "--target-accuracy", "98"}, "give a fraction"},
		{[]string{"launch", "-n", "0", "--train-examples", "100"}, "-n 0: want at least 1 worker"},
		{[]string{"launch", "extra"}, "no arguments"},
		{[]string{"worker", "--tf-config", "/nonexistent/tf.json"}, "reading the cluster spec"},
		{[]string{"eval", "--checkpoint", "/nonexistent/ckpt.safetensors"}, "reading checkpoint"},
	} {
		args := append([]string{"meshtrain", "--log-level", "error"}, tc.args...)
		err := newApp().Run(args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to mention %q", tc.args, err, tc.want)
		}
	}
}
