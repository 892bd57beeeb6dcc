package launch

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/meshtrain/meshtrain/collective/p2p"
)

// TestParseDiscovered: host:port lines, in order and once; blank lines
// and comments skipped; every bad line named with its number.
func TestParseDiscovered(t *testing.T) {
	for _, tc := range []struct {
		name     string
		out      string
		addrs    []string
		problems []string
	}{
		{"good", "10.0.0.1:7000\n\n# a comment\nworker-3.svc:7000\n[::1]:7001\n10.0.0.1:7000\n", []string{"10.0.0.1:7000", "worker-3.svc:7000", "[::1]:7001"}, nil},
		{"no port", "10.0.0.1\n", nil, []string{`line 1 "10.0.0.1": want host:port`}},
		{"bad port", "a:0\nb:http\nc:70000\n", nil, []string{`line 1 "a:0": port "0"`, `line 2 "b:http": port "http"`, `line 3 "c:70000"`}},
		{"no host", ":7000\n", nil, []string{`line 1 ":7000": want a host name`}},
		{"a good line among bad", "x\n\ny:1\n", []string{"y:1"}, []string{`line 1 "x"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs, problems := ParseDiscovered([]byte(tc.out))
			if !slices.Equal(addrs, tc.addrs) || len(problems) != len(tc.problems) {
				t.Fatalf("%q, %q; want %q and %d problems", addrs, problems, tc.addrs, len(tc.problems))
			}
			for i, p := range tc.problems {
				if !strings.HasPrefix(problems[i], p) {
					t.Errorf("problem %q, want it to start %q", problems[i], p)
				}
			}
		})
	}
}

// FuzzParseDiscovered: whatever the command prints, every address taken
// is host:port, once, and every other non-blank, non-comment line is a
// problem naming its line.
func FuzzParseDiscovered(f *testing.F) {
	for _, s := range []string{"a:1\nb:2\n", "x\n:1\n# c\n", "[::1]:7\n\n\n", "a:1\na:1\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		addrs, problems := ParseDiscovered(out)
		seen := map[string]bool{}
		for _, a := range addrs {
			if seen[a] || !strings.Contains(a, ":") {
				t.Fatalf("address %q twice or without a port", a)
			}
			seen[a] = true
		}
		for _, p := range problems {
			if !strings.HasPrefix(p, "line ") {
				t.Fatalf("problem %q does not name its line", p)
			}
		}
	})
}

// TestRunDiscover: a command that hangs is killed at its deadline with
// what it started, and named; one that fails says how, with its stderr;
// one that prints too much is cut and named.
func TestRunDiscover(t *testing.T) {
	for _, tc := range []struct {
		name, cmd, want  string
		deadline, within time.Duration
	}{
		{"hang", "echo a:1; sleep 30", "did not finish within 300ms (--discover-every): killed", 300 * time.Millisecond, 3 * time.Second},
		{"fails", "echo nope >&2; exit 3", "failed: exit status 3: nope", 2 * time.Second, 3 * time.Second},
		{"too much", "yes a:1 | head -c 2000000", "printed more than 1048576 bytes", 4 * time.Second, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := runDiscover(context.Background(), tc.cmd, tc.deadline)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.cmd) {
				t.Errorf("%v, want it to name the command and say %q", err, tc.want)
			}
			if d := time.Since(start); d > tc.within {
				t.Errorf("took %v, want under %v", d, tc.within)
			}
		})
	}
}

// TestGrowCheck: the flags that cannot work together, each named.
func TestGrowCheck(t *testing.T) {
	for _, tc := range []struct {
		g    Grow
		want string
	}{
		{Grow{}, ""},
		{Grow{Max: 4, Cmd: "true"}, ""},
		{Grow{Max: 2, Cmd: "true"}, "--max-workers 2 is fewer than the 3 workers listed"},
		{Grow{Max: 4}, "--max-workers 4 without --discover-cmd"},
		{Grow{Join: true}, "--join without --max-workers"},
		{Grow{Max: 4, Cmd: "true", Every: -time.Second}, "--discover-every -1s"},
		{Grow{Max: p2p.MaxPeers + 1, Cmd: "true"}, fmt.Sprintf("at most %d", p2p.MaxPeers)},
	} {
		err := tc.g.Check(3)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.g, err, tc.want)
		}
	}
}

// TestDiscoveryGivesSlots: the command's new workers get the free slots in
// the order it lists them, once; one past --max-workers is refused and
// named, and a bad line is warned about once while it stays.
func TestDiscoveryGivesSlots(t *testing.T) {
	secret, _ := hex.DecodeString("00112233445566778899aabbccddeeff")
	peers := []string{"127.0.0.1:0", "127.0.0.1:7101", "", ""}
	h, err := p2p.Listen(p2p.Config{Rank: 0, Peers: peers, ClusterSecret: secret, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	list := filepath.Join(t.TempDir(), "list")
	if err := os.WriteFile(list, []byte("127.0.0.1:7101\n127.0.0.1:7103\nbad\n127.0.0.1:7102\n127.0.0.1:7104\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.DebugLevel)
	d := newDiscovery(Grow{Max: 4, Cmd: "cat " + list, Every: time.Second}, h, peers, zap.New(core))
	d.once(context.Background())
	d.once(context.Background())
	if d.slots["127.0.0.1:7103"] != 2 || d.slots["127.0.0.1:7102"] != 3 || !h.Known(2) || !h.Known(3) {
		t.Errorf("slots %v: want 7103 at 2, 7102 at 3", d.slots)
	}
	if n := logs.FilterMessageSnippet(`line 3 "bad"`).Len(); n != 1 {
		t.Errorf("the bad line warned %d times, want once", n)
	}
	if n := logs.FilterMessageSnippet("beyond --max-workers").Len(); n != 1 || !d.full["127.0.0.1:7104"] {
		t.Errorf("the fifth worker: told %d times, refused %v; want once", n, d.full)
	}
	if n := logs.FilterMessageSnippet("listed by --discover-cmd").Len(); n != 2 {
		t.Errorf("%d workers told as new, want 2", n)
	}
}
