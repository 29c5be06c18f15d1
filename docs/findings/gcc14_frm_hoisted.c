// A scalar float add next to an explicit-rounding-mode RVV intrinsic (_rm, here RMM) must round in
// the dynamic rounding mode (RNE at program start), not in the intrinsic's.  GCC 14 (Debian's
// gcc-14-riscv64-linux-gnu 14.2) hoists the intrinsic's frm write out of the loop and restores frm
// only at the function's exit, so the fadd.s rounds its tie away from zero: exit status 1.
//   riscv64-linux-gnu-gcc-14 -O2 -march=rv64gcv -static gcc14_frm_hoisted.c -o frm
//   qemu-riscv64 -cpu rv64,v=true,vlen=128 ./frm      (any VLEN; clang: 0x3f800000 four times)
#include <riscv_vector.h>
#include <stdio.h>
#include <string.h>

__attribute__((noinline))
void f(const float *x, float *tie, signed char *q, int nb) {
    size_t vl = __riscv_vsetvl_e32m8(32);
    for (int i = 0; i < nb; i++) {
        for (int r = 0; r < 2; r++) {
            vfloat32m8_t v = __riscv_vle32_v_f32m8(x + 32 * (2 * i + r), vl);
            float a = __riscv_vfmv_f_s_f32m8_f32(v);
            tie[2 * i + r] = a + 0x1p-24f;  /* 1 + 2^-24: a tie; RNE gives 1, RMM 1 + 2^-23 */
            vint16m4_t w = __riscv_vfncvt_x_f_w_i16m4_rm(v, __RISCV_FRM_RMM, vl);
            __riscv_vse8_v_i8m2(q + 32 * (2 * i + r), __riscv_vncvt_x_x_w_i8m2(w, vl), vl);
            __asm__ volatile("" ::: "memory");
        }
    }
}

int main(void) {
    static float x[128]; static signed char q[128]; float tie[4];
    for (int i = 0; i < 128; i++) x[i] = 1.0f;
    f(x, tie, q, 2);
    int bad = 0;
    for (int i = 0; i < 4; i++) { unsigned u; memcpy(&u, &tie[i], 4); printf("row %d: 1 + 2^-24 = 0x%08x%s\n", i, u, u != 0x3f800000 ? "  WRONG (rounded away: frm still RMM)" : ""); bad += u != 0x3f800000; }
    return bad != 0;
}
