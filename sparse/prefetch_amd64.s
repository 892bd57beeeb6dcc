//go:build !purego

#include "textflag.h"

// func prefetchIndexed(base unsafe.Pointer, idx []int32, shift uint)
// Issues PREFETCHT0 for base + idx[k]<<shift for every k. A prefetch never
// faults, and retires without waiting for its line, so one pass over the
// indices puts all of a batch's cache misses in flight at once.
TEXT ·prefetchIndexed(SB), NOSPLIT, $0-40
	MOVQ base+0(FP), SI
	MOVQ idx_base+8(FP), DI
	MOVQ idx_len+16(FP), DX
	MOVQ shift+32(FP), CX
	TESTQ DX, DX
	JEQ done
loop:
	MOVLQSX (DI), AX
	SHLQ CX, AX
	PREFETCHT0 (SI)(AX*1)
	ADDQ $4, DI
	DECQ DX
	JNZ loop
done:
	RET
