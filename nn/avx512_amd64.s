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

// Four 16-float FMAs of the broadcast z into a row of 64 accumulators, from
// the B vectors Z24–Z27.
#define FMA64(z, a0, a1, a2, a3) \
	VFMADD231PS Z24, z, a0 \
	VFMADD231PS Z25, z, a1 \
	VFMADD231PS Z26, z, a2 \
	VFMADD231PS Z27, z, a3

#define STORE64(r, a0, a1, a2, a3) \
	VMOVUPS a0, (r) \
	VMOVUPS a1, 64(r) \
	VMOVUPS a2, 128(r) \
	VMOVUPS a3, 192(r)

#define ADD64(r, a0, a1, a2, a3) \
	VADDPS (r), a0, a0 \
	VADDPS 64(r), a1, a1 \
	VADDPS 128(r), a2, a2 \
	VADDPS 192(r), a3, a3

#define ZERO4(a0, a1, a2, a3) \
	VPXORD a0, a0, a0 \
	VPXORD a1, a1, a1 \
	VPXORD a2, a2, a2 \
	VPXORD a3, a3, a3

// func kernConv6x64(k int, a *float32, lda int, b *float32, offs *int, c *float32, ldc int)
// kernConv6x16 for 64 columns: C[0:6, 0:64] = A[0:6, 0:k] · B, row p of B
// at b[offs[p]:]. Each element is the same chain of FMAs in the same order
// as kernConv6x16's, so the results are the same bits.
TEXT ·kernConv6x64(SB), NOSPLIT, $0-56
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R8
	MOVQ b+24(FP), DI
	MOVQ offs+32(FP), R9
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R10
	SHLQ $2, R8
	SHLQ $2, R10
	LEAQ (SI)(R8*2), R11
	ADDQ R8, R11 // row 3
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	ZERO4(Z8, Z9, Z10, Z11)
	ZERO4(Z12, Z13, Z14, Z15)
	ZERO4(Z16, Z17, Z18, Z19)
	ZERO4(Z20, Z21, Z22, Z23)

cv64loop:
	MOVQ         (R9), AX
	VMOVUPS      (DI)(AX*4), Z24
	VMOVUPS      64(DI)(AX*4), Z25
	VMOVUPS      128(DI)(AX*4), Z26
	VMOVUPS      192(DI)(AX*4), Z27
	VBROADCASTSS (SI), Z28
	VBROADCASTSS (SI)(R8*1), Z29
	FMA64(Z28, Z0, Z1, Z2, Z3)
	VBROADCASTSS (SI)(R8*2), Z30
	FMA64(Z29, Z4, Z5, Z6, Z7)
	VBROADCASTSS (R11), Z31
	FMA64(Z30, Z8, Z9, Z10, Z11)
	VBROADCASTSS (R11)(R8*1), Z28
	FMA64(Z31, Z12, Z13, Z14, Z15)
	VBROADCASTSS (R11)(R8*2), Z29
	FMA64(Z28, Z16, Z17, Z18, Z19)
	FMA64(Z29, Z20, Z21, Z22, Z23)
	ADDQ         $4, SI
	ADDQ         $4, R11
	ADDQ         $8, R9
	DECQ         CX
	JNZ          cv64loop

	STORE64(DX, Z0, Z1, Z2, Z3)
	ADDQ R10, DX
	STORE64(DX, Z4, Z5, Z6, Z7)
	ADDQ R10, DX
	STORE64(DX, Z8, Z9, Z10, Z11)
	ADDQ R10, DX
	STORE64(DX, Z12, Z13, Z14, Z15)
	ADDQ R10, DX
	STORE64(DX, Z16, Z17, Z18, Z19)
	ADDQ R10, DX
	STORE64(DX, Z20, Z21, Z22, Z23)
	VZEROUPPER
	RET

// func kernConv4x64(k int, a *float32, lda int, b *float32, offs *int, c *float32, ldc int)
// kernConv6x64 for 4 rows (kernConv4x16's bits).
TEXT ·kernConv4x64(SB), NOSPLIT, $0-56
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R8
	MOVQ b+24(FP), DI
	MOVQ offs+32(FP), R9
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R10
	SHLQ $2, R8
	SHLQ $2, R10
	LEAQ (SI)(R8*2), R11
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	ZERO4(Z8, Z9, Z10, Z11)
	ZERO4(Z12, Z13, Z14, Z15)

