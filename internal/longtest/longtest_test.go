package longtest

import (
	"fmt"
	"testing"
)

// fakeT records how Require ended a test.
type fakeT struct {
	testing.TB
	name, ended string
}

func (f *fakeT) Helper()      {}
func (f *fakeT) Name() string { return f.name }
func (f *fakeT) Fatalf(format string, args ...any) {
	f.ended = "fatal: " + fmt.Sprintf(format, args...)
}
func (f *fakeT) Skipf(format string, args ...any) { f.ended = "skip: " + fmt.Sprintf(format, args...) }

func TestRequire(t *testing.T) {
	for _, tc := range []struct {
		name, env, want string
	}{
		{"TestLongBuild", "", "skip: a long test (builds): set MESHTRAIN_LONG=1 to run it, as .ci/run does"},
		{"TestLongBuild/sub", "0", "skip: a long test (builds): set MESHTRAIN_LONG=1 to run it, as .ci/run does"},
		{"TestLongBuild", "1", ""},
		{"TestBuild", "1", "fatal: TestBuild is a long test (builds): name it TestLong… so that .ci/run's -run '^TestLong' runs it"},
	} {
		t.Run(tc.name+"/"+tc.env, func(t *testing.T) {
			t.Setenv(Env, tc.env)
			f := &fakeT{name: tc.name}
			Require(f, "builds")
			if f.ended != tc.want {
				t.Errorf("ended %q, want %q", f.ended, tc.want)
			}
		})
	}
}
