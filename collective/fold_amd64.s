//go:build !purego

#include "textflag.h"

// AVX2 sums for reduce.go. dst is the first operand of each add, as in
// the scalar dst[i] += src[i], so a NaN keeps the same payload either way.

// ADDLOOP adds 128 bytes of src (SI) into dst (DI) CX times, with MOVE and
// ADD the packed move and add of the element type.
#define ADDLOOP(MOVE, ADD, label) \
label:                 \
	MOVE 0(DI), Y0      \
	MOVE 32(DI), Y1     \
	MOVE 64(DI), Y2     \
	MOVE 96(DI), Y3     \
	ADD  0(SI), Y0, Y0  \
	ADD  32(SI), Y1, Y1 \
	ADD  64(SI), Y2, Y2 \
	ADD  96(SI), Y3, Y3 \
	MOVE Y0, 0(DI)      \
	MOVE Y1, 32(DI)     \
	MOVE Y2, 64(DI)     \
	MOVE Y3, 96(DI)     \
	ADDQ $128, SI       \
	ADDQ $128, DI       \
	DECQ CX             \
	JNZ  label          \
	VZEROUPPER

// func addFloat32s(dst, src *float32, n int) int
TEXT ·addFloat32s(SB), NOSPLIT, $0-32
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  n+16(FP), CX
	SHRQ  $5, CX
	MOVQ  CX, AX
	SHLQ  $5, AX
	TESTQ CX, CX
	JZ    f32done
	ADDLOOP(VMOVUPS, VADDPS, f32loop)

f32done:
	MOVQ AX, ret+24(FP)
	RET

// func addFloat64s(dst, src *float64, n int) int
TEXT ·addFloat64s(SB), NOSPLIT, $0-32
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  n+16(FP), CX
	SHRQ  $4, CX
	MOVQ  CX, AX
	SHLQ  $4, AX
	TESTQ CX, CX
	JZ    f64done
	ADDLOOP(VMOVUPD, VADDPD, f64loop)

f64done:
	MOVQ AX, ret+24(FP)
	RET