cv464loop:
	MOVQ         (R9), AX
	VMOVUPS      (DI)(AX*4), Z24
	VMOVUPS      64(DI)(AX*4), Z25
	VMOVUPS      128(DI)(AX*4), Z26
	VMOVUPS      192(DI)(AX*4), Z27
	VBROADCASTSS (SI), Z28
	VBROADCASTSS (SI)(R8*1), Z29
	FMA64(Z28, Z0, Z1, Z2, Z3)
	VBROADCASTSS (R11), Z30
	FMA64(Z29, Z4, Z5, Z6, Z7)
	VBROADCASTSS (R11)(R8*1), Z31
	FMA64(Z30, Z8, Z9, Z10, Z11)
	FMA64(Z31, Z12, Z13, Z14, Z15)
	ADDQ         $4, SI
	ADDQ         $4, R11
	ADDQ         $8, R9
	DECQ         CX
	JNZ          cv464loop

	STORE64(DX, Z0, Z1, Z2, Z3)
	ADDQ R10, DX
	STORE64(DX, Z4, Z5, Z6, Z7)
	ADDQ R10, DX
	STORE64(DX, Z8, Z9, Z10, Z11)
	ADDQ R10, DX
	STORE64(DX, Z12, Z13, Z14, Z15)
	VZEROUPPER
	RET

// func kernNN6x64(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)
// kernNN6x16 for 64 columns: C[0:6, 0:64] (+)= A[0:6, 0:k] · B[0:k, 0:64],
// the same FMAs in the same order per element, then C added if acc, so
// the same bits.
TEXT ·kernNN6x64(SB), NOSPLIT, $0-57
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R8
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R9
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R10
	SHLQ $2, R8
	SHLQ $2, R9
	SHLQ $2, R10
	LEAQ (SI)(R8*2), R11
	ADDQ R8, R11 // row 3
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	ZERO4(Z8, Z9, Z10, Z11)
	ZERO4(Z12, Z13, Z14, Z15)
	ZERO4(Z16, Z17, Z18, Z19)
	ZERO4(Z20, Z21, Z22, Z23)

nn64loop:
	VMOVUPS      (DI), Z24
	VMOVUPS      64(DI), Z25
	VMOVUPS      128(DI), Z26
	VMOVUPS      192(DI), Z27
	VBROADCASTSS (SI), Z28
	VBROADCASTSS (SI)(R8*1), Z29
	FMA64(Z28, Z0, Z1, Z2, Z3)
	VBROADCASTSS (SI)(R8*2), Z30
	FMA64(Z29, Z4, Z5, Z6, Z7)
	VBROADCASTSS (R11), Z31
	FMA64(Z30, Z8, Z9, Z10, Z11)
	VBROADCASTSS (R11)(R8*1), Z28
	FMA64(Z31, Z12, Z13, Z14, Z15)
	VBROADCASTSS (R11)(R8*2), Z29
	FMA64(Z28, Z16, Z17, Z18, Z19)
	FMA64(Z29, Z20, Z21, Z22, Z23)
	ADDQ         $4, SI
	ADDQ         $4, R11
	ADDQ         R9, DI
	DECQ         CX
	JNZ          nn64loop

	MOVBLZX acc+56(FP), AX
	TESTQ   AX, AX
	JZ      nn64store
	MOVQ    DX, BX
	ADD64(BX, Z0, Z1, Z2, Z3)
	ADDQ    R10, BX
	ADD64(BX, Z4, Z5, Z6, Z7)
	ADDQ    R10, BX
	ADD64(BX, Z8, Z9, Z10, Z11)
	ADDQ    R10, BX
	ADD64(BX, Z12, Z13, Z14, Z15)
	ADDQ    R10, BX
	ADD64(BX, Z16, Z17, Z18, Z19)
	ADDQ    R10, BX
	ADD64(BX, Z20, Z21, Z22, Z23)

nn64store:
	STORE64(DX, Z0, Z1, Z2, Z3)
	ADDQ R10, DX
	STORE64(DX, Z4, Z5, Z6, Z7)
	ADDQ R10, DX
	STORE64(DX, Z8, Z9, Z10, Z11)
	ADDQ R10, DX
	STORE64(DX, Z12, Z13, Z14, Z15)
	ADDQ R10, DX
	STORE64(DX, Z16, Z17, Z18, Z19)
	ADDQ R10, DX
	STORE64(DX, Z20, Z21, Z22, Z23)
	VZEROUPPER
	RET

