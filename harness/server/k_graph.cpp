// Kernel family: small ggml graphs computed by the CPU backend, on 1 to MAX_THREADS threads.
//
//   mul_mat    ggml_mul_mat of float matrices: ggml-cpu.c hands it to tinyBLAS_RVV
//              (llamafile/sgemm.cpp) when the shape allows, else to the type's vec_dot.
//   attention  ggml_flash_attn_ext (fused: tiled, split-KV or one-chunk path in ops.cpp)
//              or the materialised path mul_mat -> soft_max_ext -> mul_mat.
//
// Python side: cases/test_mul_mat.py, cases/test_flash_attn.py (which say what every
// parameter means and which path must run).  Graph inputs and outputs are the server's
// guarded buffers themselves (tensor->data points into them), so an over-read of an input
// meets NaN guard bytes and an over-write of the result is reported by the server core.
// Intermediate tensors and the work buffer get guarded memory of their own, checked
// here after the graph ran.

#include "graph.h"
#include "server.h"

#include "ggml-cpu.h"
#include "ggml.h"

#include <string.h>

#include <string>
#include <vector>

namespace {

using namespace rvvdiff;

bool known_type(int64_t t) {
    switch (t) {
        case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_BF16: case GGML_TYPE_Q8_0: case GGML_TYPE_Q4_0:
            return true;
        default:
            return false;
    }
}

// mul_mat: ip = {type_a, type_b, k, m, n, lda, batch, bcast, n_threads[, reps]}
//   reps (default 1): how many times the graph is computed after the one set-up (a cost
//   measurement of reps 1 and 2 differs by one compute: costs/model.py)
//   bufs = {A [batch][m][lda] of type_a (only the first k of each row are used),
//           B [batch*bcast][n][k] of type_b, C [batch*bcast][n][m] f32 out}
// C = A x B^T per batch; B batch b uses A batch b / bcast (ggml's broadcast).
uint32_t k_mul_mat(Call & c) {
    if (!c.shape(c.ip.size() == 10 ? 10 : 9, 0, 3)) return ST_BAD_REQUEST;
    const int64_t ta = c.ip[0], tb = c.ip[1], k = c.ip[2], m = c.ip[3], n = c.ip[4], lda = c.ip[5];
    const int64_t batch = c.ip[6], bcast = c.ip[7], n_threads = c.ip[8], reps = c.ip.size() == 10 ? c.ip[9] : 1;
    if (!known_type(ta) || !known_type(tb)) return c.bad("mul_mat: unsupported types %lld, %lld", (long long) ta, (long long) tb);
    if (k < 1 || m < 1 || n < 1 || lda < k || batch < 1 || bcast < 1 || reps < 1) return c.bad("mul_mat: bad shape");
    if (const uint32_t st = check_threads(c, n_threads)) return st;

    Graph g(8);
    ggml_tensor * a_rows = ggml_new_tensor_3d(g.ctx(), (ggml_type) ta, lda, m, batch);
    ggml_tensor * b = ggml_new_tensor_3d(g.ctx(), (ggml_type) tb, k, n, batch * bcast);
    if (!g.bind(c, a_rows, 0) || !g.bind(c, b, 1)) return ST_BAD_REQUEST;
    ggml_tensor * a = lda == k ? a_rows : ggml_view_3d(g.ctx(), a_rows, k, m, batch, a_rows->nb[1], a_rows->nb[2], 0);
    ggml_tensor * out = ggml_mul_mat(g.ctx(), a, b);
    if (!g.bind(c, out, 2)) return ST_BAD_REQUEST;
    return g.compute(c, out, (int) n_threads, reps);
}

// attention: ip = {fused, type_k, type_v, DK, DV, n_q, n_kv, H, H_kv, mask_heads, n_threads}
//   fp = {scale, max_bias, logit_softcap}
//   bufs = {Q [H][n_q][DK] f32, K [H_kv][n_kv][DK] type_k, V [H_kv][n_kv][DV] type_v,
//           mask [mask_heads][n_q][n_kv] f16 (empty when mask_heads == 0),
//           sinks [H] f32 (empty: no sinks), out [n_q][H][DV] f32}
// fused = 1: ggml_flash_attn_ext.  fused = 0: the materialised path
//   kq = mul_mat(K, Q); [softcap: kq = softcap * tanh(kq * scale / softcap)]
//   kq = soft_max_ext(kq, mask, softcap ? 1 : scale, max_bias) (+ sinks);
//   out = permute(mul_mat(V^T, kq)), with a quantized V first cast to f32
//   (ggml cannot transpose blocks).
uint32_t k_attention(Call & c) {
    if (!c.shape(11, 3, 6)) return ST_BAD_REQUEST;
    const int64_t fused = c.ip[0], tk = c.ip[1], tv = c.ip[2], DK = c.ip[3], DV = c.ip[4];
    const int64_t n_q = c.ip[5], n_kv = c.ip[6], H = c.ip[7], H_kv = c.ip[8], mask_heads = c.ip[9];
    const int64_t n_threads = c.ip[10];
    const float scale = (float) c.fp[0], max_bias = (float) c.fp[1], softcap = (float) c.fp[2];
    if (!known_type(tk) || !known_type(tv)) return c.bad("attention: unsupported types %lld, %lld", (long long) tk, (long long) tv);
    if (DK < 1 || DV < 1 || n_q < 1 || n_kv < 1 || H_kv < 1 || H % H_kv != 0 || mask_heads < 0 ||
        (mask_heads > 0 && H % mask_heads != 0) || (max_bias > 0 && mask_heads == 0)) {
        return c.bad("attention: bad shape");
    }
    if (const uint32_t st = check_threads(c, n_threads)) return st;
    const bool has_sinks = c.bufs[4].size > 0;

    Graph g(24);
    ggml_context * ctx = g.ctx();
    ggml_tensor * q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, DK, n_q, H);
    ggml_tensor * k = ggml_new_tensor_3d(ctx, (ggml_type) tk, DK, n_kv, H_kv);
    ggml_tensor * v = ggml_new_tensor_3d(ctx, (ggml_type) tv, DV, n_kv, H_kv);
    if (!g.bind(c, q, 0) || !g.bind(c, k, 1) || !g.bind(c, v, 2)) return ST_BAD_REQUEST;
    ggml_tensor * mask = nullptr;
    std::vector<ggml_fp16_t> padded;  // the mask with its rows padded, for trees that require it
    if (mask_heads > 0) {
#ifdef GGML_KQ_MASK_PAD
        // Trees of 2025 require the mask's rows padded to GGML_KQ_MASK_PAD (ggml_flash_attn_ext
        // asserts it; llama.cpp padded them): the call's n_q rows per head, then padding rows
        // no query reads.
        const int64_t n_q_pad = GGML_PAD(n_q, GGML_KQ_MASK_PAD);
#else
        const int64_t n_q_pad = n_q;
#endif
        if (n_q_pad == n_q) {
            mask = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, n_kv, n_q, mask_heads);
            if (!g.bind(c, mask, 3)) return ST_BAD_REQUEST;
        } else {
            if (!c.size_is(3, sizeof(ggml_fp16_t) * n_kv * n_q * mask_heads)) return ST_BAD_REQUEST;
            mask = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, n_kv, n_q_pad, mask_heads);
            padded.assign(n_kv * n_q_pad * mask_heads, ggml_fp16_t(0));
            const ggml_fp16_t * src = c.buf<const ggml_fp16_t>(3);
            for (int64_t h = 0; h < mask_heads; ++h) {
                memcpy(&padded[h * n_q_pad * n_kv], src + h * n_q * n_kv, sizeof(ggml_fp16_t) * n_q * n_kv);
            }
            mask->data = padded.data();
            c.note("mask_rows_padded_to", std::to_string(n_q_pad));
        }
    } else if (!c.size_is(3, 0)) {
        return ST_BAD_REQUEST;
    }
    ggml_tensor * sinks = nullptr;
    if (has_sinks) {
        sinks = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, H);
        if (!g.bind(c, sinks, 4)) return ST_BAD_REQUEST;
    }

    ggml_tensor * out;
    if (fused) {
        out = ggml_flash_attn_ext(ctx, q, k, v, mask, scale, max_bias, softcap);
        if (sinks) ggml_flash_attn_ext_add_sinks(out, sinks);
    } else {
        ggml_tensor * kq = ggml_mul_mat(ctx, k, q);  // [n_kv, n_q, H]
        float sm_scale = scale;
        if (softcap != 0.0f) {
            kq = ggml_scale(ctx, ggml_tanh(ctx, ggml_scale(ctx, kq, scale / softcap)), softcap);
            sm_scale = 1.0f;
        }
        kq = ggml_soft_max_ext(ctx, kq, mask, sm_scale, max_bias);
        if (sinks) ggml_soft_max_add_sinks(kq, sinks);
        ggml_tensor * vv = ggml_is_quantized(v->type) ? ggml_cast(ctx, v, GGML_TYPE_F32) : v;
        ggml_tensor * vt = ggml_cont(ctx, ggml_transpose(ctx, vv));                     // [n_kv, DV, H_kv]
        ggml_tensor * kqv = ggml_mul_mat(ctx, vt, kq);                                    // [DV, n_q, H]
        out = ggml_cont(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3));                         // [DV, H, n_q]
    }
    if (!g.bind(c, out, 5)) return ST_BAD_REQUEST;
    return g.compute(c, out, (int) n_threads);
}

RVVDIFF_KERNEL("mul_mat", k_mul_mat);
RVVDIFF_KERNEL("attention", k_attention);

}  // namespace
