// Kernel family: SpacemiT's flash-attention kernels (ggml-cpu/spacemit/rvv_kernels.cpp) with a TCM, called as
// their dispatch (spacemit/ime.cpp, forward_flash_attn_ext_f16) calls them.  In the spacemit build only.
//
//   spacemit_fa  ip = {kernel (0: one-chunk, 1: tiled), tcm_bytes, then attention.h's ip}
//                fp, bufs: attention.h's (the fused node's inputs and its output)
//
// ime.cpp hands each thread's TCM block (tls_context.tcm_buffer: tightly coupled memory that SpacemiT's
// libspine_tcm runtime maps on boards that have it) to the kernel with its size.  Through ggml under QEMU there is
// none: the one-chunk kernel then runs one query row at a time, and its 2- and 4-row kernels (decode with GQA)
// and the tiled kernel's TCM scratch never run.  Here the rows are cut as ime.cpp cuts them (one chunk of
// ceil(rows / n_threads) per thread) and each thread's chunk runs in turn on this thread with its own guarded block
// of tcm_bytes (0: none), and, for the tiled kernel, its slice of a work buffer sized as ime.cpp's work_size.
// The kernels assume VLEN 1024 (loads of DK and DV elements in one register group): other VLENs are refused.
// Python side: cases/spacemit_fa_tcm.py.

// The backend's flash attention came with rvv_kernels.cpp (2026-05); an older backend registers nothing here (the
// Python side says "not in this tree" from the tree's sources).
#if defined(GGML_USE_CPU_RISCV64_SPACEMIT) && __has_include("spacemit/rvv_kernels.h")

#include "attention.h"
#include "graph.h"
#include "server.h"

#include "common.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "ops.h"
#include "spacemit/rvv_kernels.h"

namespace {

using namespace rvvdiff;

uint32_t k_spacemit_fa(Call & c) {
    if (!c.shape(2 + AttentionInputs::N_IP, 3, 6)) return ST_BAD_REQUEST;
    const int64_t kernel = c.ip[0], tcm_bytes = c.ip[1];
    if ((kernel != 0 && kernel != 1) || tcm_bytes < 0) return c.bad("spacemit_fa: bad kernel or TCM size");
    if (ggml_cpu_get_rvv_vlen() != 128) {
        return c.bad("spacemit_fa: SpacemiT's kernels are written for VLEN 1024, this is VLEN %d",
                     ggml_cpu_get_rvv_vlen() * 8);
    }
    Graph g(8);
    AttentionInputs a;
    if (const uint32_t st = a.bind(c, g, 2)) return st;
    if (a.tk != GGML_TYPE_F16 || a.tv != GGML_TYPE_F16 || a.DK > 128 || a.DV > 128) {
        return c.bad("spacemit_fa: the kernels take f16 K and V with DK, DV <= 128 (ime.cpp)");
    }
    ggml_tensor * dst = a.fused(g.ctx());
    if (!g.bind(c, dst, 5)) return ST_BAD_REQUEST;

    const int nth = (int) a.n_threads;
    const int64_t nr = a.n_q * a.H;
    const int64_t dr = (nr + nth - 1) / nth;
    // ime.cpp's work_size for the tiled kernel (per thread), plus ggml_graph_plan's cache line per thread.
    const size_t per_thread = sizeof(float) * (GGML_FA_TILE_Q * a.DK + 2 * GGML_FA_TILE_Q * GGML_FA_TILE_KV +
                                               GGML_FA_TILE_Q * a.DV + GGML_FA_TILE_KV * a.DV + GGML_FA_TILE_KV * a.DK);
    const size_t wsize = (per_thread + CACHE_LINE_SIZE) * nth;
    void * wdata = kernel == 1 ? g.scratch(wsize, "the work buffer (ime.cpp's work_size)") : nullptr;
    if (kernel == 1 && !wdata) return c.bad("spacemit_fa: out of memory");
    for (int ith = 0; ith < nth; ++ith) {
        const int64_t ir0 = dr * ith, ir1 = ir0 + dr < nr ? ir0 + dr : nr;
        if (ir0 >= ir1) continue;
        void * tcm = tcm_bytes > 0 ? g.scratch((size_t) tcm_bytes, "a thread's TCM block") : nullptr;
        if (tcm_bytes > 0 && !tcm) return c.bad("spacemit_fa: out of memory");
        const ggml_compute_params params = {ith, nth, kernel == 1 ? wsize : 0, wdata, nullptr, false};
        if (kernel == 1) {
            spacemit_kernels::rvv::forward_flash_attn_ext_f16_tiled_vlen1024_vf16(&params, dst, (int) ir0, (int) ir1,
                                                                               tcm, (size_t) tcm_bytes);
        } else {
            spacemit_kernels::rvv::forward_flash_attn_ext_f16_one_chunk_vlen1024_vf16(&params, dst, (int) ir0,
                                                                                   (int) ir1, tcm, (size_t) tcm_bytes);
        }
    }
    return g.guards(c);
}

RVVDIFF_KERNEL("spacemit_fa", k_spacemit_fa);

}  // namespace

#endif  // GGML_USE_CPU_RISCV64_SPACEMIT && spacemit/rvv_kernels.h
