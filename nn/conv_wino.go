package nn

import "github.com/meshtrain/meshtrain/nn/internal/wino"

// useWino switches l to Winograd's F(2×2, 3×3) (nn/internal/wino) when
// it is a 3×3, stride-1, undilated convolution padded by one on every
// side with at least 8 input channels (a first layer's 3 make products
// too short to pay for the transforms): 2.25× fewer products in each of
// its three passes. Graph turns it on where it turns on fullGrad (see
// there): the Sequential chains keep the direct products, and so their
// results keep every bit. It allocates now, so that no training step
// does, and reports whether it switched.
func (l *conv2D) useWino() bool {
	if l.KH != 3 || l.KW != 3 || !l.plain() || l.PadT != 1 || l.PadL != 1 || l.OutH != l.InH || l.OutW != l.InW || l.InC < 8 || l.InH%2 != 0 || l.InW%2 != 0 {
		return false
	}
	c, err := wino.New(l.InC, l.OutC, l.InH, l.InW, wino.Kernels{Mul: convNN, MulNT: convNT})
	if err != nil {
		panic("nn: " + err.Error()) // the checks above rule it out
	}
	l.wino = c
	// The direct passes' grids (the input gradient's product alone
	// 627 KB at 16 channels of 32×32) are never read now.
	l.dcolg, l.yg, l.dyg, l.dxg, l.xg = nil, nil, nil, nil, nil
	return true
}

// winoForward is Forward on the Winograd passes, keeping the input's
// grids for Backward in training.
func (l *conv2D) winoForward(y, x []float32, n int) {
	var b []float32
	if !l.NoBias {
		b = l.b
	}
	l.wino.Forward(y, x, l.w, b, n, l.train)
}

// winoBackward is Backward on the Winograd passes.
func (l *conv2D) winoBackward(dx, dy, x []float32, n int) {
	var db []float32
	if !l.NoBias {
		db = l.db
	}
	l.wino.Backward(dx, dy, x, l.w, l.dw, db, n)
}
