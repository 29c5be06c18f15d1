"""The C text of the op and flash-attention forms (harness/upstream/public_ops.py): one node on guarded memory.

The program (also valid C++) makes a no-alloc ggml context, gives every input tensor its bytes in memory of its own
followed by :data:`GUARD` bytes of 0xff (NaN in f32 and f16: a kernel that reads past a source meets NaNs, as in
rvvdiff's kernel server), builds the op on the sources' views (``ggml_permute``) as the kernel server's adapter
did, gives the result guarded memory too, computes the graph on the CPU backend with the case's threads and
checks (1) that nothing was written past the result (a guard byte changed: an out-of-bounds write) and (2) every
value against the oracle's within its bound (0: the same number; any NaN matches a NaN).  It prints the first
wrong values and the count, and exits with 1 while anything is wrong.  For a call that crashed where the test ran,
whether the program dies is the verdict; one without expected values (attention's, rvvdiff has no oracle of the
recorded inputs outside its test) prints the first values and the guard check if it gets that far.
"""

from __future__ import annotations

from harness.upstream.c_text import hex_lines, literal
from harness.upstream.public import Public, enumerator
from harness.upstream.public_ops import FlashAttn, OpGraph

#: Guard bytes after every tensor's memory.
GUARD = 256

_BINARY = {"add", "sub", "mul", "div"}


def _f(v: float) -> str:
    """A float literal (NAN and INFINITY as math.h spells them)."""
    lit = literal(v)
    return lit if lit.lstrip("-").isalpha() else lit + "f"


def _op_lines(pub: OpGraph) -> tuple[list[str], list[str], str]:
    """(hex inputs, graph lines, the result's tensor) of an op form."""
    data, lines, names = [], [], []
    for i, s in enumerate(pub.sources):
        data.append(hex_lines(f"S{i}_HEX", s.data))
        make = f"tensor(ctx, {enumerator(s.type)}, {', '.join(map(str, s.ne))}, S{i}_HEX)"
        if s.perm != (0, 1, 2, 3):
            make = f"ggml_permute(ctx, {make}, {', '.join(map(str, s.perm))})"
        lines.append(f"    struct ggml_tensor * s{i} = {make};")
        names.append(f"s{i}")
    op, args = pub.op, ", ".join(names)
    out = "c"
    if op in ("norm", "rms_norm"):
        call = f"ggml_{op}(ctx, s0, {_f(pub.fparams[0])})"
    elif op in _BINARY | {"cont", "sum_rows", "get_rows"}:
        call = f"ggml_{op}(ctx, {args})"
    elif op == "concat":
        call = f"ggml_concat(ctx, s0, s1, {pub.iparams[0]})"
    elif op == "repeat":
        lines.append(f"    struct ggml_tensor * like = ggml_new_tensor_4d(ctx, s0->type, "
                     f"{', '.join(map(str, pub.iparams))});  // the shape to repeat to (no data)")
        call = "ggml_repeat(ctx, s0, like)"
    elif op == "cpy":
        lines.append(f"    struct ggml_tensor * dst = tensor(ctx, {enumerator(pub.dst_type)}, s0->ne[0], s0->ne[1], "
                     "s0->ne[2], s0->ne[3], NULL);")
        call, out = "ggml_cpy(ctx, s0, dst)", "dst"
    else:
        raise ValueError(f"program_ops: no program for op {op!r}")
    lines.append(f"    struct ggml_tensor * c = {call};")
    if out == "c":
        lines.append("    c->data = guarded(ggml_nbytes(c), NULL);")
    return data, lines, out


def _fa_lines(pub: FlashAttn) -> tuple[list[str], list[str], str]:
    """(hex inputs, graph lines, the result's tensor) of a flash-attention form."""
    data = [hex_lines("Q_HEX", pub.q), hex_lines("K_HEX", pub.k), hex_lines("V_HEX", pub.v)]
    lines = [f"    struct ggml_tensor * q = tensor(ctx, GGML_TYPE_F32, {pub.dk}, {pub.n_q}, {pub.heads}, 1, Q_HEX);",
             f"    struct ggml_tensor * k = tensor(ctx, {enumerator(pub.k_type)}, {pub.dk}, {pub.n_kv}, {pub.kv_heads}, "
             "1, K_HEX);",
             f"    struct ggml_tensor * v = tensor(ctx, {enumerator(pub.v_type)}, {pub.dv}, {pub.n_kv}, {pub.kv_heads}, "
             "1, V_HEX);"]
    if pub.mask_heads:
        data.append(hex_lines("MASK_HEX", pub.mask))
        nq, nkv, mh = pub.n_q, pub.n_kv, pub.mask_heads
        lines += ["#ifdef GGML_KQ_MASK_PAD  // a tree of 2025: the mask's rows padded (rows no query reads, zero)",
                  f"    struct ggml_tensor * mask = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, {nkv}, "
                  f"GGML_PAD({nq}, GGML_KQ_MASK_PAD), {mh});",
                  "    mask->data = guarded(ggml_nbytes(mask), NULL);  memset(mask->data, 0, ggml_nbytes(mask));",
                  f"    const char * rows = (const char *) guarded({2 * nq * nkv * mh}, MASK_HEX);",
                  f"    for (int h = 0; h < {mh}; ++h) memcpy((char *) mask->data + h * mask->nb[2], "
                  f"rows + h * {2 * nq * nkv}, {2 * nq * nkv});",
                  "#else",
                  f"    struct ggml_tensor * mask = tensor(ctx, GGML_TYPE_F16, {nkv}, {nq}, {mh}, 1, MASK_HEX);",
                  "#endif"]
    else:
        lines.append("    struct ggml_tensor * mask = NULL;  // no mask")
    lines.append(f"    struct ggml_tensor * c = ggml_flash_attn_ext(ctx, q, k, v, mask, {_f(pub.scale)}, "
                 f"{_f(pub.max_bias)}, {_f(pub.softcap)});")
    if pub.sinks:
        data.append(hex_lines("SINKS_HEX", pub.sinks))
        lines.append(f"    ggml_flash_attn_ext_add_sinks(c, tensor(ctx, GGML_TYPE_F32, {pub.heads}, 1, 1, 1, SINKS_HEX));")
    lines.append("    c->data = guarded(ggml_nbytes(c), NULL);")
    return data, lines, "c"


