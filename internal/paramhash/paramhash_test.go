package paramhash

import "testing"

func TestHex(t *testing.T) {
	// SHA-256 of the 8 bytes 00 00 80 3f 00 00 00 c0 (1.0 and -2.0 as little-endian float32).
	const want = "ee4ac73c2bd27756ab82780f27c73a7bc4d3f0bb6acb37e008bc27eccd7e588b"
	if got := Hex([]float32{1, -2}); got != want {
		t.Fatalf("hash %s, want %s", got, want)
	}
	big := make([]float32, 5000) // more than one internal block
	big[4999] = 1
	if Hex(big) == Hex(make([]float32, 5000)) {
		t.Fatal("the last value does not change the hash")
	}
	// Both ways of reading the vector give the same bytes.
	direct := Hex(big)
	defer func(le bool) { littleEndian = le }(littleEndian)
	littleEndian = !littleEndian
	if got := Hex(big); got != direct {
		t.Fatalf("hashed by the other way: %s, want %s", got, direct)
	}
}
