"""FP16 / BF16 <-> FP32 conversions (``ggml_cpu_*`` in ggml-cpu.c): bit-exact against NumPy / ml_dtypes.

Tolerance: none.  A conversion has one right answer per input (IEEE
round-to-nearest-even for narrowing, exact widening), so every element must
match bit for bit.  The one freedom: a NaN input must give a NaN, with any
payload (the RISC-V vector conversions return the canonical NaN, the C
reference keeps the payload; ggml specifies neither).

Loop sizes (the table in docs/vec_dot.md): the RVV paths of fp16_to_fp32 and
bf16_to_fp32 run an unrolled main loop (2 x VLMAX(e16m2) elements per
iteration) and a leftover vsetvl loop; fp32_to_fp16 one vsetvl loop at e32m2;
fp32_to_bf16 is scalar in every build.  Every run checks, at the test's VLEN,
the lengths of ``S.crossing_lengths`` (each loop twice plus a remainder, and
a real model's widest row plus a tail) with seeded data, after the random
lengths; the sweeps add a 16-bit source's 65536 patterns plus a tail that
leaves the leftover loop a full and a partial trip (``sweep_inputs``), and
every rounding edge of a narrowing (190486 values: a remainder at every VLEN).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
from hypothesis import strategies as st

from cases import coverage
from cases import loops as L
from cases import strategies as S
from cases.vec_dot import STORAGE_TYPE
from cases.vec_source import file_notes, rvv_path, rvv_paths, where
from harness.check import observe
from harness.check.compare import assert_bitwise_equal
from harness.core.config import IsaBuild
from harness.emulators.protocol import In, Out
from harness.ggml.tree import Tree
from harness.plugin.targets import session
from oracles import floats as F

_STORAGE = {"f32": np.float32, "f16": np.uint16, "bf16": np.uint16}
_VIEW = {"f32": np.float32, "f16": np.float16, "bf16": F.BF16}


@dataclass(frozen=True, repr=False)
class Conversion(S.KernelSpec):
    """One ggml conversion entry point and what the harness knows about it."""

    name: str  # ggml_cpu_<name>, and the kernel server's name for it
    src: str
    dst: str
    shape: S.VectorShape  # how its RVV path walks the input (element width, LMUL, unroll)
    rvv_when: str | None  # the extension that selects the RVV path in the pinned tree; None: scalar in every build
    oracle: Callable[[np.ndarray], np.ndarray]

    @property
    def function(self) -> str:
        return f"ggml_cpu_{self.name}"

    @property
    def requires(self) -> tuple[str, ...]:
        """What the kernel server's adapter calls (harness/plugin/marks.py skips the kernel as "not in
        this tree" when the tree lacks it)."""
        return (self.function, *(STORAGE_TYPE[f] for f in (self.src, self.dst) if f != "f32"))

    def path(self, isa: IsaBuild) -> str:
        """"rvv" when the tree's function, as ``isa`` compiles it, calls RVV intrinsics (in the
        pinned tree: the builds with ``rvv_when``), else "scalar"."""
        return "rvv" if rvv_path(session().source, isa, self.function, CPU_FILES) else "scalar"


CONVERSIONS = [
    # vfwcvt.f.f.v at e16/m2, unrolled by two, then a vsetvl tail loop.
    Conversion("fp16_to_fp32", "f16", "f32", S.VectorShape(16, (2,), 2), "zvfhmin", F.fp16_bits_to_f32),
    # vfncvt.f.f.w from e32/m2 in one vsetvl loop.
    Conversion("fp32_to_fp16", "f32", "f16", S.VectorShape(32, (2,)), "zvfh", F.f32_to_fp16_bits),
    # vfwcvtbf16 at e16/m2, unrolled by two, then a tail loop.
    Conversion("bf16_to_fp32", "bf16", "f32", S.VectorShape(16, (2,), 2), "zvfbfmin", F.bf16_bits_to_f32),
    # Scalar loop in every build of the pinned tree (tested so that a new RVV path is covered).
    Conversion("fp32_to_bf16", "f32", "bf16", S.VectorShape(32, (1,)), None, F.f32_to_bf16_bits),
]


def _inputs(kernel: Conversion, n: int) -> st.SearchStrategy[np.ndarray]:
    if kernel.src == "f32":
        return S.fp32_for_narrowing(n, kernel.dst)
    return S.uint16_patterns(n)


@st.composite
def conversion_inputs(draw: st.DrawFn, kernel: Conversion) -> np.ndarray:
    """A random length (``S.lengths``, small ones first) and inputs from every class of value."""
    n = draw(S.lengths(kernel.shape), label="n")
    return draw(_inputs(kernel, n), label="x")


def crossing_inputs(kernel: Conversion, vlen: int) -> list[np.ndarray]:
    """Seeded inputs at every length of ``S.crossing_lengths`` for this VLEN (fixed cases
    of every run): every loop level crossed twice plus a remainder, and a real model's row."""
    out = []
    for n in S.crossing_lengths(kernel.shape, vlen):
        if kernel.src == "f32":
            out.append(S.fp32_narrowing_array(n, kernel.dst, seed=n))
        else:
            out.append(S.uint16_array(n, seed=n))
    return out


