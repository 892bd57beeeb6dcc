package text

import (
	"math"
	"slices"
	"testing"

	"github.com/meshtrain/meshtrain/data"
)

// tokenHash is the FNV-1a-64 of s, written out: what Tokens must give for
// a lower-case token.
func tokenHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range []byte(s) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}

func TestTokens(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"", nil},
		{"  \n\t", nil},
		{"Hello", []string{"hello"}},
		{"FREE money!!! free", []string{"free", "money", "free"}},
		{"a1b2 c_d-e", []string{"a1b2", "c", "d", "e"}},
		{"<html><b>Viagra</b>", []string{"html", "b", "viagra", "b"}},
		{"Ünïcödé ÉTÉ", []string{"ünïcödé", "été"}},
		{"x\xffy", []string{"x", "y"}}, // invalid UTF-8 separates
		{"from: bob@example.com", []string{"from", "bob", "example", "com"}},
	} {
		var got []uint64
		Tokens([]byte(tc.text), func(h uint64) { got = append(got, h) })
		var want []uint64
		for _, w := range tc.want {
			want = append(want, tokenHash(w))
		}
		if !slices.Equal(got, want) {
			t.Errorf("Tokens(%q) = %v, want the hashes of %q", tc.text, got, tc.want)
		}
	}
}

func TestBagOfWords(t *testing.T) {
	const d = 1 << 20
	idx := func(tok string) int32 { return int32(tokenHash(tok) % d) }
	for _, tc := range []struct {
		name   string
		values string
		text   string
		want   map[int32]float32
	}{
		{"empty", BagBinary, "...", nil},
		{"binary counts once", BagBinary, "spam Spam SPAM eggs", map[int32]float32{idx("spam"): 1, idx("eggs"): 1}},
		{"log count", BagLogCount, "spam Spam SPAM eggs", map[int32]float32{idx("spam"): float32(1 + math.Log(3)), idx("eggs"): 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := BagOfWords{Features: d, Values: tc.values}
			if err := b.Check(); err != nil {
				t.Fatal(err)
			}
			// A fresh and a reused destination give the same example.
			reused := data.Example{Indices: []int32{7, 8, 9}, Values: []float32{1, 2, 3}}
			for _, ex := range []*data.Example{{}, &reused} {
				b.Example([]byte(tc.text), -1, ex)
				if ex.Label != -1 || len(ex.Indices) != len(tc.want) || len(ex.Values) != len(ex.Indices) {
					t.Fatalf("got %+v, want %d features labelled -1", ex, len(tc.want))
				}
				if len(tc.want) == 0 && (ex.Indices != nil || ex.Values != nil) {
					t.Fatalf("an empty bag has non-nil slices: %+v", ex)
				}
				for k, i := range ex.Indices {
					if k > 0 && ex.Indices[k-1] >= i {
						t.Fatalf("indices not sorted and unique: %v", ex.Indices)
					}
					if tc.want[i] != ex.Values[k] {
						t.Fatalf("feature %d = %v, want %v", i, ex.Values[k], tc.want[i])
					}
				}
			}
		})
	}
}

// TestBagOfWordsCollisions: with D = 1 every token is feature 0, and the
// counts of colliding tokens add up.
func TestBagOfWordsCollisions(t *testing.T) {
	b := BagOfWords{Features: 1, Values: BagLogCount}
	var ex data.Example
	b.Example([]byte("one two three four"), 1, &ex)
	if !slices.Equal(ex.Indices, []int32{0}) || ex.Values[0] != float32(1+math.Log(4)) {
		t.Fatalf("got %v %v, want feature 0 with 1 + ln 4", ex.Indices, ex.Values)
	}
}

func TestBagOfWordsCheck(t *testing.T) {
	for _, b := range []BagOfWords{{Features: 0, Values: BagBinary}, {Features: -3, Values: BagBinary}, {Features: 10, Values: "tfidf"}, {Features: 10}} {
		if err := b.Check(); err == nil {
			t.Errorf("%+v: no error", b)
		}
	}
}

// TestHeldOut: the split is a function of the bytes only, and holds out
// about the share asked for.
func TestHeldOut(t *testing.T) {
	for _, pct := range []int{0, 20, 50, 100} {
		n := 0
		for i := range 10_000 {
			doc := []byte{byte(i), byte(i >> 8), 'x'}
			h := HeldOut(doc, pct)
			if h != HeldOut(slices.Clone(doc), pct) {
				t.Fatalf("document %d: two answers", i)
			}
			if h {
				n++
			}
		}
		if got := float64(n) / 100; math.Abs(got-float64(pct)) > 1.5 {
			t.Errorf("%d%%: held out %.1f%%", pct, got)
		}
	}
	// Pinned: the same split on every machine and in every version.
	if HeldOut([]byte("hello"), 20) || !HeldOut([]byte("hello"), 60) {
		t.Fatalf("the split of %q moved", "hello")
	}
}

// FuzzBagOfWords: any bytes make a valid sparse example.
func FuzzBagOfWords(f *testing.F) {
	f.Add([]byte("Subject: FREE money\n\n<b>now</b>"), uint16(100))
	f.Add([]byte("\xff\xfe ÉTÉ été"), uint16(1))
	f.Fuzz(func(t *testing.T, text []byte, d uint16) {
		b := BagOfWords{Features: int(d) + 1, Values: BagLogCount}
		var ex data.Example
		b.Example(text, 1, &ex)
		if err := ex.Normalize(b.Features); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		for _, v := range ex.Values {
			if !(v >= 1) {
				t.Fatalf("%q: value %v < 1", text, v)
			}
		}
	})
}
