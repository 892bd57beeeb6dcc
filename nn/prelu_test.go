package nn

import (
	"strings"
	"testing"
)

// TestLayerGradients's cases of PReLU, on spaced inputs (its kink is at 0).
func init() {
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"prelu_vector", 350, spec(vectorShape(9), PReLU{}), true, false},
		{"prelu_sequence", 351, spec(imageShape(1, 6, 3), PReLU{SharedAxes: []int{1}}), true, false},
		{"prelu_image", 352, spec(imageShape(3, 4, 2), PReLU{SharedAxes: []int{2, 1}, AlphaInit: &Initializer{Value: 0.25}}), true, false},
	}...)
}

// TestPReLUSharedAxes: the slopes are per channel, so shared_axes must
// span the positions; anything else is refused naming the option.
func TestPReLUSharedAxes(t *testing.T) {
	for _, tc := range []struct {
		in   Shape
		axes []int
		want string // "" for no error
	}{
		{vectorShape(4), nil, ""},
		{imageShape(1, 5, 2), []int{1}, ""},
		{imageShape(1, 5, 2), []int{1, 2}, ""},
		{imageShape(4, 5, 2), []int{1, 2}, ""},
		{imageShape(4, 5, 2), nil, "shared_axes none on an input of 4×5×2 is not supported"},
		{imageShape(4, 5, 2), []int{1}, "must be [1, 2]"},
		{imageShape(1, 5, 2), nil, "must be [1] (a sequence's steps)"},
		{vectorShape(4), []int{1}, "must be none"},
	} {
		_, _, err := PReLU{SharedAxes: tc.axes}.build(tc.in)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v, shared_axes %v: error %v, want %q", tc.in, tc.axes, err, tc.want)
		}
	}
}
