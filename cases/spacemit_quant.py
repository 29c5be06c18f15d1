"""SpacemiT's activation quantizers (ggml-cpu/spacemit/rvv_kernels.cpp) against NumPy, byte for byte.

``quantize_a_{row,4row}_{i8,i8_hp,i8k}`` turn one or four float rows into the blocks the backend's IME GEMMs read
(oracles/spacemit_q8.py describes the three formats).  ime.cpp calls them only on IME2 cores (the A100), which no
public assembler builds, so the kernel server calls them directly (harness/server/k_spacemit.cpp), with the block
length each caller passes (ime.cpp's ``forward_mul_mat``: ``a_blk_len = INTER_SIZE``):

* ``i8`` (blk_len 32): q4_0 / q4_1 / q4_K with INTER_SIZE 32, q6_K, q8_0, q5_*, mxfp4;
* ``i8_hp`` (blk_len 256): q4_0 with INTER_SIZE 256 (``ne[0] % 256 == 0``);
* ``i8k`` (blk_len 256): q2_K, q3_K.

``count_k`` is the row length (``ne10``, a multiple of the weight's block, so of blk_len) or, for a single row, a
thread's share of whole blocks: a count_k that is not a multiple of blk_len is outside the API (the kernels would
read and write a whole block past it) and not tested.

Which code runs: ``__riscv_vlenb()`` 32 (VLEN 256) and 128 (VLEN 1024) take the RVV paths, every other VLEN the
``quantize_a_nrow_*_ref`` loops; the oracle follows the path of the VLEN (:func:`path_of`; the result notes it, and
the kernel's ``vlenb`` proves the VLEN).  Each call is then held to the format's promise from the input alone
(oracles/spacemit_q8.py: ``promise``).  Tolerance: none for the bytes; the promise's bounds are derived there.

Domains (one test each, so a known failure in one leaves the others gating): ``core`` (Gaussian, spiky, all-negative,
exact-tie and constant blocks at one drawn scale), ``zeros`` (all-zero blocks and sub-blocks), ``range`` (blocks at
the ends of the format's range: largest magnitudes up to FLT_MAX, 2^22 for ``hp`` whose scales are fp16; down to
2^-100, where 1 / scale is still finite; subnormal elements beside normal ones).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from cases import coverage
from cases import loops as L
from cases import strategies as S
from cases.spacemit_tree import BACKEND
from cases.vec_source import scan_rvv_file
from harness.check import observe
from harness.check.compare import assert_all_within, assert_bitwise_equal
from harness.emulators.protocol import In, Out
from harness.ggml.tree import Tree
from oracles import spacemit_q8 as SQ8

FILE = "src/ggml-cpu/spacemit/rvv_kernels.cpp"
#: VLENs whose ``__riscv_vlenb()`` the quantizers have an RVV path for.
RVV_VLENS = (256, 1024)
#: Real models' row lengths (SmolLM2 576, Qwen3-0.6B 1024, 1536, Llama 2048 / 4096, an FFN of 11008).
REAL_WIDTHS = (576, 1024, 1536, 2048, 4096, 11008)


@dataclass(frozen=True, repr=False)
class Quantizer(S.KernelSpec):
    """One quantizer of rvv_kernels.cpp: its adapter number, format and rows per call."""

    name: str  # test id: row_i8, 4row_i8, ...
    code: int  # k_spacemit.cpp's quantizer number
    fmt: str  # oracles/spacemit_q8.py's format
    rows: int

    @property
    def function(self) -> str:
        return f"quantize_a_{self.name}"

    @property
    def ref_function(self) -> str:
        """The scalar loop it runs at the VLENs without an RVV path."""
        return f"quantize_a_nrow_{self.name.split('_', 1)[1]}_ref"

    @property
    def blk_len(self) -> int:
        return SQ8.FORMATS[self.fmt].blk_len

    @property
    def requires(self) -> tuple[str, ...]:
        return (self.function,)

    @property
    def tree_needs(self) -> tuple[str, ...]:
        """rvv_kernels.cpp's quantizer: the backend before 2026-05 has IME1's own quantize_a_row_i8 /
        quantize_a_4row_i8 in ime1_kernels.cpp (another block format, no sums), run by the IME1 GEMM's tests."""
        return (f"{BACKEND}/rvv_kernels.cpp:{self.function}",)


