//go:build !purego

#include "textflag.h"

// AVX2+FMA micro-kernels for gemm.go. Arguments are raw pointers with
// strides in elements; the Go callers check bounds before calling.

// func kernNN4x16(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)
// C[0:4, 0:16] (+)= A[0:4, 0:k] · B[0:k, 0:16]
TEXT ·kernNN4x16(SB), NOSPLIT, $0-57
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
	LEAQ (SI)(R8*1), R11
	LEAQ (SI)(R8*2), R12
	LEAQ (R11)(R8*2), R13
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

nn4loop:
	VMOVUPS      (DI), Y8
	VMOVUPS      32(DI), Y9
	VBROADCASTSS (SI), Y10
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VBROADCASTSS (R11), Y11
	VFMADD231PS  Y8, Y11, Y2
	VFMADD231PS  Y9, Y11, Y3
	VBROADCASTSS (R12), Y12
	VFMADD231PS  Y8, Y12, Y4
	VFMADD231PS  Y9, Y12, Y5
	VBROADCASTSS (R13), Y13
	VFMADD231PS  Y8, Y13, Y6
	VFMADD231PS  Y9, Y13, Y7
	ADDQ         $4, SI
	ADDQ         $4, R11
	ADDQ         $4, R12
	ADDQ         $4, R13
	ADDQ         R9, DI
	DECQ         CX
	JNZ          nn4loop

	MOVBLZX acc+56(FP), AX
	TESTQ   AX, AX
	JZ      nn4store
	VADDPS  (DX), Y0, Y0
	VADDPS  32(DX), Y1, Y1
	LEAQ    (DX)(R10*1), BX
	VADDPS  (BX), Y2, Y2
	VADDPS  32(BX), Y3, Y3
	LEAQ    (BX)(R10*1), BX
	VADDPS  (BX), Y4, Y4
	VADDPS  32(BX), Y5, Y5
	LEAQ    (BX)(R10*1), BX
	VADDPS  (BX), Y6, Y6
	VADDPS  32(BX), Y7, Y7

nn4store:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y2, (DX)
	VMOVUPS Y3, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y6, (DX)
	VMOVUPS Y7, 32(DX)
	VZEROUPPER
	RET

// func kernNN4x16m(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, mask *int32, acc bool)
// As kernNN4x16 for the first w < 16 columns, selected by mask (16 int32s,
// -1 for a column in use, 0 otherwise); masked-off memory is never touched.
TEXT ·kernNN4x16m(SB), NOSPLIT, $0-65
	MOVQ    k+0(FP), CX
	MOVQ    a+8(FP), SI
	MOVQ    lda+16(FP), R8
	MOVQ    b+24(FP), DI
	MOVQ    ldb+32(FP), R9
	MOVQ    c+40(FP), DX
	MOVQ    ldc+48(FP), R10
	MOVQ    mask+56(FP), AX
	VMOVDQU (AX), Y14
	VMOVDQU 32(AX), Y15
	SHLQ    $2, R8
	SHLQ    $2, R9
	SHLQ    $2, R10
	LEAQ    (SI)(R8*1), R11
	LEAQ    (SI)(R8*2), R12
	LEAQ    (R11)(R8*2), R13
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	VXORPS  Y4, Y4, Y4
	VXORPS  Y5, Y5, Y5
	VXORPS  Y6, Y6, Y6
	VXORPS  Y7, Y7, Y7

nn4mloop:
	VMASKMOVPS   (DI), Y14, Y8
	VMASKMOVPS   32(DI), Y15, Y9
	VBROADCASTSS (SI), Y10
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VBROADCASTSS (R11), Y11
	VFMADD231PS  Y8, Y11, Y2
	VFMADD231PS  Y9, Y11, Y3
	VBROADCASTSS (R12), Y12
	VFMADD231PS  Y8, Y12, Y4
	VFMADD231PS  Y9, Y12, Y5
	VBROADCASTSS (R13), Y13
	VFMADD231PS  Y8, Y13, Y6
	VFMADD231PS  Y9, Y13, Y7
	ADDQ         $4, SI
	ADDQ         $4, R11
	ADDQ         $4, R12
	ADDQ         $4, R13
	ADDQ         R9, DI
	DECQ         CX
	JNZ          nn4mloop

	MOVBLZX    acc+64(FP), AX
	TESTQ      AX, AX
	JZ         nn4mstore
	MOVQ       DX, BX
	VMASKMOVPS (BX), Y14, Y8
	VMASKMOVPS 32(BX), Y15, Y9
	VADDPS     Y8, Y0, Y0
	VADDPS     Y9, Y1, Y1
	ADDQ       R10, BX
	VMASKMOVPS (BX), Y14, Y8
	VMASKMOVPS 32(BX), Y15, Y9
	VADDPS     Y8, Y2, Y2
	VADDPS     Y9, Y3, Y3
	ADDQ       R10, BX
	VMASKMOVPS (BX), Y14, Y8
	VMASKMOVPS 32(BX), Y15, Y9
	VADDPS     Y8, Y4, Y4
	VADDPS     Y9, Y5, Y5
	ADDQ       R10, BX
	VMASKMOVPS (BX), Y14, Y8
	VMASKMOVPS 32(BX), Y15, Y9
	VADDPS     Y8, Y6, Y6
	VADDPS     Y9, Y7, Y7

nn4mstore:
	VMASKMOVPS Y0, Y14, (DX)
	VMASKMOVPS Y1, Y15, 32(DX)
	ADDQ       R10, DX
	VMASKMOVPS Y2, Y14, (DX)
	VMASKMOVPS Y3, Y15, 32(DX)
	ADDQ       R10, DX
	VMASKMOVPS Y4, Y14, (DX)
	VMASKMOVPS Y5, Y15, 32(DX)
	ADDQ       R10, DX
	VMASKMOVPS Y6, Y14, (DX)
	VMASKMOVPS Y7, Y15, 32(DX)
	VZEROUPPER
	RET

