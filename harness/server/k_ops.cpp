// Kernel family: one ggml op through ggml's public API, on sources that may be permuted views.
//
//   op   ip = {op, n_threads, dst_type, n_src, n_iparams,
//             then per source: type, ne0, ne1, ne2, ne3, p0, p1, p2, p3,
//             then the op's integer parameters[, reps]}
//        fp = the op's float parameters
//        bufs = {source 0 storage, ..., source n_src-1 storage, dst}
//
// Source i is a contiguous tensor of shape ne (its storage: buffer i), seen through
// ggml_permute(p0, p1, p2, p3) when the permutation is not the identity (a strided view, as a
// model's transposes and head splits make them).  The op:
//
//   0 norm      (src0, eps = fp0)             6 cont     (src0)
//   1 rms_norm  (src0, eps = fp0)             7 cpy      (src0 into a new contiguous dst_type tensor)
//   2 add       (src0, src1)                  8 repeat   (src0, to ne = iparams 0..3)
//   3 sub       (src0, src1)                  9 sum_rows (src0)
//   4 mul       (src0, src1)                 10 get_rows (src0, src1 = i32 row ids)
//   5 div       (src0, src1)                 11 concat   (src0, src1, dim = iparam 0)
//  12 rope      (src0, src1 = i32 positions, n_dims, mode, n_ctx_orig = iparams 0..2,
//                freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow = fp0..5): ggml_rope_ext
//  13 swiglu    (src0 = gate, src1 = up): ggml_swiglu_split, silu(src0) * src1
//
// dst is the op's result, contiguous (its buffer's size must be ggml_nbytes of it).  The op runs on
// whichever kernel the build routes it to: ggml-cpu's own in the kernel families' builds, the
// SpacemiT backend's (ggml-cpu/spacemit/rvv_kernels.cpp, through its extra buffer type's
// tensor traits) in the spacemit build.  Python side: cases/spacemit_ops.py.  reps (default 1): how
// many times the graph is computed after its one set-up (a cost measurement of reps 1 and 2 differs
// by one compute: costs/spacemit_ops.py; ops 12 and 13 are measured only, at a model's shapes:
// costs/model_rest.py).

#include "graph.h"
#include "server.h"

#include "ggml-cpu.h"
#include "ggml.h"

