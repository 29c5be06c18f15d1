"""The repack family's kernel table (cases/repack.py says where the rest is): one entry per layout,
where its kernels can run, the bound constants of the RVV entry and of the generic twin.

Bound (one rule, the constants per kernel derived from its arithmetic, as in
cases/test_quant_dot.py): every kernel forms exact integer sums of ``q_w * q_a`` (times integer
sub-block scales; widening multiplies, int16 accumulators whose range the types bound, int32
sums) and floating-point error enters where those sums are converted to fp32, multiplied by
the fp16 / fp32 scales and accumulated.  If every elementwise product passes through at most
``K = a + b * n_blocks`` fp32 roundings on its way to the result, then (Higham ch. 3)::

    |got - exact| <= gamma(K) * sum_i |w_i a_i|  +  2^-149 * (sum_i |int_i| + K)  +  oracle

with the magnitude taken part by part (main and minimums), the second term for scale products
that underflow into fp32's subnormals (q8_K's fp32 ``d``), and the float64 oracle's own
``2 k 2^-53 sum|w_i a_i|``.  Each table entry names its ``(a, b)`` for the RVV entry point and
for the generic twin, and why.

Exact by construction (the parity tests): every fp16 / fp32 scale of the weights is ``+-2^e``,
of an activation row ``+-2^e'``, and the quants are bounded so that ``sum |w_i a_i| <= 2^24``
units of ``2^(e + e')``: every partial sum any kernel forms is an fp32 number, so the repacked
kernels, the un-repacked ``vec_dot`` path and the oracle must agree bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cases.strategies import KernelSpec
from harness.check.compare import assert_bitwise_equal
from oracles import quants as Q
from oracles import repack as RP
from oracles.bounds import gamma

# ------------------------------------------------------------------ the build's own view


@dataclass(frozen=True)
class BuildInfo:
    """What one kernel server reports about repacking (``repack_info``)."""

    layouts: dict[str, tuple[int, int, int, int]]  # layout -> (type id, INTER_SIZE, NB_COLS, sizeof block)
    quantize_mats: frozenset[str]  # "q8_0_4x1", ...
    buft: str  # the CPU device's extra buffer type called CPU_REPACK, or "none"


def _parse_info(message: str) -> BuildInfo:
    """``repack_info``'s notes; its ``type.*`` lines are left out (type ids: cases/quant_variants.py ``type_id``)."""
    layouts, qm, buft = {}, set(), "none"
    for line in message.split():
        key, value = line.split("=", 1)
        if key.startswith("layout."):
            layouts[key[7:]] = tuple(int(v) for v in value.split(","))
        elif key.startswith("quantize_mat."):
            qm.add(key[len("quantize_mat."):])
        elif key == "buft":
            buft = value
    return BuildInfo(layouts, frozenset(qm), buft)


_INFO: dict[str, BuildInfo] = {}  # by kernel server binary


def build_info(target) -> BuildInfo:
    key = str(target.server().build.server)
    if key not in _INFO:
        _INFO[key] = _parse_info(target.call("repack_info").message)
    return _INFO[key]


def assert_bytes_equal(got: np.ndarray, expected: np.ndarray, *, name: str, context: str) -> None:
    """Byte arrays equal, reported byte by byte (the indices are byte offsets)."""
    __tracebackhide__ = True
    assert_bitwise_equal(np.asarray(got, np.uint8), np.asarray(expected, np.uint8), name=name, context=context)


def notes(message: str) -> dict[str, str]:
    """A response's ``key=value`` lines as a dict."""
    return dict(line.split("=", 1) for line in message.splitlines() if "=" in line)


# ------------------------------------------------------------------ the table


@dataclass(frozen=True)
class Depth:
    """``K = a + b * n_blocks``: the most fp32 roundings any elementwise product passes through."""

    a: int
    b: int
    derivation: str

    def k(self, n_blocks: int) -> int:
        return self.a + self.b * n_blocks


KINDS = ("gemv", "gemm")
IMPLS = ("rvv", "generic")