// func kernNN1x16m(k int, a *float32, b *float32, ldb int, c *float32, mask *int32, acc bool)
// C[0, 0:w] (+)= A[0, 0:k] · B[0:k, 0:w], w selected by mask as above.
TEXT ·kernNN1x16m(SB), NOSPLIT, $0-49
	MOVQ    k+0(FP), CX
	MOVQ    a+8(FP), SI
	MOVQ    b+16(FP), DI
	MOVQ    ldb+24(FP), R9
	MOVQ    c+32(FP), DX
	MOVQ    mask+40(FP), AX
	VMOVDQU (AX), Y14
	VMOVDQU 32(AX), Y15
	SHLQ    $2, R9
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	LEAQ    (DI)(R9*1), R11
	SHLQ    $1, R9
	MOVQ    CX, BX
	SHRQ    $1, BX
	JZ      nn1tail

nn1loop:
	VMASKMOVPS   (DI), Y14, Y8
	VMASKMOVPS   32(DI), Y15, Y9
	VBROADCASTSS (SI), Y10
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VMASKMOVPS   (R11), Y14, Y8
	VMASKMOVPS   32(R11), Y15, Y9
	VBROADCASTSS 4(SI), Y10
	VFMADD231PS  Y8, Y10, Y2
	VFMADD231PS  Y9, Y10, Y3
	ADDQ         $8, SI
	ADDQ         R9, DI
	ADDQ         R9, R11
	DECQ         BX
	JNZ          nn1loop

nn1tail:
	ANDQ         $1, CX
	JZ           nn1done
	VMASKMOVPS   (DI), Y14, Y8
	VMASKMOVPS   32(DI), Y15, Y9
	VBROADCASTSS (SI), Y10
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1

nn1done:
	VADDPS     Y2, Y0, Y0
	VADDPS     Y3, Y1, Y1
	MOVBLZX    acc+48(FP), AX
	TESTQ      AX, AX
	JZ         nn1store
	VMASKMOVPS (DX), Y14, Y8
	VMASKMOVPS 32(DX), Y15, Y9
	VADDPS     Y8, Y0, Y0
	VADDPS     Y9, Y1, Y1

nn1store:
	VMASKMOVPS Y0, Y14, (DX)
	VMASKMOVPS Y1, Y15, 32(DX)
	VZEROUPPER
	RET

// func kernNT1x4(k int, a *float32, b *float32, ldb int, c *float32, acc bool)
// c[j] (+)= dot(a[0:k], b[j*ldb : j*ldb+k]) for j = 0..3; k is a positive
// multiple of 8 (the caller adds the tail). Two accumulators per output
// hide the FMA latency.
TEXT ·kernNT1x4(SB), NOSPLIT, $0-41
	MOVQ   k+0(FP), CX
	MOVQ   a+8(FP), SI
	MOVQ   b+16(FP), R8
	MOVQ   ldb+24(FP), R9
	MOVQ   c+32(FP), DX
	SHLQ   $2, R9
	LEAQ   (R8)(R9*1), R10
	LEAQ   (R8)(R9*2), R11
	LEAQ   (R10)(R9*2), R12
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	SHRQ   $3, CX
	MOVQ   CX, BX
	SHRQ   $1, BX
	JZ     nttail

ntloop:
	VMOVUPS     (SI), Y8
	VMOVUPS     32(SI), Y9
	VFMADD231PS (R8), Y8, Y0
	VFMADD231PS 32(R8), Y9, Y4
	VFMADD231PS (R10), Y8, Y1
	VFMADD231PS 32(R10), Y9, Y5
	VFMADD231PS (R11), Y8, Y2
	VFMADD231PS 32(R11), Y9, Y6
	VFMADD231PS (R12), Y8, Y3
	VFMADD231PS 32(R12), Y9, Y7
	ADDQ        $64, SI
	ADDQ        $64, R8
	ADDQ        $64, R10
	ADDQ        $64, R11
	ADDQ        $64, R12
	DECQ        BX
	JNZ         ntloop

nttail:
	ANDQ        $1, CX
	JZ          ntdone
	VMOVUPS     (SI), Y8
	VFMADD231PS (R8), Y8, Y0
	VFMADD231PS (R10), Y8, Y1
	VFMADD231PS (R11), Y8, Y2
	VFMADD231PS (R12), Y8, Y3

ntdone:
	VADDPS       Y4, Y0, Y0
	VADDPS       Y5, Y1, Y1
	VADDPS       Y6, Y2, Y2
	VADDPS       Y7, Y3, Y3
	VHADDPS      Y1, Y0, Y0
	VHADDPS      Y3, Y2, Y2
	VHADDPS      Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	MOVBLZX      acc+40(FP), AX
	TESTQ        AX, AX
	JZ           ntstore
	VMOVUPS      (DX), X1
	VADDPS       X1, X0, X0

ntstore:
	VMOVUPS    X0, (DX)
	VZEROUPPER
	RET

// func kernNT3x4(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)
// C[i, j] (+)= dot(A[i, 0:k], B[j, 0:k]) for i < 3, j < 4; k is a positive
// multiple of 8. Twelve accumulators: per 8 elements, 7 loads feed 12 FMAs.
TEXT ·kernNT3x4(SB), NOSPLIT, $0-57
	MOVQ   k+0(FP), CX
	MOVQ   a+8(FP), SI
	MOVQ   lda+16(FP), AX
	MOVQ   b+24(FP), R8
	MOVQ   ldb+32(FP), BX
	MOVQ   c+40(FP), DX
	MOVQ   ldc+48(FP), R12
	SHLQ   $2, AX
	SHLQ   $2, BX
	SHLQ   $2, R12
	LEAQ   (SI)(AX*1), DI
	LEAQ   (DI)(AX*1), AX
	LEAQ   (R8)(BX*1), R9
	LEAQ   (R9)(BX*1), R10
	LEAQ   (R10)(BX*1), R11
	MOVQ   AX, BX
	SHRQ   $3, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

