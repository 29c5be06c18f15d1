"""Float matrix multiplication (``ggml_mul_mat`` of F32 / F16 / BF16) on 1-4 threads against a float64 oracle.

Path (ggml-cpu.c ``ggml_compute_forward_mul_mat`` and llamafile/sgemm.cpp): with
GGML_LLAMAFILE, ``llamafile_sgemm`` is tried first.  Its RVV class
``tinyBLAS_RVV`` (LMUL 4: f32 vectors of e32m4, f16 / bf16 of e16m2, VLMAX =
VLEN / 8 elements either way) takes the product when

    n >= 2,  k % (VLEN / 8) == 0,  m % 4 == 0,  and A's type has a kernel in the build
    (pinned tree: f32 in any RVV build, f16 with zvfh, bf16 with zvfbfwma; the tests read
    it from the tree under test: ``tinyblas``, and the ``mul_mat`` coverage scan lists
    the instantiations no entry of ``KERNELS`` tests; the smallest n too, from the
    ``if (n < N) return false;`` on the way to each instantiation: ``TinyBlas.min_n``),

where m = rows of A (``ne01``), n = rows of B (``ne11``), k = the dot length.  A B of
another type than A is first converted to A's dot type (``from_float``: f32 -> f16 /
bf16, round to nearest even) and tinyBLAS is tried again.  It then runs
``gemm<RM=2, RN=2, BM>`` with BM = 8 if m % 16 == 0 and m / 16 >= threads, else 4 if
m % 8 == 0, else 2.  Otherwise mul_mat falls back to the type's ``ggml_vec_dot_*``
per output element.  ``test_mul_mat_path`` checks these conditions against what QEMU
saw execute; the value tests record the expected path per example.

Bound (both paths): every output is a dot product of length k.  tinyBLAS_RVV
accumulates k / VLMAX products per vector lane with fused multiply-adds (f16 x f16
and bf16 x bf16 products are exact in f32: vfwmacc / vfwmaccbf16 round only the sum),
then adds the lanes with vfredusum in an unspecified order; the vec_dot kernels do
the same (or accumulate in double).  One rounding per term, any summation order, one
final store: ``|got - exact| <= gamma(k + 1) * sum_l |a_l b_l|`` with u = 2^-24, b
already rounded to A's type (the conversion above is exact to model), plus the
float64 oracle's own k 2^-53 sum|a b|.  A second test uses small integers whose
every partial sum is exact in f32: the result must be exact, so a missing, doubled
or misplaced term always shows.

Sizes: both value tests check random shapes, then the shapes of ``loop_shapes`` (every loop level of
both paths -- k-steps, panels, column tiles, n-blocks, jobs and chunks over threads, B
matrices, the vec_dot strips -- crossed twice plus a remainder at every VLEN); one random
shape in four has a real-model k, m or n; ``drawn`` reports both to the size table
(cases/loops.py, docs/attention.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest
from hypothesis import strategies as st

from cases import coverage
from cases import loops as L
from cases import strategies as S
from cases.mul_mat_shapes import (
    BATCH_MAX,
    BN,
    FALLBACK_CHUNK,
    M_MAX,
    REAL_K,
    REAL_K_OFFSETS,
    REAL_M,
    REAL_N,
    RM,
    RN,
    Shape,
    block_rows,
    fallback_chunks,
    largest_shapes,
    loop_shapes,
    on_tinyblas,
    shapes,
    tinyblas_plan,
)
from cases.vec_source import ALL_EXTENSIONS, HEADERS, file_notes
from harness.check import observe
from harness.check.compare import assert_all_within, assert_bitwise_equal
from harness.core.config import ISA_BUILDS, IsaBuild
from harness.emulators.protocol import In, Out
from harness.ggml import csource, tree
from harness.ggml.source import GgmlSource
from harness.ggml.tree import Tree
from harness.plugin.targets import session
from oracles.bounds import gamma
from oracles.matmul import matmul, oracle_error

BOUND = "gamma(k+1) * sum|a_l b_l|, u = 2^-24: one rounding per term, any order, final store (+ oracle's k 2^-53)"


@dataclass(frozen=True, repr=False)
class MatMulKernel(S.KernelSpec):
    """One operand-type combination of ggml_mul_mat and where tinyBLAS_RVV exists for it."""

    name: str  # test id
    a: str  # A (src0) type
    b: str  # B (src1) type as stored; rounded to ``a`` before the product when different
    tinyblas_when: str  # extension that compiles tinyBLAS_RVV for A's type in the pinned tree
    vector: str  # tinyBLAS_RVV's vector type for A in the pinned tree, as in its mangled name (e.g. float16m2)

    @property
    def requires(self) -> tuple[str, ...]:
        """What the kernel server's adapter and the fallback call (harness/plugin/marks.py skips the
        kernel as "not in this tree" when the tree lacks one)."""
        return ("ggml_mul_mat", *dict.fromkeys(enumerator(t) for t in (self.a, self.b)), f"ggml_vec_dot_{self.a}")

    @property
    def entry_points(self) -> tuple[str, ...]:
        """The code these tests exist to check (the PR gate runs them at the thorough budget when
        it changes; harness/ggml/changes.py): the mul_mat op and what it calls, not the vec_dot it
        falls back to, which cases/vec_dot.py owns."""
        return ("ggml_mul_mat",)

    def path(self, isa: IsaBuild, vlen: int, k: int, m: int, n: int, threads: int) -> str:
        """The path ggml-cpu takes for this shape (the module docstring's conditions), with the
        tinyBLAS_RVV types the tree's llamafile_sgemm compiles in ``isa`` (``tinyblas``)."""
        tb = tinyblas(session().source, tuple(isa.extensions), vector=isa.vector).get(self.a)
        if tb is not None and on_tinyblas(vlen, k, m, n, tb.min_n):
            return f"tinyBLAS_RVV<{tb.vector}>::gemm<{RM},{RN},{block_rows(m, threads)}>"
        return f"ggml_vec_dot_{self.a}"


KERNELS = [
    MatMulKernel("f32", "f32", "f32", "v", "float32m4"),
    MatMulKernel("f16", "f16", "f16", "zvfh", "float16m2"),
    MatMulKernel("f16_f32", "f16", "f32", "zvfh", "float16m2"),
    MatMulKernel("bf16", "bf16", "bf16", "zvfbfwma", "bfloat16m2"),
    MatMulKernel("bf16_f32", "bf16", "f32", "zvfbfwma", "bfloat16m2"),
]
IDS = [k.name for k in KERNELS]


def enumerator(fmt: str) -> str:
    """ggml's type enumerator of a format: ``bf16`` -> ``GGML_TYPE_BF16``."""
    return f"GGML_TYPE_{fmt.upper()}"


def type_id(fmt: str) -> int:
    """The tree's ``enum ggml_type`` value of ``fmt`` (harness/ggml/tree.py), as the kernel server takes it."""
    return tree.of(session().source).type_id(fmt)


# ------------------------------------------------------------------ tinyBLAS_RVV in the tree

#: The tinyBLAS source (relative to the ggml directory) and its entry point.
SGEMM = "src/ggml-cpu/llamafile/sgemm.cpp"
#: tinyBLAS_RVV's A element type (its TA template argument) -> ggml format.
TINYBLAS_TA = {"float": "f32", "ggml_fp16_t": "f16", "ggml_bf16_t": "bf16"}
# tinyBLAS_RVV<D, V, TA, TB, TC> as llamafile_sgemm instantiates it.
_INSTANCE = re.compile(r"\btinyBLAS_RVV\s*<\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*>")


#: ``if (n < N) return false;`` in llamafile_sgemm: a batch below N never reaches tinyBLAS (``<=`` too).
_MIN_N = re.compile(r"\bif\s*\(\s*n\s*(<=?)\s*(\d+)\s*\)\s*\{?\s*return\s+false\b")


@dataclass(frozen=True)
class TinyBlas:
    """One tinyBLAS_RVV instantiation llamafile_sgemm compiles."""

    vector: str  # V as in the mangled name: vfloat16m2_t -> float16m2
    ta: str  # A's C type
    line: int  # in sgemm.cpp
    #: The smallest batch (B rows, n) llamafile_sgemm lets reach it in this build: the ``n < N`` returns
    #: before the switch and in the type's case ahead of the instantiation (pinned tree: 2, decoding
    #: takes the vec_dot fallback).
    min_n: int = 2


@cache
def tinyblas(src: GgmlSource, extensions: tuple[str, ...], *, vector: bool = True) -> dict[str, TinyBlas]:
    """A's format (or C type, for a type ggml's formats do not name) -> the tinyBLAS_RVV that the
    tree's ``llamafile_sgemm``, as a build with ``extensions`` compiles it, runs for it (the first
    one instantiated: the others are other LMULs of the same branch, compiled out).  Empty when the
    tree has no tinyBLAS_RVV (before 2026), or for a build without V (``vector`` False: rv64gc)."""
    if not (src.ggml / SGEMM).is_file():
        return {}
    inv = tree.of(src)
    headers = [inv.file(h) for h in HEADERS if (src.ggml / h).is_file()]
    f = inv.file(SGEMM).functions(csource.build_macros(extensions, headers, vector=vector)).get("llamafile_sgemm")
    if f is None:
        return {}
    first = f.end - f.body.count("\n")  # the line of the body's opening brace
    out: dict[str, TinyBlas] = {}
    for m in _INSTANCE.finditer(f.body):
        fmt = TINYBLAS_TA.get(m.group(3), m.group(3))
        out.setdefault(fmt, TinyBlas(m.group(2).removeprefix("v").removesuffix("_t"), m.group(3),
                                     first + f.body.count("\n", 0, m.start()), _min_n(f.body, m.start())))
    return out


def _min_n(body: str, at: int) -> int:
    """The smallest n that gets past every ``n < N`` return on the way to the instantiation at ``at`` of
    llamafile_sgemm's preprocessed ``body``: those before its ``switch`` and those of the ``case`` it is in."""
    switch = body.find("switch")
    case = body.rfind("case ", 0, at)
    text = body[:switch if switch >= 0 else at] + (body[case:at] if 0 <= switch < case else "")
    return max([int(n) + (op == "<=") for op, n in _MIN_N.findall(text)], default=1)


def switch_batches(src: GgmlSource) -> tuple[int, ...]:
    """The batches on both sides of every batch switch of the tree's tinyBLAS_RVV (``min_n - 1`` on the
    vec_dot fallback, ``min_n`` on tinyBLAS) in any ISA build that compiles it, smallest first."""
    edges = {tb.min_n for b in ISA_BUILDS.values() if b.vector
             for tb in tinyblas(src, tuple(b.extensions), vector=b.vector).values()}
    return tuple(sorted({n for e in edges for n in (e - 1, e) if n >= 1}))


def path_kind(path: str) -> str:
    """A path of ``MatMulKernel.path`` or ``executed_path`` with what it is: the vec_dot fallback named so."""
    return f"{path} (vec_dot fallback)" if path.startswith("ggml_vec_dot_") else path


@coverage.register("mul_mat")
def scan(inv: Tree) -> coverage.FamilyScan:
    """llamafile_sgemm's tinyBLAS_RVV instantiations (any ISA build): one whose A type no entry
    of KERNELS has is uncovered; an entry the tree lacks a name for is not in this tree; notes
    when the tree has no tinyBLAS_RVV, or compiles it for a type in other ISA builds or with
    another vector type than the pinned tree (the tests follow the tree: ``tinyblas``)."""
    src = inv.source
    out = coverage.FamilyScan("mul_mat")
    every = tinyblas(src, ALL_EXTENSIONS)
    tested = {k.a for k in KERNELS}
    for fmt, tb in sorted(every.items()):
        if fmt not in tested:
            out.uncovered.append(coverage.Uncovered(
                f"tinyBLAS_RVV<{tb.vector}> ({tb.ta})", f"{SGEMM}:{tb.line}",
                f"no entry of KERNELS (cases/mul_mat.py) has A of type {fmt}"))
    if not every:
        out.notes.append(f"no tinyBLAS_RVV in this tree's llamafile_sgemm ({SGEMM}): every mul_mat takes the "
                         "vec_dot fallback")
    for k in KERNELS:
        if out.lacks(inv, k) or not every or k.a not in every or k.a != k.b:
            continue
        builds = [b.name for b in ISA_BUILDS.values() if k.a in tinyblas(src, tuple(b.extensions))]
        pinned = [b.name for b in ISA_BUILDS.values() if k.tinyblas_when in b.extensions]
        if builds != pinned or every[k.a].vector != k.vector:
            out.notes.append(f"tinyBLAS_RVV<{every[k.a].vector}> for {k.a} in the ISA builds {', '.join(builds)} "
                             f"(pinned tree: <{k.vector}> in {', '.join(pinned)}); the tests follow this tree")
    out.notes += file_notes(src, (SGEMM,))
    return out


# ------------------------------------------------------------------ the size table (the loops: cases/mul_mat_shapes.py)

def drawn(vlen: int) -> dict[str, L.Drawn]:
    """What the tests draw of every size the loops iterate over, at ``vlen``: the sizes of
    ``loop_shapes`` (every run) on the path they take, and the random range of ``shapes``."""
    every = [(sh, tinyblas_plan(sh, vlen)) for sh in loop_shapes(vlen)]
    tb = [(sh, p) for sh, p in every if p is not None]
    fb = [sh for sh, p in every if p is None]
    big = largest_shapes(vlen)
    s = vlen // 8
    return {
        "k (tinyBLAS)": L.Drawn([sh.k for sh, _ in tb], s, max(REAL_K)),
        "m (BM=8)": L.Drawn([sh.m for sh, p in tb if p.bm == 8], 16, max(REAL_M)),
        "m (BM=4)": L.Drawn([sh.m for sh, p in tb if p.bm == 4], 8, M_MAX),
        "m (BM=2)": L.Drawn([sh.m for sh, p in tb if p.bm == 2], 4, M_MAX),
        "n (tinyBLAS)": L.Drawn([sh.n for sh, _ in tb], 2, max(REAL_N)),
        "jobs (2 threads)": L.Drawn([p.jobs for sh, p in tb if sh.threads == 2], 1,
                                    max(p.jobs for sh in big if (p := tinyblas_plan(sh, vlen)))),
        "B matrices": L.Drawn([sh.batch * sh.bcast for sh, _ in every], 1, BATCH_MAX ** 2),
        "k (vec_dot)": L.Drawn([sh.k for sh in fb], 1, max(REAL_K) + max(REAL_K_OFFSETS)),
        "m (vec_dot)": L.Drawn([sh.m for sh in fb], 1, max(REAL_M)),
        "n*batch*bcast (vec_dot)": L.Drawn([sh.n * sh.batch * sh.bcast for sh in fb], 1, max(REAL_N)),
        "chunks (2 threads)": L.Drawn([fallback_chunks(sh) for sh in fb if sh.threads == 2], 1,
                                      max(fallback_chunks(sh) for sh in big if tinyblas_plan(sh, vlen) is None)),
    }


L.register(L.Family(
    name="mul_mat", doc="docs/attention.md",
    loops=[
        L.Loop("tinyBLAS_RVV gemm_bloc_2x2 / 2x1", "k-steps (l += VLMAX, e32m4 / e16m2)", "k (tinyBLAS)",
               lambda vlen: vlen // 8, remainder=False, real=REAL_K, source="sgemm.cpp:tinyBLAS_RVV::gemm_bloc_2x2"),
        L.Loop("tinyBLAS_RVV gemm<2,2,8>", "panels of RM*BM = 16 rows (jobs)", "m (BM=8)", lambda vlen: RM * 8,
               remainder=False, real=REAL_M, source="sgemm.cpp:tinyBLAS_RVV::gemm"),
        L.Loop("tinyBLAS_RVV gemm<2,2,4>", "panels of RM*BM = 8 rows (jobs)", "m (BM=4)", lambda vlen: RM * 4,
               remainder=False, source="sgemm.cpp:tinyBLAS_RVV::gemm"),
        L.Loop("tinyBLAS_RVV gemm<2,2,2>", "panels of RM*BM = 4 rows (jobs)", "m (BM=2)", lambda vlen: RM * 2,
               remainder=False, source="sgemm.cpp:tinyBLAS_RVV::gemm"),
        L.Loop("tinyBLAS_RVV gemm", "column tiles of RN = 2, then a 2x1 edge tile", "n (tinyBLAS)",
               lambda vlen: RN, real=REAL_N, source="sgemm.cpp:tinyBLAS_RVV::gemm"),
        L.Loop("tinyBLAS_RVV gemm", "n-blocks of ~BN = 36 tiles (jobs), unequal when they do not divide",
               "n (tinyBLAS)", lambda vlen: BN * RN, real=REAL_N, source="sgemm.cpp:tinyBLAS_RVV::gemm"),
        L.Loop("tinyBLAS_RVV gemm", "jobs over 2 threads (job ith, then chunk_add)", "jobs (2 threads)",
               lambda vlen: 2, source="sgemm.cpp:tinyBLAS_RVV::gemm"),
        L.Loop("ggml_compute_forward_mul_mat", "one llamafile_sgemm per B matrix (A broadcast)", "B matrices",
               lambda vlen: 1, remainder=False, source="ggml-cpu.c:ggml_compute_forward_mul_mat"),
        L.Loop("ggml_vec_dot_f32", "strip-mining, vsetvl e32m8", "k (vec_dot)", lambda vlen: vlen // 4,
               real=REAL_K, source="vec.cpp:ggml_vec_dot_f32"),
        L.Loop("ggml_vec_dot_f16 (zvfh)", "strip-mining, vsetvl e16m1", "k (vec_dot)", lambda vlen: vlen // 16,
               real=REAL_K, source="vec.cpp:ggml_vec_dot_f16"),
        L.Loop("ggml_vec_dot_bf16 (zvfbfwma)", "main loop unrolled by 2, e16m2 (leftover: vsetvl e16m2)",
               "k (vec_dot)", lambda vlen: vlen // 4, real=REAL_K, source="vec.cpp:ggml_vec_dot_bf16"),
        L.Loop("mul_mat vec_dot fallback", "blocks / chunks of 16 rows of A", "m (vec_dot)",
               lambda vlen: FALLBACK_CHUNK, real=REAL_M, source="ggml-cpu.c:ggml_compute_forward_mul_mat_one_chunk"),
        L.Loop("mul_mat vec_dot fallback", "blocks / chunks of 16 B rows (all B matrices)", "n*batch*bcast (vec_dot)",
               lambda vlen: FALLBACK_CHUNK, real=REAL_N, source="ggml-cpu.c:ggml_compute_forward_mul_mat_one_chunk"),
        L.Loop("mul_mat vec_dot fallback", "chunks over 2 threads (chunk ith, then atomic add)", "chunks (2 threads)",
               lambda vlen: 2, source="ggml-cpu.c:ggml_compute_forward_mul_mat"),
    ],
    drawn=drawn,
    notes=(
        "Every run checks the shapes of `loop_shapes` (in `test_mul_mat` and `test_mul_mat_exact`, after the "
        "random draws, so a failure they find is reported shrunk); one random shape in four has one real-model size "
        "(k 2048-14336, m 2048-4096 or n 512) "
        "with the other two small.",
        "k on tinyBLAS_RVV is a multiple of VLMAX = VLEN / 8 by its entry condition (no remainder); any other k "
        "takes the vec_dot fallback.  The bf16 leftover loop (e16m2, at most VLEN / 4 - 1 elements) runs on "
        "the remainder of the unrolled loop's witness.",
        "The row blocks of RM = 2 inside a panel run exactly BM times (a constant), the per-thread conversion "
        "of B to A's type (f16_f32, bf16_f32) splits k among the threads in one pass.",
    )))


@dataclass(frozen=True)
class MatMulCase:
    """A shape and its operands: A [batch, m, k], B [batch * bcast, n, k] (B as stored)."""

    shape: Shape
    a: np.ndarray
    b: np.ndarray
    origin: str  # "loop_shapes" or "drawn"

    def __repr__(self) -> str:  # printed for a failure: the shape, not megabytes of data
        return f"MatMulCase({self.shape}, {self.origin})"

    def _repr_pretty_(self, p, cycle: bool) -> None:  # Hypothesis's printer would list every field
        p.text(repr(self))


def _nudge(kernel: MatMulKernel, b: np.ndarray, seed: int) -> np.ndarray:
    """B with values of its own format that A's format cannot hold: the conversion must round them."""
    if kernel.b == kernel.a:
        return b
    rng = np.random.default_rng(seed)
    return (b * (1 + rng.uniform(-2.0 ** -12, 2.0 ** -12, b.shape))).astype(np.float32)


@st.composite
def cases(draw: st.DrawFn, kernel: MatMulKernel, vlen: int, kind: str) -> MatMulCase:
    """A random shape of ``shapes`` and operands of ``kind`` ("floats" of every value kind, or
    small "integers" whose products and sums are exact)."""
    sh = draw(shapes(vlen), label="shape")

    def fill(rows: int, label: str) -> np.ndarray:
        size = rows * sh.k
        if kind == "integers":
            return draw(S.small_integer_vectors(size), label=label).reshape(rows, sh.k)
        return draw(S.float_vectors(size, kernel.a), label=label).reshape(rows, sh.k)

    a = np.stack([fill(sh.m, f"a{i}") for i in range(sh.batch)])
    b = np.stack([fill(sh.n, f"b{i}") for i in range(sh.batch * sh.bcast)])
    if kind != "integers":
        b = _nudge(kernel, b, draw(st.integers(0, 2**32 - 1), label="nudge_seed"))
    return MatMulCase(sh, a, b, "drawn")


def loop_cases(kernel: MatMulKernel, vlen: int, kind: str) -> list[MatMulCase]:
    """The shapes of ``loop_shapes`` with seeded operands of ``kind``: Gaussian values of A's
    format (B nudged off it when B's type differs), or integers in [-8, 8] without zeros (so a
    dropped or doubled k-step, tile or chunk always changes the exact result)."""
    out = []
    for i, sh in enumerate(loop_shapes(vlen)):
        rng = np.random.default_rng(1000 + i)
        dims_a, dims_b = (sh.batch, sh.m, sh.k), (sh.batch * sh.bcast, sh.n, sh.k)
        if kind == "integers":
            a, b = ((rng.integers(1, 9, d) * rng.choice([-1, 1], d)).astype(np.float32) for d in (dims_a, dims_b))
        else:
            a = S.round_to(kernel.a, rng.standard_normal(dims_a))
            b = _nudge(kernel, S.round_to(kernel.a, rng.standard_normal(dims_b)), 2000 + i)
        out.append(MatMulCase(sh, a, b, "loop_shapes"))
    return out


def stored_matrix(fmt: str, x: np.ndarray, pad: int = 0) -> np.ndarray:
    """Rows of ``x`` in ggml's memory format, each followed by ``pad`` junk elements."""
    stored = S.to_storage(fmt, x)
    if pad:
        # NaN in every format (0x7FFF is a NaN as fp16 and as bf16): a row over-read poisons the result.
        junk = np.full((*stored.shape[:-1], pad), 0x7FFF if stored.dtype == np.uint16 else np.nan, stored.dtype)
        stored = np.concatenate([stored, junk], axis=-1)
    return stored


def run_mul_mat(kernel: MatMulKernel, target, shape: Shape, a: np.ndarray, b: np.ndarray, reps: int = 1) -> np.ndarray:
    """C = A x B^T on the target: a [batch, m, k], b [batch * bcast, n, k] -> [batch * bcast, n, m]; the graph
    computed ``reps`` times after its one set-up (a cost measurement's repetitions: costs/model.py)."""
    sh = shape
    observe.note("path", kernel.path(target.isa, target.vlen, sh.k, sh.m, sh.n, sh.threads))
    ip = [type_id(kernel.a), type_id(kernel.b), sh.k, sh.m, sh.n, sh.k + sh.pad, sh.batch, sh.bcast, sh.threads]
    ip += [reps] if reps != 1 else []
    bufs = [In(stored_matrix(kernel.a, a, sh.pad)), In(stored_matrix(kernel.b, b)), Out(4 * sh.m * sh.n * sh.batch * sh.bcast)]
    r = target.call("mul_mat", ip, [], bufs)
    return r.output(0, np.float32).reshape(sh.batch * sh.bcast, sh.n, sh.m)


def shape_context(kernel: MatMulKernel, target, sh: Shape) -> str:
    path = kernel.path(target.isa, target.vlen, sh.k, sh.m, sh.n, sh.threads)
    return f"ggml_mul_mat {kernel.a} x {kernel.b}, {sh}, {target.id}, {path}"


def check_bound(kernel: MatMulKernel, target, case: MatMulCase) -> None:
    """Every element of C within the derived bound of its dot product."""
    sh, a, b = case.shape, case.a, case.b
    got = run_mul_mat(kernel, target, sh, a, b)
    exact, abs_sum = matmul(a, S.round_to(kernel.a, b), sh.bcast)
    bound = gamma(sh.k + 1) * abs_sum + oracle_error(sh.k, abs_sum)
    assert_all_within(got, exact, bound, name="C", context=f"{shape_context(kernel, target, sh)}, {case.origin}",
                      derivation=BOUND)


def assert_exact(got: np.ndarray, exact: np.ndarray, context: str) -> None:
    """C bit for bit, elements named [plane, row of B, row of A] (the fp32 rounding of the float64 oracle
    is exact: small integers)."""
    __tracebackhide__ = True
    assert_bitwise_equal(got, exact.astype(np.float32), name="C", context=context)


def check_exact(kernel: MatMulKernel, target, case: MatMulCase) -> None:
    """C exact (operands are small integers: every partial sum is exact in f32)."""
    got = run_mul_mat(kernel, target, case.shape, case.a, case.b)
    exact, _ = matmul(case.a, case.b, case.shape.bcast)
    assert_exact(got, exact, f"{shape_context(kernel, target, case.shape)}, {case.origin}")


def explore_then_loops(request: pytest.FixtureRequest, kernel: MatMulKernel, vlen: int, kind: str,
                       check: Callable[[MatMulCase], None]) -> None:
    """``check`` on random cases (Hypothesis draws and shrinks them), then on ``loop_cases``.

    The loop-crossing shapes come after the draws, not as explicit examples ahead of them: a
    bug that a smaller drawn shape also shows is then reported shrunk (e.g. m = 4, n = 3 for
    a wrong edge tile) rather than at the fixed, larger loop-crossing shape."""
    S.explore(request, cases(kernel, vlen, kind), [], check, after=loop_cases(kernel, vlen, kind))


#: One probe per shape class, as (class, shape at VLEN: function of VLEN/8).
PROBES = [
    ("tinyblas-bm8", lambda s: Shape(2 * s, 32, 5, threads=2)),
    ("tinyblas-bm4", lambda s: Shape(s, 24, 3, threads=3)),
    ("tinyblas-bm2", lambda s: Shape(3 * s, 12, 2, threads=1, batch=2, bcast=2)),
    ("tinyblas-bm4-threads", lambda s: Shape(s, 16, 4, threads=2)),  # m % 16 == 0 but m / 16 < threads
    ("k-not-multiple", lambda s: Shape(2 * s + 4, 16, 4, threads=2)),
    ("m-not-multiple", lambda s: Shape(s, 10, 4, threads=1)),
    ("n-is-1", lambda s: Shape(s, 16, 1, threads=2)),
]
# tinyBLAS_RVV<D, V, TA, TB, TC>::gemm<RM, RN, BM>, mangled:
#   clang: ...tinyBLAS_RVVIu17__rvv_<D>_tu17__rvv_<V>_t...4gemmILi<RM>ELi<RN>ELi<BM>E
#   GCC:   the same, but V written as a back-reference (``S1_``) when it is D (the f32 x f32 gemm):
#          ...tinyBLAS_RVVIu17__rvv_float32m4_tS1_fffE4gemmILi2ELi2ELi8EEEvlll
# (the trace has already dropped GCC's ``.constprop.0``: elf.base_symbol).  No other type precedes
# V in the name, so a substitution there can only be D.
_TINYBLAS = re.compile(r"tinyBLAS_RVVIu\d+__rvv_(\w+?)_t(?:u\d+__rvv_(\w+?)_t|S\d*_)"
                       r".*4gemmILi(\d+)ELi(\d+)ELi(\d+)E")


def _gemm(m: re.Match[str]) -> tuple[str, str, str, str]:
    """(V, RM, RN, BM) of a tinyBLAS_RVV gemm symbol (V is D when the name refers back to it)."""
    d, v, rm, rn, bm = m.groups()
    return v or d, rm, rn, bm


def executed_path(calls: frozenset[str]) -> str:
    """The mul_mat path a trace shows: the tinyBLAS_RVV gemm that ran, else the vec_dot."""
    gemms = sorted({_gemm(m) for c in calls if (m := _TINYBLAS.search(c))})
    if gemms:
        return " + ".join(f"tinyBLAS_RVV<{v}>::gemm<{rm},{rn},{bm}>" for v, rm, rn, bm in gemms)
    dots = sorted(c for c in calls if c.startswith("ggml_vec_dot_"))
    return " + ".join(dots) or "neither tinyBLAS_RVV nor a vec_dot"
