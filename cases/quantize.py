"""The quantize family: activation quantizers (``quantize_row_q8_0 / _q8_1 / _q8_K`` in
arch/riscv/quants.c) against the NumPy reference quantizers of ``oracles.q8``, bit for bit --
the table (one entry per activation record of oracles/quant_types.py), inputs, checks, loop levels
and the coverage scan.  The tests are in cases/test_quantize.py.

Tolerance: none.  Each quantizer is a fixed sequence of fp32 operations (``d = amax / 127``,
``1 / d``, ``x * id``; q8_K: ``-127 / max``, ``x * iscale``, ``1 / iscale``), each correctly
rounded, followed by a rounding to integers; the oracle performs the same operations in
float32, so every byte has one right answer -- given the rounding rule and, for q8_K, which
element counts as the maximum.  Those two choices are where the RVV kernels and the reference
(``quantize_row_*_ref``, which the scalar ``*_generic`` twin calls) part ways, and the tests
pin the difference down exactly:

* q8_0 / q8_1: RVV converts with ``vfncvt.x.f.w`` in the default rounding mode (ties to even),
  the reference with ``roundf`` (ties away from zero).  RVV must equal the oracle with ties to
  even bit for bit; against the reference, every differing quant must be an exact tie
  (``x * id`` = k + 1/2) and nothing else may differ, except q8_1's ``s``, which must be
  ``fp16(sum(qs) * d)`` of RVV's own quants.
* q8_K: both round ties to even.  The reference takes the *first* element of largest
  magnitude as ``max``; RVV takes ``max_val`` if ``|max_val| > |min_val|`` else ``min_val``,
  i.e. the negative one when +a and -a both occur.  RVV must equal the oracle with that rule
  bit for bit; against the reference, a block may differ only when both signs of the largest
  magnitude occur, and then by an exact sign flip of ``d``, ``qs`` and ``bsums`` (the values
  ``d * q`` are identical).  The reference leaves the ``bsums`` of an all-zero block unwritten
  (RVV writes zeros); those bytes are not compared for the twin.

Domain: finite inputs whose every block is either all zero or has ``amax >= 2^-100`` (smaller
blocks make ``1 / d`` overflow, and the C conversion of an infinite or NaN float to an integer
is undefined in the reference); ``|x| <= 2^100``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from cases import coverage
from cases import loops as L
from cases import quant_strategies as QS
from cases import quant_variants as V
from cases.strategies import KernelSpec
from harness.check import observe
from harness.check.compare import assert_bitwise_equal
from harness.emulators.protocol import In, Out
from harness.ggml import tree
from harness.plugin.targets import session
from oracles import q8 as Q8
from oracles import quant_types as QT
from oracles import quants as Q

IMPL_RVV, IMPL_GENERIC = 0, 1


@dataclass(frozen=True, repr=False)
class Quantizer(KernelSpec):
    """One activation quantizer and the two oracles it is held to."""

    name: str  # the type it produces (test id)
    rvv_oracle: Callable[[np.ndarray], np.ndarray]  # the RVV kernel's semantics
    ref_oracle: Callable[[np.ndarray], np.ndarray]  # quantize_row_<name>_ref's semantics

    @property
    def block(self) -> int:
        return Q.fmt(self.name).block

    @property
    def requires(self) -> tuple[str, ...]:
        """What the tree must have for this quantizer's tests (else "not in this tree")."""
        return f"GGML_TYPE_{self.name.upper()}", f"quantize_row_{self.name}"


def _q8_K(pick: str) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: Q8.quantize_q8_K(x, pick)[0]


#: Per activation type: (the RVV kernel's semantics, quantize_row_<name>_ref's semantics).
ORACLES: dict[str, tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray]]] = {
    "q8_0": (lambda x: Q8.quantize_q8_0(x, "half_even"), lambda x: Q8.quantize_q8_0(x, "half_away")),
    "q8_1": (lambda x: Q8.quantize_q8_1(x, "half_even"), lambda x: Q8.quantize_q8_1(x, "half_away")),
    "q8_K": (_q8_K("negative_on_tie"), _q8_K("first")),
}

#: One quantizer per activation record of oracles/quant_types.py (with its oracles), in the records' order.
QUANTIZERS = [Quantizer(r.name, *ORACLES[r.name]) for r in QT.RECORDS if r.kind == "activation" and r.name in ORACLES]
IDS = [q.name for q in QUANTIZERS]

# ------------------------------------------------------------------ inputs