nt3loop:
	VMOVUPS     (SI), Y12
	VMOVUPS     (DI), Y13
	VMOVUPS     (BX), Y14
	VMOVUPS     (R8), Y15
	VFMADD231PS Y15, Y12, Y0
	VFMADD231PS Y15, Y13, Y4
	VFMADD231PS Y15, Y14, Y8
	VMOVUPS     (R9), Y15
	VFMADD231PS Y15, Y12, Y1
	VFMADD231PS Y15, Y13, Y5
	VFMADD231PS Y15, Y14, Y9
	VMOVUPS     (R10), Y15
	VFMADD231PS Y15, Y12, Y2
	VFMADD231PS Y15, Y13, Y6
	VFMADD231PS Y15, Y14, Y10
	VMOVUPS     (R11), Y15
	VFMADD231PS Y15, Y12, Y3
	VFMADD231PS Y15, Y13, Y7
	VFMADD231PS Y15, Y14, Y11
	ADDQ        $32, SI
	ADDQ        $32, DI
	ADDQ        $32, BX
	ADDQ        $32, R8
	ADDQ        $32, R9
	ADDQ        $32, R10
	ADDQ        $32, R11
	DECQ        CX
	JNZ         nt3loop

	VHADDPS      Y1, Y0, Y0
	VHADDPS      Y3, Y2, Y2
	VHADDPS      Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      Y5, Y4, Y4
	VHADDPS      Y7, Y6, Y6
	VHADDPS      Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPS       X5, X4, X4
	VHADDPS      Y9, Y8, Y8
	VHADDPS      Y11, Y10, Y10
	VHADDPS      Y10, Y8, Y8
	VEXTRACTF128 $1, Y8, X9
	VADDPS       X9, X8, X8
	LEAQ         (DX)(R12*1), DI
	LEAQ         (DI)(R12*1), SI
	MOVBLZX      acc+56(FP), AX
	TESTQ        AX, AX
	JZ           nt3store
	VADDPS       (DX), X0, X0
	VADDPS       (DI), X4, X4
	VADDPS       (SI), X8, X8

nt3store:
	VMOVUPS    X0, (DX)
	VMOVUPS    X4, (DI)
	VMOVUPS    X8, (SI)
	VZEROUPPER
	RET

// func rowsKernel(dst *float32, ldd int, src *float32, lds int, rows, w int, add bool)
// For each of rows rows: dst[0:w] = src[0:w] (add false) or dst[0:w] +=
// src[0:w] (add true); rows are ldd and lds elements apart. The w mod 8
// tail is an overlapping 8-wide move for a copy of w ≥ 8 and scalar
// otherwise (masked stores are slow on AMD). im2col and col2im move many
// short rows, for which a memmove call per row costs more than the copy.
TEXT ·rowsKernel(SB), NOSPLIT, $0-49
	MOVQ    dst+0(FP), DI
	MOVQ    ldd+8(FP), R8
	MOVQ    src+16(FP), SI
	MOVQ    lds+24(FP), R9
	MOVQ    rows+32(FP), CX
	MOVQ    w+40(FP), R10
	MOVBLZX add+48(FP), R11
	SHLQ    $2, R8
	SHLQ    $2, R9
	LEAQ    -32(R10*4), R12 // byte offset of the last 8 elements
	MOVQ    R10, R13
	ANDQ    $7, R13         // tail length
	SHRQ    $3, R10         // full chunks
	TESTQ   CX, CX
	JZ      rowsdone

rowsloop:
	MOVQ  R10, BX
	XORQ  DX, DX
	TESTQ BX, BX
	JZ    rowstail

rowschunk:
	VMOVUPS (SI)(DX*1), Y0
	TESTQ   R11, R11
	JZ      rowsput
	VADDPS  (DI)(DX*1), Y0, Y0

rowsput:
	VMOVUPS Y0, (DI)(DX*1)
	ADDQ    $32, DX
	DECQ    BX
	JNZ     rowschunk

rowstail:
	TESTQ   R13, R13
	JZ      rowsnext
	TESTQ   R11, R11
	JNZ     rowsscalar
	TESTQ   R10, R10
	JZ      rowsscalar
	VMOVUPS (SI)(R12*1), Y0
	VMOVUPS Y0, (DI)(R12*1)
	JMP     rowsnext

rowsscalar:
	MOVQ R13, BX

rowsscalarloop:
	VMOVSS (SI)(DX*1), X0
	TESTQ  R11, R11
	JZ     rowsscalarput
	VADDSS (DI)(DX*1), X0, X0

rowsscalarput:
	VMOVSS X0, (DI)(DX*1)
	ADDQ   $4, DX
	DECQ   BX
	JNZ    rowsscalarloop

rowsnext:
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ CX
	JNZ  rowsloop

rowsdone:
	VZEROUPPER
	RET

// func kernNN6x16(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)
// C[0:6, 0:16] (+)= A[0:6, 0:k] · B[0:k, 0:16]: twelve accumulators, so
// per k two loads of B and six broadcasts feed twelve FMAs.
TEXT ·kernNN6x16(SB), NOSPLIT, $0-57
	MOVQ   k+0(FP), CX
	MOVQ   a+8(FP), SI
	MOVQ   lda+16(FP), R8
	MOVQ   b+24(FP), DI
	MOVQ   ldb+32(FP), R9
	MOVQ   c+40(FP), DX
	MOVQ   ldc+48(FP), R10
	SHLQ   $2, R8
	SHLQ   $2, R9
	SHLQ   $2, R10
	LEAQ   (SI)(R8*2), R11
	ADDQ   R8, R11 // row 3
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

