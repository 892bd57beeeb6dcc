package cost

import (
	"fmt"
	"strconv"
	"strings"
)

// rateUnits are tc(8)'s decimal units, longest suffix first.
var rateUnits = []struct {
	suffix string
	scale  float64
}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}}

// ParseRate parses a link rate written the way tc(8) writes one, a number
// and one of bit, kbit, mbit, gbit (decimal: 1gbit = 10^9 bit/s), e.g.
// 100mbit, 1gbit, 1.8gbit, and returns it in bits per second.
func ParseRate(s string) (float64, error) {
	low := strings.ToLower(strings.TrimSpace(s))
	for _, u := range rateUnits {
		if num, ok := strings.CutSuffix(low, u.suffix); ok {
			if v, err := strconv.ParseFloat(num, 64); err == nil && v > 0 {
				return v * u.scale, nil
			}
			break
		}
	}
	return 0, fmt.Errorf("rate %q: want a number and bit, kbit, mbit or gbit, e.g. 100mbit, 1gbit, 1.8gbit", s)
}

// LinkBeta is β for a link shaped to bits per second: its payload rate
// in bytes per second.
func LinkBeta(bitsPerSecond float64) float64 { return bitsPerSecond / 8 * PayloadShare }