INPUT_KINDS = ("gaussian", "wide", "ties", "sign_ties", "zero_blocks", "constant")


@st.composite
def float_rows(draw: st.DrawFn, block: int) -> np.ndarray:
    """Rows of whole blocks: Gaussian data at one drawn scale, per-element binades ("wide"),
    blocks of exact ties (amax = 127 * 2^e and values (k + 1/2) * 2^e, so x * id = k + 1/2
    exactly), blocks holding +a and -a as their largest magnitudes, all-zero blocks, constant
    blocks; mixed block by block."""
    nb = draw(QS.block_counts(block), label="n_blocks")
    kinds = draw(st.lists(st.sampled_from(INPUT_KINDS), min_size=1, max_size=3, unique=True), label="kinds")
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    return make_row(nb, block, kinds, seed)


@functools.cache
def near_ties() -> np.ndarray:
    """Floats x in (0, 1) whose product with 127 rounds (fp32) to an exact tie k + 1/2 although
    the exact product is not one.  In a block whose largest magnitude is 1 (iscale = -127), a
    quantizer that rounds x * iscale to fp32 and then to the nearest integer (ISO C, the oracle)
    lands on the tie's even side; one whose compiler fuses the multiply into the rounding's add
    (``nearest_int(x * iscale)``, ``x * iscale + 12582912.f`` as one fmadd.s: GCC's default
    -ffp-contract=fast) rounds the exact product, to the other side (docs/findings.md)."""
    out = []
    for k in range(127):
        x = np.float32((k + 0.5) / 127)
        for _ in range(8):
            if np.float32(x * np.float32(127)) == k + 0.5 and float(x) * 127 != k + 0.5:
                out.append(x)
                break
            x = np.nextafter(x, np.float32(1))
    return np.array(out, np.float32)


