package launch

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretFromFile(t *testing.T) {
	const hexSecret = "00112233445566778899aabbccddeeff"
	dir := t.TempDir()
	tests := []struct {
		name, content string
		perm          os.FileMode
		want          string // an error's text; "" for success
	}{
		{"private", hexSecret + "\n", 0o600, ""},
		{"read-only for the user", "  " + hexSecret, 0o400, ""},
		{"group-readable", hexSecret, 0o640, "has permissions 0640: its group or others may read it, and with it join the cluster; make it private with chmod 600"},
		{"world-readable", hexSecret, 0o604, "has permissions 0604"},
		{"group-writable", hexSecret, 0o620, "has permissions 0620"},
		{"not hex", "not a secret", 0o600, "want at least 32 hex digits"},
		{"too short", "0011", 0o600, "want at least 32 hex digits"},
	}
	t.Setenv(PSKEnv, "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.perm); err != nil { // past the umask
				t.Fatal(err)
			}
			secret, psk, err := SecretFromFile(path)
			switch {
			case tt.want == "" && (err != nil || !bytes.Equal(secret, []byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}) || psk != nil):
				t.Errorf("got %x, %x, %v", secret, psk, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path)):
				t.Errorf("got %v, want an error naming %s and saying %q", err, path, tt.want)
			}
		})
	}
	for _, path := range []string{filepath.Join(dir, "missing"), dir} {
		if _, _, err := SecretFromFile(path); err == nil || !strings.Contains(err.Error(), "cluster secret file") {
			t.Errorf("%s: got %v", path, err)
		}
	}
}
