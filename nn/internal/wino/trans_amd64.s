//go:build !purego

#include "textflag.h"

// AVX2 kernels of the tile transforms, 8 tiles at a time (trans.go's Go
// versions say what each computes, in the same order of operations, so
// that both give the same bits). Counts and strides are in floats.

// STORE4 stores rows u = 0…3 of a column of 8 tiles' coordinates at BX
// + u·R15 (R15: 4 planes) and moves BX on by one plane (DX).
#define STORE4(y0, y1, y2, y3) \
	VMOVUPS y0, (BX) \
	VMOVUPS y1, (BX)(R15*1) \
	VMOVUPS y2, (BX)(R15*2) \
	ADDQ    R15, BX \
	VMOVUPS y3, (BX)(R15*2) \
	SUBQ    R15, BX \
	ADDQ    DX, BX

// GRIDARGS loads the arguments of a transform from a phased grid: CX =
// n bytes, SI = grid, BX = pplane bytes, DI = dst, DX = ds bytes, R15 =
// 4·DX, AX = 0; R9 = pgw bytes.
#define GRIDARGS \
	MOVQ n+0(FP), CX \
	SHLQ $2, CX \
	MOVQ grid+8(FP), SI \
	MOVQ pplane+16(FP), BX \
	SHLQ $2, BX \
	MOVQ pgw+24(FP), R9 \
	SHLQ $2, R9 \
	MOVQ dst+32(FP), DI \
	MOVQ ds+40(FP), DX \
	SHLQ $2, DX \
	MOVQ DX, R15 \
	SHLQ $2, R15 \
	XORQ AX, AX

// Column v of the input transform for the rows a = 0…3 of 8 tiles, into
// Y0…Y3: T0 is d0−d2, T1 d1+d2, T2 d2−d1, T3 d1−d3, where row a's cells
// d0, d2 are r0[i], r0[i+1] and d1, d3 are r1[i], r1[i+1].
#define T0(r0, r1, y) \
	VMOVUPS (r0)(AX*1), y \
	VSUBPS  4(r0)(AX*1), y, y

#define T1(r0, r1, y) \
	VMOVUPS (r1)(AX*1), y \
	VADDPS  4(r0)(AX*1), y, y

#define T2(r0, r1, y) \
	VMOVUPS 4(r0)(AX*1), y \
	VSUBPS  (r1)(AX*1), y, y

#define T3(r0, r1, y) \
	VMOVUPS (r1)(AX*1), y \
	VSUBPS  4(r1)(AX*1), y, y

// INCOL computes column v (by T) of the transform of 8 tiles and stores
// it (STORE4).
#define INCOL(T) \
	T(SI, R8, Y0) \
	T(R9, R10, Y1) \
	T(R11, R12, Y2) \
	T(R13, R14, Y3) \
	VSUBPS  Y2, Y0, Y4 \
	VADDPS  Y2, Y1, Y5 \
	VSUBPS  Y1, Y2, Y6 \
	VSUBPS  Y3, Y1, Y7 \
	STORE4(Y4, Y5, Y6, Y7)

// func inputTransformAsm(n int, grid *float32, pplane, pgw int, dst *float32, ds int)
// Phases 0…3 in SI, R8, R9, R10; each one row on in R11…R14.
TEXT ·inputTransformAsm(SB), NOSPLIT, $0-48
	GRIDARGS
	LEAQ (SI)(R9*1), R11
	LEAQ (SI)(BX*1), R8
	LEAQ (R8)(R9*1), R12
	LEAQ (R8)(BX*1), R10
	LEAQ (R10)(R9*1), R13
	LEAQ (R10)(BX*1), R14
	MOVQ R9, BX
	MOVQ R10, R9
	MOVQ R14, R10
	LEAQ (R10)(BX*1), R14

inloop:
	CMPQ AX, CX
	JGE  indone
	LEAQ (DI)(AX*1), BX
	INCOL(T0)
	INCOL(T1)
	INCOL(T2)
	INCOL(T3)
	ADDQ $32, AX
	JMP  inloop

indone:
	VZEROUPPER
	RET