DATA iota16<>+0(SB)/8, $0x0000000100000000
DATA iota16<>+8(SB)/8, $0x0000000300000002
DATA iota16<>+16(SB)/8, $0x0000000500000004
DATA iota16<>+24(SB)/8, $0x0000000700000006
DATA iota16<>+32(SB)/8, $0x0000000900000008
DATA iota16<>+40(SB)/8, $0x0000000b0000000a
DATA iota16<>+48(SB)/8, $0x0000000d0000000c
DATA iota16<>+56(SB)/8, $0x0000000f0000000e
GLOBL iota16<>(SB), RODATA|NOPTR, $64

// func chanLast(np, c int, src *float32, plane int, dst *float32)
// dst[q·c + ci] = src[ci·plane + q] for q < np and ci < c, a multiple of
// 16: one gather per pixel and 16 channels.
TEXT ·chanLast(SB), NOSPLIT, $0-40
	MOVQ         np+0(FP), CX
	MOVQ         c+8(FP), R8
	MOVQ         src+16(FP), SI
	MOVQ         plane+24(FP), R9
	MOVQ         dst+32(FP), DI
	VPBROADCASTD R9, Z1
	VPMULLD      iota16<>(SB), Z1, Z1 // lane i: i·plane
	MOVQ         R9, R10
	SHLQ         $6, R10              // bytes from 16 channels to the next 16
	TESTQ        CX, CX
	JZ           cldone

clpixel:
	MOVQ SI, AX
	MOVQ R8, BX

clblock:
	KXNORW     K1, K1, K1
	VGATHERDPS (AX)(Z1*4), K1, Z2
	VMOVUPS    Z2, (DI)
	ADDQ       $64, DI
	ADDQ       R10, AX
	SUBQ       $16, BX
	JNZ        clblock
	ADDQ       $4, SI
	DECQ       CX
	JNZ        clpixel

cldone:
	VZEROUPPER
	RET

// func chanFirst(rows, w, c int, src *float32, lds int, dst *float32, hw int)
// dst[ci·hw + r·w + x] = src[(r·lds + x)·c + ci] for ci < c, r < rows,
// x < w: 16 columns of a channel's row per gather, the last masked.
TEXT ·chanFirst(SB), NOSPLIT, $0-56
	MOVQ         w+8(FP), R8
	MOVQ         c+16(FP), R9
	MOVQ         src+24(FP), SI
	MOVQ         lds+32(FP), R10
	MOVQ         dst+40(FP), DI
	MOVQ         hw+48(FP), R11
	VPBROADCASTD R9, Z1
	VPMULLD      iota16<>(SB), Z1, Z1 // lane i: i·c
	IMULQ        R9, R10
	SHLQ         $2, R10              // bytes between source rows
	SHLQ         $2, R11              // bytes between channel planes of dst
	MOVQ         R9, R12
	SHLQ         $6, R12              // bytes from 16 pixels to the next 16
	MOVQ         R8, CX
	ANDQ         $15, CX
	MOVL         $1, AX
	SHLL         CX, AX
	DECL         AX
	KMOVW        AX, K3               // the last chunk's columns (none if w%16 = 0)
	SHRQ         $4, R8               // whole chunks per row
	XORQ         R13, R13             // ci

cfchan:
	LEAQ (SI)(R13*4), BX // channel ci of the first pixel
	MOVQ DI, DX
	MOVQ rows+0(FP), R14

cfrow:
	MOVQ  BX, AX
	MOVQ  R8, CX
	TESTQ CX, CX
	JZ    cftail

cfchunk:
	KXNORW     K1, K1, K1
	VGATHERDPS (AX)(Z1*4), K1, Z2
	VMOVUPS    Z2, (DX)
	ADDQ       $64, DX
	ADDQ       R12, AX
	DECQ       CX
	JNZ        cfchunk

cftail:
	KORTESTW K3, K3
	JZ       cfnext
	KMOVW    K3, K1
	VPXORD   Z2, Z2, Z2
	VGATHERDPS (AX)(Z1*4), K1, Z2
	VMOVUPS  Z2, K3, (DX)
	MOVQ     w+8(FP), CX
	ANDQ     $15, CX
	LEAQ     (DX)(CX*4), DX

cfnext:
	ADDQ R10, BX
	DECQ R14
	JNZ  cfrow
	ADDQ R11, DI
	INCQ R13
	CMPQ R13, R9
	JNE  cfchan
	VZEROUPPER
	RET

