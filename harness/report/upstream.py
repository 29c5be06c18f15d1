"""Upstream reports: a failure report turned into an issue text for ggml's maintainers.

``rvvdiff report CASE_DIR --upstream`` writes, next to the case:

- ``repro.c``: a standalone program through ggml's public API only (``ggml.h``, ``ggml-cpu.h``,
  ``ggml-backend.h``): the failing call as a one-node graph (``ggml_mul_mat``) computed on the CPU
  backend, the weights in the CPU backend's extra buffer type (``CPU_REPACK``) when the call went
  through repacked code.  Its inputs are the shrunk case's bytes; its expected numbers are the
  oracle's, with the comparison's bound.  It prints both and exits 1 while they differ.
- ``issue.md``: at most :data:`MAX_LINES` lines: a title naming the function, VLENs and ISA builds,
  what goes wrong, who hits it, the program, the commands that build and run it, and its verdict
  at every VLEN and ISA build, as run here.

The VLENs and builds the title names are not copied from anywhere: the program is built against
each ISA build of the tree and run at every QEMU VLEN (with the recorded tail/mask stress mode),
and the title lists exactly those where it fails.  With a fixed tree (a fix of
``harness/data/fixes/`` or ``--fixed TREE``) the same program is run against it, and the issue
says where it passes.

A call that no public op reaches (a ``*_generic`` twin called directly, a kernel ggml defines but
never calls, a repack layout the selection never picks) has no public form: :func:`public_form`
says why, and the report says so instead of pretending.
"""

from __future__ import annotations

import hashlib
import math
import re
import shlex
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.build import stock
from harness.build.builds import Build, ensure_built
from harness.build.toolchain import compiler
from harness.core.config import ISA_BUILDS, STRESS_PROPS, IsaBuild, cache_dir
from harness.core.errors import RvvdiffError
from harness.core.proc import run
from harness.emulators import qemu as Q
from harness.emulators.base import Emulator
from harness.ggml.source import GgmlSource
from harness.report.failure import Case

#: The issue text's length limit (the program and the table included).
MAX_LINES = 60

#: ggml type names by enum value, for the types a public form can hold (ggml.h's enum).
TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
              10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS",
              17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS",
              29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4", 41: "Q1_0"}

_FLOAT_DOTS = {"vec_dot_f32": 0, "vec_dot_f16": 1, "vec_dot_bf16": 30}


class NoPublicForm(Exception):
    """The recorded call has no equivalent through ggml's public API (the message says why)."""


@dataclass
class Public:
    """The failing call as ``C = ggml_mul_mat(A, B)``: A is ``m`` rows of ``k`` elements of
    ``a_type``, B ``n`` rows of ``k`` elements of ``b_type`` (None: the vec_dot_type of A's type,
    looked up at run time through ``ggml_get_type_traits_cpu``), C ``n`` x ``m`` floats."""

    a_type: int
    b_type: int | None
    k: int
    m: int
    n: int
    a: bytes
    b: bytes
    expected: np.ndarray  # n * m values, C's memory order
    bound: np.ndarray  # per element (0: bitwise)
    repack: bool = False
    #: What the program computes, in ggml's words (one line, a comment in the program).
    what: str = ""
    #: The function the case exists for (the title names it).
    function: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def b_spec(self) -> str:
        return f"GGML_TYPE_{TYPE_NAMES[self.b_type]}" if self.b_type is not None else \
            "ggml_get_type_traits_cpu(A_TYPE)->vec_dot_type"


def _type(t: int, where: str) -> int:
    if t not in TYPE_NAMES:
        raise NoPublicForm(f"{where}: ggml type {t} is not one rvvdiff writes a public program for")
    return t


