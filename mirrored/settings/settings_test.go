package settings

import (
	"errors"
	"testing"
)

func TestCompare(t *testing.T) {
	s := func(kv ...string) []Setting {
		var out []Setting
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, Setting{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		who  []string
		all  [][]Setting
		want string // "" for no error
	}{
		{"equal", []string{"rank 0", "rank 1"}, [][]Setting{s("lr", "0.1"), s("lr", "0.1")}, ""},
		{"one differs", []string{"rank 0", "rank 1", "rank 2"}, [][]Setting{s("lr", "0.1"), s("lr", "0.1"), s("lr", "0.2")},
			"lr is 0.1 on ranks 0, 1 but 0.2 on rank 2"},
		{"missing and empty", []string{"rank 0", "the checkpoint"}, [][]Setting{s("a", "", "b", "x"), s("a", "y")},
			`a is "" on rank 0 but y on the checkpoint; b is x on rank 0 but (not set) on the checkpoint`},
	} {
		err := Compare(tc.who, tc.all)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want none", tc.name, err)
			}
			continue
		}
		var mm *MismatchError
		if !errors.As(err, &mm) || err.Error() != tc.want {
			t.Errorf("%s: %v, want MismatchError %q", tc.name, err, tc.want)
		}
	}
}

// TestFingerprint: only the Resume settings count, by name and value.
func TestFingerprint(t *testing.T) {
	base := []Setting{{Name: "lr", Value: "0.1", Resume: true}, {Name: "hash_every", Value: "0"}}
	for _, tc := range []struct {
		name string
		ss   []Setting
		same bool
	}{
		{"a protocol setting changed", []Setting{base[0], {Name: "hash_every", Value: "5"}}, true},
		{"a Resume setting changed", []Setting{{Name: "lr", Value: "0.2", Resume: true}, base[1]}, false},
		{"a Resume setting added", append([]Setting{{Name: "seed", Value: "1", Resume: true}}, base...), false},
	} {
		if got := Fingerprint(tc.ss) == Fingerprint(base); got != tc.same {
			t.Errorf("%s: same fingerprint %v, want %v", tc.name, got, tc.same)
		}
	}
	if got, want := JSON(base), `{"lr":"0.1"}`; got != want {
		t.Errorf("JSON %s, want %s", got, want)
	}
}
