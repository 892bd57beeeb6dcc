package main

import (
	"strings"
	"testing"
)

func TestGradientBucketFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		err  string
	}{
		{"1M", 1 << 20, ""},
		{"256K", 256 << 10, ""},
		{"4096", 4096, ""},
		{"off", -1, ""},
		{"0", -1, ""},
		{"0K", -1, ""},
		{"1G", 1 << 30, ""},
		{"2G", 0, "at most 1G"},
		{"-1", 0, "want a size"},
		{"1.5M", 0, "want a size"},
		{"", 0, "want a size"},
		{"1M,2M", 0, "want a size"},
	} {
		got, err := gradientBucketFlag(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--gradient-bucket")):
			t.Errorf("%q: error %v, want one naming --gradient-bucket and %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}