def _expected(case: Case, size: int) -> tuple[np.ndarray, np.ndarray]:
    comp = case.data.get("comparison") or {}
    if "expected" not in case.arrays:
        emu = case.data.get("target", {}).get("emulator", "qemu")
        said = [ln.strip() for ln in (case.call.get("server_message") or "").splitlines()
                if ln.strip() and "restarted" not in ln and not ln.startswith("***")]
        if emu != "qemu":
            raise NoPublicForm(f"the call crashes under {emu} only ({' '.join(said)[:400] or 'no result'}); the upstream "
                               "program compares numbers under QEMU, which does not show it")
        raise NoPublicForm("the report recorded no expected values (a crash or a path check): "
                           "the program would have nothing to compare with")
    exp = case.arrays["expected"].reshape(-1).astype(np.float64)
    if exp.size != size:
        raise NoPublicForm(f"the recorded expected values ({exp.size}) are not the {size} outputs of the graph")
    mode = comp.get("mode")
    if mode == "bitwise":
        bound = np.zeros(size)
    elif mode == "bound" and "bound" in case.arrays:
        bound = np.broadcast_to(case.arrays["bound"].astype(np.float64).reshape(-1), (size,)).copy()
    else:
        raise NoPublicForm(f"the comparison ({mode}) has no absolute bound the program can apply; "
                           "use `rvvdiff repro --c` for this one")
    return exp, bound


def public_form(case: Case) -> Public:
    """The recorded call as a public ggml graph, or :class:`NoPublicForm` with the reason."""
    call = case.call
    kernel, ip = call.get("kernel"), [int(v) for v in call.get("ip", [])]
    bufs = [case.arrays.get(f"buf{i}") for i in range(len(call.get("buffers", [])))]
    ctx = (case.data.get("comparison") or {}).get("context", "")
    function = ctx.split(",")[0].strip() if ctx.startswith("ggml_") else ""
    if kernel == "quant_vec_dot" and len(ip) == 3:
        t, n, impl = ip
        if impl != 0:
            raise NoPublicForm(f"the case calls the *_generic twin of {TYPE_NAMES.get(t, t)}'s vec_dot directly; "
                               "no op reaches it in an RVV build")
        exp, bound = _expected(case, 1)
        return Public(_type(t, "quant_vec_dot"), None, n, 1, 1, bufs[0].tobytes(), bufs[1].tobytes(), exp, bound,
                      what=f"one {TYPE_NAMES[t]} row times one row of its vec_dot_type, k = {n}: "
                           "mul_mat calls the type's vec_dot once",
                      function=function or f"the {TYPE_NAMES[t]} vec_dot")
    if kernel in _FLOAT_DOTS and len(ip) == 1:
        t, n = _FLOAT_DOTS[kernel], ip[0]
        exp, bound = _expected(case, 1)
        return Public(t, t, n, 1, 1, bufs[0].tobytes(), bufs[1].tobytes(), exp, bound,
                      what=f"one {TYPE_NAMES[t]} row times one {TYPE_NAMES[t]} row, k = {n}",
                      function=function or f"ggml_{kernel}")
    if kernel == "mul_mat" and len(ip) == 9:
        ta, tb, k, m, n, lda, batch, bcast, _threads = ip
        if lda != k or batch != 1 or bcast != 1:
            raise NoPublicForm(f"mul_mat with padded rows or batches (lda={lda}, batch={batch}, bcast={bcast}): "
                               "only the 2-D form is written as a program")
        exp, bound = _expected(case, m * n)
        return Public(_type(ta, "mul_mat"), _type(tb, "mul_mat"), k, m, n, bufs[0].tobytes(), bufs[1].tobytes(),
                      exp, bound, what=f"mul_mat of {m} {TYPE_NAMES[ta]} rows and {n} {TYPE_NAMES[tb]} rows, k = {k}",
                      function=function or "ggml_mul_mat")
    if kernel == "repack_mul_mat" and len(ip) == 7:
        t, k, m, n, batch, placement, _threads = ip
        if batch != 1:
            raise NoPublicForm("repack_mul_mat with batches: only the 2-D form is written as a program")
        exp, bound = _expected(case, m * n)
        return Public(_type(t, "repack_mul_mat"), 0, k, m, n, bufs[0].tobytes(), bufs[1].tobytes(), exp, bound,
                      repack=placement == 1,
                      what=f"mul_mat of {m} {TYPE_NAMES[t]} rows" + (" in the CPU_REPACK buffer" if placement == 1 else "")
                           + f" and {n} F32 rows, k = {k}", function=function or "ggml_mul_mat")
    if kernel in ("repack_gemx", "repack_layout", "repack_quantize_mat"):
        raise NoPublicForm(f"{kernel} calls the repack code of one layout directly (declared in ggml's internal "
                           "repack.h); mul_mat reaches it only where the tree's selection picks that layout at "
                           "that VLEN (docs/repack.md); the adapter program of `rvvdiff repro --c` calls it")
    raise NoPublicForm(f"the {kernel or 'recorded'} call has no public form rvvdiff writes "
                       "(no op of ggml.h calls that function alone); `rvvdiff repro --c` writes the adapter program")


