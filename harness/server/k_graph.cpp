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

#include "attention.h"
#include "graph.h"
#include "server.h"

#include "ggml-cpu.h"
#include "ggml.h"

namespace {

using namespace rvvdiff;

// mul_mat: ip = {type_a, type_b, k, m, n, lda, batch, bcast, n_threads[, reps]}
//   reps (default 1): how many times the graph is computed after the one set-up (a cost
//   measurement of reps 1 and 2 differs by one compute: costs/model.py)
//   bufs = {A [batch][m][lda] of type_a (only the first k of each row are used),
//           B [batch*bcast][n][k] of type_b, C [batch*bcast][n][m] f32 out}
// C = A x B^T per batch; B batch b uses A batch b / bcast (ggml's broadcast).
uint32_t k_mul_mat(Call & c) {
    if (!c.shape_trailing(9, 0, 3)) return ST_BAD_REQUEST;
    const int64_t ta = c.ip[0], tb = c.ip[1], k = c.ip[2], m = c.ip[3], n = c.ip[4], lda = c.ip[5];
    const int64_t batch = c.ip[6], bcast = c.ip[7], n_threads = c.ip[8], reps = c.trailing(9, 1);
    if (!known_graph_type(ta) || !known_graph_type(tb)) return c.bad("mul_mat: unsupported types %lld, %lld", (long long) ta, (long long) tb);
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

// attention: ip = {fused, type_k, type_v, DK, DV, n_q, n_kv, H, H_kv, mask_heads, n_threads[, reps]}
//   reps (default 1): how many times the graph is computed after the one set-up (costs/spacemit_fa.py)
//   fp = {scale, max_bias, logit_softcap}
//   bufs = {Q [H][n_q][DK] f32, K [H_kv][n_kv][DK] type_k, V [H_kv][n_kv][DV] type_v,
//           mask [mask_heads][n_q][n_kv] f16 (empty when mask_heads == 0),
//           sinks [H] f32 (empty: no sinks), out [n_q][H][DV] f32}
// fused = 1: ggml_flash_attn_ext.  fused = 0: the materialised path
//   kq = mul_mat(K, Q); [softcap: kq = softcap * tanh(kq * scale / softcap)]
//   kq = soft_max_ext(kq, mask, softcap ? 1 : scale, max_bias) (+ sinks);
//   out = permute(mul_mat(V^T, kq)), with a quantized V first cast to f32
//   (ggml cannot transpose blocks).
// fused = 2: the materialised path with V given transposed, V [H_kv][DV][n_kv] of a float type (llama.cpp's V
//   cache without flash attention): mul_mat(V^T, kq) without the cont of a transposed view.
uint32_t k_attention(Call & c) {
    const size_t n_ip = 1 + AttentionInputs::N_IP;
    if (!c.shape_trailing(n_ip, 3, 6)) return ST_BAD_REQUEST;
    const int64_t mode = c.ip[0], reps = c.trailing(n_ip, 1);
    if (mode < 0 || mode > 2) return c.bad("attention: fused must be 0, 1 or 2");
    if (reps < 1) return c.bad("attention: reps %lld", (long long) reps);
    Graph g(24);
    ggml_context * ctx = g.ctx();
    AttentionInputs a;
    if (const uint32_t st = a.bind(c, g, 1, mode == 2)) return st;
    if (mode == 2 && ggml_is_quantized(a.v->type)) return c.bad("attention: a quantized V cannot be given transposed");

    ggml_tensor * out;
    if (mode == 1) {
        out = a.fused(ctx);
    } else {
        ggml_tensor * kq = ggml_mul_mat(ctx, a.k, a.q);  // [n_kv, n_q, H]
        float sm_scale = a.scale;
        if (a.softcap != 0.0f) {
            kq = ggml_scale(ctx, ggml_tanh(ctx, ggml_scale(ctx, kq, a.scale / a.softcap)), a.softcap);
            sm_scale = 1.0f;
        }
        kq = ggml_soft_max_ext(ctx, kq, a.mask, sm_scale, a.max_bias);
        if (a.sinks) ggml_soft_max_add_sinks(kq, a.sinks);
        ggml_tensor * vv = ggml_is_quantized(a.v->type) ? ggml_cast(ctx, a.v, GGML_TYPE_F32) : a.v;
        ggml_tensor * vt = mode == 2 ? a.v : ggml_cont(ctx, ggml_transpose(ctx, vv));    // [n_kv, DV, H_kv]
        ggml_tensor * kqv = ggml_mul_mat(ctx, vt, kq);                                    // [DV, n_q, H]
        out = ggml_cont(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3));                         // [DV, H, n_q]
    }
    if (!g.bind(c, out, 5)) return ST_BAD_REQUEST;
    return g.compute(c, out, (int) a.n_threads, reps);
}

RVVDIFF_KERNEL("mul_mat", k_mul_mat);
RVVDIFF_KERNEL("attention", k_attention);

}  // namespace
