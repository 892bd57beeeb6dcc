//go:build !purego

#include "textflag.h"

// AVX-512 kernels (avx512_amd64.go says what each computes). Arguments
// are raw pointers; the Go callers check bounds first.

// Row pointers of a 3×3 window whose top-left pixel is pos[0]: R10, R11
// and R12 point at its three rows (pixel stride R9 bytes, row stride R13).
#define WINDOW \
	MOVLQSX (SI), AX \
	IMULQ   R9, AX \
	LEAQ    (R8)(AX*1), R10 \
	LEAQ    (R10)(R13*1), R11 \
	LEAQ    (R11)(R13*1), R12

// Nine taps of 32 floats at R (tap stride R9 bytes) into or from Z0–Z17,
// three taps from each of the row pointers.
#define LOAD32(r, z0, z1, z2, z3, z4, z5) \
	VMOVUPS (r), z0 \
	VMOVUPS 64(r), z1 \
	VMOVUPS (r)(R9*1), z2 \
	VMOVUPS 64(r)(R9*1), z3 \
	VMOVUPS (r)(R9*2), z4 \
	VMOVUPS 64(r)(R9*2), z5

#define STORE32(r, z0, z1, z2, z3, z4, z5) \
	VMOVUPS z0, (r) \
	VMOVUPS z1, 64(r) \
	VMOVUPS z2, (r)(R9*1) \
	VMOVUPS z3, 64(r)(R9*1) \
	VMOVUPS z4, (r)(R9*2) \
	VMOVUPS z5, 64(r)(R9*2)

#define FMA32(r, z0, z1, z2, z3, z4, z5) \
	VFMADD231PS (r), Z31, z0 \
	VFMADD231PS 64(r), Z31, z1 \
	VFMADD231PS (r)(R9*1), Z31, z2 \
	VFMADD231PS 64(r)(R9*1), Z31, z3 \
	VFMADD231PS (r)(R9*2), Z31, z4 \
	VFMADD231PS 64(r)(R9*2), Z31, z5

// One 16-float read-modify-write: mem += Z31 · w.
#define RMW(m, w, t) \
	VMOVUPS     m, t \
	VFMADD231PS w, Z31, t \
	VMOVUPS     t, m

#define SCATTER32(r, z0, z1, z2, z3, z4, z5) \
	RMW((r), z0, Z18) \
	RMW(64(r), z1, Z19) \
	RMW((r)(R9*1), z2, Z20) \
	RMW(64(r)(R9*1), z3, Z21) \
	RMW((r)(R9*2), z4, Z22) \
	RMW(64(r)(R9*2), z5, Z23)

#define LOAD16(r, z0, z1, z2) \
	VMOVUPS (r), z0 \
	VMOVUPS (r)(R9*1), z1 \
	VMOVUPS (r)(R9*2), z2

#define STORE16(r, z0, z1, z2) \
	VMOVUPS z0, (r) \
	VMOVUPS z1, (r)(R9*1) \
	VMOVUPS z2, (r)(R9*2)

#define FMA16(r, z0, z1, z2) \
	VFMADD231PS (r), Z31, z0 \
	VFMADD231PS (r)(R9*1), Z31, z1 \
	VFMADD231PS (r)(R9*2), Z31, z2

#define SCATTER16(r, z0, z1, z2) \
	RMW((r), z0, Z18) \
	RMW((r)(R9*1), z1, Z19) \
	RMW((r)(R9*2), z2, Z20)

// The taps' block at DX (tap stride R9): rows of three taps at DX, BX, R12.
#define TAPROWS \
	MOVQ DX, BX \
	LEAQ (BX)(R9*2), BX \
	ADDQ R9, BX \
	LEAQ (BX)(R9*2), R12 \
	ADDQ R9, R12

// func hwcGrad32(n int, pos *int32, gv *float32, x *float32, pix, row int, acc *float32)
TEXT ·hwcGrad32(SB), NOSPLIT, $0-56
	MOVQ n+0(FP), CX
	MOVQ pos+8(FP), SI
	MOVQ gv+16(FP), DI
	MOVQ x+24(FP), R8
	MOVQ pix+32(FP), R9
	MOVQ row+40(FP), R13
	MOVQ acc+48(FP), DX
	TAPROWS
	LOAD32(DX, Z0, Z1, Z2, Z3, Z4, Z5)
	LOAD32(BX, Z6, Z7, Z8, Z9, Z10, Z11)
	LOAD32(R12, Z12, Z13, Z14, Z15, Z16, Z17)
	TESTQ CX, CX
	JZ    g32done