def sweep_inputs(kernel: Conversion, vlen: int) -> np.ndarray:
    """The sweep of one call: every rounding edge of a narrowing (tie, tie +- 1 ulp, overflow,
    subnormal, NaN payloads: 190486 values for fp16, which leaves a remainder at every VLEN),
    or all 65536 patterns of a 16-bit source followed by ``max(step) - 1`` more (65536 is a
    multiple of every step: the tail makes the leftover loop run a full and a partial trip
    after the main loop)."""
    if kernel.src == "f32":
        return S.all_edges_fp32(kernel.dst)
    tail = max(kernel.shape.steps(vlen)) - 1
    return np.arange((1 << 16) + tail, dtype=np.uint32).astype(np.uint16)


def check_conversion(kernel: Conversion, target, x: np.ndarray) -> None:
    """Run ``kernel`` on ``x`` at ``target`` and compare with the oracle, bit for bit."""
    n = x.size
    path = kernel.path(target.isa)
    observe.note("path", path)
    out_itemsize = np.dtype(_STORAGE[kernel.dst]).itemsize
    r = target.call(kernel.name, [n], [], [In(x), Out(n * out_itemsize)])
    got = r.output(0, _STORAGE[kernel.dst]).view(_VIEW[kernel.dst])
    expected = np.asarray(kernel.oracle(x)).view(_VIEW[kernel.dst])
    shown = x.view(_VIEW[kernel.src])
    assert_bitwise_equal(got, expected, name=f"{kernel.name}(x)", inputs=shown,
                         context=f"ggml_cpu_{kernel.name}, n={n}, {target.id}, {path} path")


ids = [k.name for k in CONVERSIONS]


# ------------------------------------------------------------------ loop sizes (docs/vec_dot.md)

_RVV = [k for k in CONVERSIONS if k.rvv_when]
_SOURCE = {"fp16_to_fp32": "ggml-cpu.c:ggml_cpu_fp16_to_fp32", "bf16_to_fp32": "ggml-cpu.c:ggml_cpu_bf16_to_fp32",
           "fp32_to_fp16": "ggml-cpu.c:ggml_cpu_fp32_to_fp16"}


def _var(kernel: Conversion) -> str:
    return f"n ({kernel.name})"


@cache
def _drawn(vlen: int) -> dict[str, L.Drawn]:
    """Per kernel: the lengths test_convert's fixed cases and the sweep check at ``vlen``
    (built by the functions the tests call), and the random range of ``S.lengths``."""
    return {_var(k): L.Drawn(every_run=sorted({x.size for x in crossing_inputs(k, vlen)}
                                              | {sweep_inputs(k, vlen).size}),
                             lo=1, hi=S.MAX_LENGTH)
            for k in _RVV}


L.register(L.Family(
    name="conversions", doc="docs/vec_dot.md",
    loops=[loop for k in _RVV for loop in k.shape.loops(k.name, _var(k), _SOURCE[k.name])],
    drawn=_drawn,
    notes=("The scalar loop after each RVV loop runs no element (the vsetvl loops finish the row). "
           "fp32_to_bf16 has no RVV path in the pinned tree (a scalar loop in every build); it is "
           "tested at the same lengths.",
           "The unrolled main loop needs no remainder of its own (the leftover loop takes it); its "
           "witness 2 x step + r gives the leftover loop r elements after two main iterations, and "
           "3 x step - 1 (also every run) a full leftover trip and a partial one.")))


# ------------------------------------------------------------------ what the tree has (cases/coverage.py)

#: Where the conversions are (relative to the ggml directory).
CPU_FILES = ("src/ggml-cpu/ggml-cpu.c",)
#: Functions of ggml-cpu.c with an RVV path that are not kernels: the CPU feature detection.
NOT_KERNELS = {
    "ggml_init_riscv_arch_features": "reads the CPU's vector length at start-up",
    "ggml_cpu_has_riscv_v": "reports whether the build has RVV",
    "ggml_cpu_get_rvv_vlen": "reports the vector length",
}


@coverage.register("conversions")
def scan(inv: Tree) -> coverage.FamilyScan:
    """ggml-cpu.c: a function with an RVV path (in any ISA build) that is neither in CONVERSIONS
    nor CPU feature detection (NOT_KERNELS) is uncovered; a conversion the tree lacks is not in
    this tree; one without an RVV path in this tree is a note (tested on its scalar path)."""
    src = inv.source
    out = coverage.FamilyScan("conversions")
    found = rvv_paths(src, CPU_FILES)
    known = {k.function for k in CONVERSIONS}
    for name, r in sorted(found.items()):
        if name not in known and name not in NOT_KERNELS:
            out.uncovered.append(coverage.Uncovered(
                name, where(src, r.function), f"{r.describe()}; no test knows it (cases/conversions.py)"))
    for k in CONVERSIONS:
        if out.lacks(inv, k):
            continue
        if k.rvv_when and k.function not in found:
            out.notes.append(f"{k.function} has no RVV path in this tree: tested on its scalar path")
    out.notes += file_notes(src, CPU_FILES)
    return out