def _check(count: str, bounded: bool, unknown: bool, out: str) -> str:
    """The lines after the compute over ``count`` outputs: the guard, then the values (``unknown``: no expected
    values, the first ones printed)."""
    guard = (f"    int past = clobbered({out});\n"
             f"    if (past) printf(\"the op wrote past the end of its result: guard byte %d of {GUARD} changed\\n\", "
             "past - 1);\n")
    if unknown:
        return (guard + f"    for (int i = 0; i < {count} && i < 4; ++i) printf(\"out[%d] = %.9g\\n\", i, "
                        f"ggml_get_f32_1d({out}, i));\n"
                        "    printf(\"VLEN %d: ran to the end\\n\", ggml_cpu_get_rvv_vlen() * 8);\n"
                        "    return past != 0;\n")
    tol = "bound[i]" if bounded else "bound[0]"
    return (guard + "    int bad = 0;\n"
            f"    for (int i = 0; i < {count}; ++i) {{\n"
            f"        double got = ggml_get_f32_1d({out}, i), want = expected[i], tol = {tol};\n"
            "        int same = got == want && (tol > 0 || signbit(got) == signbit(want));  // bound 0: the same number\n"
            "        if (!(same || fabs(got - want) <= tol || (isnan(got) && isnan(want))) && bad++ < 4)\n"
            "            printf(\"out[%d] = %.9g, expected %.9g (bound %.3g)\\n\", i, got, want, tol);\n"
            "    }\n"
            f"    printf(\"VLEN %d: %d of {count} wrong%s\\n\", ggml_cpu_get_rvv_vlen() * 8, bad, "
            "past ? \", and a write past the result\" : \"\");\n"
            "    return bad != 0 || past != 0;\n")


def program(pub: Public, title: str) -> str:
    """The C source (also valid C++) of an op or flash-attention form."""
    if isinstance(pub, OpGraph):
        data, lines, out = _op_lines(pub)
    elif isinstance(pub, FlashAttn):
        data, lines, out = _fa_lines(pub)
    else:
        raise TypeError(f"program_ops: no program for {type(pub).__name__}")
    arrays = ""
    if pub.expected is None:  # (a crash with no oracle here) the first values of the result, if it gets that far
        lines.append(f"    const int n_out = (int) ggml_nelements({out});")
        check = _check("n_out", False, True, out)
    else:
        size, bounded = pub.expected.size, bool(pub.bound.any())
        exp = ", ".join(literal(v) for v in pub.expected)
        bnd = ", ".join(literal(v) for v in pub.bound) if bounded else "0"
        arrays = f"static const double expected[{size}] = {{{exp}}}, bound[{size if bounded else 1}] = {{{bnd}}};\n"
        check = _check(str(size), bounded, False, out)
    verdict = (f"the call died of {pub.signal} where the test ran: whether this program dies is the verdict"
               if pub.crashed else "exit status 1 while the result is wrong")
    return f"""// {title}: {pub.what}. ggml's public API only; {verdict}.
#include "ggml.h"
#include "ggml-cpu.h"
#include "ggml-backend.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
{chr(10).join(data)}
{arrays}#define GUARD {GUARD}  // bytes of 0xff after every tensor's memory (NaN in f32 and f16)
static void * guarded(size_t n, const char * h) {{  // h: hex bytes, "hh*N" = N bytes hh; NULL: 0xff
    unsigned char * p = (unsigned char *) malloc(n + GUARD), * q = p;  unsigned v;  int k, len;
    memset(p, 0xff, n + GUARD);
    while (h && sscanf(h, " %2x%n", &v, &len) == 1) {{
        h += len; k = 1;
        if (*h == '*' && sscanf(h + 1, "%d%n", &k, &len) == 1) h += 1 + len;
        while (k-- > 0) *q++ = (unsigned char) v;
    }}
    return p;
}}
static struct ggml_tensor * tensor(struct ggml_context * ctx, enum ggml_type t, int64_t ne0, int64_t ne1, int64_t ne2,
                                   int64_t ne3, const char * h) {{
    struct ggml_tensor * x = ggml_new_tensor_4d(ctx, t, ne0, ne1, ne2, ne3);
    x->data = guarded(ggml_nbytes(x), h);
    return x;
}}
static int clobbered(const struct ggml_tensor * x) {{  // 1 + the first changed guard byte, or 0
    const unsigned char * g = (const unsigned char *) x->data + ggml_nbytes(x);
    for (int i = 0; i < GUARD; ++i) if (g[i] != 0xff) return i + 1;
    return 0;
}}
int main(void) {{
    struct ggml_init_params p = {{ 1u << 20, NULL, true }};  struct ggml_context * ctx = ggml_init(p);
{chr(10).join(lines)}
    struct ggml_cgraph * g = ggml_new_graph(ctx);  ggml_build_forward_expand(g, c);
    ggml_backend_t cpu = ggml_backend_cpu_init();  ggml_backend_cpu_set_n_threads(cpu, {pub.threads});
    ggml_backend_graph_compute(cpu, g);
{check}}}
"""
