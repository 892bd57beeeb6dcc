// Package longtest gates the long end-to-end tests: release builds,
// timing goals on emulated hosts, runs of many epochs. The README's test
// command skips them, because on a busy laptop they would miss their
// timing goals or its ten minutes; .ci/run runs them after it, by name
// (go test -run '^TestLong' with MESHTRAIN_LONG=1), so each is named
// TestLong….
package longtest

import (
	"os"
	"strings"
	"testing"
)

// Env is the variable that runs the long tests when it is "1".
const Env = "MESHTRAIN_LONG"

// Enabled says whether the long tests run.
func Enabled() bool { return os.Getenv(Env) == "1" }

// Require skips t unless the long tests run, saying what it is and how to
// run it; a long test not named TestLong… fails, since .ci/run would
// never run it.
func Require(t testing.TB, what string) {
	t.Helper()
	if name, _, _ := strings.Cut(t.Name(), "/"); !strings.HasPrefix(name, "TestLong") {
		t.Fatalf("%s is a long test (%s): name it TestLong… so that .ci/run's -run '^TestLong' runs it", name, what)
		return
	}
	if !Enabled() {
		t.Skipf("a long test (%s): set %s=1 to run it, as .ci/run does", what, Env)
	}
}