# ------------------------------------------------------------------ the program

def encode(data: bytes) -> str:
    """Bytes as hex, runs of three or more equal bytes as ``hh*N`` (the program's ``fill`` reads it)."""
    out, lit, i = [], "", 0
    while i < len(data):
        j = i
        while j < len(data) and data[j] == data[i]:
            j += 1
        if j - i >= 3:
            if lit:
                out.append(lit)
                lit = ""
            out.append(f"{data[i]:02x}*{j - i}")
        else:
            lit += data[i:j].hex()
        i = j
    if lit:
        out.append(lit)
    return " ".join(out)


def decode(text: str) -> bytes:
    """The inverse of :func:`encode` (what the program's ``fill`` does)."""
    out = bytearray()
    for tok in text.split():
        if "*" in tok:
            h, n = tok.split("*")
            out += bytes([int(h, 16)]) * int(n)
        else:
            out += bytes.fromhex(tok)
    return bytes(out)


def _hex_lines(name: str, data: bytes, width: int = 100) -> str:
    h = encode(data)
    if len(h) <= width - 10:
        return f'static const char * {name} = "{h}";'
    rows, row = [], ""
    for tok in h.split(" "):
        while len(tok) > width:  # a long literal: split between bytes (``width`` is even)
            if row:
                rows.append(row)
                row = ""
            rows.append(tok[:width])
            tok = tok[width:]
        if row and len(row) + 1 + len(tok) > width:
            rows.append(row)
            row = tok
        else:
            row = f"{row} {tok}" if row else tok
    rows.append(row)
    return f"static const char * {name} =\n" + "\n".join(f'    "{r} "' for r in rows) + ";"


def _lit(v: float) -> str:
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return repr(float(v))


