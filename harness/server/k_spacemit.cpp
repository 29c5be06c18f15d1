// Kernel family: SpacemiT's activation quantizers (ggml-cpu/spacemit/rvv_kernels.cpp) and weight layouts
// (ggml-cpu/spacemit/repack.cpp), called directly.  Only the spacemit build (GGML_CPU_RISCV64_SPACEMIT) has
// them; every other build registers nothing here.  Python side: cases/spacemit_quant.py (quantizers) and
// cases/spacemit_layouts.py (layouts); the NumPy formats are oracles/spacemit_q8.py and oracles/spacemit_repack.py.
//
// Why direct calls: the backend calls the quantizers and the 32-row layouts only on IME2 cores (the A100), and
// no public assembler builds IME2, so no op of this build reaches them; the functions themselves have external
// linkage (rvv_kernels.h, and repack<BLOC_TYPE, INTER_SIZE, NB_COLS>'s explicit specialisations in repack.cpp).
//
//   spacemit_quantize  ip = {quantizer, blk_len, count_k}
//                      bufs = {a: rows x count_k floats (rows = 4 for the _4row_ quantizers, else 1), quant_a}
//        quantizer: 0 quantize_a_row_i8, 1 quantize_a_4row_i8, 2 quantize_a_row_i8_hp, 3 quantize_a_4row_i8_hp,
//                   4 quantize_a_row_i8k, 5 quantize_a_4row_i8k (namespace spacemit_kernels::rvv).
//        quant_a's size must be what the tree's own q8_blk_size / q8_hp_blk_size / q8k_blk_size give for
//        count_k / blk_len blocks of every row (so the Python layout and the tree's agree).  Notes "vlenb".
//   spacemit_repack    ip = {ggml type, INTER_SIZE, NB_COLS, ne0, ne1, ne2}
//                      bufs = {src: ne1 * ne2 rows of ggml blocks, dst: the repacked tensor}
//        runs ggml::cpu::riscv64_spacemit::repack<block, INTER_SIZE, NB_COLS> on a tensor of that shape whose
//        data is dst; dst's size must be what the backend's buffer type allocates for the tensor
//        (ggml_backend_buft_get_alloc_size; the Python side asks spacemit_alloc_size first).  Notes "ret", the
//        repack's return value (-1: the layout refuses the shape, dst untouched).
//   spacemit_alloc_size  ip = {ggml type, ne0, ne1, ne2}, no buffers
//        Notes "alloc_size", what the backend's buffer type allocates for a tensor of that type and shape
//        (the tree's own figure: a tree that fixes it allocates otherwise than the pinned one).
//
// The blk_len each quantizer asserts (32 for i8, 256 for hp and i8k) is checked here first, so a wrong request
// is a bad request, not an abort of the server.

#ifdef GGML_USE_CPU_RISCV64_SPACEMIT

#include "server.h"
#include "rvvdiff_tree.h"

#define GGML_COMMON_DECL_CPP
#include "ggml-common.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "spacemit/ime.h"
// repack.h came with the IME2 layouts (2026-05); before it, the IME1 layouts were ime.cpp's own and none of the
// 32-row ones below existed (their RVVDIFF_HAS_ names are 0 there).
#if __has_include("spacemit/repack.h")
#include "spacemit/repack.h"
#endif

// The quantizers came with rvv_kernels.cpp (older trees of the backend have IME1's own only).
#if __has_include("spacemit/rvv_kernels.h") && RVVDIFF_HAS_quantize_a_row_i8_hp && RVVDIFF_HAS_quantize_a_row_i8k
#define SPACEMIT_QUANTIZERS 1
#include "spacemit/rvv_kernels.h"
#else
#define SPACEMIT_QUANTIZERS 0
#endif

#include <riscv_vector.h>

#include <string>
#include <vector>

namespace ggml::cpu::riscv64_spacemit {}  // declared by repack.h where the tree has it