nn6loop:
	VMOVUPS      (DI), Y12
	VMOVUPS      32(DI), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS  Y12, Y14, Y0
	VFMADD231PS  Y13, Y14, Y1
	VBROADCASTSS (SI)(R8*1), Y15
	VFMADD231PS  Y12, Y15, Y2
	VFMADD231PS  Y13, Y15, Y3
	VBROADCASTSS (SI)(R8*2), Y14
	VFMADD231PS  Y12, Y14, Y4
	VFMADD231PS  Y13, Y14, Y5
	VBROADCASTSS (R11), Y15
	VFMADD231PS  Y12, Y15, Y6
	VFMADD231PS  Y13, Y15, Y7
	VBROADCASTSS (R11)(R8*1), Y14
	VFMADD231PS  Y12, Y14, Y8
	VFMADD231PS  Y13, Y14, Y9
	VBROADCASTSS (R11)(R8*2), Y15
	VFMADD231PS  Y12, Y15, Y10
	VFMADD231PS  Y13, Y15, Y11
	ADDQ         $4, SI
	ADDQ         $4, R11
	ADDQ         R9, DI
	DECQ         CX
	JNZ          nn6loop

	MOVBLZX acc+56(FP), AX
	TESTQ   AX, AX
	JZ      nn6store
	MOVQ    DX, BX
	VADDPS  (BX), Y0, Y0
	VADDPS  32(BX), Y1, Y1
	ADDQ    R10, BX
	VADDPS  (BX), Y2, Y2
	VADDPS  32(BX), Y3, Y3
	ADDQ    R10, BX
	VADDPS  (BX), Y4, Y4
	VADDPS  32(BX), Y5, Y5
	ADDQ    R10, BX
	VADDPS  (BX), Y6, Y6
	VADDPS  32(BX), Y7, Y7
	ADDQ    R10, BX
	VADDPS  (BX), Y8, Y8
	VADDPS  32(BX), Y9, Y9
	ADDQ    R10, BX
	VADDPS  (BX), Y10, Y10
	VADDPS  32(BX), Y11, Y11

nn6store:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y2, (DX)
	VMOVUPS Y3, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y6, (DX)
	VMOVUPS Y7, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y8, (DX)
	VMOVUPS Y9, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y10, (DX)
	VMOVUPS Y11, 32(DX)
	VZEROUPPER
	RET

// func kernConv6x16(k int, a *float32, lda int, b *float32, offs *int, c *float32, ldc int)
// C[0:6, 0:16] = A[0:6, 0:k] · B where row p of B is b[offs[p] : offs[p]+16]:
// kernNN6x16 with B's rows found through a table instead of a stride, so
// that a convolution reads shifted windows of its input in place of an
// im2col matrix.
TEXT ·kernConv6x16(SB), NOSPLIT, $0-56
	MOVQ   k+0(FP), CX
	MOVQ   a+8(FP), SI
	MOVQ   lda+16(FP), R8
	MOVQ   b+24(FP), DI
	MOVQ   offs+32(FP), R9
	MOVQ   c+40(FP), DX
	MOVQ   ldc+48(FP), R10
	SHLQ   $2, R8
	SHLQ   $2, R10
	LEAQ   (SI)(R8*2), R11
	ADDQ   R8, R11 // row 3
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

cv6loop:
	MOVQ         (R9), AX
	VMOVUPS      (DI)(AX*4), Y12
	VMOVUPS      32(DI)(AX*4), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS  Y12, Y14, Y0
	VFMADD231PS  Y13, Y14, Y1
	VBROADCASTSS (SI)(R8*1), Y15
	VFMADD231PS  Y12, Y15, Y2
	VFMADD231PS  Y13, Y15, Y3
	VBROADCASTSS (SI)(R8*2), Y14
	VFMADD231PS  Y12, Y14, Y4
	VFMADD231PS  Y13, Y14, Y5
	VBROADCASTSS (R11), Y15
	VFMADD231PS  Y12, Y15, Y6
	VFMADD231PS  Y13, Y15, Y7
	VBROADCASTSS (R11)(R8*1), Y14
	VFMADD231PS  Y12, Y14, Y8
	VFMADD231PS  Y13, Y14, Y9
	VBROADCASTSS (R11)(R8*2), Y15
	VFMADD231PS  Y12, Y15, Y10
	VFMADD231PS  Y13, Y15, Y11
	ADDQ         $4, SI
	ADDQ         $4, R11
	ADDQ         $8, R9
	DECQ         CX
	JNZ          cv6loop

	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y2, (DX)
	VMOVUPS Y3, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y6, (DX)
	VMOVUPS Y7, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y8, (DX)
	VMOVUPS Y9, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y10, (DX)
	VMOVUPS Y11, 32(DX)
	VZEROUPPER
	RET

// func kernConvNT3x4(k int, a *float32, aoffs *int, b *float32, boffs *int, c *float32, ldc int, acc bool)
// C[i, j] (+)= dot(a[aoffs[i] : aoffs[i]+k], b[boffs[j] : boffs[j]+k]) for
// i < 3, j < 4; k is a positive multiple of 8: kernNT3x4 with the rows of
// both operands found through tables.
TEXT ·kernConvNT3x4(SB), NOSPLIT, $0-57
	MOVQ   k+0(FP), CX
	MOVQ   a+8(FP), SI
	MOVQ   aoffs+16(FP), AX
	MOVQ   b+24(FP), R8
	MOVQ   boffs+32(FP), BX
	MOVQ   c+40(FP), DX
	MOVQ   ldc+48(FP), R12
	SHLQ   $2, R12
	MOVQ   8(BX), R9
	MOVQ   16(BX), R10
	MOVQ   24(BX), R11
	MOVQ   (BX), BX
	LEAQ   (R8)(R9*4), R9
	LEAQ   (R8)(R10*4), R10
	LEAQ   (R8)(R11*4), R11
	LEAQ   (R8)(BX*4), R8
	MOVQ   8(AX), DI
	MOVQ   16(AX), BX
	MOVQ   (AX), AX
	LEAQ   (SI)(DI*4), DI
	LEAQ   (SI)(BX*4), BX
	LEAQ   (SI)(AX*4), SI
	SHRQ   $3, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