def program(pub: Public, title: str) -> str:
    """The C source (also valid C++) of the public reproducer."""
    exp = ", ".join(_lit(v) for v in pub.expected)
    bnd = ", ".join(_lit(v) for v in pub.bound) if pub.bound.any() else "0"
    size, k = pub.expected.size, pub.k
    ta = f"GGML_TYPE_{TYPE_NAMES[pub.a_type]}"
    b_type = (f"GGML_TYPE_{TYPE_NAMES[pub.b_type]}" if pub.b_type is not None
              else "ggml_get_type_traits_cpu(a->type)->vec_dot_type")
    b_make = f"tensor(ctx, {b_type}, {k}, {pub.n}, B_HEX)"
    if pub.repack:
        # As llama.cpp places a weight: in CPU_REPACK when the device runs the op from there, else in CPU memory.
        a_make = (
            "    ggml_backend_reg_t reg = ggml_backend_cpu_reg();  ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);\n"
            "    typedef ggml_backend_buffer_type_t * (*extra_t)(ggml_backend_dev_t);\n"
            "    extra_t extra = (extra_t) ggml_backend_reg_get_proc_address(reg, \"ggml_backend_dev_get_extra_bufts\");\n"
            "    ggml_backend_buffer_type_t buft = NULL;\n"
            "    for (ggml_backend_buffer_type_t * t = extra(dev); t && *t; ++t)\n"
            "        if (!strcmp(ggml_backend_buft_name(*t), \"CPU_REPACK\")) buft = *t;\n"
            "    struct ggml_init_params wp = { ggml_tensor_overhead(), NULL, true };\n"
            "    struct ggml_context * wctx = ggml_init(wp);\n"
            f"    struct ggml_tensor * w = ggml_new_tensor_2d(wctx, {ta}, {k}, {pub.m});\n"
            "    if (!buft || !ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft)) return 2;\n"
            f"    struct ggml_tensor * a = tensor(ctx, {ta}, {k}, {pub.m}, A_HEX), * b = {b_make};\n"
            "    struct ggml_tensor * c = ggml_mul_mat(ctx, w, b);\n"
            "    int repacked = ggml_backend_dev_supports_op(dev, c);\n"
            "    if (repacked) ggml_backend_tensor_set(w, a->data, 0, ggml_nbytes(w)); else c = ggml_mul_mat(ctx, a, b);\n"
            "    printf(\"weights in %s\\n\", repacked ? \"CPU_REPACK\" : \"CPU memory (CPU_REPACK does not take them)\");\n")
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
    unsigned char * p = (unsigned char *) x->data;  unsigned v;  int n, len;
    while (sscanf(h, " %2x%n", &v, &len) == 1) {{
        h += len; n = 1;
        if (*h == '*' && sscanf(h + 1, "%d%n", &n, &len) == 1) h += 1 + len;
        while (n-- > 0) *p++ = (unsigned char) v;
    }}
    return x;
}}
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


# ------------------------------------------------------------------ building and running it here

@dataclass
class Verdict:
    tree: str  # "pinned" / "fixed"
    isa: str
    vlen: int
    failing: bool | None  # None: not built / not run (``text`` says why)
    text: str
    emulator: str = "qemu"


def public_includes(build: Build) -> list[str]:
    return [f for f in build.cflags if f.startswith("-I") and f.rstrip("/").endswith("/include")]


def build_program(src: Path, build: Build, out: Path, emulator: Emulator | None = None) -> Path:
    """Compile ``src`` with rvvdiff's compiler against the build's static libraries (C, then a C++ link:
    ggml-cpu has C++ objects); for Spike, linked with its runtime."""
    cc = compiler()
    march = [f for f in build.cflags if f.startswith(("-march", "-mabi"))]
    obj = out.with_suffix(".o")
    run([cc.cc, "-O1", *march, *public_includes(build), "-c", str(src), "-o", str(obj)], timeout=300,
        what=f"compiling {src.name} for the {build.isa.name} build")
    extra = emulator.link_args(build) if emulator is not None else []
    run([cc.cxx, str(obj), *map(str, build.libs), "-static", "-lm", "-lpthread", *extra, "-o", str(out)],
        timeout=300, what=f"linking {out.name}")
    return out


def run_program(exe: Path, isa: IsaBuild, vlen: int, stress: bool, emulator: Emulator | None = None,
                timeout: float = 300, trap: bool = False) -> tuple[bool | None, str]:
    """Run the program under QEMU (default) or ``emulator``: (wrong?, its output); None: no verdict.
    ``trap``: the finding is a trap, not a number: the verdict is whether the program stopped abnormally
    (a signal under QEMU, a trap under Spike) instead of exiting with 0 or 1."""
    import subprocess

    emu = emulator or Q.qemu()
    props = {**isa.qemu, **(STRESS_PROPS if stress else {})}
    lacking = emu.lacking(props)
    if lacking:
        return None, emu.lacking_reason(lacking, f"VLEN {vlen}, {isa.name}")
    argv = emu.command(exe, vlen, props)
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"did not finish in {timeout:g} s"
    text = (r.stdout + r.stderr).strip()
    if trap:
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("***")]
        return r.returncode not in (0, 1), (f"exit {r.returncode}: " + " / ".join(lines[-2:]) if r.returncode not in (0, 1)
                                             else f"ran to the end (exit {r.returncode})")
    if r.returncode not in (0, 1):
        return None, f"exit {r.returncode}: {text.splitlines()[-1] if text else 'no output'}"
    return r.returncode == 1, text