g32loop:
	WINDOW
	VBROADCASTSS (DI), Z31
	FMA32(R10, Z0, Z1, Z2, Z3, Z4, Z5)
	FMA32(R11, Z6, Z7, Z8, Z9, Z10, Z11)
	FMA32(R12, Z12, Z13, Z14, Z15, Z16, Z17)
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JNZ  g32loop

g32done:
	TAPROWS
	STORE32(DX, Z0, Z1, Z2, Z3, Z4, Z5)
	STORE32(BX, Z6, Z7, Z8, Z9, Z10, Z11)
	STORE32(R12, Z12, Z13, Z14, Z15, Z16, Z17)
	VZEROUPPER
	RET

// func hwcGrad16(n int, pos *int32, gv *float32, x *float32, pix, row int, acc *float32)
TEXT ·hwcGrad16(SB), NOSPLIT, $0-56
	MOVQ n+0(FP), CX
	MOVQ pos+8(FP), SI
	MOVQ gv+16(FP), DI
	MOVQ x+24(FP), R8
	MOVQ pix+32(FP), R9
	MOVQ row+40(FP), R13
	MOVQ acc+48(FP), DX
	TAPROWS
	LOAD16(DX, Z0, Z1, Z2)
	LOAD16(BX, Z3, Z4, Z5)
	LOAD16(R12, Z6, Z7, Z8)
	TESTQ CX, CX
	JZ    g16done

g16loop:
	WINDOW
	VBROADCASTSS (DI), Z31
	FMA16(R10, Z0, Z1, Z2)
	FMA16(R11, Z3, Z4, Z5)
	FMA16(R12, Z6, Z7, Z8)
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JNZ  g16loop

g16done:
	TAPROWS
	STORE16(DX, Z0, Z1, Z2)
	STORE16(BX, Z3, Z4, Z5)
	STORE16(R12, Z6, Z7, Z8)
	VZEROUPPER
	RET

// func hwcScatter32(n int, pos *int32, gv *float32, dx *float32, pix, row int, w *float32)
TEXT ·hwcScatter32(SB), NOSPLIT, $0-56
	MOVQ n+0(FP), CX
	MOVQ pos+8(FP), SI
	MOVQ gv+16(FP), DI
	MOVQ dx+24(FP), R8
	MOVQ pix+32(FP), R9
	MOVQ row+40(FP), R13
	MOVQ w+48(FP), DX
	TAPROWS
	LOAD32(DX, Z0, Z1, Z2, Z3, Z4, Z5)
	LOAD32(BX, Z6, Z7, Z8, Z9, Z10, Z11)
	LOAD32(R12, Z12, Z13, Z14, Z15, Z16, Z17)
	TESTQ CX, CX
	JZ    s32done

s32loop:
	WINDOW
	VBROADCASTSS (DI), Z31
	SCATTER32(R10, Z0, Z1, Z2, Z3, Z4, Z5)
	SCATTER32(R11, Z6, Z7, Z8, Z9, Z10, Z11)
	SCATTER32(R12, Z12, Z13, Z14, Z15, Z16, Z17)
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JNZ  s32loop

s32done:
	VZEROUPPER
	RET

// func hwcScatter16(n int, pos *int32, gv *float32, dx *float32, pix, row int, w *float32)
TEXT ·hwcScatter16(SB), NOSPLIT, $0-56
	MOVQ n+0(FP), CX
	MOVQ pos+8(FP), SI
	MOVQ gv+16(FP), DI
	MOVQ dx+24(FP), R8
	MOVQ pix+32(FP), R9
	MOVQ row+40(FP), R13
	MOVQ w+48(FP), DX
	TAPROWS
	LOAD16(DX, Z0, Z1, Z2)
	LOAD16(BX, Z3, Z4, Z5)
	LOAD16(R12, Z6, Z7, Z8)
	TESTQ CX, CX
	JZ    s16done

s16loop:
	WINDOW
	VBROADCASTSS (DI), Z31
	SCATTER16(R10, Z0, Z1, Z2)
	SCATTER16(R11, Z3, Z4, Z5)
	SCATTER16(R12, Z6, Z7, Z8)
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JNZ  s16loop

s16done:
	VZEROUPPER
	RET