// ROUTE16 lists the routed windows of codes Z0 (base positions Z1,
// gradients Z2) at pos and g (R9, R10) from entry DX on, advancing DX, and
// adds their gradients into Z9.
#define ROUTE16 \
	VPTESTMD    Z7, Z0, K1 \
	VPADDD      Z6, Z1, K1, Z1 \
	VPTESTMD    Z8, Z0, K2 \
	VPADDD      Z5, Z1, K2, Z1 \
	VPTESTMD    Z0, Z0, K3 \
	VADDPS      Z2, Z9, K3, Z9 \
	VPCOMPRESSD Z1, K3, Z3 \
	VCOMPRESSPS Z2, K3, Z4 \
	VMOVDQU32   Z3, (R9)(DX*4) \
	VMOVUPS     Z4, (R10)(DX*4) \
	KMOVW       K3, AX \
	POPCNTL     AX, AX \
	ADDQ        AX, DX

// func listRouted16(n int, hot *int32, dy *float32, base *int32, gw int, pos *int32, gv *float32, sum *float32) int
TEXT ·listRouted16(SB), NOSPLIT, $0-72
	MOVQ         n+0(FP), CX
	MOVQ         hot+8(FP), SI
	MOVQ         dy+16(FP), DI
	MOVQ         base+24(FP), R8
	MOVQ         gw+32(FP), AX
	MOVQ         pos+40(FP), R9
	MOVQ         gv+48(FP), R10
	MOVQ         sum+56(FP), R11
	VPBROADCASTD AX, Z5 // a grid row down
	MOVL         $1, AX
	VPBROADCASTD AX, Z6 // a column right
	MOVL         $0xA, AX
	VPBROADCASTD AX, Z7 // the right cells' bits
	MOVL         $0xC, AX
	VPBROADCASTD AX, Z8 // the bottom cells' bits
	VPXORD       Z9, Z9, Z9
	XORQ         DX, DX
	CMPQ         CX, $16
	JLT          lrtail

lrloop:
	VMOVDQU32 (SI), Z0
	VMOVDQU32 (R8), Z1
	VMOVUPS   (DI), Z2
	ROUTE16
	ADDQ      $64, SI
	ADDQ      $64, DI
	ADDQ      $64, R8
	SUBQ      $16, CX
	CMPQ      CX, $16
	JGE       lrloop

lrtail:
	TESTQ       CX, CX
	JZ          lrdone
	MOVL        $1, AX
	SHLL        CX, AX
	DECL        AX
	KMOVW       AX, K4
	VMOVDQU32.Z (SI), K4, Z0
	VMOVDQU32.Z (R8), K4, Z1
	VMOVUPS.Z   (DI), K4, Z2
	ROUTE16

lrdone:
	VMOVUPS Z9, (R11)
	MOVQ    DX, ret+64(FP)
	VZEROUPPER
	RET

// Four FMAs of the B vector z into column j's accumulators of rows 0–3,
// from the A vectors Z24–Z27.
#define NTCOL(z, c0, c1, c2, c3) \
	VFMADD231PS z, Z24, c0 \
	VFMADD231PS z, Z25, c1 \
	VFMADD231PS z, Z26, c2 \
	VFMADD231PS z, Z27, c3

// HSUM sets C's element at m to the sum of z's 16 lanes (plus the element
// if R13 is set), in a fixed order: halves, quarters, pairs, neighbours.
#define HSUM(z, y, m) \
	VEXTRACTF64X4 $1, z, Y30 \
	VADDPS        y, Y30, Y30 \
	VEXTRACTF32X4 $1, Y30, X31 \
	VADDPS        X31, X30, X30 \
	VPERMILPS     $0x4E, X30, X31 \
	VADDPS        X31, X30, X30 \
	VPERMILPS     $0xB1, X30, X31 \
	VADDSS        X31, X30, X30 \
	TESTQ         R13, R13 \
	JZ            2(PC) \
	VADDSS        m, X30, X30 \
	VMOVSS        X30, m

