package launch

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/meshtrain/meshtrain/internal/inputfile"
)

// SecretFileEnv names a file holding the cluster secret (also
// --secret-file): a way to give it that keeps it out of the environment,
// which schedulers such as Slurm copy into every task and may record.
const SecretFileEnv = "MESHTRAIN_CLUSTER_SECRET_FILE"

// SecretFromFile reads the cluster secret from path (the hex digits
// SecretEnv would hold; surrounding whitespace is ignored) and the
// optional PSK from the environment. Like ssh with a private key, it
// refuses a file its group or others may read or write: on a shared
// filesystem they could join the cluster or impersonate its peers.
func SecretFromFile(path string) (secret, psk []byte, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster secret file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("cluster secret file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, nil, fmt.Errorf("cluster secret file %s has permissions %04o: its group or others may read it, and with it join the cluster; make it private with chmod 600 %s", path, perm, path)
	}
	b, err := inputfile.ReadFile(path) // swapped for a FIFO since the Stat: refused
	if err != nil {
		return nil, nil, fmt.Errorf("cluster secret file: %w", err)
	}
	if secret, err = parseSecret(strings.TrimSpace(string(b)), "cluster secret file "+path); err != nil {
		return nil, nil, err
	}
	if psk, err = pskFromEnv(); err != nil {
		return nil, nil, err
	}
	return secret, psk, nil
}