@dataclass(frozen=True, repr=False)
class RepackKernel(KernelSpec):
    """One interleaved layout of the tree and the GEMV / GEMM kernels that read it."""

    name: str  # the layout (oracles.repack.LAYOUTS) and test id
    rvv: Depth  # the entry point ggml calls (RVV body, or what it falls back to)
    generic: Depth  # the *_generic twin
    zvfh_only: bool  # compiled only with __riscv_zvfh (repack.h, repack.cpp)
    rvv_from: int  # smallest VLEN at which the entry point computes every column (see module doc)
    max_int: int  # largest |integer part| of w_i per unit of |q_a| (main + minimum), for exactness

    @property
    def layout(self) -> RP.Layout:
        return RP.layout(self.name)

    def entry(self, kind: str, impl: str = "rvv") -> str:
        lay = self.layout
        fn = f"ggml_{kind}_{lay.weight}_{lay.ncols}x{lay.blocklen}_{lay.activation}"
        return fn if impl == "rvv" else f"{fn}_generic"

    def depth(self, impl: str) -> Depth:
        return self.rvv if impl == "rvv" else self.generic

    @property
    def block(self) -> str:
        """The interleaved block struct of repack.h (``block_q4_0x16``, ``block_q4_Kx16`` ...)."""
        return f"block_{self.layout.weight}x{self.layout.ncols}"

    @property
    def quantize_mat(self) -> str:
        """The activation quantizer of its GEMM (``ggml_quantize_mat_q8_0_4x1`` ...)."""
        lay = self.layout
        return f"ggml_quantize_mat_{lay.activation}_4x{lay.activation_blocklen}"

    @property
    def requires(self) -> tuple[str, ...]:
        """What the tree must have for this layout's tests (harness/plugin/marks.py skips them as "not
        in this tree" otherwise): the weight and activation types, the interleaved block, the GEMV
        / GEMM entry points and the GEMM's activation quantizer."""
        lay = self.layout
        return (f"GGML_TYPE_{lay.weight.upper()}", f"GGML_TYPE_{lay.activation.upper()}", self.block,
                self.entry("gemv"), self.entry("gemm"), self.quantize_mat)

    def bound(self, impl: str, n_blocks: int, p: RP.Products) -> np.ndarray:
        k = self.depth(impl).k(n_blocks)
        n = n_blocks * Q.block_size(self.layout.weight)
        return gamma(k) * p.magnitude + 2.0 ** -149 * (p.int_magnitude + k) + RP.oracle_error(n, p.magnitude)

    def describe_bound(self, impl: str, n_blocks: int) -> str:
        d = self.depth(impl)
        return (f"gamma(K) * sum|w_i a_i| + 2^-149 * (sum|int_i| + K) + oracle, K = {d.a} + {d.b} * {n_blocks} "
                f"blocks = {d.k(n_blocks)}: {d.derivation}")

    def not_compiled(self, target) -> str | None:
        """Why the layout and its kernels are not in ``target``'s build (None: they are)."""
        if self.zvfh_only and not target.features.get("zvfh"):
            return (f"{self.name}: the layout and its kernels are compiled only with zvfh "
                    f"(#if defined __riscv_zvfh in repack.h / repack.cpp); build {target.isa.name} has none")
        return None

    def unavailable(self, target, impl: str) -> str | None:
        """Why this kernel cannot run on ``target`` (None: it can)."""
        if reason := self.not_compiled(target):
            return reason
        if impl == "rvv" and target.vlen < self.rvv_from:
            return (f"{self.entry('gemv')} / gemm need VLEN >= {self.rvv_from}: vl = 16 at SEW 8, LMUL 1/2 exceeds "
                    f"VLMAX = VLEN/16 = {target.vlen // 16} (columns 8-15 are never computed); ggml selects "
                    "them only at VLEN 256; their generic twins run here")
        return None


