"""Standalone C/C++ reproducers of a recorded failing call."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from harness.report.failure import Case
from harness.report.replay import decode_like


def arr(name: str, data: bytes) -> str:
    """A C array of ``data``, 24 bytes a line (one element when empty: C has no empty arrays)."""
    rows = [",".join(str(b) for b in data[i:i + 24]) for i in range(0, len(data), 24)] or ["0"]
    return f"static const unsigned char {name}[{max(len(data), 1)}] = {{\n    " + ",\n    ".join(rows) + "\n};"


def c_reproducer(case: Case, path: Path) -> Path:
    """A standalone C++ program: the failing call's inputs as literals, the kernel adapter called
    directly (linked with the server's adapter objects and the same ggml build), guard regions
    checked, outputs printed and compared with the recorded expected bytes where they map."""
    call = case.call
    comp = case.data.get("comparison")
    recorded = case.recorded_outputs()
    where = decode_like(recorded, case.arrays["got"]) if comp and "got" in case.arrays else None

    decls, setup = [], []
    for i, b in enumerate(call["buffers"]):
        kind = b["kind"]
        if kind != "OUT":
            decls.append(arr(f"buf{i}", case.arrays[f"buf{i}"].tobytes()))
        setup.append(f"    add_buffer(c, rvvdiff::BUF_{kind}, {b['size']}u, {b['fill']}, "
                     f"{'buf' + str(i) if kind != 'OUT' else 'nullptr'});")
    # Without per-element expected values to compare with (an ULP comparison, or one recorded as a
    # single worst element), the program does what `rvvdiff repro` does: it prints the outputs and
    # fails while they equal the recorded failing ones.
    outs = [j for j, b in enumerate(call["buffers"]) if b["kind"] != "IN"]
    for k, data in enumerate(recorded[:len(outs)]):
        decls.append(arr(f"recorded{k}", data))
    same = " && ".join(f"memcmp(c.bufs[{j}].data(), recorded{k}, {len(data)}u) == 0"
                       for k, (j, data) in enumerate(zip(outs, recorded))) or "false"
    show = "".join(f"    print_floats({j}, c.bufs[{j}].data(), {len(data) // 4});\n" for j, data in zip(outs, recorded))
    check = (f"{show}"
             f"    if ({same}) {{ printf(\"outputs equal the recorded failing outputs: STILL FAILS\\n\"); return 1; }}\n"
             f"    printf(\"outputs differ from the recorded failing outputs; judge them with the pytest replay command\\n\");\n"
             f"    return 0;")
    if where is not None and comp["mode"] in ("bitwise", "bound"):
        i, dt = where
        out_buf = [j for j, b in enumerate(call["buffers"]) if b["kind"] != "IN"][i]
        exp = case.arrays["expected"].reshape(-1).astype(np.float64)
        ctype = {4: "float", 8: "double"}.get(dt.itemsize)
        if ctype and dt.kind == "f":
            def lit(v: float) -> str:
                if math.isfinite(v):
                    return repr(float(v))
                return "NAN" if math.isnan(v) else ("INFINITY" if v > 0 else "-INFINITY")

            lits = ",".join(lit(v) for v in exp)
            decls.append(f"static const double expected[{exp.size}] = {{{lits}}};")
            b = (np.broadcast_to(case.arrays["bound"].astype(np.float64).reshape(-1), exp.shape)
                 if comp["mode"] == "bound" else np.zeros(exp.size))
            decls.append(f"static const double bounds[{exp.size}] = {{{','.join(lit(v) for v in b)}}};")
            tol = float(b.max())
            check = (f"    const {ctype} * got = reinterpret_cast<const {ctype} *>(c.bufs[{out_buf}].data());\n"
                     f"    int bad = 0;\n"
                     f"    for (int k = 0; k < {exp.size}; ++k) {{\n"
                     f"        double g = got[k], e = expected[k];\n"
                     f"        bool ok = (std::isnan(g) && std::isnan(e)) || g == e || std::fabs(g - e) <= bounds[k];\n"
                     f"        if (!ok && bad++ < 10) printf(\"[%d] got %.9g, expected %.9g\\n\", k, g, e);\n"
                     f"    }}\n"
                     f"    printf(\"%d of {exp.size} elements fail ({comp['mode']}, bound up to {tol!r})\\n\", bad);\n"
                     f"    return bad ? 1 : 0;")
    tgt = case.data["target"]
    src = f"""// rvvdiff standalone reproducer for {case.data['test']}
// ggml: {case.data['ggml']['label']} commit {case.data['ggml']['commit']}
// target: VLEN {tgt['vlen']}, ISA build {tgt['isa']} by {tgt.get('compiler', 'clang')}
// Calls the kernel adapter "{call['kernel']}" directly (no protocol), with the recorded inputs.
#include "server.h"
#include "ggml-cpu.h"
#include <cmath>
#include <cstdio>
#include <cstring>

{chr(10).join(decls)}

static void print_floats(size_t i, const void * p, size_t n) {{
    printf("output %zu as float32:", i);
    for (size_t k = 0; k < n && k < 16; ++k) printf(" %.9g", static_cast<const float *>(p)[k]);
    printf(n > 16 ? " ...\\n" : "\\n");
}}

static void add_buffer(rvvdiff::Call & c, uint32_t kind, size_t size, int fill, const unsigned char * data) {{
    rvvdiff::Buffer b;
    b.kind = kind;
    b.allocate(size, kind == rvvdiff::BUF_IN ? rvvdiff::GUARD_BYTE_IN : rvvdiff::GUARD_BYTE_OUT);
    if (data) memcpy(b.data(), data, size); else memset(b.data(), fill, size);
    c.bufs.push_back(static_cast<rvvdiff::Buffer &&>(b));
}}

int main() {{
    ggml_cpu_init();
    rvvdiff::Call c;
    c.name = "{call['kernel']}";
    c.ip = {{{', '.join(str(int(v)) for v in call['ip'])}}};
    c.fp = {{{', '.join(repr(float(v)) for v in call['fp'])}}};
{chr(10).join(setup)}
    rvvdiff::KernelFn fn = nullptr;
    for (const auto & k : rvvdiff::registry()) if (c.name == k.name) fn = k.fn;
    if (!fn) {{ printf("kernel %s is not in this build\\n", c.name.c_str()); return 2; }}
    printf("VLEN %d: calling %s\\n", ggml_cpu_get_rvv_vlen() * 8, c.name.c_str());
    if (fn(c) != rvvdiff::ST_OK) {{ printf("adapter rejected the call: %s\\n", c.err.c_str()); return 2; }}
    for (size_t i = 0; i < c.bufs.size(); ++i) {{
        long where = 0;
        if (!c.bufs[i].guards_intact(where)) {{ printf("wrote outside buffer %zu at offset %ld\\n", i, where); return 1; }}
    }}
{check}
}}
"""
    path.write_text(src)
    return path


#: ggml types by name, for the kernels whose ggml-only program names the type (ggml.h's enum values).
_FLOAT_TYPES = {"f32": 0, "f16": 1, "bf16": 30}


def upstream_call(call: dict[str, Any]) -> tuple[int, int] | None:
    """(ggml type, n) when the recorded call is a vec_dot that ggml's public API reaches
    (``ggml_get_type_traits_cpu(type)->vec_dot``): the quantized dots' entry point and the float
    dots.  Other adapters have no public equivalent; their reproducer is the adapter program."""
    k, ip = call["kernel"], call["ip"]
    if k == "quant_vec_dot" and len(ip) == 3 and ip[2] == 0:
        return int(ip[0]), int(ip[1])
    if k.startswith("vec_dot_") and k[8:] in _FLOAT_TYPES and len(ip) == 1:
        return _FLOAT_TYPES[k[8:]], int(ip[0])
    return None


def upstream_reproducer(case: Case, path: Path) -> Path | None:
    """A C program that needs only ggml (ggml.h, ggml-cpu.h and the two libraries): the failing
    vec_dot through the CPU type traits with the recorded rows, printing got and expected and
    exiting 1 while they differ by more than the bound.  None when the kernel has no such form."""
    call = case.call
    tn = upstream_call(call)
    comp = case.data.get("comparison") or {}
    if tn is None or "expected" not in case.arrays:
        return None
    t, n = tn
    exp = float(case.arrays["expected"].reshape(-1)[0])
    tol = (float(case.arrays["bound"].reshape(-1)[0]) if comp.get("mode") == "bound" and "bound" in case.arrays
           else 0.0)
    x, y = (case.arrays[f"buf{i}"].tobytes() for i in (0, 1))

    tgt, ggml = case.data["target"], case.data["ggml"]
    stress = ", agnostic elements written with ones (QEMU rvv_ta_all_1s / rvv_ma_all_1s)" if tgt.get("stress") else ""
    src = f"""// Reproducer: {case.data['test']}
// ggml {ggml['label']} commit {ggml['commit']}; VLEN {tgt['vlen']}, ISA build {tgt['isa']}{stress}.
// The shrunk case rvvdiff found: x is one row of ggml type {t}, y one row of its vec_dot_type, n = {n}.
#include "ggml.h"
#include "ggml-cpu.h"
#include <math.h>
#include <stdio.h>

{arr("x", x)}
{arr("y", y)}

int main(void) {{
    ggml_cpu_init();
    const enum ggml_type type = (enum ggml_type) {t};
    float s = 0.0f;
    ggml_get_type_traits_cpu(type)->vec_dot({n}, &s, 0, x, 0, y, 0, 1);
    const double expected = {exp!r}, bound = {tol!r};
    printf("VLEN %d: vec_dot of %s, n = {n}: got %.9g, expected %.9g\\n", ggml_cpu_get_rvv_vlen() * 8,
           ggml_type_name(type), s, expected);
    return !(fabs(s - expected) <= bound);
}}
"""
    path.write_text(src)
    return path