def verify(src: Path, trees: dict[str, GgmlSource], isas: list[str], vlens: list[int], stress: bool,
           work: Path, emulator: Emulator | None = None, trap: bool = False) -> list[Verdict]:
    """The program built against each tree x ISA build and run at each VLEN (one run each, under QEMU
    or ``emulator``; ``trap``: judged by whether it traps, :func:`run_program`)."""
    out = []
    tag = f"-{emulator.name}" if emulator is not None else ""
    emu = emulator.name if emulator is not None else "qemu"
    for label, tree in trees.items():
        for name in isas:
            isa = ISA_BUILDS[name]
            try:
                build = ensure_built(tree, isa)
                exe = build_program(src, build, work / f"repro-{label}-{name}{tag}", emulator)
            except RvvdiffError as e:  # one line per build that cannot make the program
                msg = str(e).strip().splitlines()
                out += [Verdict(label, name, v, None, f"not built: {msg[0] if msg else type(e).__name__}",
                                emu) for v in vlens]
                continue
            for v in vlens:
                failing, text = run_program(exe, isa, v, stress, emulator, trap=trap)
                out.append(Verdict(label, name, v, failing, text, emu))
    return out


# ------------------------------------------------------------------ the issue text

def _vlens(found: list[int], tested: list[int]) -> str:
    found = sorted(set(found))
    if found and found == sorted(set(tested)):
        return f"every VLEN ({found[0]}-{found[-1]})"
    return "VLEN " + (", ".join(map(str, found)) or "none")


def title_of(function: str, verdicts: list[Verdict], stress: bool, trap: bool = False) -> str:
    mine = [v for v in verdicts if v.tree != "fixed"]
    bad = [v for v in mine if v.failing]
    builds = sorted({v.isa for v in bad}, key=list(ISA_BUILDS).index)
    where = ("every RVV build" if set(builds) == set(ISA_BUILDS) else "/".join(builds)
             + (" builds" if len(builds) > 1 else " build"))
    spike = f" under {bad[0].emulator.capitalize()}" if bad and len({v.emulator for v in bad}) == 1 and \
        bad[0].emulator != "qemu" else ""
    return (f"{function} (RISC-V RVV): {'traps' if trap else 'wrong result'} at "
            f"{_vlens([v.vlen for v in bad], [v.vlen for v in mine])}{spike}, "
            f"{where}" + (", when tail-agnostic elements are written with ones" if stress else ""))


def verdict_word(failing: bool | None, trap: bool = False) -> str:
    """A verdict in the tables: wrong / ok (trap / runs for a trap finding), or not run."""
    return ("trap" if trap else "wrong") if failing else ("runs" if trap else "ok") if failing is False else "not run"


def verdict_table(verdicts: list[Verdict], trap: bool = False) -> list[str]:
    """One row per tree and group of builds with the same verdicts (``trap``: "trap" / "runs")."""
    vlens = sorted({v.vlen for v in verdicts})
    rows = ["| tree | builds | " + " | ".join(f"VLEN {v}" for v in vlens) + " |", "|" + "---|" * (2 + len(vlens))]
    # Another emulator that ran VLENs QEMU ran too (a trap finding under Spike) gets rows of its own.
    both = {v.vlen for v in verdicts if v.emulator == "qemu"} & {v.vlen for v in verdicts if v.emulator != "qemu"}

    def row_of(v: Verdict) -> str:
        return f"{v.tree} ({v.emulator})" if both and v.emulator != "qemu" else v.tree

    for t in dict.fromkeys(row_of(v) for v in verdicts):
        groups: dict[tuple[str, ...], list[str]] = {}
        for i in sorted({v.isa for v in verdicts if row_of(v) == t}, key=list(ISA_BUILDS).index):
            cells = []
            for vl in vlens:
                m = [x for x in verdicts if row_of(x) == t and x.isa == i and x.vlen == vl]
                cells.append(verdict_word(m[0].failing if m else None, trap))
            groups.setdefault(tuple(cells), []).append(i)
        rows += [f"| {t} | {', '.join(isas)} | " + " | ".join(cells) + " |" for cells, isas in groups.items()]
    return rows


