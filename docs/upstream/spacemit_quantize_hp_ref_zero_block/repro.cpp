// quantize_a_row_i8_hp (SpacemiT, spacemit/rvv_kernels.cpp) on one row of 256 zeros: a zero block quantizes to
// scale 0 and int8s 0, with sums (and ratios) 0, so every output byte must be 0. Exit status 1 while any is not.
#include "spacemit/rvv_kernels.h"
#include <riscv_vector.h>
#include <cstdio>

namespace K = spacemit_kernels;
constexpr size_t BLK_LEN = 256, COUNT_K = 256;

int main() {
    static float a[COUNT_K];  // zeros
    static uint8_t out[COUNT_K / BLK_LEN * K::q8_hp_blk_size(BLK_LEN, true, true)];
    K::rvv::quantize_a_row_i8_hp(BLK_LEN, a, COUNT_K, out);
    int bad = 0;
    for (size_t i = 0; i < sizeof(out); ++i)
        if (out[i] != 0 && bad++ < 6) printf("byte %zu = 0x%02x, expected 0\n", i, out[i]);
    printf("VLEN %d: %d of %zu output bytes not 0\n", (int) __riscv_vlenb() * 8, bad, sizeof(out));
    return bad != 0;
}
