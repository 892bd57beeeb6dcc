//go:build !purego

#include "textflag.h"

// AVX2 kernels of the generic layers (layers_amd64.go says what each
// computes). Arguments are raw pointers with strides in elements.

DATA lbit1<>+0(SB)/8, $0x0000000100000001
DATA lbit1<>+8(SB)/8, $0x0000000100000001
DATA lbit1<>+16(SB)/8, $0x0000000100000001
DATA lbit1<>+24(SB)/8, $0x0000000100000001
GLOBL lbit1<>(SB), RODATA|NOPTR, $32
DATA lbit2<>+0(SB)/8, $0x0000000200000002
DATA lbit2<>+8(SB)/8, $0x0000000200000002
DATA lbit2<>+16(SB)/8, $0x0000000200000002
DATA lbit2<>+24(SB)/8, $0x0000000200000002
GLOBL lbit2<>(SB), RODATA|NOPTR, $32
DATA lbit4<>+0(SB)/8, $0x0000000400000004
DATA lbit4<>+8(SB)/8, $0x0000000400000004
DATA lbit4<>+16(SB)/8, $0x0000000400000004
DATA lbit4<>+24(SB)/8, $0x0000000400000004
GLOBL lbit4<>(SB), RODATA|NOPTR, $32
DATA lbit8<>+0(SB)/8, $0x0000000800000008
DATA lbit8<>+8(SB)/8, $0x0000000800000008
DATA lbit8<>+16(SB)/8, $0x0000000800000008
DATA lbit8<>+24(SB)/8, $0x0000000800000008
GLOBL lbit8<>(SB), RODATA|NOPTR, $32
DATA lanes8<>+0(SB)/8, $0x0000000100000000
DATA lanes8<>+8(SB)/8, $0x0000000300000002
DATA lanes8<>+16(SB)/8, $0x0000000500000004
DATA lanes8<>+24(SB)/8, $0x0000000700000006
GLOBL lanes8<>(SB), RODATA|NOPTR, $32

// POOLMAX pools the 8 windows of rows Y0:Y1 (top) and Y2:Y3 (bottom):
// Y8 = the windows' maxima and Y0 = the one-hot codes of their first
// maxima, in window order.
#define POOLMAX \
	VSHUFPS $0x88, Y1, Y0, Y4 \
	VSHUFPS $0xDD, Y1, Y0, Y5 \
	VSHUFPS $0x88, Y3, Y2, Y6 \
	VSHUFPS $0xDD, Y3, Y2, Y7 \
	VMAXPS  Y5, Y4, Y8 \
	VMAXPS  Y7, Y6, Y9 \
	VMAXPS  Y9, Y8, Y8 \
	VCMPPS  $0, Y8, Y4, Y0 \
	VCMPPS  $0, Y8, Y5, Y1 \
	VCMPPS  $0, Y8, Y6, Y2 \
	VANDNPS Y1, Y0, Y1 \
	VORPS   Y1, Y0, Y3 \
	VANDNPS Y2, Y3, Y2 \
	VORPS   Y2, Y3, Y3 \
	VANDPS  lbit1<>(SB), Y0, Y0 \
	VANDPS  lbit2<>(SB), Y1, Y1 \
	VANDPS  lbit4<>(SB), Y2, Y2 \
	VANDNPS lbit8<>(SB), Y3, Y3 \
	VORPS   Y1, Y0, Y0 \
	VORPS   Y3, Y2, Y2 \
	VORPS   Y2, Y0, Y0 \
	VPERMPD $0xD8, Y8, Y8 \
	VPERMPD $0xD8, Y0, Y0

// func maxPool2Fwd(rows, groups int, x *float32, ldx int, y *float32, ldy int, code *int32, lmask, smask *int32)
TEXT ·maxPool2Fwd(SB), NOSPLIT, $0-72
	MOVQ    rows+0(FP), CX
	MOVQ    x+16(FP), SI
	MOVQ    ldx+24(FP), R9
	MOVQ    y+32(FP), DI
	MOVQ    ldy+40(FP), R11
	MOVQ    code+48(FP), DX
	MOVQ    lmask+56(FP), AX
	TESTQ   AX, AX
	JZ      mpfnomask
	VMOVDQU (AX), Y14
	VMOVDQU 32(AX), Y15
	MOVQ    smask+64(FP), R8
	VMOVDQU (R8), Y13

