// rvvdiff kernel server: the inputs of an attention request and its fused node, shared by the adapters that run
// flash attention (k_graph.cpp: attention, through a graph; k_spacemit_fa.cpp: SpacemiT's kernels called as
// their dispatch calls them).
//
//   ip[first ...] = {type_k, type_v, DK, DV, n_q, n_kv, H, H_kv, mask_heads, n_threads}
//   fp = {scale, max_bias, logit_softcap}
//   bufs = {Q [H][n_q][DK] f32, K [H_kv][n_kv][DK] type_k, V [H_kv][n_kv][DV] type_v,
//           mask [mask_heads][n_q][n_kv] f16 (empty when mask_heads == 0), sinks [H] f32 (empty: no sinks), out}
//
// Python side: cases/flash_attn.py (attention_call), which says what each parameter means.

#pragma once

#include "graph.h"
#include "server.h"

#include "ggml.h"

#include <string.h>

#include <string>
#include <vector>

namespace rvvdiff {

// The K / V (and mul_mat) types the graph adapters take.
inline bool known_graph_type(int64_t t) {
    switch (t) {
        case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_BF16: case GGML_TYPE_Q8_0: case GGML_TYPE_Q4_0:
            return true;
        default:
            return false;
    }
}

struct AttentionInputs {
    static constexpr size_t N_IP = 10;

    int64_t tk = 0, tv = 0, DK = 0, DV = 0, n_q = 0, n_kv = 0, H = 0, H_kv = 0, mask_heads = 0, n_threads = 0;
    float scale = 0, max_bias = 0, softcap = 0;
    ggml_tensor *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr, *sinks = nullptr;
    std::vector<ggml_fp16_t> padded;  // the mask with its rows padded, for trees that require it

    // Reads ip[first ...] and fp, checks them, and creates Q, K, V, the mask and the sinks in g, bound to the
    // call's buffers 0-4 (V as [H_kv][DV][n_kv] when v_transposed: llama.cpp's V cache without flash attention).
    // ST_OK, or the status to answer (c.err set).
    uint32_t bind(Call & c, Graph & g, size_t first, bool v_transposed = false) {
        const int64_t * p = c.ip.data() + first;
        tk = p[0], tv = p[1], DK = p[2], DV = p[3], n_q = p[4], n_kv = p[5], H = p[6], H_kv = p[7];
        mask_heads = p[8], n_threads = p[9];
        scale = (float) c.fp[0], max_bias = (float) c.fp[1], softcap = (float) c.fp[2];
        if (!known_graph_type(tk) || !known_graph_type(tv)) {
            return c.bad("%s: unsupported types %lld, %lld", c.name.c_str(), (long long) tk, (long long) tv);
        }
        if (DK < 1 || DV < 1 || n_q < 1 || n_kv < 1 || H_kv < 1 || H % H_kv != 0 || mask_heads < 0 ||
            (mask_heads > 0 && H % mask_heads != 0) || (max_bias > 0 && mask_heads == 0)) {
            return c.bad("%s: bad shape", c.name.c_str());
        }
        if (const uint32_t st = check_threads(c, n_threads)) return st;
        ggml_context * ctx = g.ctx();
        q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, DK, n_q, H);
        k = ggml_new_tensor_3d(ctx, (ggml_type) tk, DK, n_kv, H_kv);
        v = v_transposed ? ggml_new_tensor_3d(ctx, (ggml_type) tv, n_kv, DV, H_kv)
                         : ggml_new_tensor_3d(ctx, (ggml_type) tv, DV, n_kv, H_kv);
        if (!g.bind(c, q, 0) || !g.bind(c, k, 1) || !g.bind(c, v, 2)) return ST_BAD_REQUEST;
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
        if (c.bufs[4].size > 0) {
            sinks = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, H);
            if (!g.bind(c, sinks, 4)) return ST_BAD_REQUEST;
        }
        return ST_OK;
    }

    // ggml_flash_attn_ext of the inputs (with the sinks added).
    ggml_tensor * fused(ggml_context * ctx) const {
        ggml_tensor * out = ggml_flash_attn_ext(ctx, q, k, v, mask, scale, max_bias, softcap);
        if (sinks) ggml_flash_attn_ext_add_sinks(out, sinks);
        return out;
    }
};

}  // namespace rvvdiff