// func kernNT4x6(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)
// C[i, j] (+)= dot(A[i, 0:k], B[j, 0:k]) for i < 4, j < 6, k ≥ 1: 24
// accumulators of 16 lanes, the last chunk of k mod 16 masked, each
// reduced by HSUM. Per 16 elements, 10 loads feed 24 FMAs.
TEXT ·kernNT4x6(SB), NOSPLIT, $0-57
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R8
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R9
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R10
	SHLQ $2, R8
	SHLQ $2, R9
	SHLQ $2, R10
	LEAQ (SI)(R8*2), R11 // row 2 of A
	LEAQ (DI)(R9*2), R12
	ADDQ R9, R12         // row 3 of B
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	ZERO4(Z8, Z9, Z10, Z11)
	ZERO4(Z12, Z13, Z14, Z15)
	ZERO4(Z16, Z17, Z18, Z19)
	ZERO4(Z20, Z21, Z22, Z23)
	MOVQ CX, BX
	ANDQ $15, BX         // the masked tail
	SHRQ $4, CX
	JZ   nt46tail

nt46loop:
	VMOVUPS (SI), Z24
	VMOVUPS (SI)(R8*1), Z25
	VMOVUPS (R11), Z26
	VMOVUPS (R11)(R8*1), Z27
	VMOVUPS (DI), Z28
	VMOVUPS (DI)(R9*1), Z29
	NTCOL(Z28, Z0, Z6, Z12, Z18)
	VMOVUPS (DI)(R9*2), Z28
	NTCOL(Z29, Z1, Z7, Z13, Z19)
	VMOVUPS (R12), Z29
	NTCOL(Z28, Z2, Z8, Z14, Z20)
	VMOVUPS (R12)(R9*1), Z28
	NTCOL(Z29, Z3, Z9, Z15, Z21)
	VMOVUPS (R12)(R9*2), Z29
	NTCOL(Z28, Z4, Z10, Z16, Z22)
	NTCOL(Z29, Z5, Z11, Z17, Z23)
	ADDQ    $64, SI
	ADDQ    $64, R11
	ADDQ    $64, DI
	ADDQ    $64, R12
	DECQ    CX
	JNZ     nt46loop

nt46tail:
	TESTQ         BX, BX
	JZ            nt46sum
	MOVQ          BX, CX
	MOVL          $1, AX
	SHLL          CX, AX
	DECL          AX
	KMOVW         AX, K1
	VMOVUPS.Z     (SI), K1, Z24
	VMOVUPS.Z     (SI)(R8*1), K1, Z25
	VMOVUPS.Z     (R11), K1, Z26
	VMOVUPS.Z     (R11)(R8*1), K1, Z27
	VMOVUPS.Z     (DI), K1, Z28
	VMOVUPS.Z     (DI)(R9*1), K1, Z29
	NTCOL(Z28, Z0, Z6, Z12, Z18)
	VMOVUPS.Z     (DI)(R9*2), K1, Z28
	NTCOL(Z29, Z1, Z7, Z13, Z19)
	VMOVUPS.Z     (R12), K1, Z29
	NTCOL(Z28, Z2, Z8, Z14, Z20)
	VMOVUPS.Z     (R12)(R9*1), K1, Z28
	NTCOL(Z29, Z3, Z9, Z15, Z21)
	VMOVUPS.Z     (R12)(R9*2), K1, Z29
	NTCOL(Z28, Z4, Z10, Z16, Z22)
	NTCOL(Z29, Z5, Z11, Z17, Z23)

nt46sum:
	MOVBQZX acc+56(FP), R13
	HSUM(Z0, Y0, (DX))
	HSUM(Z1, Y1, 4(DX))
	HSUM(Z2, Y2, 8(DX))
	HSUM(Z3, Y3, 12(DX))
	HSUM(Z4, Y4, 16(DX))
	HSUM(Z5, Y5, 20(DX))
	ADDQ    R10, DX
	HSUM(Z6, Y6, (DX))
	HSUM(Z7, Y7, 4(DX))
	HSUM(Z8, Y8, 8(DX))
	HSUM(Z9, Y9, 12(DX))
	HSUM(Z10, Y10, 16(DX))
	HSUM(Z11, Y11, 20(DX))
	ADDQ    R10, DX
	HSUM(Z12, Y12, (DX))
	HSUM(Z13, Y13, 4(DX))
	HSUM(Z14, Y14, 8(DX))
	HSUM(Z15, Y15, 12(DX))
	HSUM(Z16, Y16, 16(DX))
	HSUM(Z17, Y17, 20(DX))
	ADDQ    R10, DX
	HSUM(Z18, Y18, (DX))
	HSUM(Z19, Y19, 4(DX))
	HSUM(Z20, Y20, 8(DX))
	HSUM(Z21, Y21, 12(DX))
	HSUM(Z22, Y22, 16(DX))
	HSUM(Z23, Y23, 20(DX))
	VZEROUPPER
	RET