mpfnomask:
	SHLQ  $2, R9
	SHLQ  $2, R11
	TESTQ CX, CX
	JZ    mpfdone

mpfrow:
	MOVQ SI, R12
	LEAQ (SI)(R9*1), R13
	MOVQ DI, R14
	MOVQ DX, R15
	MOVQ  groups+8(FP), BX
	TESTQ AX, AX
	JZ    mpfgroup // no masks: every group whole
	DECQ  BX
	JZ    mpflast

mpfgroup:
	VMOVUPS (R12), Y0
	VMOVUPS 32(R12), Y1
	VMOVUPS (R13), Y2
	VMOVUPS 32(R13), Y3
	POOLMAX
	VMOVUPS Y8, (R14)
	VMOVDQU Y0, (R15)
	ADDQ    $64, R12
	ADDQ    $64, R13
	ADDQ    $32, R14
	ADDQ    $32, R15
	DECQ    BX
	JNZ     mpfgroup
	TESTQ   AX, AX
	JZ      mpfnext

mpflast:
	VMASKMOVPS (R12), Y14, Y0
	VMASKMOVPS 32(R12), Y15, Y1
	VMASKMOVPS (R13), Y14, Y2
	VMASKMOVPS 32(R13), Y15, Y3
	POOLMAX
	VMASKMOVPS Y8, Y13, (R14)
	VMASKMOVPS Y0, Y13, (R15)

mpfnext:
	LEAQ       (SI)(R9*2), SI
	ADDQ       R11, DI
	ADDQ       R11, DX
	DECQ       CX
	JNZ        mpfrow

mpfdone:
	VZEROUPPER
	RET

// POOLSPREAD spreads the gradients Y10 of 8 windows with one-hot codes Y11
// onto their cells: Y2:Y3 the top row's 16 floats, Y8:Y9 the bottom's.
#define POOLSPREAD \
	VANDPS     lbit1<>(SB), Y11, Y4 \
	VPCMPEQD   lbit1<>(SB), Y4, Y4 \
	VANDPS     Y10, Y4, Y4 \
	VANDPS     lbit2<>(SB), Y11, Y5 \
	VPCMPEQD   lbit2<>(SB), Y5, Y5 \
	VANDPS     Y10, Y5, Y5 \
	VANDPS     lbit4<>(SB), Y11, Y6 \
	VPCMPEQD   lbit4<>(SB), Y6, Y6 \
	VANDPS     Y10, Y6, Y6 \
	VANDPS     lbit8<>(SB), Y11, Y7 \
	VPCMPEQD   lbit8<>(SB), Y7, Y7 \
	VANDPS     Y10, Y7, Y7 \
	VUNPCKLPS  Y5, Y4, Y0 \
	VUNPCKHPS  Y5, Y4, Y1 \
	VPERM2F128 $0x20, Y1, Y0, Y2 \
	VPERM2F128 $0x31, Y1, Y0, Y3 \
	VUNPCKLPS  Y7, Y6, Y0 \
	VUNPCKHPS  Y7, Y6, Y1 \
	VPERM2F128 $0x20, Y1, Y0, Y8 \
	VPERM2F128 $0x31, Y1, Y0, Y9