cnt3loop:
	VMOVUPS     (SI), Y12
	VMOVUPS     (DI), Y13
	VMOVUPS     (BX), Y14
	VMOVUPS     (R8), Y15
	VFMADD231PS Y15, Y12, Y0
	VFMADD231PS Y15, Y13, Y4
	VFMADD231PS Y15, Y14, Y8
	VMOVUPS     (R9), Y15
	VFMADD231PS Y15, Y12, Y1
	VFMADD231PS Y15, Y13, Y5
	VFMADD231PS Y15, Y14, Y9
	VMOVUPS     (R10), Y15
	VFMADD231PS Y15, Y12, Y2
	VFMADD231PS Y15, Y13, Y6
	VFMADD231PS Y15, Y14, Y10
	VMOVUPS     (R11), Y15
	VFMADD231PS Y15, Y12, Y3
	VFMADD231PS Y15, Y13, Y7
	VFMADD231PS Y15, Y14, Y11
	ADDQ        $32, SI
	ADDQ        $32, DI
	ADDQ        $32, BX
	ADDQ        $32, R8
	ADDQ        $32, R9
	ADDQ        $32, R10
	ADDQ        $32, R11
	DECQ        CX
	JNZ         cnt3loop

	VHADDPS      Y1, Y0, Y0
	VHADDPS      Y3, Y2, Y2
	VHADDPS      Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      Y5, Y4, Y4
	VHADDPS      Y7, Y6, Y6
	VHADDPS      Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPS       X5, X4, X4
	VHADDPS      Y9, Y8, Y8
	VHADDPS      Y11, Y10, Y10
	VHADDPS      Y10, Y8, Y8
	VEXTRACTF128 $1, Y8, X9
	VADDPS       X9, X8, X8
	LEAQ         (DX)(R12*1), DI
	LEAQ         (DI)(R12*1), SI
	MOVBLZX      acc+56(FP), AX
	TESTQ        AX, AX
	JZ           cnt3store
	VADDPS       (DX), X0, X0
	VADDPS       (DI), X4, X4
	VADDPS       (SI), X8, X8

cnt3store:
	VMOVUPS    X0, (DX)
	VMOVUPS    X4, (DI)
	VMOVUPS    X8, (SI)
	VZEROUPPER
	RET

// Constant vectors for the pooling kernels: the one-hot window-cell bits.
DATA poolbit1<>+0(SB)/8, $0x0000000100000001
DATA poolbit1<>+8(SB)/8, $0x0000000100000001
DATA poolbit1<>+16(SB)/8, $0x0000000100000001
DATA poolbit1<>+24(SB)/8, $0x0000000100000001
GLOBL poolbit1<>(SB), RODATA|NOPTR, $32
DATA poolbit2<>+0(SB)/8, $0x0000000200000002
DATA poolbit2<>+8(SB)/8, $0x0000000200000002
DATA poolbit2<>+16(SB)/8, $0x0000000200000002
DATA poolbit2<>+24(SB)/8, $0x0000000200000002
GLOBL poolbit2<>(SB), RODATA|NOPTR, $32
DATA poolbit4<>+0(SB)/8, $0x0000000400000004
DATA poolbit4<>+8(SB)/8, $0x0000000400000004
DATA poolbit4<>+16(SB)/8, $0x0000000400000004
DATA poolbit4<>+24(SB)/8, $0x0000000400000004
GLOBL poolbit4<>(SB), RODATA|NOPTR, $32
DATA poolbit8<>+0(SB)/8, $0x0000000800000008
DATA poolbit8<>+8(SB)/8, $0x0000000800000008
DATA poolbit8<>+16(SB)/8, $0x0000000800000008
DATA poolbit8<>+24(SB)/8, $0x0000000800000008
GLOBL poolbit8<>(SB), RODATA|NOPTR, $32

// POOLFWD pools 8 windows whose two rows start at R12 and R13 (16 floats
// each): Y9 = max(window max + bias Y14, 0), Y0 = the one-hot code of the
// first maximum (0 where the ReLU is off), both in window order.
#define POOLFWD \
	VMOVUPS      (R12), Y0 \
	VMOVUPS      32(R12), Y1 \
	VMOVUPS      (R13), Y2 \
	VMOVUPS      32(R13), Y3 \
	VSHUFPS      $0x88, Y1, Y0, Y4 \
	VSHUFPS      $0xDD, Y1, Y0, Y5 \
	VSHUFPS      $0x88, Y3, Y2, Y6 \
	VSHUFPS      $0xDD, Y3, Y2, Y7 \
	VMAXPS       Y5, Y4, Y8 \
	VMAXPS       Y7, Y6, Y9 \
	VMAXPS       Y9, Y8, Y8 \
	VADDPS       Y14, Y8, Y9 \
	VMAXPS       Y9, Y13, Y9 \
	VCMPPS       $0, Y8, Y4, Y0 \
	VCMPPS       $0, Y8, Y5, Y1 \
	VCMPPS       $0, Y8, Y6, Y2 \
	VANDNPS      Y1, Y0, Y1 \
	VORPS        Y1, Y0, Y3 \
	VANDNPS      Y2, Y3, Y2 \
	VORPS        Y2, Y3, Y3 \
	VANDPS       poolbit1<>(SB), Y0, Y0 \
	VANDPS       poolbit2<>(SB), Y1, Y1 \
	VANDPS       poolbit4<>(SB), Y2, Y2 \
	VANDNPS      poolbit8<>(SB), Y3, Y3 \
	VORPS        Y1, Y0, Y0 \
	VORPS        Y3, Y2, Y2 \
	VORPS        Y2, Y0, Y0 \
	VCMPPS       $0x1E, Y13, Y9, Y4 \
	VANDPS       Y4, Y0, Y0 \
	VPERMPD      $0xD8, Y9, Y9 \
	VPERMPD      $0xD8, Y0, Y0