namespace {

using namespace rvvdiff;
namespace R = ggml::cpu::riscv64_spacemit;

#if SPACEMIT_QUANTIZERS
namespace Q = spacemit_kernels;

using QuantizeFn = void (*)(size_t, const float *, size_t, uint8_t *);

struct Quantizer {
    QuantizeFn fn;
    size_t rows;
    size_t blk_len;
    int format;  // 0: q8 (with the int16 sum), 1: q8 hp (with sums and the average scale), 2: q8k
};

const Quantizer QUANTIZERS[] = {
    {Q::rvv::quantize_a_row_i8, 1, 32, 0},     {Q::rvv::quantize_a_4row_i8, 4, 32, 0},
    {Q::rvv::quantize_a_row_i8_hp, 1, 256, 1}, {Q::rvv::quantize_a_4row_i8_hp, 4, 256, 1},
    {Q::rvv::quantize_a_row_i8k, 1, 256, 2},   {Q::rvv::quantize_a_4row_i8k, 4, 256, 2},
};

size_t block_bytes(int format, size_t blk_len) {
    switch (format) {
        case 0: return Q::q8_blk_size(blk_len, true);
        case 1: return Q::q8_hp_blk_size(blk_len, true, true);
        default: return Q::q8k_blk_size(blk_len);
    }
}

uint32_t k_spacemit_quantize(Call & c) {
    if (!c.shape(3, 0, 2)) return ST_BAD_REQUEST;
    const int64_t which = c.ip[0], blk_len = c.ip[1], count_k = c.ip[2];
    const int64_t n = (int64_t) (sizeof(QUANTIZERS) / sizeof(QUANTIZERS[0]));
    if (which < 0 || which >= n) {
        return c.bad("spacemit_quantize: quantizer %lld (0-%lld)", (long long) which, (long long) n - 1);
    }
    const Quantizer & q = QUANTIZERS[which];
    if (blk_len != (int64_t) q.blk_len) {
        return c.bad("spacemit_quantize: quantizer %lld takes blk_len %zu, not %lld", (long long) which, q.blk_len,
                     (long long) blk_len);
    }
    if (count_k < 1 || count_k % blk_len != 0) {
        return c.bad("spacemit_quantize: count_k=%lld is not a positive multiple of %lld", (long long) count_k,
                     (long long) blk_len);
    }
    const size_t out = q.rows * (size_t) (count_k / blk_len) * block_bytes(q.format, q.blk_len);
    if (!c.size_is(0, q.rows * (size_t) count_k * sizeof(float)) || !c.size_is(1, out)) return ST_BAD_REQUEST;
    q.fn(q.blk_len, c.buf<const float>(0), (size_t) count_k, c.buf<uint8_t>(1));
    c.note("vlenb", std::to_string(__riscv_vlenb()));
    return ST_OK;
}

RVVDIFF_KERNEL("spacemit_quantize", k_spacemit_quantize);
#endif  // SPACEMIT_QUANTIZERS

using RepackFn = int (*)(ggml_tensor *, const void *, size_t);

struct Layout {
    ggml_type type;
    int inter;
    RepackFn fn;
};

// The layouts this tree has, registered below by SPACEMIT_LAYOUT.
std::vector<Layout> & layouts() {
    static std::vector<Layout> all;
    return all;
}

struct LayoutRegistrar {
    LayoutRegistrar(ggml_type type, int inter, RepackFn fn) { layouts().push_back({type, inter, fn}); }
};

}  // namespace

// One layout: the explicit specialisation repack<BLOCK, INTER, 32> of repack.cpp (declared here, defined by ggml)
// and its table entry, compiled when HAS (the tree has the static function that specialisation calls) is 1.
#define SPACEMIT_LAYOUT_0(BLOCK, TYPE, INTER)
#define SPACEMIT_LAYOUT_1(BLOCK, TYPE, INTER)                                                                         \
    namespace ggml::cpu::riscv64_spacemit {                                                                           \
    template <> int repack<BLOCK, INTER, 32>(ggml_tensor *, const void *, size_t);                                  \
    }                                                                                                                 \
    static LayoutRegistrar RVVDIFF_CAT(rvvdiff_layout_, __LINE__)(TYPE, INTER, R::repack<BLOCK, INTER, 32>);
#define SPACEMIT_LAYOUT(HAS, BLOCK, TYPE, INTER) RVVDIFF_CAT(SPACEMIT_LAYOUT_, HAS)(BLOCK, TYPE, INTER)