// func maxPool2Bwd(rows, groups int, dx *float32, ldx int, dy *float32, ldy int, code *int32, lmask, smask *int32, over bool)
TEXT ·maxPool2Bwd(SB), NOSPLIT, $0-73
	MOVQ    rows+0(FP), CX
	MOVQ    dx+16(FP), SI
	MOVQ    ldx+24(FP), R9
	MOVQ    dy+32(FP), DI
	MOVQ    ldy+40(FP), R11
	MOVQ    code+48(FP), DX
	MOVQ    lmask+56(FP), AX
	VMOVDQU (AX), Y14
	VMOVDQU 32(AX), Y15
	MOVQ    smask+64(FP), AX
	VMOVDQU (AX), Y13
	MOVBLZX over+72(FP), AX
	SHLQ    $2, R9
	SHLQ    $2, R11
	TESTQ   CX, CX
	JZ      mpbdone

mpbrow:
	MOVQ SI, R12
	LEAQ (SI)(R9*1), R13
	MOVQ DI, R14
	MOVQ DX, R15
	MOVQ groups+8(FP), BX
	DECQ BX
	JZ   mpblast

mpbgroup:
	VMOVUPS (R14), Y10
	VMOVDQU (R15), Y11
	POOLSPREAD
	VMOVUPS Y2, (R12)
	VMOVUPS Y3, 32(R12)
	VMOVUPS Y8, (R13)
	VMOVUPS Y9, 32(R13)
	ADDQ    $64, R12
	ADDQ    $64, R13
	ADDQ    $32, R14
	ADDQ    $32, R15
	DECQ    BX
	JNZ     mpbgroup

mpblast:
	TESTQ      AX, AX
	JNZ        mpbover
	VMASKMOVPS (R14), Y13, Y10
	VMASKMOVPS (R15), Y13, Y11
	POOLSPREAD
	VMASKMOVPS Y2, Y14, (R12)
	VMASKMOVPS Y3, Y15, 32(R12)
	VMASKMOVPS Y8, Y14, (R13)
	VMASKMOVPS Y9, Y15, 32(R13)
	JMP        mpbnext

mpbover:
	VMOVUPS    (R14), Y10
	VMOVDQU    (R15), Y11
	POOLSPREAD
	VMASKMOVPS Y2, Y14, (R12)
	VMASKMOVPS Y3, Y15, 32(R12)
	VMOVUPS    Y8, (R13)
	VMOVUPS    Y9, 32(R13)

mpbnext:
	LEAQ       (SI)(R9*2), SI
	ADDQ       R11, DI
	ADDQ       R11, DX
	DECQ       CX
	JNZ        mpbrow

mpbdone:
	VZEROUPPER
	RET

// func reluFwd8(n int, x, y *float32)
// max(0, x) returns x when both are zero or x is NaN; adding +0 then turns
// −0 into +0, as Go's max(x, 0) does.
TEXT ·reluFwd8(SB), NOSPLIT, $0-24
	MOVQ   n+0(FP), CX
	MOVQ   x+8(FP), SI
	MOVQ   y+16(FP), DI
	VXORPS Y13, Y13, Y13
	SHRQ   $3, CX
	JZ     rfdone

rfloop:
	VMOVUPS (SI), Y0
	VMAXPS  Y0, Y13, Y0
	VADDPS  Y13, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     rfloop

rfdone:
	VZEROUPPER
	RET

// func reluBwd8(n int, dy, y, dx *float32)
TEXT ·reluBwd8(SB), NOSPLIT, $0-32
	MOVQ   n+0(FP), CX
	MOVQ   dy+8(FP), SI
	MOVQ   y+16(FP), R8
	MOVQ   dx+24(FP), DI
	VPXOR  Y13, Y13, Y13
	SHRQ   $3, CX
	JZ     rbdone

rbloop:
	VMOVDQU  (R8), Y1
	VPCMPGTD Y13, Y1, Y1
	VANDPS   (SI), Y1, Y1
	VMOVUPS  Y1, (DI)
	ADDQ     $32, SI
	ADDQ     $32, R8
	ADDQ     $32, DI
	DECQ     CX
	JNZ      rbloop

rbdone:
	VZEROUPPER
	RET

