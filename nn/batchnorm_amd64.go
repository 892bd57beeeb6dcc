//go:build !purego

package nn

// The AVX2 kernels of BatchNormalization (batchnorm_amd64.s), each over
// the first n&^7 floats; bnSum, bnSqDev, bnBwdSums, bnAffine and bnBwdDx
// (batchnorm.go) call them and do the rest.

//go:noescape
func bnSum8(n int, x *float32) float64

//go:noescape
func bnSqDev8(n int, x *float32, mean float64) float64

//go:noescape
func bnBwdSums8(n int, dy, x *float32, mean float64) (sdy, sdyx float64)

//go:noescape
func bnAffine8(n int, x, y *float32, mean, a, b float32)

//go:noescape
func bnBwdDx8(n int, dy, x, dx *float32, mean, a, b, c float32)
