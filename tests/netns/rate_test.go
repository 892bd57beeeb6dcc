package netns

import (
	"strings"
	"testing"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want Rate
		str  string
	}{
		{"100mbit", 100 * Mbit, "100mbit"},
		{"1gbit", Gbit, "1gbit"},
		{"1.8gbit", 1800 * Mbit, "1.8gbit"},
		{" 1GBit ", Gbit, "1gbit"},
		{"500kbit", 500_000, "500kbit"},
		{"8000bit", 8000, "8kbit"},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if err != nil || got != tt.want || got.String() != tt.str {
			t.Errorf("ParseRate(%q) = %d (%v), %v; want %d (%s)", tt.in, got, got, err, tt.want, tt.str)
		}
	}
	for _, bad := range []string{"", "1g", "gbit", "-1gbit", "0mbit", "1kbit", "fast"} {
		if r, err := ParseRate(bad); err == nil || !strings.Contains(err.Error(), "bit") {
			t.Errorf("ParseRate(%q) = %v, %v; want an error naming the units", bad, r, err)
		}
	}
}

func TestTags(t *testing.T) {
	h := &Hosts{Tag: TagForProcess(), N: 2}
	for _, ns := range []string{h.Namespace(0), h.Namespace(1), h.bridge()} {
		if !strings.HasPrefix(ns, Prefix) || tagOf(ns) != h.Tag {
			t.Errorf("namespace %q: tag %q, want %q", ns, tagOf(ns), h.Tag)
		}
	}
	if !processTagRE.MatchString(h.Tag) || !tagRE.MatchString(h.Tag) {
		t.Errorf("tag %q is not a valid process tag", h.Tag)
	}
	if processTagRE.MatchString("cli") {
		t.Error(`the hosts command's tag "cli" would be taken for a process's`)
	}
	if h.IP(0) != Subnet+".1" || h.IP(1) != Subnet+".2" {
		t.Errorf("addresses %s, %s", h.IP(0), h.IP(1))
	}
}
