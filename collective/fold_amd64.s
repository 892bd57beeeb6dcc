//go:build !purego

#include "textflag.h"

// AVX2 sums for reduce.go. dst is the first operand of each add, as in
// the scalar dst[i] += src[i], so a NaN keeps the same payload either way.

// func addFloat32s(dst, src *float32, n int) int
TEXT ·addFloat32s(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	MOVQ CX, AX
	SHLQ $5, AX
	TESTQ CX, CX
	JZ   f32done

f32loop:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VADDPS  (SI), Y0, Y0
	VADDPS  32(SI), Y1, Y1
	VADDPS  64(SI), Y2, Y2
	VADDPS  96(SI), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	DECQ    CX
	JNZ     f32loop
	VZEROUPPER

f32done:
	MOVQ AX, ret+24(FP)
	RET

// func addFloat64s(dst, src *float64, n int) int
TEXT ·addFloat64s(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	MOVQ CX, AX
	SHLQ $4, AX
	TESTQ CX, CX
	JZ   f64done

f64loop:
	VMOVUPD (DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
	VADDPD  (SI), Y0, Y0
	VADDPD  32(SI), Y1, Y1
	VADDPD  64(SI), Y2, Y2
	VADDPD  96(SI), Y3, Y3
	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	DECQ    CX
	JNZ     f64loop
	VZEROUPPER

f64done:
	MOVQ AX, ret+24(FP)
	RET