// func biasRows(dst *float32, ldd int, src *float32, lds, rows, w int, bias float32)
// The w mod 8 tail is an overlapping 8-wide step for w ≥ 8 (it rewrites
// the same sums) and scalar otherwise.
TEXT ·biasRows(SB), NOSPLIT, $0-52
	MOVQ         dst+0(FP), DI
	MOVQ         ldd+8(FP), R8
	MOVQ         src+16(FP), SI
	MOVQ         lds+24(FP), R9
	MOVQ         rows+32(FP), CX
	MOVQ         w+40(FP), R10
	VBROADCASTSS bias+48(FP), Y14
	SHLQ         $2, R8
	SHLQ         $2, R9
	LEAQ         -32(R10*4), R12 // byte offset of the last 8 elements
	MOVQ         R10, R13
	ANDQ         $7, R13         // tail length
	SHRQ         $3, R10         // full chunks
	TESTQ        CX, CX
	JZ           brdone

brloop:
	MOVQ  R10, BX
	XORQ  DX, DX
	TESTQ BX, BX
	JZ    brtail

brchunk:
	VADDPS  (SI)(DX*1), Y14, Y0
	VMOVUPS Y0, (DI)(DX*1)
	ADDQ    $32, DX
	DECQ    BX
	JNZ     brchunk

brtail:
	TESTQ   R13, R13
	JZ      brnext
	TESTQ   R10, R10
	JZ      brscalar
	VADDPS  (SI)(R12*1), Y14, Y0
	VMOVUPS Y0, (DI)(R12*1)
	JMP     brnext

brscalar:
	MOVQ R13, BX

brscalarloop:
	VADDSS (SI)(DX*1), X14, X0
	VMOVSS X0, (DI)(DX*1)
	ADDQ   $4, DX
	DECQ   BX
	JNZ    brscalarloop

brnext:
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ CX
	JNZ  brloop

brdone:
	VZEROUPPER
	RET

// func copyRowsSum(dst *float32, ldd int, src *float32, lds, rows, w int, sum *float32, tmask *int32)
// Copies rows as rowsKernel does and adds every float copied into
// sum[0:8]. For w ≥ 8 the w mod 8 tail of a row is an overlapping 8-wide
// copy of the row's last 8 floats, of which only the lanes tmask selects
// (the last w mod 8) are summed; shorter rows are scalar (into sum[0]).
TEXT ·copyRowsSum(SB), NOSPLIT, $0-64
	MOVQ    dst+0(FP), DI
	MOVQ    ldd+8(FP), R8
	MOVQ    src+16(FP), SI
	MOVQ    lds+24(FP), R9
	MOVQ    rows+32(FP), CX
	MOVQ    w+40(FP), R10
	MOVQ    tmask+56(FP), AX
	VMOVDQU (AX), Y10
	VXORPS  Y11, Y11, Y11
	VXORPS  X12, X12, X12
	SHLQ    $2, R8
	SHLQ    $2, R9
	LEAQ    -32(R10*4), R12 // byte offset of the last 8 elements
	MOVQ    R10, R13
	ANDQ    $7, R13         // tail length
	SHRQ    $3, R10         // full chunks
	TESTQ   CX, CX
	JZ      crsdone

crsloop:
	MOVQ  R10, BX
	XORQ  DX, DX
	TESTQ BX, BX
	JZ    crsscalar

crschunk:
	VMOVUPS (SI)(DX*1), Y0
	VMOVUPS Y0, (DI)(DX*1)
	VADDPS  Y0, Y11, Y11
	ADDQ    $32, DX
	DECQ    BX
	JNZ     crschunk
	TESTQ   R13, R13
	JZ      crsnext
	VMOVUPS (SI)(R12*1), Y0
	VMOVUPS Y0, (DI)(R12*1)
	VANDPS  Y10, Y0, Y0
	VADDPS  Y0, Y11, Y11
	JMP     crsnext

crsscalar:
	MOVQ  R13, BX
	TESTQ BX, BX
	JZ    crsnext

crsscalarloop:
	VMOVSS (SI)(DX*1), X0
	VMOVSS X0, (DI)(DX*1)
	VADDSS X0, X12, X12
	ADDQ   $4, DX
	DECQ   BX
	JNZ    crsscalarloop