// func poolFwd8(rows, groups int, r *float32, ldr int, bias float32, y *float32, ldy int, hot *int32, mask *int32)
// For i < rows, 2×2 max pooling of grid rows 2i and 2i+1 (r, rows ldr
// apart) in groups of 8 windows: y[i*ldy+j] = max(window max + bias, 0)
// and hot[i*ldy+j] its one-hot code. The last group stores only the lanes
// mask selects; it reads 16 floats of each row whatever the mask.
TEXT ·poolFwd8(SB), NOSPLIT, $0-72
	MOVQ         rows+0(FP), CX
	MOVQ         r+16(FP), SI
	MOVQ         ldr+24(FP), R9
	VBROADCASTSS bias+32(FP), Y14
	MOVQ         y+40(FP), DI
	MOVQ         ldy+48(FP), R11
	MOVQ         hot+56(FP), DX
	MOVQ         mask+64(FP), AX
	VMOVDQU      (AX), Y15
	VXORPS       Y13, Y13, Y13
	SHLQ         $2, R9
	SHLQ         $2, R11
	TESTQ        CX, CX
	JZ           pfdone

pfrow:
	MOVQ SI, R12
	LEAQ (SI)(R9*1), R13
	MOVQ DI, R14
	MOVQ DX, R15
	MOVQ groups+8(FP), BX
	DECQ BX
	JZ   pflast

pfgroup:
	POOLFWD
	VMOVUPS Y9, (R14)
	VMOVUPS Y0, (R15)
	ADDQ    $64, R12
	ADDQ    $64, R13
	ADDQ    $32, R14
	ADDQ    $32, R15
	DECQ    BX
	JNZ     pfgroup

pflast:
	POOLFWD
	VMASKMOVPS Y9, Y15, (R14)
	VMASKMOVPS Y0, Y15, (R15)
	LEAQ       (SI)(R9*2), SI
	ADDQ       R11, DI
	ADDQ       R11, DX
	DECQ       CX
	JNZ        pfrow

pfdone:
	VZEROUPPER
	RET

// POOLBWD spreads the gradient Y10 of 8 windows with one-hot codes Y11
// onto their rows at R12 and R13 (16 floats each, zero where a cell is not
// the window's routed maximum), and adds the routed gradients into Y12.
#define POOLBWD \
	VANDPS      poolbit1<>(SB), Y11, Y4 \
	VPCMPEQD    poolbit1<>(SB), Y4, Y4 \
	VANDPS      Y10, Y4, Y4 \
	VANDPS      poolbit2<>(SB), Y11, Y5 \
	VPCMPEQD    poolbit2<>(SB), Y5, Y5 \
	VANDPS      Y10, Y5, Y5 \
	VANDPS      poolbit4<>(SB), Y11, Y6 \
	VPCMPEQD    poolbit4<>(SB), Y6, Y6 \
	VANDPS      Y10, Y6, Y6 \
	VANDPS      poolbit8<>(SB), Y11, Y7 \
	VPCMPEQD    poolbit8<>(SB), Y7, Y7 \
	VANDPS      Y10, Y7, Y7 \
	VPCMPEQD    Y13, Y11, Y8 \
	VANDNPS     Y10, Y8, Y8 \
	VADDPS      Y8, Y12, Y12 \
	VUNPCKLPS   Y5, Y4, Y0 \
	VUNPCKHPS   Y5, Y4, Y1 \
	VPERM2F128  $0x20, Y1, Y0, Y2 \
	VPERM2F128  $0x31, Y1, Y0, Y3 \
	VMOVUPS     Y2, (R12) \
	VMOVUPS     Y3, 32(R12) \
	VUNPCKLPS   Y7, Y6, Y0 \
	VUNPCKHPS   Y7, Y6, Y1 \
	VPERM2F128  $0x20, Y1, Y0, Y2 \
	VPERM2F128  $0x31, Y1, Y0, Y3 \
	VMOVUPS     Y2, (R13) \
	VMOVUPS     Y3, 32(R13)

// POOLBWDM is POOLBWD for a row's last group: only the columns of its
// windows in the mask (Y14: columns 0-7, Y9: 8-15, from Y15's windows)
// are stored, so that a grid row narrower than the groups' 16 columns
// does not spill zeros into the next row, which an earlier group of the
// same pooled row has already written.
#define POOLBWDM \
	VANDPS      poolbit1<>(SB), Y11, Y4 \
	VPCMPEQD    poolbit1<>(SB), Y4, Y4 \
	VANDPS      Y10, Y4, Y4 \
	VANDPS      poolbit2<>(SB), Y11, Y5 \
	VPCMPEQD    poolbit2<>(SB), Y5, Y5 \
	VANDPS      Y10, Y5, Y5 \
	VANDPS      poolbit4<>(SB), Y11, Y6 \
	VPCMPEQD    poolbit4<>(SB), Y6, Y6 \
	VANDPS      Y10, Y6, Y6 \
	VANDPS      poolbit8<>(SB), Y11, Y7 \
	VPCMPEQD    poolbit8<>(SB), Y7, Y7 \
	VANDPS      Y10, Y7, Y7 \
	VPCMPEQD    Y13, Y11, Y8 \
	VANDNPS     Y10, Y8, Y8 \
	VADDPS      Y8, Y12, Y12 \
	VUNPCKLPS   Y5, Y4, Y0 \
	VUNPCKHPS   Y5, Y4, Y1 \
	VPERM2F128  $0x20, Y1, Y0, Y2 \
	VPERM2F128  $0x31, Y1, Y0, Y3 \
	VMASKMOVPS  Y2, Y14, (R12) \
	VMASKMOVPS  Y3, Y9, 32(R12) \
	VUNPCKLPS   Y7, Y6, Y0 \
	VUNPCKHPS   Y7, Y6, Y1 \
	VPERM2F128  $0x20, Y1, Y0, Y2 \
	VPERM2F128  $0x31, Y1, Y0, Y3 \
	VMASKMOVPS  Y2, Y14, (R13) \
	VMASKMOVPS  Y3, Y9, 32(R13)

