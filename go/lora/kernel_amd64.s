#include "textflag.h"

// func dotRowsI8AVX2(m *int8, q *int16, out *int32, rows, stride int)
// out[r] = sum_j int32(m[r*stride+j]) * int32(q[j]); stride % 32 == 0, rows > 0.
// int8 x 16 is sign-extended to int16 (VPMOVSXBW), multiplied with the int16 query and summed in pairs
// into int32 (VPMADDWD): exact for |m|, |q| <= 127 (no saturation).
TEXT ·dotRowsI8AVX2(SB), NOSPLIT, $0-40
	MOVQ m+0(FP), SI
	MOVQ q+8(FP), DX
	MOVQ out+16(FP), DI
	MOVQ rows+24(FP), CX
	MOVQ stride+32(FP), BX

row:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	XORQ  AX, AX

col:
	VPMOVSXBW (SI)(AX*1), Y4
	VPMOVSXBW 16(SI)(AX*1), Y5
	VPMADDWD  (DX)(AX*2), Y4, Y4
	VPMADDWD  32(DX)(AX*2), Y5, Y5
	VPADDD    Y4, Y0, Y0
	VPADDD    Y5, Y1, Y1
	ADDQ      $32, AX
	CMPQ      AX, BX
	JLT       col

	VPADDD       Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPADDD       X1, X0, X0
	VMOVD        X0, (DI)
	ADDQ         BX, SI
	ADDQ         $4, DI
	DECQ         CX
	JNZ          row
	VZEROUPPER
	RET

// func dot64AVX2(a, b *float32, n int) float64
// Lanes: Y0..Y3 accumulate float64(a[j])*float64(b[j]) for j mod 16 in 0-3, 4-7, 8-11, 12-15.
TEXT ·dot64AVX2(SB), NOSPLIT, $0-32
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	XORQ   AX, AX

d64loop:
	VCVTPS2PD   (SI)(AX*4), Y4
	VCVTPS2PD   (DI)(AX*4), Y5
	VFMADD231PD Y5, Y4, Y0
	VCVTPS2PD   16(SI)(AX*4), Y6
	VCVTPS2PD   16(DI)(AX*4), Y7
	VFMADD231PD Y7, Y6, Y1
	VCVTPS2PD   32(SI)(AX*4), Y8
	VCVTPS2PD   32(DI)(AX*4), Y9
	VFMADD231PD Y9, Y8, Y2
	VCVTPS2PD   48(SI)(AX*4), Y10
	VCVTPS2PD   48(DI)(AX*4), Y11
	VFMADD231PD Y11, Y10, Y3
	ADDQ        $16, AX
	CMPQ        AX, CX
	JLT         d64loop

	VADDPD       Y1, Y0, Y0      // lanes 0-3 + 4-7
	VADDPD       Y3, Y2, Y2      // lanes 8-11 + 12-15
	VADDPD       Y2, Y0, Y0      // v0..v3
	VEXTRACTF128 $1, Y0, X1      // v2, v3
	VADDPD       X1, X0, X0      // v0+v2, v1+v3
	VPERMILPD    $1, X0, X1
	VADDSD       X1, X0, X0      // (v0+v2)+(v1+v3)
	VMOVSD       X0, ret+24(FP)
	VZEROUPPER
	RET

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET
