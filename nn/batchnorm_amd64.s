//go:build !purego

#include "textflag.h"

// The AVX2 kernels of BatchNormalization (batchnorm.go). Each takes the
// first n&^7 floats; the Go callers do the rest.

// func bnSum8(n int, x *float32) float64
// Sums in float64, two accumulators of 4 lanes.
TEXT ·bnSum8(SB), NOSPLIT, $0-24
	MOVQ   n+0(FP), CX
	MOVQ   x+8(FP), SI
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	SHRQ   $3, CX
	JZ     bsdone

bsloop:
	VCVTPS2PD (SI), Y0
	VCVTPS2PD 16(SI), Y1
	VADDPD    Y0, Y2, Y2
	VADDPD    Y1, Y3, Y3
	ADDQ      $32, SI
	DECQ      CX
	JNZ       bsloop

bsdone:
	VADDPD       Y3, Y2, Y2
	VEXTRACTF128 $1, Y2, X3
	VADDPD       X3, X2, X2
	VHADDPD      X2, X2, X2
	VMOVSD       X2, ret+16(FP)
	VZEROUPPER
	RET

// func bnSqDev8(n int, x *float32, mean float64) float64
// Sums (x−mean)² in float64.
TEXT ·bnSqDev8(SB), NOSPLIT, $0-32
	MOVQ         n+0(FP), CX
	MOVQ         x+8(FP), SI
	VBROADCASTSD mean+16(FP), Y4
	VXORPD       Y2, Y2, Y2
	VXORPD       Y3, Y3, Y3
	SHRQ         $3, CX
	JZ           bqdone

bqloop:
	VCVTPS2PD   (SI), Y0
	VCVTPS2PD   16(SI), Y1
	VSUBPD      Y4, Y0, Y0
	VSUBPD      Y4, Y1, Y1
	VFMADD231PD Y0, Y0, Y2
	VFMADD231PD Y1, Y1, Y3
	ADDQ        $32, SI
	DECQ        CX
	JNZ         bqloop

bqdone:
	VADDPD       Y3, Y2, Y2
	VEXTRACTF128 $1, Y2, X3
	VADDPD       X3, X2, X2
	VHADDPD      X2, X2, X2
	VMOVSD       X2, ret+24(FP)
	VZEROUPPER
	RET

// func bnBwdSums8(n int, dy, x *float32, mean float64) (sdy, sdyx float64)
// Sums dy and dy·(x−mean) in float64.
TEXT ·bnBwdSums8(SB), NOSPLIT, $0-48
	MOVQ         n+0(FP), CX
	MOVQ         dy+8(FP), SI
	MOVQ         x+16(FP), DI
	VBROADCASTSD mean+24(FP), Y8
	VXORPD       Y4, Y4, Y4
	VXORPD       Y5, Y5, Y5
	VXORPD       Y6, Y6, Y6
	VXORPD       Y7, Y7, Y7
	SHRQ         $3, CX
	JZ           bbdone

bbloop:
	VCVTPS2PD   (SI), Y0
	VCVTPS2PD   16(SI), Y1
	VCVTPS2PD   (DI), Y2
	VCVTPS2PD   16(DI), Y3
	VADDPD      Y0, Y4, Y4
	VADDPD      Y1, Y5, Y5
	VSUBPD      Y8, Y2, Y2
	VSUBPD      Y8, Y3, Y3
	VFMADD231PD Y0, Y2, Y6
	VFMADD231PD Y1, Y3, Y7
	ADDQ        $32, SI
	ADDQ        $32, DI
	DECQ        CX
	JNZ         bbloop

bbdone:
	VADDPD       Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPD       X5, X4, X4
	VHADDPD      X4, X4, X4
	VMOVSD       X4, sdy+32(FP)
	VADDPD       Y7, Y6, Y6
	VEXTRACTF128 $1, Y6, X7
	VADDPD       X7, X6, X6
	VHADDPD      X6, X6, X6
	VMOVSD       X6, sdyx+40(FP)
	VZEROUPPER
	RET

// func bnAffine8(n int, x, y *float32, mean, a, b float32)
// y = (x−mean)·a + b.
TEXT ·bnAffine8(SB), NOSPLIT, $0-36
	MOVQ         n+0(FP), CX
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), DI
	VBROADCASTSS mean+24(FP), Y4
	VBROADCASTSS a+28(FP), Y5
	VBROADCASTSS b+32(FP), Y6
	SHRQ         $3, CX
	JZ           badone

baloop:
	VMOVUPS     (SI), Y0
	VSUBPS      Y4, Y0, Y0
	VFMADD213PS Y6, Y5, Y0
	VMOVUPS     Y0, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	DECQ        CX
	JNZ         baloop

badone:
	VZEROUPPER
	RET

// func bnBwdDx8(n int, dy, x, dx *float32, mean, a, b, c float32)
// dx = a·dy + (b·(x−mean) + c).
TEXT ·bnBwdDx8(SB), NOSPLIT, $0-48
	MOVQ         n+0(FP), CX
	MOVQ         dy+8(FP), SI
	MOVQ         x+16(FP), R8
	MOVQ         dx+24(FP), DI
	VBROADCASTSS mean+32(FP), Y4
	VBROADCASTSS a+36(FP), Y5
	VBROADCASTSS b+40(FP), Y6
	VBROADCASTSS c+44(FP), Y7
	SHRQ         $3, CX
	JZ           bxdone

bxloop:
	VMOVUPS     (R8), Y0
	VSUBPS      Y4, Y0, Y0
	VFMADD213PS Y7, Y6, Y0
	VFMADD231PS (SI), Y5, Y0
	VMOVUPS     Y0, (DI)
	ADDQ        $32, SI
	ADDQ        $32, R8
	ADDQ        $32, DI
	DECQ        CX
	JNZ         bxloop

bxdone:
	VZEROUPPER
	RET
