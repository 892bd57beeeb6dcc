package main

import (
	"strings"
	"testing"
)

// TestTrainBadInput: bad flags fail before any data is loaded, with an
// error naming the flag's problem.
func TestTrainBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "vgg"}, `model "vgg"`},
		{[]string{"--optimizer", "rmsprop"}, `optimizer "rmsprop"`},
		{[]string{"--batch", "0"}, "batch size 0"},
		{[]string{"--batch", "-5"}, "batch size -5"},
		{[]string{"--lr", "0"}, "learning rate 0"},
		{[]string{"--lr", "-1"}, "learning rate -1"},
		{[]string{"--lr-schedule", "exp"}, `schedule "exp"`},
		{[]string{"--target-accuracy", "99"}, "give a fraction"},
		{[]string{"extra"}, "no arguments"},
	} {
		args := append([]string{"meshtrain", "--log-level", "error", "train"}, tc.args...)
		err := newApp().Run(args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to mention %q", tc.args, err, tc.want)
		}
	}
}