_ONE_FMA = "per block one vfmacc of float(sumi) (exact: |sumi| < 2^24) by the fp16 x fp16 scale product (exact, vfwmul)"
_GENERIC_32 = "per byte pair sumi * d_w (rounded) * d_a (rounded) += (rounded)"

KERNELS = [
    RepackKernel("q4_0_16x1", Depth(0, 1, _ONE_FMA), Depth(2, 16, f"{_GENERIC_32}: 16 terms per block"),
                 True, 256, 8),
    RepackKernel("q8_0_16x1", Depth(0, 1, _ONE_FMA), Depth(2, 32, "per quant sumi * d_w * d_a += : 32 terms per block"),
                 True, 256, 128),
    RepackKernel("iq4_nl_16x1", Depth(0, 1, _ONE_FMA), Depth(2, 16, f"{_GENERIC_32}: 16 terms per block"),
                 True, 256, 127),
    RepackKernel("q4_K_16x1", Depth(2, 3, "per block the scale products dmin * d_a and d_w * d_a (1), two "
                                          "min corrections (product, subtraction) and one vfmacc of float(sumi) "
                                          "(|sumi| may pass 2^24: 1): 3 accumulations per block, 2 roundings before"),
                 Depth(3, 128, "main: 128 terms sumi * d * d_a per block (2 products, 1 addition); mins: 8 terms "
                               "per block; one final subtraction"),
                 True, 256, 63 * 15 + 63),
    RepackKernel("q2_K_16x1", Depth(2, 17, "per block 16 min corrections float(bsum * m) * (dmin * d_a) (2 roundings "
                                           "each, subtracted) and one float(isum) * (d * d_a) added: 17 "
                                           "accumulations per block; |isum| < 2^21 converts exactly"),
                 Depth(3, 1, "per block isum * (d_a * d) - summs * (d_a * dmin): 2 scale products, 2 products, one "
                             "subtraction, one accumulation"),
                 True, 256, 15 * 3 + 15),
    RepackKernel("q4_0_8x8", Depth(2, 2, "RVV: per block float(sumi) * d_a (rounded) then vfmacc by d_w: 1 + nb; "
                                         "at VLEN 128 the entry calls its generic twin: 2 + 2 nb"),
                 Depth(2, 2, "per 8-byte chunk sumi * d_w * d_a += : 2 terms per block, 2 roundings before"),
                 False, 128, 8),
]
BY_NAME = {k.name: k for k in KERNELS}
IDS = [k.name for k in KERNELS]


@dataclass(frozen=True, repr=False)
class QuantizeMat(KernelSpec):
    """One activation quantizer of the repacked GEMMs: ``ggml_quantize_mat_<name>`` writes 4 rows
    of ``act`` blocks interleaved ``inter`` bytes at a time."""

    name: str  # "q8_0_4x1" (test id)
    act: str  # the activation type
    inter: int  # INTER_SIZE
    zvfh_only: bool  # declared only with __riscv_zvfh (repack.h)

    @property
    def function(self) -> str:
        return f"ggml_quantize_mat_{self.name}"

    @property
    def requires(self) -> tuple[str, ...]:
        return (f"GGML_TYPE_{self.act.upper()}", self.function)


QUANTIZE_MATS = [QuantizeMat("q8_0_4x1", "q8_0", 1, True), QuantizeMat("q8_0_4x8", "q8_0", 8, False),
                 QuantizeMat("q8_K_4x1", "q8_K", 1, True)]

#: Weight types the selection sweep asks about: the table's, and types other architectures
#: repack (q5_K, q6_K, mxfp4, q1_0, q4_1 never) that must stay un-repacked on RISC-V; a tree's
#: sweep (:func:`sweep_types`) also has the types its selection names and drops those it lacks.
SWEEP_TYPES = ("q4_0", "q8_0", "iq4_nl", "q4_K", "q2_K", "q4_1", "q5_K", "q6_K", "mxfp4", "q1_0")
#: Row counts of the sweep: multiples of 16 and of 8, and neither.
SWEEP_ROWS = (1, 8, 15, 16, 17, 24, 32, 40, 48, 64)