namespace {

using namespace rvvdiff;

constexpr int SRC_FIELDS = 9;

bool known_type(int64_t t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_I32;
}

uint32_t k_op(Call & c) {
    if (c.ip.size() < 5) return c.bad("op: %zu integer parameters, want at least 5", c.ip.size());
    const int64_t op = c.ip[0], n_threads = c.ip[1], dst_type = c.ip[2], n_src = c.ip[3], n_par = c.ip[4];
    if (n_src < 1 || n_src > 2 || n_par < 0 || n_par > 8) return c.bad("op: %lld sources, %lld parameters",
                                                                       (long long) n_src, (long long) n_par);
    const size_t n_ip = 5 + SRC_FIELDS * n_src + n_par;
    if (!c.shape_trailing(n_ip, c.fp.size(), n_src + 1)) return ST_BAD_REQUEST;
    if (const uint32_t st = check_threads(c, n_threads)) return st;
    const int64_t * par = &c.ip[5 + SRC_FIELDS * n_src];
    const int64_t reps = c.trailing(n_ip, 1);
    if (reps < 1) return c.bad("op: reps %lld", (long long) reps);

    Graph g(16);
    ggml_context * ctx = g.ctx();
    ggml_tensor * src[2] = {nullptr, nullptr};
    for (int64_t i = 0; i < n_src; ++i) {
        const int64_t * f = &c.ip[5 + SRC_FIELDS * i];
        if (!known_type(f[0])) return c.bad("op: source %lld has type %lld", (long long) i, (long long) f[0]);
        for (int d = 1; d <= 4; ++d) {
            if (f[d] < 1) return c.bad("op: source %lld has ne%d = %lld", (long long) i, d - 1, (long long) f[d]);
        }
        bool seen[4] = {false, false, false, false};
        for (int d = 5; d <= 8; ++d) {
            if (f[d] < 0 || f[d] > 3 || seen[f[d]]) return c.bad("op: source %lld: bad permutation", (long long) i);
            seen[f[d]] = true;
        }
        ggml_tensor * t = ggml_new_tensor_4d(ctx, (ggml_type) f[0], f[1], f[2], f[3], f[4]);
        if (!g.bind(c, t, (size_t) i)) return ST_BAD_REQUEST;
        const bool identity = f[5] == 0 && f[6] == 1 && f[7] == 2 && f[8] == 3;
        src[i] = identity ? t : ggml_permute(ctx, t, (int) f[5], (int) f[6], (int) f[7], (int) f[8]);
    }
    auto need = [&](int64_t srcs, int64_t pars, size_t fps) {
        if (n_src == srcs && n_par == pars && c.fp.size() == fps) return true;
        c.bad("op %lld: %lld sources, %lld integer and %zu float parameters, want %lld, %lld and %zu", (long long) op,
              (long long) n_src, (long long) n_par, c.fp.size(), (long long) srcs, (long long) pars, fps);
        return false;
    };

    ggml_tensor * out = nullptr;
    switch (op) {
        case 0: case 1:
            if (!need(1, 0, 1)) return ST_BAD_REQUEST;
            out = op == 0 ? ggml_norm(ctx, src[0], (float) c.fp[0]) : ggml_rms_norm(ctx, src[0], (float) c.fp[0]);
            break;
        case 2: case 3: case 4: case 5:
            if (!need(2, 0, 0)) return ST_BAD_REQUEST;
            if (!ggml_can_repeat(src[1], src[0])) return c.bad("op %lld: src1 does not broadcast over src0", (long long) op);
            out = op == 2 ? ggml_add(ctx, src[0], src[1]) : op == 3 ? ggml_sub(ctx, src[0], src[1])
                : op == 4 ? ggml_mul(ctx, src[0], src[1]) : ggml_div(ctx, src[0], src[1]);
            break;
        case 6:
            if (!need(1, 0, 0)) return ST_BAD_REQUEST;
            out = ggml_cont(ctx, src[0]);
            break;
        case 7: {
            if (!need(1, 0, 0) || !known_type(dst_type)) return ST_BAD_REQUEST;
            const int64_t * ne = src[0]->ne;
            ggml_tensor * dst = ggml_new_tensor_4d(ctx, (ggml_type) dst_type, ne[0], ne[1], ne[2], ne[3]);
            if (!g.bind(c, dst, (size_t) n_src)) return ST_BAD_REQUEST;  // ggml_cpy's result is a view of dst
            return g.compute(c, ggml_cpy(ctx, src[0], dst), (int) n_threads, reps);
        }
        case 8: {
            if (!need(1, 4, 0)) return ST_BAD_REQUEST;
            ggml_tensor * like = ggml_new_tensor_4d(ctx, src[0]->type, par[0], par[1], par[2], par[3]);
            if (!ggml_can_repeat(src[0], like)) return c.bad("repeat: the source does not tile the target shape");
            out = ggml_repeat(ctx, src[0], like);
            break;
        }
        case 9:
            if (!need(1, 0, 0)) return ST_BAD_REQUEST;
            out = ggml_sum_rows(ctx, src[0]);
            break;
        case 10:
            if (!need(2, 0, 0)) return ST_BAD_REQUEST;
            if (src[1]->type != GGML_TYPE_I32) return c.bad("get_rows: the row ids must be i32");
            out = ggml_get_rows(ctx, src[0], src[1]);
            break;
        case 11:
            if (!need(2, 1, 0) || par[0] < 0 || par[0] > 3) return ST_BAD_REQUEST;
            out = ggml_concat(ctx, src[0], src[1], (int) par[0]);
            break;
        case 12:
            if (!need(2, 3, 6)) return ST_BAD_REQUEST;
            if (src[1]->type != GGML_TYPE_I32) return c.bad("rope: the positions must be i32");
            out = ggml_rope_ext(ctx, src[0], src[1], nullptr, (int) par[0], (int) par[1], (int) par[2], (float) c.fp[0],
                                (float) c.fp[1], (float) c.fp[2], (float) c.fp[3], (float) c.fp[4], (float) c.fp[5]);
            break;
        case 13:
            if (!need(2, 0, 0)) return ST_BAD_REQUEST;
            out = ggml_swiglu_split(ctx, src[0], src[1]);  // the fused op (GLU, ggml 2025-07: k_vec.cpp's swiglu too)
            break;
        default:
            return c.bad("op: unknown op %lld", (long long) op);
    }
    if (out->type != (ggml_type) dst_type) return c.bad("op %lld: the result has type %d, not %lld", (long long) op,
                                                        (int) out->type, (long long) dst_type);
    if (!g.bind(c, out, (size_t) n_src)) return ST_BAD_REQUEST;
    return g.compute(c, out, (int) n_threads, reps);
}

RVVDIFF_KERNEL("op", k_op);

}  // namespace