// func poolBwd8(rows, groups int, d *float32, ldd int, dy *float32, ldy int, hot *int32, mask *int32, sum *float32)
// The adjoint of poolFwd8: writes all 16·groups floats of grid rows 2i and
// 2i+1 (d, rows ldd apart) for i < rows, in order, so a row's overrun into
// the next row is overwritten there; lanes past the mask get gradient 0.
// sum[0:8] receives the lane sums of the routed gradients (for the bias).
TEXT ·poolBwd8(SB), NOSPLIT, $0-72
	MOVQ    rows+0(FP), CX
	MOVQ    d+16(FP), SI
	MOVQ    ldd+24(FP), R9
	MOVQ    dy+32(FP), DI
	MOVQ    ldy+40(FP), R11
	MOVQ    hot+48(FP), DX
	MOVQ    mask+56(FP), AX
	VMOVDQU (AX), Y15
	VUNPCKLPS  Y15, Y15, Y0
	VUNPCKHPS  Y15, Y15, Y1
	VPERM2F128 $0x20, Y1, Y0, Y14
	VPERM2F128 $0x31, Y1, Y0, Y9
	VXORPS  Y13, Y13, Y13
	VXORPS  Y12, Y12, Y12
	SHLQ    $2, R9
	SHLQ    $2, R11
	TESTQ   CX, CX
	JZ      pbdone

pbrow:
	MOVQ SI, R12
	LEAQ (SI)(R9*1), R13
	MOVQ DI, R14
	MOVQ DX, R15
	MOVQ groups+8(FP), BX
	DECQ BX
	JZ   pblast

pbgroup:
	VMOVUPS (R14), Y10
	VMOVDQU (R15), Y11
	POOLBWD
	ADDQ    $64, R12
	ADDQ    $64, R13
	ADDQ    $32, R14
	ADDQ    $32, R15
	DECQ    BX
	JNZ     pbgroup

pblast:
	VMASKMOVPS (R14), Y15, Y10
	VMASKMOVPS (R15), Y15, Y11
	POOLBWDM
	LEAQ       (SI)(R9*2), SI
	ADDQ       R11, DI
	ADDQ       R11, DX
	DECQ       CX
	JNZ        pbrow

pbdone:
	MOVQ    sum+64(FP), AX
	VMOVUPS Y12, (AX)
	VZEROUPPER
	RET

// func kernConv4x16(k int, a *float32, lda int, b *float32, offs *int, c *float32, ldc int)
// kernConv6x16 for 4 rows of A and C.
TEXT ·kernConv4x16(SB), NOSPLIT, $0-56
	MOVQ   k+0(FP), CX
	MOVQ   a+8(FP), SI
	MOVQ   lda+16(FP), R8
	MOVQ   b+24(FP), DI
	MOVQ   offs+32(FP), R9
	MOVQ   c+40(FP), DX
	MOVQ   ldc+48(FP), R10
	SHLQ   $2, R8
	SHLQ   $2, R10
	LEAQ   (SI)(R8*2), R11 // row 2
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

cv4loop:
	MOVQ         (R9), AX
	VMOVUPS      (DI)(AX*4), Y12
	VMOVUPS      32(DI)(AX*4), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS  Y12, Y14, Y0
	VFMADD231PS  Y13, Y14, Y1
	VBROADCASTSS (SI)(R8*1), Y15
	VFMADD231PS  Y12, Y15, Y2
	VFMADD231PS  Y13, Y15, Y3
	VBROADCASTSS (R11), Y14
	VFMADD231PS  Y12, Y14, Y4
	VFMADD231PS  Y13, Y14, Y5
	VBROADCASTSS (R11)(R8*1), Y15
	VFMADD231PS  Y12, Y15, Y6
	VFMADD231PS  Y13, Y15, Y7
	ADDQ         $4, SI
	ADDQ         $4, R11
	ADDQ         $8, R9
	DECQ         CX
	JNZ          cv4loop

	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y2, (DX)
	VMOVUPS Y3, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	ADDQ    R10, DX
	VMOVUPS Y6, (DX)
	VMOVUPS Y7, 32(DX)
	VZEROUPPER
	RET

// func sgdMomentum8(n int, p, gr, v *float32, lr, mu, wd float32)
// For i < 8n: v[i] = mu·v[i] + (g[i] + wd·p[i]); p[i] -= lr·v[i], with
// separate multiplies and adds (no FMA), so the bits are those of the Go
// loop in optim.go.
TEXT ·sgdMomentum8(SB), NOSPLIT, $0-44
	MOVQ         n+0(FP), CX
	MOVQ         p+8(FP), SI
	MOVQ         gr+16(FP), DI
	MOVQ         v+24(FP), DX
	VBROADCASTSS lr+32(FP), Y13
	VBROADCASTSS mu+36(FP), Y14
	VBROADCASTSS wd+40(FP), Y15
	TESTQ        CX, CX
	JZ           sgddone