crsnext:
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ CX
	JNZ  crsloop

crsdone:
	MOVQ    sum+48(FP), AX
	VADDPS  (AX), Y11, Y11
	VMOVUPS Y11, (AX)
	VADDSS  (AX), X12, X12
	VMOVSS  X12, (AX)
	VZEROUPPER
	RET

// LISTCHUNK lists the non-zero floats of Y0, whose grid positions are
// Y9: it adds Y0 into the sums Y13, and writes the packed values, their
// positions and the channel Y12 at entry AX of g (R11), pos (DI) and chs
// (R8), 8 entries whatever the count, which it adds to AX.
#define LISTCHUNK \
	VADDPS    Y0, Y13, Y13 \
	VCMPPS    $4, Y14, Y0, Y1 \
	VMOVMSKPS Y1, R15 \
	POPCNTL   R15, R14 \
	SHLQ      $5, R15 \
	VMOVDQU   (R12)(R15*1), Y2 \
	VPERMPS   Y0, Y2, Y3 \
	VMOVUPS   Y3, (R11)(AX*4) \
	VPERMD    Y9, Y2, Y4 \
	VMOVDQU   Y4, (DI)(AX*4) \
	VMOVDQU   Y12, (R8)(AX*4) \
	ADDQ      R14, AX

// func listNZ(rows, w int, src *float32, lds int, dst *float32, ldd int, ch int32, pos, chs *int32, gv *float32, mask, lut *int32, sum *float32) int
TEXT ·listNZ(SB), NOSPLIT, $0-112
	MOVQ         rows+0(FP), CX
	MOVQ         w+8(FP), R10
	DECQ         R10
	SHRQ         $3, R10
	VMOVQ        R10, X8          // full chunks before the (masked) last
	MOVQ         src+16(FP), SI
	MOVQ         lds+24(FP), R9
	SHLQ         $2, R9
	MOVQ         dst+32(FP), R10
	MOVL         ch+48(FP), R14
	VMOVD        R14, X12
	VPBROADCASTD X12, Y12
	MOVQ         pos+56(FP), DI
	MOVQ         chs+64(FP), R8
	MOVQ         gv+72(FP), R11
	MOVQ         mask+80(FP), AX
	VMOVDQU      (AX), Y15
	MOVQ         lut+88(FP), R12
	VXORPS       Y14, Y14, Y14
	VXORPS       Y13, Y13, Y13
	VMOVDQU      lanes8<>(SB), Y11
	MOVL         $8, R14
	VMOVD        R14, X10
	VPBROADCASTD X10, Y10         // a chunk's step
	XORQ         AX, AX           // entries listed
	XORQ         R13, R13         // grid position of the row's first output
	TESTQ        CX, CX
	JZ           lndone

lnrow:
	VMOVD        R13, X9
	VPBROADCASTD X9, Y9
	VPADDD       Y11, Y9, Y9
	XORQ         DX, DX
	VMOVQ        X8, BX
	TESTQ        BX, BX
	JZ           lntail

lnchunk:
	VMOVUPS (SI)(DX*1), Y0
	VMOVUPS Y0, (R10)(DX*1)
	LISTCHUNK
	VPADDD  Y10, Y9, Y9
	ADDQ    $32, DX
	DECQ    BX
	JNZ     lnchunk

lntail:
	VMASKMOVPS (SI)(DX*1), Y15, Y0
	VMOVUPS    Y0, (R10)(DX*1)
	LISTCHUNK
	ADDQ       R9, SI
	MOVQ       ldd+40(FP), BX
	ADDQ       BX, R13
	SHLQ       $2, BX
	ADDQ       BX, R10
	DECQ       CX
	JNZ        lnrow

lndone:
	MOVQ    sum+96(FP), DX
	VADDPS  (DX), Y13, Y13
	VMOVUPS Y13, (DX)
	MOVQ    AX, ret+104(FP)
	VZEROUPPER
	RET