def make_row(nb: int, block: int, kinds: tuple[str, ...] | list[str], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.empty((nb, block), np.float64)
    pick = rng.integers(0, len(kinds), nb)
    for b in range(nb):
        kind = kinds[pick[b]]
        e = float(rng.integers(-20, 20))
        if kind == "gaussian":
            v = rng.standard_normal(block) * 2.0 ** e
        elif kind == "wide":
            v = np.sign(rng.standard_normal(block)) * np.exp2(rng.uniform(-60, 60, block))
        elif kind in ("ties", "sign_ties"):
            v = (rng.integers(-127, 127, block) + 0.5) * 2.0 ** e
            i, j = rng.choice(block, 2, replace=False)
            v[i] = 127 * 2.0 ** e * (1 if rng.random() < 0.5 else -1)
            if kind == "sign_ties":  # both signs of the largest magnitude, the positive one first
                i, j = min(i, j), max(i, j)
                v[i], v[j] = 127 * 2.0 ** e, -127 * 2.0 ** e
        elif kind == "near_ties":  # amax = 2^e, the rest near ties: see near_ties()
            v = rng.choice(near_ties(), block) * rng.choice([-1.0, 1.0], block) * 2.0 ** e
            v[rng.integers(block)] = 2.0 ** e * (1 if rng.random() < 0.5 else -1)
        elif kind == "zero_blocks":
            v = np.zeros(block)
        else:  # constant
            v = np.full(block, 3.0 * 2.0 ** e)
        x[b] = v
    return x.reshape(-1).astype(np.float32)


# ------------------------------------------------------------------ running and comparing


def run_quantizer(q: Quantizer, target, x: np.ndarray, impl: int) -> np.ndarray:
    r = target.call("quant_from_float", [V.type_id(target, q.name), x.size, impl], [],
                    [In(x), Out(Q.row_bytes(q.name, x.size))])
    return Q.blocks(q.name, r.output(0, np.uint8)).copy()


def _qs_slice(name: str) -> slice:
    return slice(*QT.record(name).field("qs"))


def _context(q: Quantizer, target, x: np.ndarray, what: str) -> str:
    return f"quantize_row_{q.name}{what}, k={x.size} ({x.size // q.block} blocks), {target.id}"


def assert_rvv_vs_reference(q: Quantizer, x: np.ndarray, got: np.ndarray, ref: np.ndarray, context: str) -> None:
    """Where the RVV blocks differ from the reference ones, the difference is the documented one
    (ties rounded to even; q8_K: a sign flip of a block with +a and -a) and nothing else."""
    xb = np.asarray(x, np.float32).reshape(-1, q.block)
    qs = _qs_slice(q.name)
    problems = []
    for b in np.flatnonzero(np.any(got != ref, axis=1)):
        gq, rq = got[b, qs].view(np.int8).astype(int), ref[b, qs].view(np.int8).astype(int)
        if q.name == "q8_K":
            amax = np.max(np.abs(xb[b]))
            both = np.any(xb[b] == amax) and np.any(xb[b] == -amax)
            flipped = (got[b, 0:4].view(np.float32)[0] == -ref[b, 0:4].view(np.float32)[0]
                       and np.array_equal(gq, -rq)
                       and np.array_equal(got[b, 260:].view("<i2"), -ref[b, 260:].view("<i2")))
            if not (both and flipped):
                problems.append(f"block {b}: differs from the reference, not by the sign choice of a +-amax block")
            continue
        d, v = Q8.q8_scaled(xb[b:b + 1])
        scaled = v[0].astype(np.float64)
        diff = np.flatnonzero(gq != rq)
        ties = np.abs(scaled - np.trunc(scaled)) == 0.5
        even = np.rint(scaled).astype(int)
        bad = [i for i in diff if not (ties[i] and gq[i] == even[i])]
        if bad:
            i = bad[0]
            problems.append(f"block {b} element {i}: x*id={scaled[i]!r} -> RVV {gq[i]}, reference {rq[i]} "
                            f"(not an exact tie rounded to even; {len(bad)} such elements)")
        if not np.array_equal(got[b, 0:2], ref[b, 0:2]):
            problems.append(f"block {b}: d differs from the reference")
        if q.name == "q8_1":
            with np.errstate(over="ignore"):
                s = np.float16(np.float32(gq.sum()) * d[0]).view(np.uint16)
            if got[b, 2:4].view(np.uint16)[0] != s:
                problems.append(f"block {b}: s is not fp16(sum(qs) * d) of RVV's own quants")
    observe.record("blocks_differing_from_reference", float(np.count_nonzero(np.any(got != ref, axis=1))))
    assert not problems, (f"quantize_row_{q.name}: RVV differs from the reference beyond the documented "
                          f"rounding / sign rule [{context}]\n  " + "\n  ".join(problems[:5]))


_DTYPES = {"fp16": np.float16, "fp32": np.float32, "int8": np.int8, "int16": np.int16}


def _fields(r: QT.QuantType) -> dict[str, tuple[slice, type]]:
    out, off = {}, 0
    for f in r.fields:
        out[f.name] = (slice(off, off + f.nbytes), _DTYPES[f.role])
        off += f.nbytes
    return out


#: Fields of each block, from its record: name -> (byte slice, dtype to compare them as).
FIELDS = {q.name: _fields(QT.record(q.name)) for q in QUANTIZERS}


def assert_blocks_equal(q: Quantizer, got: np.ndarray, expected: np.ndarray, *, name: str, context: str) -> None:
    """Block rows equal bit for bit, compared field by field (so a message names d, s, qs or bsums, and
    an element by [block, index in the field])."""
    __tracebackhide__ = True
    for field, (sl, dtype) in FIELDS[q.name].items():
        g = np.ascontiguousarray(got[:, sl]).view(dtype)
        e = np.ascontiguousarray(expected[:, sl]).view(dtype)
        assert_bitwise_equal(g, e, name=f"{name}.{field}", context=context)


def check_quantizer(q: Quantizer, target, x: np.ndarray) -> None:
    got = run_quantizer(q, target, x, IMPL_RVV)
    twin = run_quantizer(q, target, x, IMPL_GENERIC)
    ref = q.ref_oracle(x)
    entry = V.scan(session().source.cpu_dir).quantizers.get(q.name)
    if V.rvv_quantizer_runs(target, q.name):
        expected, rule = q.rvv_oracle(x), "RVV rounding / sign rule"
    elif entry is not None and entry.rvv:  # rv64gc: the tree's RVV body is not compiled, its generic one is
        expected, rule = ref, f"the {target.isa.name} build compiles no RVV body, so quantize_row_ref semantics"
        observe.note("path", f"generic (the {target.isa.name} build has no vector extension)")
    else:  # a tree without an RVV body: the entry point is ggml's generic quantizer (arch-fallback.h)
        expected, rule = ref, "no RVV body in this tree, so quantize_row_ref semantics"
        observe.note("path", "generic (no RVV body in arch/riscv/quants.c)")
    if q.name == "q8_K":  # the reference leaves the bsums of all-zero blocks unwritten
        zero = Q8.quantize_q8_K(x)[1]
        twin[zero, 260:] = ref[zero, 260:]
        if expected is ref:
            got[zero, 260:] = ref[zero, 260:]
    assert_blocks_equal(q, got, expected, name=f"quantize_row_{q.name}(x)",
                        context=_context(q, target, x, " (entry point)") + f"; oracle: {rule}")
    assert_blocks_equal(q, twin, ref, name=f"quantize_row_{q.name}_generic(x)",
                        context=_context(q, target, x, "_generic") + "; oracle: quantize_row_ref semantics")
    assert_rvv_vs_reference(q, x, got, ref, _context(q, target, x, ""))


def edge_rows(block: int) -> list[tuple[int, tuple[str, ...], int]]:
    """The rows every run checks, as (blocks, input kinds, seed): 1, 2 and 3 blocks of exact
    ties, +-amax pairs, zero and constant blocks, a block of near ties (:func:`near_ties`); 5
    blocks of mixed kinds; the longest real model's row (``block_counts``' real sizes: 448 blocks
    of 32, 56 super-blocks) and a row of 257 blocks (a block index past 8 bits).  The size table
    (cases/loops.py) reads its counts."""
    mixed = tuple(INPUT_KINDS)
    rows = [(1, ("ties",), 1), (2, ("sign_ties",), 2), (3, ("zero_blocks", "ties"), 3),
            (1, ("constant",), 4), (1, ("sign_ties",), 5), (1, ("near_ties",), 6)]
    rows += [(nb, mixed, 6 + i) for i, nb in enumerate(QS.every_run_counts(block)) if nb > 3]
    return rows + [(257, mixed, 6)]


# ------------------------------------------------------------------ coverage (cases/coverage.py)


@coverage.register("quantize")
def coverage_scan(inv: tree.Tree) -> coverage.FamilyScan:
    """The activation quantizers' scan of the tree (:func:`cases.quant_variants.quantizer_coverage`)."""
    return V.quantizer_coverage(inv, QUANTIZERS)


# ------------------------------------------------------------------ loop levels (cases/loops.py)


def _drawn(vlen: int) -> dict[str, L.Drawn]:
    """What test_quantize_edges checks every run and test_quantize draws, per size variable."""
    out = {}
    for var, block in (("blocks of 32", 32), ("super-blocks of 256", 256)):
        lo, hi = QS.block_count_range(block)
        out[var] = L.Drawn(sorted({nb for nb, _, _ in edge_rows(block)}), lo, hi)
    out["elements of a super-block"] = L.Drawn((256,), 256, 256)
    chunk = min(_vlmax_e32m8(vlen), 256)  # the first vsetvl chunk of a super-block
    out["elements of a vsetvl chunk"] = L.Drawn((chunk,), chunk, chunk)
    return out


def _vlmax_e32m8(vlen: int) -> int:
    return vlen * 8 // 32


L.register(L.Family(
    name="quantize", doc="docs/quants.md",
    loops=[
        L.Loop("quantize_row_q8_0, quantize_row_q8_1", "row: one block of 32 per trip (vl = 32, e32m8)",
               "blocks of 32", lambda v: 1, remainder=False, real=QS.real_counts(32),
               source="quants.c:quantize_row_q8_0, quantize_row_q8_1"),
        L.Loop("quantize_row_q8_K", "row: one super-block per trip", "super-blocks of 256", lambda v: 1,
               remainder=False, real=QS.real_counts(256), source="quants.c:quantize_row_q8_K"),
        L.Loop("quantize_row_q8_K", "inside a super-block: strip-mining, vsetvl_e32m8(rem) (min/max pass and "
               "quantize pass)", "elements of a super-block", _vlmax_e32m8, remainder=False,
               vlens=(128, 256, 512), source="quants.c:quantize_row_q8_K"),
        L.Loop("quantize_row_q8_K", "inside a vsetvl chunk: 16-element bsums (a peeled group, then k += 16)",
               "elements of a vsetvl chunk", lambda v: 16, remainder=False, source="quants.c:quantize_row_q8_K"),
    ],
    drawn=_drawn,
    notes=(
        "At VLEN 1024 the strip-mining loop of quantize_row_q8_K makes one trip per super-block (VLMAX of e32m8 "
        "is 256 = QK_K), so it is crossed twice only across super-blocks; 256 is a multiple of VLMAX at every "
        "VLEN, so that loop has no remainder by construction.",
        "Every run: `test_quantize_edges` (`edge_rows`); at random: `test_quantize` (`block_counts`).",
    )))
