package main

import "testing"

// TestParseImageSize: --image-size takes HxW, H×W or N; anything else is
// refused naming the value.
func TestParseImageSize(t *testing.T) {
	cases := []struct {
		in   string
		want [2]int
		ok   bool
	}{
		{"", [2]int{}, true}, {"32x24", [2]int{32, 24}, true}, {"32×24", [2]int{32, 24}, true}, {"64", [2]int{64, 64}, true},
		{"0x3", [2]int{}, false}, {"axb", [2]int{}, false}, {"9000x9000", [2]int{}, false}, {"3x", [2]int{}, false},
	}
	for _, c := range cases {
		got, err := parseImageSize(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%q: %v, %v; want %v, ok %t", c.in, got, err, c.want, c.ok)
		}
	}
}