def first_wrong(verdicts: list[Verdict]) -> tuple[Verdict | None, list[str]]:
    for v in verdicts:
        if v.tree != "fixed" and v.failing:
            return v, [ln for ln in v.text.splitlines() if ln.strip()]
    return None, []


def _wrapped(argv: list[str], width: int = 160) -> list[str]:
    lines, cur = [], ""
    for w in argv:
        w = shlex.quote(w)
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur + " \\")
            cur = "  " + w
        else:
            cur = f"{cur} {w}" if cur else w
    return lines + [cur]


def build_lines(tree: GgmlSource, isa: IsaBuild, vlen: int, stress: bool) -> list[str]:
    """The stock-toolchain commands (harness/build/stock.py, as verified by :func:`verify_stock`) with
    the tree named ``llama.cpp`` (or ``ggml``) and the build directory ``rv``."""
    name = "llama.cpp" if tree.ggml != tree.root else "ggml"

    def rel(argv: list[str]) -> list[str]:
        return [a.replace(str(tree.root), name) for a in argv if a != "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"]

    configure, build = stock.build_argvs(tree.root, isa, "clang", Path("rv"))
    link = stock.link_argv(Path("repro.c"), Path("repro"), tree=tree.root, build_dir=Path("rv"), toolchain="clang")
    run_ = [*stock.run_argv(Path("repro"), vlen, isa, stress, half_avl=stress, qemu="qemu-riscv64")[:-1], "./repro"]
    return ["```sh", *_wrapped(rel(configure)), *_wrapped(rel(build)), *_wrapped(rel(link)),
            *_wrapped(run_, 400), "```"]


def verify_stock(tree: GgmlSource, label: str, isa: IsaBuild, vlen: int, stress: bool, src: Path,
                 work: Path) -> Verdict:
    """The program built with the stock toolchain's commands (Debian's clang, ggml's CMake) and run once."""
    import subprocess

    why = stock.missing("clang")
    if why:
        return Verdict(label, isa.name, vlen, None, why)
    key = hashlib.sha256(str(tree.root).encode()).hexdigest()[:12]
    try:
        exe = stock.build_program(tree.root, isa, "clang", cache_dir() / "stock" / f"{key}-{isa.name}", src,
                                  work / f"repro-{label}-{isa.name}-clang")
    except RvvdiffError as e:
        return Verdict(label, isa.name, vlen, None, f"not built with {stock.CLANG}: {str(e).splitlines()[0]}")
    r = subprocess.run(stock.run_argv(exe, vlen, isa, stress, half_avl=stress), capture_output=True, text=True,
                       timeout=300)
    if r.returncode not in (0, 1):
        return Verdict(label, isa.name, vlen, None, f"exit {r.returncode}: {(r.stdout + r.stderr).strip()[-200:]}")
    return Verdict(label, isa.name, vlen, r.returncode == 1, r.stdout.strip())


def paragraph(md: str, label: str) -> str:
    """The paragraph of a short fix report that starts with ``**label.**``, on one line ('' if none)."""
    m = re.search(rf"^\*\*{re.escape(label)}\.\*\*\s*(.+?)(?:\n\s*\n|\Z)", md, re.M | re.S)
    return " ".join(m.group(1).split()) if m else ""


