package hostid

import (
	"os"
	"os/exec"
	"testing"
)

func TestSelfIsStableAndHex(t *testing.T) {
	a, b := Self(), Self()
	if a != b {
		t.Fatalf("Self changed between calls: %s then %s", a, b)
	}
	if len(a) != 16 {
		t.Fatalf("Self = %q, want 16 hex digits", a)
	}
}

// TestSelfDiffersAcrossNetworkNamespaces runs the test binary in a new
// network namespace (as the emulated hosts are) and expects another name.
func TestSelfDiffersAcrossNetworkNamespaces(t *testing.T) {
	if os.Getenv("HOSTID_PRINT") == "1" {
		os.Stdout.WriteString(Self())
		os.Exit(0)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and unshare(1) to make a network namespace")
	}
	cmd := exec.Command(unshare, "--net", os.Args[0], "-test.run", "^TestSelfDiffersAcrossNetworkNamespaces$")
	cmd.Env = append(os.Environ(), "HOSTID_PRINT=1")
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("cannot make a network namespace here: %v", err)
	}
	if got := string(out); got == Self() || len(got) != 16 {
		t.Fatalf("in a new network namespace Self = %q, here %q: want another 16-digit name", got, Self())
	}
}
