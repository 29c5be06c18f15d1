"""The recorded call of a failure report as a public ggml graph, or why it has none.

``rvvdiff report CASE_DIR --upstream`` turns a failure report into an issue for ggml's maintainers;
its program goes through ggml's public API only (``ggml.h``, ``ggml-cpu.h``, ``ggml-backend.h``): the
failing call as a one-node graph computed on the CPU backend.  Each kind of call has a form, a record of
what the program builds: :class:`MulMat` (``ggml_mul_mat``, the weights in the CPU backend's extra buffer
type ``CPU_REPACK`` when the call went through repacked code), and harness/upstream/public_ops.py's
``OpGraph`` (one op on sources that may be permuted views: SpacemiT's backend claims NORM, ADD, CPY ... for
every graph) and ``FlashAttn`` (``ggml_flash_attn_ext``).  Their inputs are the shrunk case's bytes; their
expected numbers are the oracle's, with the comparison's bound (:func:`expected_of`); a call that crashed
where the test ran has none, and the program's run is the verdict.

A call that no public op reaches (a ``*_generic`` twin called directly, a kernel ggml defines but
never calls, a repack layout the selection never picks, SpacemiT's quantizers and layouts that only its
IME GEMMs reach) has no public form: :func:`public_form` says why, and the report says so instead of
pretending.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.ggml.source import GgmlSource, resolve
from harness.report.failure import Case
from harness.upstream import public_ops
from harness.upstream.public_base import SPACEMIT_DIRECT, NoPublicForm, Public, expected_of

#: The float dot kernels and the ggml type of both their rows.
_FLOAT_DOTS = {"vec_dot_f32": "f32", "vec_dot_f16": "f16", "vec_dot_bf16": "bf16"}


def enumerator(name: str) -> str:
    """ggml's enumerator of a type name (``q4_K`` -> ``GGML_TYPE_Q4_K``; the inverse of
    :func:`harness.ggml.tree.type_name`)."""
    return "GGML_TYPE_" + name.upper()


def source_of(case: Case) -> GgmlSource:
    """The tree the case ran against (the pinned tree, or the recorded root of another)."""
    g = case.data["ggml"]
    return resolve(None if g["label"].startswith("pinned") else g["root"])


@dataclass
class MulMat(Public):
    """The failing call as ``C = ggml_mul_mat(A, B)``: A is ``m`` rows of ``k`` elements of
    ``a_type``, B ``n`` rows of ``k`` elements of ``b_type`` (ggml type names, ``q4_0``; None: the
    vec_dot_type of A's type, looked up at run time through ``ggml_get_type_traits_cpu``), C ``n`` x
    ``m`` floats (``expected``: n * m values, C's memory order)."""

    a_type: str
    b_type: str | None
    k: int
    m: int
    n: int
    a: bytes
    b: bytes
    repack: bool = False
    #: The extra buffer type the weights go to when ``repack`` (by its name; SpacemiT's: harness/upstream/spacemit_ime.py).
    buft: str = "CPU_REPACK"


class _Types:
    """The ggml types of the tree the case ran against, by the enum value the case recorded."""

    def __init__(self, types: Mapping[str, int]):
        self.names = {v: k for k, v in types.items()}
        self.types = types

    def name(self, t: int, where: str) -> str:
        """The type name of enum value ``t`` (NoPublicForm when the tree has no such value)."""
        if t not in self.names:
            raise NoPublicForm(f"{where}: ggml type {t} is not in the tree's enum ggml_type (it has "
                               f"{min(self.names)}..{max(self.names)}): was the case recorded against another tree?")
        return self.names[t]

    def named(self, name: str, where: str) -> str:
        """``name`` when the tree has that type (NoPublicForm when not)."""
        if name not in self.types:
            raise NoPublicForm(f"{where}: the tree has no ggml type {name}")
        return name


def public_form(case: Case, types: Mapping[str, int]) -> Public:
    """The recorded call as a public ggml graph, or :class:`NoPublicForm` with the reason.  ``types``: the ggml
    types of the tree the case ran against, name -> enum value (``harness.ggml.tree.of(source).types``,
    :func:`source_of`): the recorded call names types by that tree's values."""
    tree = _Types(types)
    call = case.call
    kernel, ip = call.get("kernel"), [int(v) for v in call.get("ip", [])]
    bufs = [case.arrays.get(f"buf{i}") for i in range(len(call.get("buffers", [])))]
    ctx = (case.data.get("comparison") or {}).get("context", "")
    named = re.match(r"ggml_\w+", ctx)  # the op or function the comparison names first
    function = named.group(0) if named else ""
    if kernel == "quant_vec_dot" and len(ip) == 3:
        t, n, impl = ip
        a = tree.name(t, "quant_vec_dot")
        if impl != 0:
            raise NoPublicForm(f"the case calls the *_generic twin of {a.upper()}'s vec_dot directly; "
                               "no op reaches it in an RVV build")
        exp, bound = expected_of(case, 1)
        return MulMat(a, None, n, 1, 1, bufs[0].tobytes(), bufs[1].tobytes(), expected=exp, bound=bound,
                      what=f"one {a.upper()} row times one row of its vec_dot_type, k = {n}: "
                           "mul_mat calls the type's vec_dot once",
                      function=function or f"the {a.upper()} vec_dot")
    if kernel in _FLOAT_DOTS and len(ip) == 1:
        t, n = tree.named(_FLOAT_DOTS[kernel], kernel), ip[0]
        exp, bound = expected_of(case, 1)
        return MulMat(t, t, n, 1, 1, bufs[0].tobytes(), bufs[1].tobytes(), expected=exp, bound=bound,
                      what=f"one {t.upper()} row times one {t.upper()} row, k = {n}",
                      function=function or f"ggml_{kernel}")
    if kernel == "mul_mat" and len(ip) == 9:
        ta_id, tb_id, k, m, n, lda, batch, bcast, _threads = ip
        ta, tb = tree.name(ta_id, "mul_mat"), tree.name(tb_id, "mul_mat")
        if lda != k or batch != 1 or bcast != 1:
            raise NoPublicForm(f"mul_mat with padded rows or batches (lda={lda}, batch={batch}, bcast={bcast}): "
                               "only the 2-D form is written as a program")
        exp, bound = expected_of(case, m * n)
        return MulMat(ta, tb, k, m, n, bufs[0].tobytes(), bufs[1].tobytes(),
                      expected=exp, bound=bound, what=f"mul_mat of {m} {ta.upper()} rows and {n} {tb.upper()} rows, k = {k}",
                      function=function or "ggml_mul_mat")
    if kernel == "repack_mul_mat" and len(ip) == 7:
        t_id, k, m, n, batch, placement, _threads = ip
        t = tree.name(t_id, "repack_mul_mat")
        if batch != 1:
            raise NoPublicForm("repack_mul_mat with batches: only the 2-D form is written as a program")
        if placement == 2:
            raise NoPublicForm(SPACEMIT_DIRECT["repack_mul_mat"])
        exp, bound = expected_of(case, m * n)
        return MulMat(t, tree.named("f32", kernel), k, m, n, bufs[0].tobytes(), bufs[1].tobytes(), expected=exp,
                      bound=bound,
                      repack=placement == 1,
                      what=f"mul_mat of {m} {t.upper()} rows" + (" in the CPU_REPACK buffer" if placement == 1 else "")
                           + f" and {n} F32 rows, k = {k}", function=function or "ggml_mul_mat")
    if kernel in ("repack_gemx", "repack_layout", "repack_quantize_mat"):
        raise NoPublicForm(f"{kernel} calls the repack code of one layout directly (declared in ggml's internal "
                           "repack.h); mul_mat reaches it only where the tree's selection "
                           "(ggml_repack_get_optimal_repack_type) picks that layout at that VLEN")
    if kernel in ("op", "attention"):  # SpacemiT's ops (and ggml's own), flash attention
        return public_ops.form(case, tree, function)
    if kernel in SPACEMIT_DIRECT:
        raise NoPublicForm(SPACEMIT_DIRECT[kernel])
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


# ------------------------------------------------------------------ exact repacked mul_mat (no recorded case)

#: Weight types :func:`exact_repack` can write, with (weight rows m, row length k, activation rows n): m a
#: multiple of 16 (every RISC-V layout's interleave), n = 5 (one 4-row GEMM group and one GEMV row).
EXACT_SHAPES = {"q4_0": (16, 64, 5), "q4_K": (16, 256, 5)}


def _q4_0_block(q: np.ndarray) -> bytes:
    """One q4_0 block of d = 1 and the 32 unsigned 4-bit values ``q`` (the element is ``q - 8``)."""
    qs = (q[:16] | (q[16:] << 4)).astype(np.uint8)
    return np.float16(1).tobytes() + qs.tobytes()


def _q4_K_block(q: np.ndarray, sc: np.ndarray, mn: np.ndarray) -> bytes:
    """One q4_K super-block of d = dmin = 1: 256 values ``q`` (0-15), per sub-block of 32 a scale ``sc`` and
    a min ``mn`` (0-15: the 6-bit fields' high bits stay 0); element = sc * q - mn."""
    scales = np.zeros(12, np.uint8)
    scales[:4], scales[4:8] = sc[:4], mn[:4]
    scales[8:] = sc[4:] | (mn[4:] << 4)
    qs = np.concatenate([q[64 * c:64 * c + 32] | (q[64 * c + 32:64 * c + 64] << 4) for c in range(4)]).astype(np.uint8)
    return np.float16(1).tobytes() + np.float16(1).tobytes() + scales.tobytes() + qs.tobytes()


def exact_repack(weight: str, seed: int = 1) -> Public:
    """``C = ggml_mul_mat(W, X)`` with W in CPU_REPACK, exact by construction: every scale a small integer (d = 1),
    the F32 activations integers in [-63, 63] with one -127 per block, so ggml's q8_0 / q8_K quantization of X
    is exact (its scale is 1) and every product, sub-block sum and row sum is an integer far below 2^24 (below
    2^15 per sub-block, so no 16-bit sum overflows): the result is exact in any order, and the bound is 0."""
    if weight not in EXACT_SHAPES:
        raise NoPublicForm(f"no exact repacked program for {weight} (only {', '.join(EXACT_SHAPES)})")
    m, k, n = EXACT_SHAPES[weight]
    rng = np.random.default_rng(seed)
    qb = 32 if weight == "q4_0" else 256
    x = rng.integers(-63, 64, size=(n, k)).astype(np.int64)
    q = rng.integers(0, 16, size=(m, k)).astype(np.int64)
    x[:, ::qb] = -127  # the block's largest magnitude: q8 scale exactly 1
    q[:, ::qb] = 8 if weight == "q4_0" else 0  # ... and a zero weight there (the sums stay small)
    if weight == "q4_0":
        w = q - 8
        blocks = b"".join(_q4_0_block(q[r, i:i + 32]) for r in range(m) for i in range(0, k, 32))
    else:
        sc = rng.integers(1, 16, size=(m, k // 32)).astype(np.int64)
        mn = rng.integers(0, 16, size=(m, k // 32)).astype(np.int64)
        w = np.repeat(sc, 32, axis=1) * q - np.repeat(mn, 32, axis=1)
        blocks = b"".join(_q4_K_block(q[r, i:i + 256], sc[r, i // 32:i // 32 + 8], mn[r, i // 32:i // 32 + 8])
                          for r in range(m) for i in range(0, k, 256))
    expected = (x @ w.T).reshape(-1).astype(np.float64)  # C is n rows of m: C[j, i] = sum_l x[j, l] w[i, l]
    assert np.abs(expected).max() < 2 ** 24
    return MulMat(weight, "f32", k, m, n, blocks, x.astype(np.float32).tobytes(), expected=expected, bound=np.zeros(m * n),
                  repack=True, what=f"mul_mat of {m} {weight.upper()} rows in the CPU_REPACK buffer and {n} F32 rows, "
                                    f"k = {k}", inputs="inputs exact by construction (integer scales and values: "
                                    "any order of summation gives the expected numbers)")
