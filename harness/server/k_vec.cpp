// Kernel family: the rest of the floating-point vector kernels of vec.h / vec.cpp
// (scale / multiply-add in fp32 and fp16, the unrolled f16 dot and f32 mad,
// SiLU, SwiGLU, softmax, centred variance).  Python side: cases/test_vec_ops.py,
// which defines what every parameter and buffer means; the adapters only check
// sizes, place the pointers as ggml's callers do and call the kernel.
//
// Most of these are `static inline` in vec.h: including the internal header
// compiles them into this file with ggml-cpu's own flags, so the code that runs
// is the code ggml-cpu inlines into its ops.
//
// In-place aliasing: where ggml itself calls a kernel with y == x (ops.cpp:
// silu and norm in place, scale with a bias in place, softmax in place in the
// tiled flash attention), the adapter takes ip "inplace" = 1 and one in/out
// buffer that serves as both.

#include "server.h"

#include "ggml-cpu.h"
#include "vec.h"

namespace {

using namespace rvvdiff;

// The input/output pair of an elementwise kernel: bufs {x in, y out} or, in
// place, {y in/out} with x = y; `n_extra` buffers (a returned double) follow.
template <typename T>
struct XY {
    const T * x = nullptr;
    T * y = nullptr;
    size_t next = 0;  // index of the buffer after the pair
};

template <typename T>
bool xy(Call & c, int64_t n, bool inplace, size_t n_extra, XY<T> & out) {
    const size_t nb = (inplace ? 1 : 2) + n_extra;
    if (c.bufs.size() != nb) {
        c.bad("expected %zu buffers (inplace=%d), got %zu", nb, int(inplace), c.bufs.size());
        return false;
    }
    const size_t bytes = size_t(n) * sizeof(T);
    if (inplace) {
        if (!c.size_is(0, bytes)) return false;
        out.y = c.buf<T>(0);
        out.x = out.y;
        out.next = 1;
    } else {
        if (!c.size_is(0, bytes) || !c.size_is(1, bytes)) return false;
        out.x = c.buf<const T>(0);
        out.y = c.buf<T>(1);
        out.next = 2;
    }
    return true;
}

bool params(Call & c, size_t n_ip, size_t n_fp) {
    if (c.ip.size() != n_ip || c.fp.size() != n_fp) {
        c.bad("expected %zu int and %zu float parameters, got %zu and %zu", n_ip, n_fp, c.ip.size(), c.fp.size());
        return false;
    }
    return true;
}

// ---------------------------------------------------------------- y op= x * v

// ip = {n}; fp = {v}; bufs = {x[n] in, y[n] in/out}: y += x*v.
template <typename T, void (*F)(int, T *, const T *, float)>
uint32_t k_mad(Call & c) {
    if (!c.shape(1, 1, 2)) return ST_BAD_REQUEST;
    const int64_t n = c.ip[0];
    if (!c.size_is(0, n * sizeof(T)) || !c.size_is(1, n * sizeof(T))) return ST_BAD_REQUEST;
    F(int(n), c.buf<T>(1), c.buf<const T>(0), float(c.fp[0]));
    return ST_OK;
}

// ip = {n}; fp = {v}; bufs = {y[n] in/out}: y *= v.
template <typename T, void (*F)(int, T *, float)>
uint32_t k_scale(Call & c) {
    if (!c.shape(1, 1, 1)) return ST_BAD_REQUEST;
    const int64_t n = c.ip[0];
    if (!c.size_is(0, n * sizeof(T))) return ST_BAD_REQUEST;
    F(int(n), c.buf<T>(0), float(c.fp[0]));
    return ST_OK;
}

RVVDIFF_KERNEL("vec_mad_f32", (k_mad<float, ggml_vec_mad_f32>));
RVVDIFF_KERNEL("vec_mad_f16", (k_mad<ggml_fp16_t, ggml_vec_mad_f16>));
RVVDIFF_KERNEL("vec_scale_f32", (k_scale<float, ggml_vec_scale_f32>));
RVVDIFF_KERNEL("vec_scale_f16", (k_scale<ggml_fp16_t, ggml_vec_scale_f16>));

// ip = {n, inplace}; fp = {s, b}; bufs = {x, y} or {y}: y = x*s + b.
uint32_t k_mad1_f32(Call & c) {
    if (!params(c, 2, 2)) return ST_BAD_REQUEST;
    const int64_t n = c.ip[0];
    XY<float> p;
    if (!xy(c, n, c.ip[1] != 0, 0, p)) return ST_BAD_REQUEST;
    ggml_vec_mad1_f32(int(n), p.y, p.x, float(c.fp[0]), float(c.fp[1]));
    return ST_OK;
}
RVVDIFF_KERNEL("vec_mad1_f32", k_mad1_f32);

// ---------------------------------------------------------------- unrolled forms

// ip = {n, xs}; bufs = {xv in (GGML_VEC_DOT_UNROLL rows, xs bytes apart), y[n] f16 in,
// s[GGML_VEC_DOT_UNROLL] f32 out}: s[k] = dot(row k, y).
uint32_t k_dot_f16_unroll(Call & c) {
    if (!c.shape(2, 0, 3)) return ST_BAD_REQUEST;
    const int64_t n = c.ip[0], xs = c.ip[1];
    if (xs < n * int64_t(sizeof(ggml_fp16_t))) return c.bad("row stride xs=%lld < row size", (long long) xs);
    const size_t xbytes = size_t(xs) * (GGML_VEC_DOT_UNROLL - 1) + size_t(n) * sizeof(ggml_fp16_t);
    if (!c.size_is(0, xbytes) || !c.size_is(1, n * sizeof(ggml_fp16_t)) ||
        !c.size_is(2, GGML_VEC_DOT_UNROLL * sizeof(float))) {
        return ST_BAD_REQUEST;
    }
    ggml_vec_dot_f16_unroll(int(n), int(xs), c.buf<float>(2), c.buf<void>(0), c.buf<ggml_fp16_t>(1));
    c.note("unroll", std::to_string(GGML_VEC_DOT_UNROLL));
    return ST_OK;
}
RVVDIFF_KERNEL("vec_dot_f16_unroll", k_dot_f16_unroll);

// ip = {n, xs, vs}; bufs = {xv in (GGML_VEC_MAD_UNROLL rows, xs bytes apart),
// vv in (GGML_VEC_MAD_UNROLL floats, vs bytes apart), y[n] in/out}: y += sum_k x_k * v_k.
uint32_t k_mad_f32_unroll(Call & c) {
    if (!c.shape(3, 0, 3)) return ST_BAD_REQUEST;
    const int64_t n = c.ip[0], xs = c.ip[1], vs = c.ip[2];
    if (xs < n * int64_t(sizeof(float)) || vs < int64_t(sizeof(float))) return c.bad("strides too small");
    const size_t xbytes = size_t(xs) * (GGML_VEC_MAD_UNROLL - 1) + size_t(n) * sizeof(float);
    const size_t vbytes = size_t(vs) * (GGML_VEC_MAD_UNROLL - 1) + sizeof(float);
    if (!c.size_is(0, xbytes) || !c.size_is(1, vbytes) || !c.size_is(2, n * sizeof(float))) return ST_BAD_REQUEST;
    ggml_vec_mad_f32_unroll(int(n), int(xs), int(vs), c.buf<float>(2), c.buf<const float>(0), c.buf<const float>(1));
    c.note("unroll", std::to_string(GGML_VEC_MAD_UNROLL));
    return ST_OK;
}
RVVDIFF_KERNEL("vec_mad_f32_unroll", k_mad_f32_unroll);

// ---------------------------------------------------------------- activations

// ip = {n, inplace}; bufs = {x, y} or {y}: y = silu(x).
uint32_t k_silu_f32(Call & c) {
    if (!params(c, 2, 0)) return ST_BAD_REQUEST;
    const int64_t n = c.ip[0];
    XY<float> p;
    if (!xy(c, n, c.ip[1] != 0, 0, p)) return ST_BAD_REQUEST;
    ggml_vec_silu_f32(int(n), p.y, p.x);
    return ST_OK;
}
RVVDIFF_KERNEL("vec_silu_f32", k_silu_f32);

// ip = {n}; bufs = {x[n] in, g[n] in, y[n] out}: y = silu(x) * g.
uint32_t k_swiglu_f32(Call & c) {
    if (!c.shape(1, 0, 3)) return ST_BAD_REQUEST;
    const int64_t n = c.ip[0];
    for (size_t i = 0; i < 3; ++i) {
        if (!c.size_is(i, n * sizeof(float))) return ST_BAD_REQUEST;
    }
    ggml_vec_swiglu_f32(int(n), c.buf<float>(2), c.buf<const float>(0), c.buf<const float>(1));
    return ST_OK;
}
RVVDIFF_KERNEL("vec_swiglu_f32", k_swiglu_f32);

// ---------------------------------------------------------------- row reductions

// ip = {n, inplace}; fp = {max}; bufs = {x, y} or {y}, then sum[1] f64 out:
// y = exp(x - max), sum = sum(y).
uint32_t k_soft_max_f32(Call & c) {
    if (!params(c, 2, 1)) return ST_BAD_REQUEST;
    const int64_t n = c.ip[0];
    XY<float> p;
    if (!xy(c, n, c.ip[1] != 0, 1, p) || !c.size_is(p.next, sizeof(ggml_float))) return ST_BAD_REQUEST;
    *c.buf<ggml_float>(p.next) = ggml_vec_soft_max_f32(int(n), p.y, p.x, float(c.fp[0]));
    return ST_OK;
}
RVVDIFF_KERNEL("vec_soft_max_f32", k_soft_max_f32);

// ip = {n, inplace}; fp = {mean}; bufs = {x, y} or {y}, then var[1] f64 out:
// y = x - mean, var = sum(y^2) / n.
uint32_t k_cvar_f32(Call & c) {
    if (!params(c, 2, 1)) return ST_BAD_REQUEST;
    const int64_t n = c.ip[0];
    XY<float> p;
    if (!xy(c, n, c.ip[1] != 0, 1, p) || !c.size_is(p.next, sizeof(ggml_float))) return ST_BAD_REQUEST;
    *c.buf<ggml_float>(p.next) = ggml_vec_cvar_f32(int(n), p.y, p.x, float(c.fp[0]));
    return ST_OK;
}
RVVDIFF_KERNEL("vec_cvar_f32", k_cvar_f32);

}  // namespace