sgdloop:
	VMOVUPS (SI), Y0
	VMOVUPS (DI), Y1
	VMOVUPS (DX), Y2
	VMULPS  Y0, Y15, Y3
	VADDPS  Y3, Y1, Y1
	VMULPS  Y2, Y14, Y2
	VADDPS  Y1, Y2, Y2
	VMOVUPS Y2, (DX)
	VMULPS  Y2, Y13, Y2
	VSUBPS  Y2, Y0, Y0
	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	ADDQ    $32, DX
	DECQ    CX
	JNZ     sgdloop

sgddone:
	VZEROUPPER
	RET

// func sparseGather(n int, pos *int32, gv *float32, ch *int32, x *float32, rows int, roffs *int, acc *float32)
// For each entry e < n and row r < rows: acc[(ch[e]·rows + r)·8 : +8] +=
// g[e] · x[pos[e]+roffs[r] : +8]: a convolution's weight gradient from a
// sparse output gradient.
TEXT ·sparseGather(SB), NOSPLIT, $0-64
	MOVQ  n+0(FP), CX
	MOVQ  pos+8(FP), SI
	MOVQ  gv+16(FP), DI
	MOVQ  ch+24(FP), R8
	MOVQ  x+32(FP), R9
	MOVQ  rows+40(FP), R10
	MOVQ  roffs+48(FP), R11
	MOVQ  acc+56(FP), DX
	MOVQ  R10, R12
	SHLQ  $5, R12
	TESTQ CX, CX
	JZ    sgdone

sgentry:
	MOVLQSX      (SI), AX
	LEAQ         (R9)(AX*4), AX // x + pos
	MOVLQSX      (R8), BX
	IMULQ        R12, BX
	ADDQ         DX, BX         // acc row of the channel
	VBROADCASTSS (DI), Y0
	XORQ         R13, R13

sgrow:
	MOVQ        (R11)(R13*8), R14
	VMOVUPS     (BX), Y1
	VFMADD231PS (AX)(R14*4), Y0, Y1
	VMOVUPS     Y1, (BX)
	ADDQ        $32, BX
	INCQ        R13
	CMPQ        R13, R10
	JNE         sgrow
	ADDQ        $4, SI
	ADDQ        $4, DI
	ADDQ        $4, R8
	DECQ        CX
	JNZ         sgentry

sgdone:
	VZEROUPPER
	RET

// func sparseGather5(n int, pos *int32, gv *float32, x *float32, roffs *int, acc *float32)
// sparseGather for one channel and five rows, the sums kept in registers
// across the entries: acc[r*8 : r*8+8] += Σ_e g[e] · x[pos[e]+roffs[r] : +8]
// for r < 5, adding the entries in order.
TEXT ·sparseGather5(SB), NOSPLIT, $0-48
	MOVQ    n+0(FP), CX
	MOVQ    pos+8(FP), SI
	MOVQ    gv+16(FP), DI
	MOVQ    x+24(FP), R9
	MOVQ    roffs+32(FP), R11
	MOVQ    acc+40(FP), DX
	MOVQ    (R11), R8
	MOVQ    8(R11), R10
	MOVQ    16(R11), R12
	MOVQ    24(R11), R13
	MOVQ    32(R11), R14
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VMOVUPS 64(DX), Y2
	VMOVUPS 96(DX), Y3
	VMOVUPS 128(DX), Y4
	TESTQ   CX, CX
	JZ      sg5done

sg5entry:
	MOVLQSX      (SI), AX
	LEAQ         (R9)(AX*4), AX
	VBROADCASTSS (DI), Y15
	VFMADD231PS  (AX)(R8*4), Y15, Y0
	VFMADD231PS  (AX)(R10*4), Y15, Y1
	VFMADD231PS  (AX)(R12*4), Y15, Y2
	VFMADD231PS  (AX)(R13*4), Y15, Y3
	VFMADD231PS  (AX)(R14*4), Y15, Y4
	ADDQ         $4, SI
	ADDQ         $4, DI
	DECQ         CX
	JNZ          sg5entry

sg5done:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VZEROUPPER
	RET

// func shiftSum(dst *float32, src *float32, lds int, k int, w int)
// dst[p] += src[p] + src[lds+p-1] + … + src[(k-1)·lds+p-(k-1)] for p < w,
// added in that order: the k rows of one (channel, ky) kernel row of a
// convolution's input gradient, summed in registers instead of added to
// dst one row at a time (rows one float apart would make each row's loads
// wait on the misaligned stores of the row before).
TEXT ·shiftSum(SB), NOSPLIT, $0-40
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  lds+16(FP), R8
	MOVQ  k+24(FP), R10
	MOVQ  w+32(FP), CX
	DECQ  R8
	SHLQ  $2, R8 // bytes from row kx at p to row kx+1 at p
	MOVQ  CX, R11
	ANDQ  $7, R11
	SHRQ  $3, CX
	TESTQ CX, CX
	JZ    sstail

sschunk:
	VMOVUPS (DI), Y0
	MOVQ    SI, R9
	MOVQ    R10, BX

sskx:
	VADDPS (R9), Y0, Y0
	ADDQ   R8, R9
	DECQ   BX
	JNZ    sskx
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	DECQ    CX
	JNZ     sschunk

sstail:
	TESTQ R11, R11
	JZ    ssdone

ssscalar:
	VMOVSS (DI), X0
	MOVQ   SI, R9
	MOVQ   R10, BX

ssskx:
	VADDSS (R9), X0, X0
	ADDQ   R8, R9
	DECQ   BX
	JNZ    ssskx
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	ADDQ   $4, SI
	DECQ   R11
	JNZ    ssscalar

ssdone:
	VZEROUPPER
	RET
