/* SpacemiT's IME1 mnemonics (vmadot, vmadotu, ..., vmadot3us), as SpacemiT's specification and ggml's
 * spacemit/ime1_kernels.cpp write them, made assembler macros for the names LLVM 22 gives the same
 * instructions (smt.vmadot, ...; -march=..._xsmtvdot).  Force-included (-include) into a C or C++ file,
 * so that its inline assembly assembles unchanged; see docs/ime.md. */
#ifndef RVVDIFF_IME1_NAMES_H
#define RVVDIFF_IME1_NAMES_H

#define RVVDIFF_IME1_NAME(n) ".macro " #n " vd, vs1, vs2\n\tsmt." #n " \\vd, \\vs1, \\vs2\n.endm\n"
#define RVVDIFF_IME1_SIGNS(n) RVVDIFF_IME1_NAME(n) RVVDIFF_IME1_NAME(n##u) RVVDIFF_IME1_NAME(n##su) \
    RVVDIFF_IME1_NAME(n##us)

__asm__(RVVDIFF_IME1_SIGNS(vmadot) RVVDIFF_IME1_SIGNS(vmadot1) RVVDIFF_IME1_SIGNS(vmadot2)
        RVVDIFF_IME1_SIGNS(vmadot3));

#undef RVVDIFF_IME1_SIGNS
#undef RVVDIFF_IME1_NAME
#endif