def _sentence(s: str) -> str:
    s = s.strip()
    return s if not s or s.endswith((".", "!", "?")) else s + "."


def issue(case: Case, pub: Public, src_text: str, verdicts: list[Verdict], *, stress: bool, isa_example: IsaBuild,
          vlen_example: int, tree: GgmlSource, stock_runs: list[Verdict] = (), cause: str = "", impact: str = "",
          fix: str = "", trap: bool = False) -> str:
    """The issue text (markdown): :data:`MAX_LINES` at most with the program inline, else the program is
    named as an attachment (``repro.c``)."""
    ggml = case.data["ggml"]
    wrong, out = first_wrong(verdicts)
    if wrong is not None:
        isa_example, vlen_example = ISA_BUILDS[wrong.isa], wrong.vlen
    head = [f"### {title_of(pub.function, verdicts, stress, trap)}",
            f"**What goes wrong.** {_sentence(cause or (case.data.get('comparison') or {}).get('name', ''))}"
            + (" It depends on what the hart writes into tail-agnostic elements: QEMU shows it with "
               "`rvv_ta_all_1s=true,rvv_ma_all_1s=true` (real chips may write ones); with QEMU's default it passes."
               if stress else "")
            + (" The program stops with a trap where the hart refuses the access: Spike does (its table below); "
               "QEMU lets the access through, so under QEMU the program runs to the end and checks its numbers."
               if trap else "")]
    if impact:
        head += ["", f"**Who hits it.** {impact}"]
    head += ["", f"Tree: {ggml['label']}, commit {ggml['commit']}. The program: {pub.what}, "
                 "with the inputs of a shrunk case (ggml's public API only):"]
    prog = ["```c", *src_text.rstrip("\n").splitlines(), "```"]
    tail = [f"Build and run (Debian bookworm: `{stock.APT_INSTALL.split(' -y ')[1]}`, qemu-user >= 10):",
            *build_lines(tree, isa_example, vlen_example, stress)]
    if trap:
        tail += ["Under QEMU this runs to the end (QEMU does not trap on the access); the trap shows on a hart that "
                 "refuses it, such as Spike (the table's Spike runs link the same program with rvvdiff's bare-metal "
                 "runtime: `rvvdiff report --upstream --spike`)."]
    said = {True: "trap" if trap else "wrong", False: "no trap" if trap else "right", None: "not run"}
    ran = ""
    if stock_runs:
        ran = "These commands, run here: " + "; ".join(
            f"{v.tree} tree {said[v.failing]}" + (f" (`{' / '.join(v.text.splitlines()[:3])}`)" if v.text else "")
            for v in stock_runs) + ". "
        wrong = None  # its output is in that line
    on_spike = sorted({v.vlen for v in verdicts if v.emulator != "qemu"})
    spike = ("" if not on_spike else f" and Spike at VLEN {on_spike[0]}-{on_spike[-1]}, rows of their own"
             if on_spike[0] <= 1024 else f" (VLEN {', '.join(map(str, on_spike))} under Spike)")
    tail += [ran + (f"Output at VLEN {wrong.vlen}, {wrong.isa} build: `" + " / ".join(out[:3]) + "`. " if wrong else "")
             + f"Run here (QEMU {Q.qemu().version}{spike}), the program at every VLEN and ISA build"
             + (f" (fixed: with the patch `{fix}`)" if fix and any(v.tree == "fixed" for v in verdicts) else "") + ":",
             "", *verdict_table(verdicts, trap)]
    text = head + prog + tail
    if len(text) > MAX_LINES:
        text = head + [f"The program, `repro.c` ({len(prog) - 2} lines), is attached."] + tail
    return "\n".join(text).rstrip() + "\n"


def wrap(text: str, width: int = 110) -> str:
    return "\n".join(textwrap.fill(p, width) for p in text.split("\n"))


def shell(argv: list[str]) -> str:
    return shlex.join(argv)