QUANTIZERS = {q.name: q for q in (
    Quantizer("row_i8", 0, "i8", 1), Quantizer("4row_i8", 1, "i8", 4),
    Quantizer("row_i8_hp", 2, "hp", 1), Quantizer("4row_i8_hp", 3, "hp", 4),
    Quantizer("row_i8k", 4, "i8k", 1), Quantizer("4row_i8k", 5, "i8k", 4),
)}
DOMAINS = ("core", "zeros", "range")


def path_of(vlen: int) -> str:
    """The code a VLEN runs: ``rvv`` (its RVV branch) or ``ref`` (``quantize_a_nrow_*_ref``)."""
    return "rvv" if vlen in RVV_VLENS else "ref"


# ------------------------------------------------------------------ inputs

#: Block kinds per domain (a block of the format's blk_len, the same kind in every row of a call).
KINDS = {"core": ("gaussian", "spiky", "negative", "ties", "constant"),
         "zeros": ("zero", "zero_part", "gaussian"),
         "range": ("huge", "tiny", "subnormal", "gaussian")}
#: Largest magnitude a block of the range domain reaches: float32's largest, or 2^22 for hp (its scales are fp16:
#: the average step must stay below 65504, i.e. amax below 65504 * 127 ~ 2^23).
TOP = {"i8": float(np.finfo(np.float32).max), "i8k": float(np.finfo(np.float32).max), "hp": 2.0 ** 22}


@dataclass(frozen=True)
class QCase:
    """One call: the quantizer, its blocks along K, the kind of each block, the data's seed and scale."""

    quantizer: str
    kinds: tuple[str, ...]  # one per block
    seed: int = 0
    scale_exp: int = 0

    @property
    def count_k(self) -> int:
        return len(self.kinds) * QUANTIZERS[self.quantizer].blk_len


