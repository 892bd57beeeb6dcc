package collective

import (
	"unsafe"
)

// number is the element types collectives reduce.
type number interface{ ~float32 | ~float64 | ~int64 }

// asBytes views s as its in-memory bytes (no copy).
func asBytes[T number](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// viewAs views b as elements of T (no copy). len(b) must be a multiple of
// the element size and b must be suitably aligned: pooled buffers and Go
// slices of T are.
func viewAs[T number](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/int(unsafe.Sizeof(z)))
}

// foldFunc folds src into dst (byte views of the same element type and
// length): dst = op(src, dst) if srcFirst, else op(dst, src).
type foldFunc func(dst, src []byte, srcFirst bool)

func folder[T number](op Op) foldFunc {
	return func(dst, src []byte, srcFirst bool) {
		fold(op, viewAs[T](dst), viewAs[T](src), srcFirst)
	}
}

func fold[T number](op Op, dst, src []T, srcFirst bool) {
	src = src[:len(dst)]
	switch op {
	case Sum, Avg:
		// Addition commutes exactly, so operand order does not matter.
		i := addVector(dst, src)
		for ; i+4 <= len(dst); i += 4 {
			d, s := dst[i:i+4:i+4], src[i:i+4:i+4]
			d[0] += s[0]
			d[1] += s[1]
			d[2] += s[2]
			d[3] += s[3]
		}
		for ; i < len(dst); i++ {
			dst[i] += src[i]
		}
	case Min:
		for i := range dst {
			a, b := dst[i], src[i]
			if srcFirst {
				a, b = b, a
			}
			if b < a {
				a = b
			}
			dst[i] = a
		}
	case Max:
		for i := range dst {
			a, b := dst[i], src[i]
			if srcFirst {
				a, b = b, a
			}
			if b > a {
				a = b
			}
			dst[i] = a
		}
	}
}

// addVector adds src into dst with the AVX2 kernels where there are any
// (float32 and float64) and returns how many leading elements it did; the
// caller does the rest. The kernels add element by element like the
// scalar loop, so the bits are the same.
func addVector[T number](dst, src []T) int {
	if !haveAddAsm || len(dst) == 0 {
		return 0
	}
	switch any(dst[0]).(type) {
	case float32:
		return addFloat32s((*float32)(unsafe.Pointer(&dst[0])), (*float32)(unsafe.Pointer(&src[0])), len(dst))
	case float64:
		return addFloat64s((*float64)(unsafe.Pointer(&dst[0])), (*float64)(unsafe.Pointer(&src[0])), len(dst))
	}
	return 0
}

// divide scales an Avg result: the division (not a multiplication by 1/n)
// matches a naive reference exactly.
func divide[T number](s []T, n int) {
	d := T(n)
	for i := range s {
		s[i] /= d
	}
}
