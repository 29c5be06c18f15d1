// Kernel family: the RVV weight layouts SpacemiT's repack.cpp defines and does not call.  Python side:
// cases/spacemit_layouts.py; the NumPy layouts are oracles/spacemit_repack.py.
//
// repack<block_q6_K, 32, 32> and repack<block_q8_0, 32, 32> pick their scalar _ref functions under `#if 1`;
// the RVV versions beside them (repack_q6_k_to_q8_0_32_bl, repack_q8_0_to_q8_0_32_bl) are static and
// unreferenced, so the library does not even contain them.  This adapter compiles the tree's repack.cpp once
// more inside a namespace of its own (its explicit specialisations become rvvdiff_uncalled::ggml::..., which
// clash with nothing) and calls the two static functions, so a tree that switches to them has been tested.
// A tree whose repack.cpp does not compile this way loses only this adapter (harness/toolchain/server.py).
//
//   spacemit_repack_uncalled  ip = {ggml type, ne0, ne1, ne2}
//        bufs = {src: ggml blocks, dst: what the backend's buffer type allocates for the tensor}
//        type q6_K: repack_q6_k_to_q8_0_32_bl; q8_0: repack_q8_0_to_q8_0_32_bl (both 32 rows x 32).
//        Notes "ret" (-1: the function refuses the shape, dst untouched).

#ifdef GGML_USE_CPU_RISCV64_SPACEMIT

#include "server.h"
#include "rvvdiff_tree.h"

#if RVVDIFF_HAS_repack_q6_k_to_q8_0_32_bl && RVVDIFF_HAS_repack_q8_0_to_q8_0_32_bl

// Everything repack.cpp includes, first at file scope (their include guards keep them there).
#define GGML_COMMON_IMPL_CPP
#define GGML_COMMON_DECL_CPP
#include "ggml-backend.h"
#include "ggml-common.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"
#include "spacemit/ime.h"
#include "spacemit/ime_kernels.h"
#include "spacemit/repack.h"

#include <riscv_vector.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <string>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
namespace rvvdiff_uncalled {
#include "spacemit/repack.cpp"
}  // namespace rvvdiff_uncalled
#pragma GCC diagnostic pop

namespace {

using namespace rvvdiff;

uint32_t k_spacemit_repack_uncalled(Call & c) {
    if (!c.shape(4, 0, 2)) return ST_BAD_REQUEST;
    const int64_t type = c.ip[0], ne0 = c.ip[1], ne1 = c.ip[2], ne2 = c.ip[3];
    if (type != GGML_TYPE_Q6_K && type != GGML_TYPE_Q8_0) {
        return c.bad("spacemit_repack_uncalled: ggml type %lld (q6_K or q8_0)", (long long) type);
    }
    if (ne0 < 1 || ne1 < 1 || ne2 < 1 || ne0 % ggml_blck_size((ggml_type) type) != 0) {
        return c.bad("spacemit_repack_uncalled: ne = %lld, %lld, %lld", (long long) ne0, (long long) ne1, (long long) ne2);
    }
    ggml_init_params p = {ggml_tensor_overhead() * 2, nullptr, true};
    ggml_context * ctx = ggml_init(p);
    ggml_tensor * t = ggml_new_tensor_3d(ctx, (ggml_type) type, ne0, ne1, ne2);
    // src: the tensor's ggml blocks; dst: what the backend's buffer type allocates for it
    if (!c.size_is(0, ggml_nbytes(t)) ||
        !c.size_is(1, ggml_backend_buft_get_alloc_size(ggml_backend_cpu_riscv64_spacemit_buffer_type(), t))) {
        ggml_free(ctx);
        return ST_BAD_REQUEST;
    }
    t->data = c.buf<void>(1);
    const int ret = type == GGML_TYPE_Q6_K
                        ? rvvdiff_uncalled::repack_q6_k_to_q8_0_32_bl(t, 32, c.buf<const void>(0), ggml_nbytes(t))
                        : rvvdiff_uncalled::repack_q8_0_to_q8_0_32_bl(t, 32, c.buf<const void>(0), ggml_nbytes(t));
    ggml_free(ctx);
    c.note("ret", std::to_string(ret));
    return ST_OK;
}

RVVDIFF_KERNEL("spacemit_repack_uncalled", k_spacemit_repack_uncalled);

}  // namespace

#endif  // RVVDIFF_HAS_...
#endif  // GGML_USE_CPU_RISCV64_SPACEMIT