// OUTROW loads row a of 8 tiles' products (BX, BX+DX, BX+2DX, BX+3DX)
// and leaves s0 = (m0+m1)+m2 in y0 and s1 = (m1−m2)−m3 in y1, BX moved
// on by 4 planes.
#define OUTROW(y0, y1) \
	VMOVUPS (BX), Y0 \
	ADDQ    DX, BX \
	VMOVUPS (BX), Y1 \
	ADDQ    DX, BX \
	VMOVUPS (BX), Y2 \
	ADDQ    DX, BX \
	VMOVUPS (BX), Y3 \
	ADDQ    DX, BX \
	VADDPS  Y1, Y0, y0 \
	VADDPS  Y2, y0, y0 \
	VSUBPS  Y2, Y1, y1 \
	VSUBPS  Y3, y1, y1

// GCOL stores column (c0, c1) of the gradient transform, its rows u =
// 0…3 being c0, c0+c1, c0−c1, c1 (STORE4).
#define GCOL(c0, c1) \
	VADDPS  c1, c0, Y8 \
	VSUBPS  c1, c0, Y9 \
	STORE4(c0, Y8, Y9, c1)

// func gradTransformAsm(n int, grid *float32, pplane, pgw int, dst *float32, ds int)
TEXT ·gradTransformAsm(SB), NOSPLIT, $0-48
	GRIDARGS
	LEAQ (SI)(BX*2), R10  // phase 2
	LEAQ (R10)(BX*1), R11 // phase 3: g00
	ADDQ $4, R10          // g01: phase 2, one column on
	LEAQ (SI)(BX*1), R12
	ADDQ R9, R12          // g10: phase 1, one row on
	LEAQ 4(SI)(R9*1), R13 // g11: phase 0, one row and column on

gloop:
	CMPQ    AX, CX
	JGE     gdone
	VMOVUPS (R11)(AX*1), Y0 // g00
	VMOVUPS (R10)(AX*1), Y1 // g01
	VMOVUPS (R12)(AX*1), Y2 // g10
	VMOVUPS (R13)(AX*1), Y3 // g11

	// Columns: c_r = (g_r0, g_r0+g_r1, g_r0−g_r1, g_r1).
	VADDPS Y1, Y0, Y4
	VSUBPS Y1, Y0, Y5
	VADDPS Y3, Y2, Y6
	VSUBPS Y3, Y2, Y7
	LEAQ   (DI)(AX*1), BX
	GCOL(Y0, Y2)
	GCOL(Y4, Y6)
	GCOL(Y5, Y7)
	GCOL(Y1, Y3)
	ADDQ   $32, AX
	JMP    gloop

gdone:
	VZEROUPPER
	RET

// SPLIT8 splits the 8 floats at (src)(i) into the 4 at even indices,
// stored at (even)(j), and the 4 at odd ones, at (odd)(j), and moves i
// on by 32 bytes and j by 16.
#define SPLIT8(src, i, even, odd, j) \
	VMOVUPS      (src)(i*1), Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VSHUFPS      $0x88, X1, X0, X2 \
	VSHUFPS      $0xDD, X1, X0, X3 \
	VMOVUPS      X2, (even)(j*1) \
	VMOVUPS      X3, (odd)(j*1) \
	ADDQ         $32, i \
	ADDQ         $16, j

// func phaseAsm(ch, h, w int, x, grid *float32, glen, pplane, pgw int)
// Lays out ch channels of h×w (x, channel after channel) on their phased
// grids (glen floats apart): input row 2k is the padded grid's row 2k+1,
// phases 2 (its odd input columns, from column 1) and 3 (its even ones,
// from column 0) at row k; row 2k+1 is grid row 2k+2, phases 0 and 1 at
// row k+1. h is even and w a multiple of 8.
TEXT ·phaseAsm(SB), NOSPLIT, $0-64
	MOVQ ch+0(FP), R8
	MOVQ w+16(FP), R10
	SHLQ $2, R10
	MOVQ x+24(FP), SI
	MOVQ grid+32(FP), DI
	MOVQ glen+40(FP), R11
	SHLQ $2, R11
	MOVQ pplane+48(FP), R12
	SHLQ $2, R12
	MOVQ pgw+56(FP), R13
	SHLQ $2, R13

pchan:
	TESTQ R8, R8
	JZ    pdone
	MOVQ  h+8(FP), R9
	SHRQ  $1, R9
	LEAQ  (DI)(R12*2), BX // phase 2
	LEAQ  (BX)(R12*1), AX // phase 3: the even columns of row 2k
	ADDQ  $4, BX          // phase 2 from column 1: the odd ones
	LEAQ  (DI)(R12*1), CX
	ADDQ  R13, CX         // phase 1, row 1: row 2k+1's even columns
	LEAQ  4(DI)(R13*1), DX // phase 0, row 1, column 1: its odd ones

