// Kernel family: FP16/BF16 <-> FP32 conversions (ggml-cpu.c) and the float dot
// products (vec.cpp).  Python side: cases/test_conversions.py, cases/test_vec_dot.py.

#include "server.h"

#include "ggml-cpu.h"
#include "vec.h"

namespace {

using namespace rvvdiff;

// Conversions: ip = {n}; bufs = {x[n] in, y[n] out}.
template <typename In, typename Out, void (*F)(const In *, Out *, int64_t)>
uint32_t k_convert(Call & c) {
    if (!c.shape(1, 0, 2)) return ST_BAD_REQUEST;
    const int64_t n = c.ip[0];
    if (!c.size_is(0, n * sizeof(In)) || !c.size_is(1, n * sizeof(Out))) return ST_BAD_REQUEST;
    F(c.buf<const In>(0), c.buf<Out>(1), n);
    return ST_OK;
}

RVVDIFF_KERNEL("fp16_to_fp32", (k_convert<ggml_fp16_t, float, ggml_cpu_fp16_to_fp32>));
RVVDIFF_KERNEL("fp32_to_fp16", (k_convert<float, ggml_fp16_t, ggml_cpu_fp32_to_fp16>));
RVVDIFF_KERNEL("bf16_to_fp32", (k_convert<ggml_bf16_t, float, ggml_cpu_bf16_to_fp32>));
RVVDIFF_KERNEL("fp32_to_bf16", (k_convert<float, ggml_bf16_t, ggml_cpu_fp32_to_bf16>));

// Dot products: ip = {n}; bufs = {x[n] in, y[n] in, s[1] float out}.
template <typename T, typename F>
uint32_t dot(Call & c, F f) {
    if (!c.shape(1, 0, 3)) return ST_BAD_REQUEST;
    const int64_t n = c.ip[0];
    if (!c.size_is(0, n * sizeof(T)) || !c.size_is(1, n * sizeof(T)) || !c.size_is(2, sizeof(float))) {
        return ST_BAD_REQUEST;
    }
    f(static_cast<int>(n), c.buf<float>(2), 0, c.buf<T>(0), 0, c.buf<T>(1), 0, 1);
    return ST_OK;
}

uint32_t k_vec_dot_f32(Call & c) { return dot<float>(c, ggml_vec_dot_f32); }
uint32_t k_vec_dot_f16(Call & c) { return dot<ggml_fp16_t>(c, ggml_vec_dot_f16); }
uint32_t k_vec_dot_bf16(Call & c) { return dot<ggml_bf16_t>(c, ggml_vec_dot_bf16); }

RVVDIFF_KERNEL("vec_dot_f32", k_vec_dot_f32);
RVVDIFF_KERNEL("vec_dot_f16", k_vec_dot_f16);
RVVDIFF_KERNEL("vec_dot_bf16", k_vec_dot_bf16);

}  // namespace
