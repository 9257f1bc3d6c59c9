//go:build amd64 && !purego

#include "textflag.h"

// func plainLenAVX2(s []byte) int
//
// len(s) >= 32. Whole 32-byte blocks first, then the last 32 bytes once
// more, with the lanes already checked shifted out of the mask.
TEXT ·plainLenAVX2(SB), NOSPLIT, $0-32
	MOVQ s_base+0(FP), SI
	MOVQ s_len+8(FP), R8
	MOVQ R8, CX
	ANDQ $~31, CX // the end of the whole blocks
	XORQ AX, AX
	MOVL $0x22, DX // '"'
	MOVQ DX, X1
	VPBROADCASTB X1, Y1
	MOVL $0x5c, DX // '\\'
	MOVQ DX, X2
	VPBROADCASTB X2, Y2
	MOVL $0x20, DX
	MOVQ DX, X3
	VPBROADCASTB X3, Y3

loop:
	CMPQ AX, CX
	JGE  tail
	VMOVDQU (SI)(AX*1), Y0
	VPCMPEQB  Y0, Y1, Y4 // == '"'
	VPCMPEQB  Y0, Y2, Y5 // == '\\'
	VPCMPGTB  Y0, Y3, Y6 // 0x20 > b as signed bytes: below 0x20 or above 0x7f
	VPOR      Y4, Y5, Y4
	VPOR      Y4, Y6, Y4
	VPMOVMSKB Y4, DX
	TESTL     DX, DX
	JNZ       found
	ADDQ      $32, AX
	JMP       loop

tail:
	CMPQ AX, R8
	JEQ  done
	MOVQ R8, R9
	SUBQ $32, R9 // the last 32 bytes start at R9 < AX
	VMOVDQU (SI)(R9*1), Y0
	VPCMPEQB  Y0, Y1, Y4
	VPCMPEQB  Y0, Y2, Y5
	VPCMPGTB  Y0, Y3, Y6
	VPOR      Y4, Y5, Y4
	VPOR      Y4, Y6, Y4
	VPMOVMSKB Y4, DX
	MOVQ      AX, CX
	SUBQ      R9, CX // lanes below AX were checked: 1 to 31 of them
	SHRL      CX, DX
	TESTL     DX, DX
	JNZ       found
	MOVQ      R8, AX
	JMP       done

found:
	BSFL DX, DX
	ADDQ DX, AX

done:
	VZEROUPPER
	MOVQ AX, ret+24(FP)
	RET
