"""The recorded call of a failure report as a public ggml op, or why it has none.

``rvvdiff report CASE_DIR --upstream`` turns a failure report into an issue for ggml's maintainers;
its program goes through ggml's public API only (``ggml.h``, ``ggml-cpu.h``, ``ggml-backend.h``): the
failing call as a one-node graph (``ggml_mul_mat``) computed on the CPU backend, the weights in the CPU
backend's extra buffer type (``CPU_REPACK``) when the call went through repacked code.  Its inputs are
the shrunk case's bytes; its expected numbers are the oracle's, with the comparison's bound.

A call that no public op reaches (a ``*_generic`` twin called directly, a kernel ggml defines but
never calls, a repack layout the selection never picks) has no public form: :func:`public_form`
says why, and the report says so instead of pretending.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.report.failure import Case

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


def callers(tree: Path, function: str) -> list[str]:
    """Where ``tree``'s ggml sources name ``function`` other than defining it (file:line)."""
    out = []
    name = re.compile(rf"\b{re.escape(function)}\b")
    # a declaration or definition: type words before the name at the start of the line ("return" is no type)
    decl = re.compile(rf"^\s*(?!return\b)(?:[A-Za-z_]\w*[\s*]+)+{re.escape(function)}\s*\(")
    for f in sorted((tree / "src").rglob("*")):
        if f.suffix not in (".c", ".cpp", ".h", ".inc") or not f.is_file():
            continue
        for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            if name.search(line) and not decl.search(line):
                out.append(f"{f.relative_to(tree)}:{i}")
    return out
