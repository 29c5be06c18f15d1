"""The public reproducer's C text: the inputs as hex strings, the graph, the comparison with the oracle.

The program (also valid C++) builds the failing call of a :class:`harness.upstream.public.Public` form as a
one-node graph, computes it on the CPU backend, compares every output with the oracle's value and bound, prints
the first wrong ones and exits with 1 while any is wrong.  This module writes the ``ggml_mul_mat`` form
(:class:`harness.upstream.public.MulMat`, one thread) and hands the others to harness/upstream/program_ops.py
(one op on sources that may be permuted views, flash attention).
"""

from __future__ import annotations

from harness.upstream import program_ops
from harness.upstream.c_text import decode, encode, hex_fill
from harness.upstream.c_text import hex_lines as _hex_lines
from harness.upstream.c_text import literal as _lit
from harness.upstream.public import MulMat, Public, enumerator

__all__ = ["decode", "encode", "program"]


def program(pub: Public, title: str) -> str:
    """The C source (also valid C++) of the public reproducer of ``pub``, whichever its form."""
    if not isinstance(pub, MulMat):
        return program_ops.program(pub, title)
    exp = ", ".join(_lit(v) for v in pub.expected)
    bnd = ", ".join(_lit(v) for v in pub.bound) if pub.bound.any() else "0"
    size, k = pub.expected.size, pub.k
    ta = enumerator(pub.a_type)
    b_type = (enumerator(pub.b_type) if pub.b_type is not None
              else "ggml_get_type_traits_cpu(a->type)->vec_dot_type")
    b_make = f"tensor(ctx, {b_type}, {k}, {pub.n}, B_HEX)"
    if pub.repack:
        # As llama.cpp places a weight: in the extra buffer type (CPU_REPACK; SpacemiT's) when the device runs the op
        # from there, else in CPU memory.
        a_make = (
            "    ggml_backend_reg_t reg = ggml_backend_cpu_reg();  ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);\n"
            "    typedef ggml_backend_buffer_type_t * (*extra_t)(ggml_backend_dev_t);\n"
            "    extra_t extra = (extra_t) ggml_backend_reg_get_proc_address(reg, \"ggml_backend_dev_get_extra_bufts\");\n"
            "    ggml_backend_buffer_type_t buft = NULL;\n"
            "    for (ggml_backend_buffer_type_t * t = extra(dev); t && *t; ++t)\n"
            f"        if (!strcmp(ggml_backend_buft_name(*t), \"{pub.buft}\")) buft = *t;\n"
            "    struct ggml_init_params wp = { ggml_tensor_overhead(), NULL, true };\n"
            "    struct ggml_context * wctx = ggml_init(wp);\n"
            f"    struct ggml_tensor * w = ggml_new_tensor_2d(wctx, {ta}, {k}, {pub.m});\n"
            "    if (!buft || !ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft)) return 2;\n"
            f"    struct ggml_tensor * a = tensor(ctx, {ta}, {k}, {pub.m}, A_HEX), * b = {b_make};\n"
            "    struct ggml_tensor * c = ggml_mul_mat(ctx, w, b);\n"
            "    int repacked = ggml_backend_dev_supports_op(dev, c);\n"
            "    if (repacked) ggml_backend_tensor_set(w, a->data, 0, ggml_nbytes(w)); else c = ggml_mul_mat(ctx, a, b);\n"
            f"    printf(\"weights in %s\\n\", repacked ? \"{pub.buft}\" : \"CPU memory ({pub.buft} does not take them)\");\n")
    else:
        a_make = (f"    struct ggml_tensor * a = tensor(ctx, {ta}, {k}, {pub.m}, A_HEX);\n"
                  f"    struct ggml_tensor * c = ggml_mul_mat(ctx, a, {b_make});\n")
    return f"""// {title}: {pub.what}. ggml's public API only; exit status 1 while the result is wrong.
#include "ggml.h"
#include "ggml-cpu.h"
#include "ggml-backend.h"
#include <math.h>
#include <stdio.h>
{'#include <string.h>' + chr(10) if pub.repack else ''}{_hex_lines("A_HEX", pub.a)}
{_hex_lines("B_HEX", pub.b)}
static const double expected[{size}] = {{{exp}}}, bound[{size if pub.bound.any() else 1}] = {{{bnd}}};
static struct ggml_tensor * tensor(struct ggml_context * ctx, enum ggml_type t, int k, int rows, const char * h) {{
    struct ggml_tensor * x = ggml_new_tensor_2d(ctx, t, k, rows);  // h: hex bytes, "hh*N" = N bytes hh
{hex_fill()}}}
int main(void) {{
    struct ggml_init_params p = {{ 16u << 20, NULL, false }};  struct ggml_context * ctx = ggml_init(p);
{a_make}    struct ggml_cgraph * g = ggml_new_graph(ctx);  ggml_build_forward_expand(g, c);
    ggml_backend_t cpu = ggml_backend_cpu_init();  ggml_backend_cpu_set_n_threads(cpu, 1);  ggml_backend_graph_compute(cpu, g);
    int bad = 0;
    for (int i = 0; i < {size}; ++i) {{
        double got = ((float *) c->data)[i], want = expected[i], tol = bound[{"i" if pub.bound.any() else "0"}];
        if (!(got == want || fabs(got - want) <= tol || (isnan(got) && isnan(want))) && bad++ < 4)
            printf("C[%d] = %.9g, expected %.9g (bound %.3g)\\n", i, got, want, tol);
    }}
    printf("VLEN %d: %d of {size} wrong\\n", ggml_cpu_get_rvv_vlen() * 8, bad);
    return bad != 0;
}}
"""