def _block(kind: str, fmt: str, n: int, rng: np.random.Generator, scale: float) -> np.ndarray:
    """``n`` values of one block of ``kind``."""
    x = rng.standard_normal(n) * scale
    if kind == "spiky":
        x[rng.integers(0, n, max(1, n // 32))] *= 256.0
    elif kind == "negative":  # the largest magnitude is negative, and so is every value
        x = -np.abs(x)
    elif kind == "ties":  # amax = 127 * 2^e and values (k + 1/2) 2^e: x * rep is an exact tie k + 1/2
        e = np.floor(np.log2(scale)) - 7
        x = (rng.integers(-127, 127, n) + 0.5) * 2.0 ** e
        x[rng.integers(n)] = 127 * 2.0 ** e * rng.choice([-1.0, 1.0])
    elif kind == "constant":
        x = np.full(n, 3.0 * scale)
    elif kind == "zero":
        x = np.zeros(n)
    elif kind == "zero_part":  # one sub-block (hp: 32) or sum group (i8k: 16) zero, the rest not
        part = {"hp": SQ8.SUB, "i8k": SQ8.GROUP}.get(fmt, n)
        j = rng.integers(0, n // part)
        x[j * part:(j + 1) * part] = 0
    elif kind == "huge":
        x = x / np.max(np.abs(x)) * TOP[fmt] * rng.uniform(0.5, 1.0)
    elif kind == "tiny":
        x = x / np.max(np.abs(x)) * 2.0 ** -100 * rng.uniform(1.0, 2.0 ** 20)
    elif kind == "subnormal":  # normal amax, some elements subnormal
        x[rng.integers(0, n, max(1, n // 4))] = rng.standard_normal(max(1, n // 4)) * 2.0 ** -140
    return x


def make_input(case: QCase) -> np.ndarray:
    """The rows (rows x count_k float32) of ``case``."""
    q = QUANTIZERS[case.quantizer]
    rng = np.random.default_rng(case.seed)
    scale = 2.0 ** case.scale_exp
    a = np.concatenate([np.stack([_block(k, q.fmt, q.blk_len, rng, scale) for _ in range(q.rows)])
                        for k in case.kinds], axis=1)
    with np.errstate(over="ignore"):
        return np.clip(a, -TOP[q.fmt], TOP[q.fmt]).astype(np.float32)


@st.composite
def quant_cases(draw: st.DrawFn, q: Quantizer, domain: str) -> QCase:
    """1 to 8 blocks (i8: 1 to 40) of the domain's kinds, at a scale 2^-20 ... 2^20."""
    if domain not in DOMAINS:
        raise ValueError(f"quant_cases: no domain {domain!r}; domains: {DOMAINS}")
    n = draw(st.integers(1, 40 if q.fmt == "i8" else 8), label="blocks")
    kinds = tuple(draw(st.lists(st.sampled_from(KINDS[domain]), min_size=n, max_size=n), label="kinds"))
    return QCase(q.name, kinds, draw(st.integers(0, 2**32 - 1), label="seed"),
                 draw(st.integers(-20, 20), label="scale_exp"))


def fixed_cases(q: Quantizer, domain: str) -> list[QCase]:
    """Every run, in the core domain: 2 and 3 blocks, and real models' row lengths (those that are whole blocks)."""
    if domain != "core":
        return []
    kinds = KINDS["core"]
    sizes = [2 * q.blk_len, 3 * q.blk_len] + [w for w in REAL_WIDTHS if w % q.blk_len == 0]
    return [QCase(q.name, tuple(kinds[(i + j) % len(kinds)] for j in range(n // q.blk_len)), seed=100 + i)
            for i, n in enumerate(sizes)]


#: The shrunk reproducers of the pinned tree's findings, run first in their (quantizer, domain) on every run.
FINDING_EXAMPLES: dict[tuple[str, str], tuple[QCase, ...]] = {
    # _ref (VLEN 128 / 512): 127 / 0 = inf, nearbyintf(0 * inf) = NaN converted to int8 for an all-zero block
    ("row_i8", "zeros"): (QCase("row_i8", ("zero",)),),
    ("4row_i8", "zeros"): (QCase("4row_i8", ("zero",)),),
    # _ref: 1 / 0 for a zero sub-block (NaN int8s), and a NaN ratio when the whole block is zero
    ("row_i8_hp", "zeros"): (QCase("row_i8_hp", ("zero",)),),
    ("4row_i8_hp", "zeros"): (QCase("4row_i8_hp", ("zero",)),),
}


# ------------------------------------------------------------------ running and checking


def run(q: Quantizer, target, a: np.ndarray) -> tuple[np.ndarray, int]:
    """The quantizer's output at ``target`` (decoded blocks) and the ``vlenb`` it saw."""
    r = target.call("spacemit_quantize", [q.code, q.blk_len, a.shape[1]], [],
                    [In(a), Out(SQ8.nbytes(q.fmt, q.rows, a.shape[1]))])
    m = re.search(r"^vlenb=(\d+)$", r.message, re.M)
    return SQ8.decode(q.fmt, q.rows, r.output(0, np.uint8)), int(m.group(1)) if m else -1


PROMISE_DERIVATION = {
    "q": "the int8 is x / step rounded: within 1/2 + 2^-15 (three float32 roundings of |x / step| <= 127; "
         "oracles/spacemit_q8.py: QUANT_SLACK); 0 where the step is 0",
    "sum": "the negated sum of the int8s; hp: -8 sum in fp16, within half an fp16 ulp beyond |sum| = 2048",
    "scale": "amax / 127 rounded once (RVV) or twice (_ref: 127 / amax, then 1 / rep): within 2^-22 relative",
    "step": "ratio * avg, each rounded to fp16 (2^-11 relative, 2^-25 absolute below 2^-14) after three float32 "
            "roundings: within (2^-10 + 2^-21) step + 2^-25 (avg + ratio)",
    "avg": "the mean step rounded to fp16 after eight float32 additions: within (2^-11 + 2^-20) mean + 2^-25",
}


def check_quant(case: QCase, target) -> None:
    """Run ``case`` at ``target``: every written byte as the oracle of the VLEN's path says, then the format's
    promise from the input alone."""
    q = QUANTIZERS[case.quantizer]
    a = make_input(case)
    path = path_of(target.vlen)
    got, vlenb = run(q, target, a)
    observe.note("path", f"{q.function}: {'RVV' if path == 'rvv' else q.ref_function} (vlenb {vlenb})")
    assert vlenb == target.vlen // 8, f"{q.function} saw vlenb={vlenb} at VLEN {target.vlen} [{target.id}]"
    context = (f"{q.function}(blk_len={q.blk_len}, count_k={case.count_k}, {q.rows} row(s)), blocks {list(case.kinds)}, "
               f"{target.id}, {path} path")
    expected = SQ8.fields(q.fmt, SQ8.quantize(q.fmt, a, path))
    for name, g in SQ8.fields(q.fmt, got).items():
        assert_bitwise_equal(g, expected[name], name=f"{q.function}.{name}", context=context)
    for name, (stored, exact, bound) in SQ8.promise(q.fmt, a, got).checks.items():
        assert_all_within(np.asarray(stored, np.float64), exact, np.broadcast_to(bound, np.shape(exact)),
                          name=f"{q.function}.{name} (promise)", context=context, derivation=PROMISE_DERIVATION[name])


# ------------------------------------------------------------------ loop sizes (docs/spacemit.md)


def _drawn(vlen: int) -> dict[str, L.Drawn]:
    out = {}
    for fmt, blk in (("i8", 32), ("hp", 256), ("i8k", 256)):
        every = sorted({c.count_k // blk for q in QUANTIZERS.values() if q.fmt == fmt for c in fixed_cases(q, "core")})
        out[f"blocks of {blk} ({fmt})"] = L.Drawn(every, 1, 40 if fmt == "i8" else 8)
    return out


def _loops() -> list[L.Loop]:
    out = []
    for fmt, blk in (("i8", 32), ("hp", 256), ("i8k", 256)):
        names = ", ".join(q.function for q in QUANTIZERS.values() if q.fmt == fmt)
        real = tuple(w // blk for w in REAL_WIDTHS if w % blk == 0)
        out.append(L.Loop(names, "blocks along K (k += blk_len; count_k is whole blocks)", f"blocks of {blk} ({fmt})",
                          lambda v: 1, remainder=False, real=real, source=f"spacemit/rvv_kernels.cpp:{names}"))
    return out


L.register(L.Family(
    name="spacemit_quant", doc="docs/spacemit.md", loops=_loops(), drawn=_drawn,
    notes=("Inside a block no loop depends on the VLEN: the RVV paths take a block of 32 (i8, hp's sub-blocks) or a "
           "16-value group (i8k) in one vsetvl (VLMAX of e32m4 / e32m2 at VLEN 256, e32m1 at 1024 is at least that); "
           "hp walks its 8 sub-blocks, i8k its 16 groups, the 4-row variants their 4 rows, all fixed counts that "
           "every call makes in full. The _ref loops (VLEN 128 / 512) are scalar.",)))


# ------------------------------------------------------------------ what the tree has (cases/coverage.py)


@coverage.register("spacemit_quant")
def scan(inv: Tree) -> coverage.FamilyScan:
    """spacemit/rvv_kernels.cpp's activation quantizers: a quantize_* function with an RVV path that the table does
    not know is uncovered (the file's other functions are cases/spacemit_ops.py's and the flash-attention family's)."""
    return scan_rvv_file(inv, "spacemit_quant", FILE, list(QUANTIZERS.values()),
                         {q.function for q in QUANTIZERS.values()}, "cases/spacemit_quant.py",
                         lambda name: name.startswith("quantize_"))