prow:
	TESTQ R9, R9
	JZ    pnext
	XORQ  R14, R14
	XORQ  R15, R15

pcol0:
	CMPQ R14, R10
	JGE  prow1
	SPLIT8(SI, R14, AX, BX, R15)
	JMP  pcol0

prow1:
	ADDQ R10, SI
	XORQ R14, R14
	XORQ R15, R15

pcol1:
	CMPQ R14, R10
	JGE  prowend
	SPLIT8(SI, R14, CX, DX, R15)
	JMP  pcol1

prowend:
	ADDQ R10, SI
	ADDQ R13, AX
	ADDQ R13, BX
	ADDQ R13, CX
	ADDQ R13, DX
	DECQ R9
	JMP  prow

pnext:
	ADDQ R11, DI
	DECQ R8
	JMP  pchan

pdone:
	VZEROUPPER
	RET

// OUTCOMB combines the 8 tiles' rows (s0, s1 of rows 0…3 in Y4…Y11)
// into their outputs: Y12, Y13 the top row's columns 0 and 1, Y14, Y15
// the bottom row's, and interleaves each row's two columns: the top
// row's 16 floats in Y2:Y3, the bottom row's in Y4:Y5.
#define OUTCOMB \
	VADDPS     Y6, Y4, Y12 \
	VADDPS     Y8, Y12, Y12 \
	VADDPS     Y7, Y5, Y13 \
	VADDPS     Y9, Y13, Y13 \
	VSUBPS     Y8, Y6, Y14 \
	VSUBPS     Y10, Y14, Y14 \
	VSUBPS     Y9, Y7, Y15 \
	VSUBPS     Y11, Y15, Y15 \
	VUNPCKLPS  Y13, Y12, Y0 \
	VUNPCKHPS  Y13, Y12, Y1 \
	VPERM2F128 $0x20, Y1, Y0, Y2 \
	VPERM2F128 $0x31, Y1, Y0, Y3 \
	VUNPCKLPS  Y15, Y14, Y0 \
	VUNPCKHPS  Y15, Y14, Y1 \
	VPERM2F128 $0x20, Y1, Y0, Y4 \
	VPERM2F128 $0x31, Y1, Y0, Y5

// func outputRowsAsm(th, tw int, m *float32, ms, pgw int, y *float32, w int)
// outputTransform straight into an image of th·2 rows of w = 2·tw floats:
// tile row i (tiles i·pgw …, tw of them, a multiple of 4) gives image
// rows 2i and 2i+1. A last block of 4 tiles reads 8 (the next ones are
// junk or the next row's) and writes 4 tiles' outputs.
TEXT ·outputRowsAsm(SB), NOSPLIT, $0-56
	MOVQ th+0(FP), R9
	MOVQ tw+8(FP), CX
	SHLQ $2, CX          // a tile row's valid bytes of m
	MOVQ m+16(FP), SI
	MOVQ ms+24(FP), DX
	SHLQ $2, DX
	MOVQ pgw+32(FP), R10
	SHLQ $2, R10
	MOVQ y+40(FP), DI    // image row 2i
	MOVQ w+48(FP), R11
	SHLQ $2, R11
	LEAQ (DI)(R11*1), R8 // image row 2i+1

orrow:
	TESTQ R9, R9
	JZ    ordone
	XORQ  AX, AX

orblock:
	MOVQ CX, R12
	SUBQ AX, R12
	JLE  ornext
	LEAQ (SI)(AX*1), BX
	OUTROW(Y4, Y5)
	OUTROW(Y6, Y7)
	OUTROW(Y8, Y9)
	OUTROW(Y10, Y11)
	OUTCOMB
	VMOVUPS Y2, (DI)(AX*2)
	VMOVUPS Y4, (R8)(AX*2)
	CMPQ    R12, $32
	JL      ornext
	VMOVUPS Y3, 32(DI)(AX*2)
	VMOVUPS Y5, 32(R8)(AX*2)
	ADDQ    $32, AX
	JMP     orblock

ornext:
	ADDQ R10, SI
	LEAQ (DI)(R11*2), DI
	LEAQ (R8)(R11*2), R8
	DECQ R9
	JMP  orrow

ordone:
	VZEROUPPER
	RET
