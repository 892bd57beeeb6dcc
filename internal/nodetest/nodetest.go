// Package nodetest runs Node.js scripts in tests that check meshtrain's
// models against other implementations (TensorFlow.js, onnxruntime-web):
// it finds node and the npm packages a script needs, or skips the test
// saying why. It installs nothing into the source tree: a package not
// found is installed, once, into a cache in the user's cache directory,
// and a failed install skips the test.
package nodetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Places a package may already be, besides $MESHTRAIN_NODE_MODULES (a
// list of node_modules directories, separated by the path list
// separator): where the development machines keep them.
var known = []string{"/tmp/tfjs/node_modules", "/tmp/ort/node_modules"}

// Modules returns a node_modules directory holding the npm package pkg
// ("@tensorflow/tfjs"), installing it into the cache if none does; it
// skips t when node or npm is missing or the install fails.
func Modules(t testing.TB, pkg string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the comparison with " + pkg + " needs Node.js")
	}
	dirs := filepath.SplitList(os.Getenv("MESHTRAIN_NODE_MODULES"))
	cache, cacheErr := os.UserCacheDir()
	var mine string
	if cacheErr == nil {
		mine = filepath.Join(cache, "meshtrain-nodetest", strings.NewReplacer("/", "_", "@", "").Replace(pkg))
		dirs = append(dirs, filepath.Join(mine, "node_modules"))
	}
	for _, d := range append(dirs, known...) {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, pkg, "package.json")); err == nil {
			return d
		}
	}
	if cacheErr != nil {
		t.Skipf("%s is not installed and there is no cache directory to install it into: %v", pkg, cacheErr)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skipf("%s is not installed, and npm is not there to install it", pkg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := os.MkdirAll(mine, 0o755); err != nil {
		t.Skipf("%s: cannot make the cache %s: %v", pkg, mine, err)
	}
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--prefix", mine, pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("%s is not installed and npm install --prefix %s failed (%v): %s", pkg, mine, err, lastLines(out, 5))
	}
	return filepath.Join(mine, "node_modules")
}

// Run runs node on script with args, resolving packages in modules, and
// fails t with its output if it fails.
func Run(t testing.TB, modules []string, script string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+strings.Join(modules, string(filepath.ListSeparator)))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s %v: %v\n%s", script, args, err, lastLines(stderr.Bytes(), 20))
	}
	return stdout.Bytes()
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// ReadFloats reads a file of little-endian float32s, as the node scripts
// write their outputs.
func ReadFloats(t testing.TB, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// WriteFloats writes x as little-endian float32s, as the node scripts
// read their inputs.
func WriteFloats(t testing.TB, path string, x []float32) {
	t.Helper()
	b := make([]byte, 0, 4*len(x))
	for _, v := range x {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
