/* rvvdiff: SpacemiT's IME1 mnemonics as ggml-cpu/spacemit/ writes them (vmadot, vmadotu, vmadotsu, vmadotus,
 * and the sliding vmadot1/2/3 forms), mapped by assembler macros onto the names LLVM's xsmtvdot extension gives
 * the same instructions (smt.vmadot ...).  Included into every C and C++ file of the SpacemiT build made by clang
 * (harness/toolchain/additions.py), together with -target-feature +xsmtvdot, so the tree's own FindSMTIME.cmake
 * check finds IME1 and ime1_kernels.cpp is compiled. */
#ifndef RVVDIFF_SPACEMIT_IME1_H
#define RVVDIFF_SPACEMIT_IME1_H
__asm__(
        ".macro vmadot vd, vs1, vs2\n smt.vmadot \\vd, \\vs1, \\vs2\n.endm\n"
        ".macro vmadotu vd, vs1, vs2\n smt.vmadotu \\vd, \\vs1, \\vs2\n.endm\n"
        ".macro vmadotsu vd, vs1, vs2\n smt.vmadotsu \\vd, \\vs1, \\vs2\n.endm\n"
        ".macro vmadotus vd, vs1, vs2\n smt.vmadotus \\vd, \\vs1, \\vs2\n.endm\n"
        ".macro vmadot1 vd, vs1, vs2\n smt.vmadot1 \\vd, \\vs1, \\vs2\n.endm\n"
        ".macro vmadot1u vd, vs1, vs2\n smt.vmadot1u \\vd, \\vs1, \\vs2\n.endm\n"
        ".macro vmadot1su vd, vs1, vs2\n smt.vmadot1su \\vd, \\vs1, \\vs2\n.endm\n"
        ".macro vmadot1us vd, vs1, vs2\n smt.vmadot1us \\vd, \\vs1, \\vs2\n.endm\n"
        ".macro vmadot2 vd, vs1, vs2\n smt.vmadot2 \\vd, \\vs1, \\vs2\n.endm\n"
        ".macro vmadot2u vd, vs1, vs2\n smt.vmadot2u \\vd, \\vs1, \\vs2\n.endm\n"
        ".macro vmadot2su vd, vs1, vs2\n smt.vmadot2su \\vd, \\vs1, \\vs2\n.endm\n"
        ".macro vmadot2us vd, vs1, vs2\n smt.vmadot2us \\vd, \\vs1, \\vs2\n.endm\n"
        ".macro vmadot3 vd, vs1, vs2\n smt.vmadot3 \\vd, \\vs1, \\vs2\n.endm\n"
        ".macro vmadot3u vd, vs1, vs2\n smt.vmadot3u \\vd, \\vs1, \\vs2\n.endm\n"
        ".macro vmadot3su vd, vs1, vs2\n smt.vmadot3su \\vd, \\vs1, \\vs2\n.endm\n"
        ".macro vmadot3us vd, vs1, vs2\n smt.vmadot3us \\vd, \\vs1, \\vs2\n.endm\n");
#endif