SPACEMIT_LAYOUT(RVVDIFF_HAS_repack_q4_0_to_q4_0_32_bl, block_q4_0, GGML_TYPE_Q4_0, 32)
SPACEMIT_LAYOUT(RVVDIFF_HAS_repack_q4_0_to_q4_0_256_32_bl_ref, block_q4_0, GGML_TYPE_Q4_0, 256)
SPACEMIT_LAYOUT(RVVDIFF_HAS_repack_q4_1_to_q4_1_32_bl, block_q4_1, GGML_TYPE_Q4_1, 32)
SPACEMIT_LAYOUT(RVVDIFF_HAS_repack_q6_k_to_q8_0_32_bl_ref, block_q6_K, GGML_TYPE_Q6_K, 32)
SPACEMIT_LAYOUT(RVVDIFF_HAS_repack_q8_0_to_q8_0_32_bl_ref, block_q8_0, GGML_TYPE_Q8_0, 32)

namespace {

uint32_t k_spacemit_repack(Call & c) {
    if (!c.shape(6, 0, 2)) return ST_BAD_REQUEST;
    const int64_t type = c.ip[0], inter = c.ip[1], cols = c.ip[2], ne0 = c.ip[3], ne1 = c.ip[4], ne2 = c.ip[5];
    const Layout * l = nullptr;
    for (const Layout & x : layouts()) {
        if (x.type == type && x.inter == inter && cols == 32) l = &x;
    }
    if (!l) {
        return c.bad("spacemit_repack: no layout %lldx%lld of ggml type %lld in this tree", (long long) cols,
                     (long long) inter, (long long) type);
    }
    if (ne0 < 1 || ne1 < 1 || ne2 < 1 || ne0 % ggml_blck_size(l->type) != 0 || ne0 % (l->inter == 256 ? 256 : 1) != 0) {
        return c.bad("spacemit_repack: ne = %lld, %lld, %lld", (long long) ne0, (long long) ne1, (long long) ne2);
    }
    ggml_init_params p = {ggml_tensor_overhead() * 2, nullptr, true};
    ggml_context * ctx = ggml_init(p);
    ggml_tensor * t = ggml_new_tensor_3d(ctx, l->type, ne0, ne1, ne2);
    // src: the tensor's ggml blocks; dst: what the backend's buffer type allocates for it
    if (!c.size_is(0, ggml_nbytes(t)) ||
        !c.size_is(1, ggml_backend_buft_get_alloc_size(ggml_backend_cpu_riscv64_spacemit_buffer_type(), t))) {
        ggml_free(ctx);
        return ST_BAD_REQUEST;
    }
    t->data = c.buf<void>(1);
    const int ret = l->fn(t, c.buf<const void>(0), ggml_nbytes(t));
    ggml_free(ctx);
    c.note("ret", std::to_string(ret));
    return ST_OK;
}

RVVDIFF_KERNEL("spacemit_repack", k_spacemit_repack);

uint32_t k_spacemit_alloc_size(Call & c) {
    if (!c.shape(4, 0, 0)) return ST_BAD_REQUEST;
    const int64_t type = c.ip[0], ne0 = c.ip[1], ne1 = c.ip[2], ne2 = c.ip[3];
    if (type < 0 || type >= GGML_TYPE_COUNT || ne0 < 1 || ne1 < 1 || ne2 < 1 ||
        ne0 % ggml_blck_size((ggml_type) type) != 0) {
        return c.bad("spacemit_alloc_size: ggml type %lld, ne = %lld, %lld, %lld", (long long) type, (long long) ne0,
                     (long long) ne1, (long long) ne2);
    }
    ggml_init_params p = {ggml_tensor_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(p);
    ggml_tensor * t = ggml_new_tensor_3d(ctx, (ggml_type) type, ne0, ne1, ne2);
    c.note("alloc_size",
           std::to_string(ggml_backend_buft_get_alloc_size(ggml_backend_cpu_riscv64_spacemit_buffer_type(), t)));
    ggml_free(ctx);
    return ST_OK;
}

RVVDIFF_KERNEL("spacemit_alloc_size", k_spacemit_alloc_size);

}  // namespace

#endif  // GGML_USE_CPU_RISCV64_SPACEMIT
