package text

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/meshtrain/meshtrain/data"
)

// Values of a hashed bag of words (BagOfWords.Values).
const (
	// BagBinary gives every token present the value 1.
	BagBinary = "binary"
	// BagLogCount gives a token seen c times the value 1 + ln(c).
	BagLogCount = "log"
)

// DefaultBagFeatures is the default width D of a hashed bag of words:
// 2^20 features, where a corpus of tens of thousands of e-mails (some
// hundred thousand distinct tokens) loses few tokens to collisions.
const DefaultBagFeatures = 1 << 20

// BagOfWords turns text into a sparse example: a hashed bag of words, the
// feature-hashing trick of Vowpal Wabbit and scikit-learn's
// HashingVectorizer. A token is a maximal run of letters and digits,
// lower-cased (Unicode rules); token t is feature FNV-1a-64(t) mod
// Features, so no vocabulary is kept and any corpus maps to the same D
// columns. Tokens that collide share a feature (their counts add up).
// The zero value is not valid: set Features and Values.
type BagOfWords struct {
	Features int    // D, the number of features, > 0
	Values   string // BagBinary or BagLogCount

	idx []int32 // scratch: one hashed index per token
}

// Check reports a bad setting, naming it and what is accepted.
func (b *BagOfWords) Check() error {
	if b.Features <= 0 || b.Features > math.MaxInt32 {
		return fmt.Errorf("bag of words of %d features: want 1..%d (e.g. %d)", b.Features, math.MaxInt32, DefaultBagFeatures)
	}
	if b.Values != BagBinary && b.Values != BagLogCount {
		return fmt.Errorf("bag-of-words values %q: want %s or %s", b.Values, BagBinary, BagLogCount)
	}
	return nil
}

// data.Example fills ex with text's features (sorted, unique indices) and
// label, reusing ex's slices. Check must have passed.
func (b *BagOfWords) Example(text []byte, label float32, ex *data.Example) {
	b.idx = b.idx[:0]
	Tokens(text, func(h uint64) { b.idx = append(b.idx, int32(h%uint64(b.Features))) })
	slices.Sort(b.idx)
	ex.Features, ex.Label = nil, label
	ex.Indices, ex.Values = ex.Indices[:0], ex.Values[:0]
	for i := 0; i < len(b.idx); {
		j := i + 1
		for j < len(b.idx) && b.idx[j] == b.idx[i] {
			j++
		}
		v := float32(1)
		if b.Values == BagLogCount {
			v = float32(1 + math.Log(float64(j-i)))
		}
		ex.Indices, ex.Values = append(ex.Indices, b.idx[i]), append(ex.Values, v)
		i = j
	}
	if len(ex.Indices) == 0 {
		ex.Indices, ex.Values = nil, nil
	}
}

// FNV-1a, 64 bits.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// Tokens calls f with the FNV-1a-64 hash of every token of text, in order:
// maximal runs of letters and digits, lower-cased, hashed as UTF-8 (so
// "Free", "FREE" and "free" are one token). Invalid UTF-8 separates tokens.
func Tokens(text []byte, f func(hash uint64)) {
	h, in := uint64(fnvOffset64), false
	var enc [utf8.UTFMax]byte
	for len(text) > 0 {
		r, size := utf8.DecodeRune(text)
		text = text[size:]
		if r == utf8.RuneError || !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
			if in {
				f(h)
				h, in = fnvOffset64, false
			}
			continue
		}
		in = true
		if r < utf8.RuneSelf { // ASCII: the common case, no encoding
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			h = (h ^ uint64(r)) * fnvPrime64
			continue
		}
		for _, c := range enc[:utf8.EncodeRune(enc[:], unicode.ToLower(r))] {
			h = (h ^ uint64(c)) * fnvPrime64
		}
	}
	if in {
		f(h)
	}
}

// HeldOut says whether a document goes to the test set of a split that
// holds out percent of them: by a hash of its bytes (the first 8 bytes of
// its SHA-256, mod 100), so the split is the same on every machine and
// run, needs no seed, and puts duplicate documents on the same side.
func HeldOut(doc []byte, percent int) bool {
	sum := sha256.Sum256(doc)
	return int(binary.BigEndian.Uint64(sum[:8])%100) < percent
}
