package cost

import "github.com/meshtrain/meshtrain/collective"

// ParseRate parses a link rate written the way tc(8) writes one (see
// collective.ParseRate: 100mbit, 1gbit, 1.8gbit) and returns it in bits
// per second.
func ParseRate(s string) (float64, error) {
	bits, err := collective.ParseRate(s)
	return float64(bits), err
}

// LinkBeta is β for a link shaped to bits per second: its payload rate
// in bytes per second.
func LinkBeta(bitsPerSecond float64) float64 { return bitsPerSecond / 8 * PayloadShare }
