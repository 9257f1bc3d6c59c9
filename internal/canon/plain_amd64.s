//go:build amd64 && !purego

#include "textflag.h"

// func plainLenAVX2(s []byte) int
TEXT ·plainLenAVX2(SB), NOSPLIT, $0-32
	MOVQ s_base+0(FP), SI
	MOVQ s_len+8(FP), CX
	ANDQ $~31, CX // the whole blocks
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
	JGE  done
	VMOVDQU (SI)(AX*1), Y0
	VPCMPEQB Y0, Y1, Y4 // == '"'
	VPCMPEQB Y0, Y2, Y5 // == '\\'
	VPCMPGTB Y0, Y3, Y6 // 0x20 > b as signed bytes: below 0x20 or above 0x7f
	VPOR     Y4, Y5, Y4
	VPOR     Y4, Y6, Y4
	VPMOVMSKB Y4, DX
	TESTL    DX, DX
	JNZ      found
	ADDQ     $32, AX
	JMP      loop

found:
	BSFL DX, DX
	ADDQ DX, AX

done:
	VZEROUPPER
	MOVQ AX, ret+24(FP)
	RET
