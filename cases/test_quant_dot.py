"""Quantized dot products (``ggml_vec_dot_<type>_<q8>`` in arch/riscv/quants.c) against NumPy oracles.

The kernels are reached as mul_mat reaches them (``ggml_get_type_traits_cpu(type)->vec_dot``);
the scalar twin ``*_generic`` of the same build is run on the same inputs as a second opinion.

Bound (one rule, constants per type, derived from the kernels' arithmetic).  Every kernel
computes integer partial sums of ``q_x * q_y`` (times integer sub-block scales) exactly --
widening multiplies, 16/32-bit reductions whose range the type bounds -- and floating-point
error enters only where those sums are converted to fp32, multiplied by the fp16 / fp32 / E8M0
scales, gathered in per-block float sums and accumulated over the row.  If on its way to the
result every elementwise product passes through at most ``K`` fp32 roundings (products,
additions, inexact int->float conversions), then (Higham, ch. 3; an FMA only saves roundings)::

    |got - exact| <= gamma(K) * sum_i |x_i y_i|  +  2^-149 * (sum_i |int_i| + K)

with ``gamma(K) = K u / (1 - K u)``, ``u = 2^-24``, the magnitude taken part by part (the
main part and the offset part -- minimums, deltas, q8_1's ``m * s`` -- that the kernels
compute separately; any grouping of products into partial sums is bounded by it).  The second
term covers underflow: a product landing in fp32's subnormal range errs by up to 2^-150
absolutely instead of relatively, and a scale product (``d_x * d_y``, ``E8M0 * d_y``) that
underflows carries that error into every integer sum it multiplies afterwards -- at most
``sum|int_i|`` times in all (the integer parts of the elementwise products), plus once per
other product.  ``K = a + b * n_blocks``, where ``b`` counts the terms accumulated per
block and ``a`` the roundings before and after that accumulation, maximised over the RVV
variants of the tree and the generic twin; each table entry below says where its numbers
come from.  Conversions of integer sums are counted where the type lets them exceed 2^24.

Exact by construction: when every float scale of a row pair is a power of two and
``sum |x_i y_i| <= 2^24 * unit`` (``unit`` the finest bit of any product), every partial sum
any kernel forms is an fp32 number and the result must be exact (bound 0); the oracle says
when this holds (``DotExpected.exact``) and :func:`test_vec_dot_exact` draws such rows.

Domain: float scales are finite (no inf / NaN in d, dmin, m, s); activation quants lie in
[-127, 127] (what every ggml quantizer produces; q8 weights may also hold -128); activation
scales are capped so that no partial sum can exceed 2^126 (fp32 overflow is not a kernel
error).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from cases import quant_strategies as QS
from cases import quant_variants as V
from cases import strategies as S
from cases.strategies import KernelSpec
from harness.check import observe
from harness.check.compare import assert_within_bound
from harness.core.config import cache_dir, locked
from harness.emulators.protocol import In, Out
from harness.ggml import tree
from harness.plugin.targets import session
from oracles import quants as Q
from oracles.bounds import U_F32, gamma

# ------------------------------------------------------------------ the table


@dataclass(frozen=True, repr=False)
class QuantDot(KernelSpec):
    """One quantized dot product: ``ggml_vec_dot_<name>_<vec_dot_type>``."""

    name: str  # ggml type name (and the test id)
    vec_dot_type: str  # the activation type the CPU backend pairs it with
    depth: tuple[int, int]  # (a, b): K = a + b * n_blocks roundings at most
    derivation: str  # where (a, b) come from
    variants: tuple[int, ...] = ()  # the _vlN variants the derivation read (a new one needs reading)

    @property
    def entry(self) -> str:
        return f"ggml_vec_dot_{self.name}_{self.vec_dot_type}"

    @property
    def requires(self) -> tuple[str, ...]:
        """What the tree must have for this kernel's tests (harness/plugin/ skips them as "not in
        this tree" otherwise): both ggml types and the entry point."""
        return f"GGML_TYPE_{self.name.upper()}", f"GGML_TYPE_{self.vec_dot_type.upper()}", self.entry

    def rounding_depth(self, n_blocks: int) -> int:
        a, b = self.depth
        return a + b * n_blocks

    def bound(self, n_blocks: int, expected: Q.DotExpected) -> float:
        k = self.rounding_depth(n_blocks)
        return gamma(k, U_F32) * expected.magnitude + 2.0 ** -149 * (expected.int_magnitude + k)

    def describe_bound(self, n_blocks: int) -> str:
        a, b = self.depth
        return (f"gamma(K) * sum|x_i y_i| + 2^-149 * (sum|int_i| + K), K = {a} + {b} * {n_blocks} blocks = "
                f"{self.rounding_depth(n_blocks)}: {self.derivation}")


DOTS = [
    QuantDot("q4_0", "q8_0", (2, 1), "per block sumi * d_x * d_y (two products; |sumi| <= 2^15 converts exactly), "
             "one sum over blocks; RVV and generic alike"),
    QuantDot("q4_1", "q8_1", (2, 1), "per block (d_x*d_y) * sumi + m*s (fp16 x fp16 products are exact; one product, "
             "one addition), one sum over blocks"),
    QuantDot("q5_0", "q8_0", (2, 1), "as q4_0"),
    QuantDot("q5_1", "q8_1", (2, 1), "as q4_1"),
    QuantDot("q8_0", "q8_0", (1, 1), "per block sumi * (d_x*d_y) (exact fp16 x fp16, one product; |sumi| < 2^20), "
             "one sum over blocks"),
    QuantDot("q1_0", "q8_0", (6, 1), "per 128-block: 4 terms d_y * sum (one product each) summed in acc (4 additions), "
             "times d_x (one product), one sum over blocks; vl128, vl256 and generic alike",
             variants=(128, 256)),
    QuantDot("mxfp4", "q8_0", (2, 1), "per block (E8M0 * d_y) * acc: the scale product is exact unless it lands in "
             "fp32's subnormals (counted), one product, one sum over blocks",
             variants=(128, 256)),
    QuantDot("iq4_nl", "q8_0", (1, 1), "per block (d_x*d_y exact) * acc: one product, one sum over blocks",
             variants=(128, 256)),
    QuantDot("q2_K", "q8_K", (3, 2), "RVV: dmin term and dall term per block (scale product + product each) in one sum: "
             "2 + 2 nb; generic: dall*isum - dmin*summs (3 roundings) per block: 3 + nb",
             variants=(128, 256)),
    QuantDot("q3_K", "q8_K", (10, 1), "RVV: d * isum per block (2 roundings; |isum| < 2^23): 2 + nb; generic: 8 lane "
             "sums of d * aux32 (2 roundings, nb terms) added at the end (8): 10 + nb",
             variants=(128, 256, 512, 1024)),
    QuantDot("q4_K", "q8_K", (10, 2), "vl128: two fused terms per block after one fadd: 2 + 2 nb; vl256: dmin*sumi and "
             "d*(sum_1+sum_2) (inexact conversion past 2^24): 3 + 2 nb; generic: 8 lanes + mins, 2 + nb + 8",
             variants=(128, 256)),
    QuantDot("q5_K", "q8_K", (10, 1), "RVV: mins in sumf, d*aux32 (conversion, scale product, product) in sums, one final "
             "addition: 4 + nb; generic: as q4_K, 10 + nb"),
    QuantDot("q6_K", "q8_K", (10, 2), "vl128: two fmadd terms per block (conversion, scale product): 2 + 2 nb; vl256-1024: "
             "d * sum_t (conversion past 2^24, 2 products): 3 + nb; generic: 8 lane sums: 10 + nb",
             variants=(128, 256, 512, 1024)),
    QuantDot("tq1_0", "q8_K", (2, 1), "per block sum * d_y * d_x (two products, |sum| < 2^16), one sum over blocks",
             variants=(128, 256, 512)),
    QuantDot("tq2_0", "q8_K", (2, 1), "per block (float)sumi * (d_y*d_x): two products, one sum over blocks",
             variants=(128, 256)),
    QuantDot("iq2_xxs", "q8_K", (10, 1), "vl512/1024: per block 8 float terms in sum, then sum * (d_x*d_y): 2 + 8 + nb "
             "(vl128/256: 4 terms); generic: d * bsum, 3 + nb; the final 0.125 is exact",
             variants=(128, 256, 512)),
    QuantDot("iq2_xs", "q8_K", (10, 1), "vl512/1024: per block 8 float terms (isum*sc pairs) then scaled: 2 + 8 + nb; "
             "vl128/256 and generic: d * sum (inexact conversion), 3 + nb",
             variants=(128, 256, 512)),
    QuantDot("iq2_s", "q8_K", (18, 1), "vl128/256/512: per block 16 float terms in sum_block, then sum_block * (d_x*d_y): "
             "2 + 16 + nb; vl1024: 1 term; generic: 3 + nb",
             variants=(128, 256, 512, 1024)),
    QuantDot("iq3_xxs", "q8_K", (10, 1), "vl1024: 8 float terms per block then d * block_sum: 2 + 8 + nb; vl128/256: 4 "
             "pairs (5); vl512: 2 inexact conversions; generic 3 + nb; the final 0.25 is exact",
             variants=(128, 256, 512, 1024)),
    QuantDot("iq3_s", "q8_K", (10, 1), "vl128: 8 float terms per block then sum_block * (d_x*d_y): 2 + 8 + nb; "
             "vl256: 4 pairs; vl512/1024: 2; generic 2 + nb",
             variants=(128, 256, 512)),
    QuantDot("iq1_s", "q8_K", (3, 1), "per block d_x * d_y * (sumi + 1/8 sumi1): one addition, two products, one sum "
             "over blocks; RVV and generic alike",
             variants=(128, 256, 512, 1024)),
    QuantDot("iq1_m", "q8_K", (3, 1), "as iq1_s",
             variants=(128, 256, 512, 1024)),
    QuantDot("iq4_xs", "q8_K", (3, 8), "RVV: d_x*d_y*(sumi) per block (conversion past 2^24, two products): 3 + nb; "
             "generic: 8 terms (d4d8*(ls-32)) * sumi per block: 3 + 8 nb",
             variants=(128, 256, 512, 1024)),
]

BY_NAME = {k.name: k for k in DOTS}
IDS = [k.name for k in DOTS]

# ------------------------------------------------------------------ running


def run_dot(kernel: QuantDot, target, pair: QS.Pair, impl: int) -> float:
    """``impl`` 0: the type traits' vec_dot (the RVV entry point); 1: the *_generic twin."""
    r = target.call("quant_vec_dot", [V.type_id(target, kernel.name), pair.n, impl], [],
                    [In(pair.x), In(pair.y), Out(4)])
    return float(r.output(0, np.float32)[0])


def _hex_rows(pair: QS.Pair, limit: int = 600) -> str:
    """The rows' bytes, when short enough to read (a shrunk case)."""
    if pair.x.size + pair.y.size > limit:
        return f"(rows of {pair.x.size} + {pair.y.size} bytes not shown)"
    return f"x={pair.x.tobytes().hex()} y={pair.y.tobytes().hex()}"


def check_dot(kernel: QuantDot, target, pair: QS.Pair, *, exact: bool = False) -> None:
    """Run the RVV entry point and its generic twin on ``pair``; both must be within the bound of
    the oracle (0 when the inputs are exact by construction).  When they fail, the message says
    which of the three (RVV, twin, oracle) stands apart."""
    expected = Q.dot(kernel.name, pair.x, kernel.vec_dot_type, pair.y)
    if exact and not expected.exact:
        raise AssertionError(f"harness: the exact-by-construction row pair is not exact ({expected}) [{pair!r}]")
    nb = pair.n_blocks
    bound = 0.0 if expected.exact else kernel.bound(nb, expected)
    derivation = ("exact by construction (power-of-two scales, every partial sum an fp32 number)"
                  if expected.exact else kernel.describe_bound(nb))
    # The failure report (and `rvvdiff repro`, --c) replays the example's last call: the twin runs
    # first, so that the last call is the RVV kernel's unless only the twin is wrong (run again below).
    twin = run_dot(kernel, target, pair, 1)
    got = run_dot(kernel, target, pair, 0)
    ok_rvv = abs(got - expected.value) <= bound
    ok_twin = abs(twin - expected.value) <= bound
    agree = abs(got - twin) <= 2 * bound
    observe.record("rvv_vs_generic/bound", abs(got - twin) / (2 * bound) if bound else float(got != twin))
    who = ("" if ok_rvv and ok_twin else
           "RVV differs from the oracle and from the generic twin, which agree" if ok_twin else
           "the generic twin differs from the oracle, the RVV kernel agrees with it" if ok_rvv else
           "RVV and the generic twin agree with each other, not with the oracle: suspect the oracle" if agree else
           "RVV, generic twin and oracle all disagree")
    context = (f"{kernel.entry}, n={pair.n} ({nb} {kernel.name} blocks), {target.id}; generic twin gave {twin!r}; "
               f"{who}; {_hex_rows(pair)}")
    assert_within_bound(got, expected.value, bound, name=f"{kernel.entry}(x, y)", context=context, derivation=derivation)
    if not ok_twin:
        twin = run_dot(kernel, target, pair, 1)
    assert_within_bound(twin, expected.value, bound, name=f"{kernel.entry}_generic(x, y)", context=context,
                        derivation=derivation)


# ------------------------------------------------------------------ coverage


def test_rvv_vec_dot_coverage(target) -> None:
    """Every RVV vec_dot of the tree under test is in the table, and every VLEN variant it has is
    one the table's bound was derived from (the ``quant_dot`` scan of cases/coverage.py: uncovered
    entry points and variants fail, with file:line); table entries the tree lacks are not in this
    tree (listed, and their tests skipped); for the others, the tree's own block sizes and
    pairings match the oracles'."""
    inv = tree.of(session().source)
    scan = V.dot_coverage(inv, DOTS)
    problems = [f"{u.name} ({u.where}): {u.why}" for u in scan.uncovered]
    found = V.scan(session().source.cpu_dir)
    types = V.tree_types(target)
    by_id = {t.id: t.name for t in types.values()}
    for k in DOTS:
        if inv.missing(k.requires):
            continue  # not in this tree: listed below
        t = types.get(k.name)
        if t is None:
            problems.append(f"{k.name}: the tree's source has GGML_TYPE_{k.name.upper()}, but its build does not report it "
                            "(quant_types)")
            continue
        f = Q.fmt(k.name)
        if (t.block, t.nbytes) != (f.block, f.nbytes):
            problems.append(f"{k.name}: the tree's blocks are {t.block} elements in {t.nbytes} bytes, the oracle's "
                            f"{f.block} in {f.nbytes}: the struct layout changed")
        if by_id.get(t.vec_dot_type) != k.vec_dot_type or found.dots.get(k.name, k).vec_dot_type != k.vec_dot_type:
            problems.append(f"{k.name}: the tree pairs it with {by_id.get(t.vec_dot_type)}, the table with {k.vec_dot_type}")
        if not t.has_vec_dot:
            problems.append(f"{k.name}: the tree's CPU type traits have no vec_dot for it")
        if not t.has_generic:
            problems.append(f"{k.name}: the kernel server knows no *_generic twin for it")
    observe.note("rvv_types", " ".join(sorted(t for t, e in found.dots.items() if e.rvv)))
    if scan.not_in_tree:
        observe.note("not_in_tree", "; ".join(scan.not_in_tree))
    assert not problems, "coverage of the tree under test:\n  " + "\n  ".join(problems)


# ------------------------------------------------------------------ differential tests


@pytest.mark.parametrize("kernel", DOTS, ids=IDS)
def test_vec_dot(kernel: QuantDot, target, request: pytest.FixtureRequest) -> None:
    """Raw blocks with edge encodings (zero / negative / subnormal / largest scales, extreme
    sub-scales, constant payloads), activations raw or quantized from floats, rows of one block
    to ~10k elements and real models' row lengths (up to 14336); first the fixed edge pairs of
    ``QS.edge_pairs`` (1, 2, 3 blocks among them), last ``QS.loop_pairs`` (5 blocks, k = 14336)."""
    S.explore(request, QS.pairs(kernel.name, kernel.vec_dot_type), QS.edge_pairs(kernel.name, kernel.vec_dot_type),
              lambda pair: check_dot(kernel, target, pair), after=QS.loop_pairs(kernel.name, kernel.vec_dot_type))


@pytest.mark.parametrize("kernel", DOTS, ids=IDS)
def test_vec_dot_exact(kernel: QuantDot, target, request: pytest.FixtureRequest) -> None:
    """Rows exact by construction: the result must be exact, so a lost, doubled or misplaced
    block or element always shows, however small; first 1, 2 and 3 blocks of random and of
    saturated bytes, and after the draws 5 blocks and the longest real model's row the type can
    make exact (``QS.exact_every_run_counts``)."""
    counts = QS.exact_every_run_counts(kernel.name, kernel.vec_dot_type)
    edges = [QS.exact_pair(kernel.name, kernel.vec_dot_type, nb, seed=nb, payload=payload, subscales="random")
             for nb in counts if nb <= QS.EDGE_BLOCKS for payload in ("random", "ones")]
    loops = [QS.exact_pair(kernel.name, kernel.vec_dot_type, nb, seed=nb, payload="random", subscales="random")
             for nb in counts if nb > QS.EDGE_BLOCKS]
    S.explore(request, QS.exact_pairs(kernel.name, kernel.vec_dot_type), edges,
              lambda pair: check_dot(kernel, target, pair, exact=True), after=loops)


GRID_DOTS = [k for k in DOTS if k.name in QS.GRID_SWEEPS]


@pytest.mark.parametrize("kernel", GRID_DOTS, ids=[k.name for k in GRID_DOTS])
@pytest.mark.parametrize("y_seed", [0, 1])
def test_vec_dot_grid(kernel: QuantDot, target, y_seed: int) -> None:
    """Every grid entry of the IQ type (and every sign pattern, sub-scale and delta), in one row
    against power-of-two activations with small quants: exact, so one wrong entry shows."""
    x = QS.grid_sweep_row(kernel.name, seed=y_seed)
    n = x.shape[0] * Q.fmt(kernel.name).block
    y = QS.exact_activation_row(kernel.vec_dot_type, n // Q.fmt(kernel.vec_dot_type).block, y_seed, max_q=1)
    check_dot(kernel, target, QS.Pair(kernel.name, kernel.vec_dot_type, x, y), exact=True)


# ------------------------------------------------------------------ weights made by ggml's quantizers

#: Float rows the corpus quantizes: shape of the data, and block counts (1, 2, 3 and a long row).
WEIGHT_DATA = ("gaussian", "outliers", "constant", "ramp")
WEIGHT_BLOCKS = (1, 2, 3, 33)


def _weight_floats(kind: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "gaussian":
        return rng.standard_normal(n).astype(np.float32)
    if kind == "outliers":
        v = rng.standard_normal(n)
        v[rng.integers(0, n, max(1, n // 50))] *= 40
        return v.astype(np.float32)
    if kind == "constant":
        return np.full(n, 0.75, np.float32)
    if kind == "ramp":
        return np.linspace(-3, 1, n).astype(np.float32)
    raise ValueError(kind)


def _quantizer_sources_hash() -> str:
    """Content of the files that define the quantizers (ggml-base), so that mutants of the RVV
    kernels reuse a corpus and a change to a quantizer makes a new one."""
    src = session().source.ggml / "src"
    h = hashlib.sha256()
    for rel in ("ggml-quants.c", "ggml-quants.h", "ggml-common.h"):
        h.update((src / rel).read_bytes())
    return h.hexdigest()[:16]


#: Deadline of the corpus's quantize_chunk calls.  ggml's IQ1 / IQ2 quantizers build their grid
#: tables on first use, which takes minutes under QEMU: over 120 s (the kernel deadline) for iq1_s
#: in the v build in a CI rehearsal whose 2 cores were shared with other runs.  This is set-up made
#: once per quantizer source, not a kernel under test, so it gets its own deadline.
CORPUS_TIMEOUT = 1200.0


def weight_corpus(target, name: str) -> dict[tuple[str, int], np.ndarray]:
    """Rows of ``name`` made by ``ggml_quantize_chunk`` (with an importance matrix of ones) from
    the float rows of WEIGHT_DATA x WEIGHT_BLOCKS.  The IQ1/IQ2 quantizers need grid tables that
    take minutes to build under QEMU, so the rows are made once per quantizer source and kept in
    the cache (the quantizers are scalar reference code: any target makes the same bytes)."""
    f = Q.fmt(name)
    path = cache_dir() / "quant_corpus" / _quantizer_sources_hash() / f"{name}.npz"
    with locked(path.with_suffix(".lock")):
        if not path.exists():
            rows = {}
            for nb in WEIGHT_BLOCKS:
                n = nb * max(f.block, 256) if f.block < 256 and nb == 33 else nb * f.block
                src = np.stack([_weight_floats(k, n, seed=nb) for k in WEIGHT_DATA])
                r = target.call("quantize_chunk", [V.type_id(target, name), len(WEIGHT_DATA), n], [],
                                [In(src), In(np.ones(n, np.float32)), Out(len(WEIGHT_DATA) * Q.row_bytes(name, n))],
                                timeout=CORPUS_TIMEOUT)
                out = r.output(0, np.uint8).reshape(len(WEIGHT_DATA), -1)
                for k, row in zip(WEIGHT_DATA, out):
                    rows[f"{k}-{nb}"] = row
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.stem + ".tmp.npz")
            np.savez(tmp, **rows)
            tmp.replace(path)
        with np.load(path) as z:
            return {(k.rsplit("-", 1)[0], int(k.rsplit("-", 1)[1])): z[k] for k in z.files}


@pytest.mark.parametrize("kernel", DOTS, ids=IDS)
def test_vec_dot_weights(kernel: QuantDot, target) -> None:
    """Weights made by ggml's own quantizer from float rows (what models hold: scales and
    sub-scales chosen by the quantizer's search), each against activations quantized from
    signed, positive and constant floats: every row of the corpus, every run."""
    corpus = weight_corpus(target, kernel.name)
    for key in sorted(corpus):
        x = Q.blocks(kernel.name, corpus[key])
        n = x.shape[0] * Q.fmt(kernel.name).block
        for seed, kind in enumerate(QS.FLOAT_KINDS):
            y = QS.quantized_activation_row(kernel.vec_dot_type, QS.activation_floats(kind, n, seed))
            observe.note("weights", f"{key[0]} x {key[1]} blocks")
            check_dot(kernel, target, QS.Pair(kernel.name, kernel.vec_dot_type, x, y))


# ------------------------------------------------------------------ findings: minimal reproducers


def _row(name: str, nb: int = 1, *, fill: dict[int, int] | None = None) -> np.ndarray:
    """``nb`` blocks of ``name``: bytes from ``fill`` (offset -> value, in every block), zero
    elsewhere, and the block scale d = 1 (its other float scales 0)."""
    f = Q.fmt(name)
    b = np.zeros((nb, f.nbytes), np.uint8)
    for off, v in (fill or {}).items():
        b[:, off] = v
    lay = QS.LAYOUTS[name]
    one16 = np.float16(1.0).view(np.uint16)
    if lay.fp32:
        b[:, lay.fp32[0]:lay.fp32[0] + 4] = np.array([1.0], np.float32).view(np.uint8)
    if lay.fp16:
        b[:, lay.fp16[0]:lay.fp16[0] + 2] = np.array([one16], np.uint16).view(np.uint8)
    if lay.e8m0:
        b[:, lay.e8m0[0]] = 128
    if lay.iq1_m_scale:
        QS.set_iq1_m_scale(b, np.full(nb, one16, np.uint16))
    return b


def _fill(start: int, stop: int, value: int) -> dict[int, int]:
    return {i: value for i in range(start, stop)}


def _activations(name: str, n: int, lo: int, hi: int, q: int = 1) -> np.ndarray:
    """Activations ``name`` with d = 1 and quants ``q`` on elements [lo, hi), 0 elsewhere."""
    qs = np.zeros(n, np.int64)
    qs[lo:hi] = q
    f = Q.fmt(name)
    y = _row(name, n // f.block)
    if name == "q8_K":
        y[:, 4:260] = qs.reshape(-1, 256).astype(np.int8).view(np.uint8)
        y[:, 260:292] = qs.reshape(-1, 16, 16).sum(axis=2).astype("<i2").view(np.uint8)
    else:
        y[:, 2:34] = qs.reshape(-1, 32).astype(np.int8).view(np.uint8)
    return y


@dataclass(frozen=True, repr=False)
class Finding(KernelSpec):
    """A bug of the pinned tree, as its smallest case (docs/findings.md; known_failures.toml)."""

    name: str
    kernel: str
    pair: Callable[[], QS.Pair]

    @property
    def requires(self) -> tuple[str, ...]:
        return BY_NAME[self.kernel].requires


def _pair(kernel: str, x: np.ndarray, lo: int, hi: int, q: int = 1) -> QS.Pair:
    k = BY_NAME[kernel]
    return QS.Pair(kernel, k.vec_dot_type, x, _activations(k.vec_dot_type, x.shape[0] * Q.fmt(kernel).block, lo, hi, q))


FINDINGS = [
    # The three below hold under default QEMU and fail under --rvv-stress: x = 1 everywhere,
    # y = 1: 256 (iq1_m: x = -1 + 1/8, -224).
    Finding("q3_K_vl512_agnostic_accumulator", "q3_K",  # VLEN 512, 1024, stress only
            lambda: _pair("q3_K", _row("q3_K", fill={**_fill(0, 32, 0xFF), **_fill(32, 96, 0x55),
                                                     **_fill(96, 104, 0x11), **_fill(104, 108, 0xAA)}), 0, 256)),
    Finding("q6_K_vl512_agnostic_accumulator", "q6_K",  # VLEN 512, 1024, stress only
            lambda: _pair("q6_K", _row("q6_K", fill={**_fill(0, 128, 0x11), **_fill(128, 192, 0xAA),
                                                     **_fill(192, 208, 1)}), 0, 256)),
    Finding("iq1_m_vl512_agnostic_accumulator", "iq1_m",  # VLEN 512, 1024, stress only
            lambda: _pair("iq1_m", _row("iq1_m"), 0, 256)),
    # One block (an odd count): x = 2 everywhere (E8M0 128, nibbles 2), y = 1: 64; RVV gives 0.
    Finding("mxfp4_odd_block_dropped", "mxfp4",  # every VLEN
            lambda: _pair("mxfp4", _row("mxfp4", fill={i: 0x22 for i in range(1, 17)}), 0, 32)),
    # One block: x = 1 (d 1, nibbles 8 -> kvalue 1), y = 1: 32; RVV gives 0.
    Finding("iq4_nl_odd_block_dropped", "iq4_nl",  # every VLEN
            lambda: _pair("iq4_nl", _row("iq4_nl", fill={i: 0x88 for i in range(2, 18)}), 0, 32)),
    # Sub-block 0: scale 1, nibbles 15, y = 69: sum 32 * 15 * 69 = 33120 > 32767; RVV gives -32416.
    Finding("q4_K_int16_subblock_sum", "q4_K",  # VLEN 256, 512, 1024 (vl256)
            lambda: _pair("q4_K", _row("q4_K", fill={4: 1, **{16 + i: 0x0F for i in range(128)}}), 0, 32, 69)),
    # Every element 1 (grid entry 0 = 8s, scale 2*0+1, d/8), y = 1 on sub-block 2 only: 32.
    Finding("iq2_xxs_vl512_subblock_offsets", "iq2_xxs",  # VLEN 512, 1024 (vl512)
            lambda: _pair("iq2_xxs", _row("iq2_xxs"), 64, 96)),
    # Sub-block 0: low nibble scale 0 (ls 1) for elements 0-15, high nibble 1 (ls 3) for 16-31; y = 1 on 0-15: 16.
    Finding("iq2_s_vl1024_scale_nibbles_swapped", "iq2_s",  # VLEN 1024
            lambda: _pair("iq2_s", _row("iq2_s", fill={74: 0x10}), 0, 16)),
    # Every element 1 (grid entry 0 = 4s, scale 1, d/4), y = 1 on sub-block 2 only: 32.
    Finding("iq3_xxs_vl1024_subblock_offsets", "iq3_xxs",  # VLEN 1024
            lambda: _pair("iq3_xxs", _row("iq3_xxs"), 64, 96)),
]


@pytest.mark.parametrize("finding", FINDINGS, ids=[f.name for f in FINDINGS])
def test_vec_dot_finding(finding: Finding, target) -> None:
    """The smallest case of each finding (exact: one block, d = 1, small integers), at every
    target: it fails where the pinned tree is wrong (the VLENs noted in FINDINGS, listed in
    known_failures.toml) and must pass everywhere else, and everywhere once fixed."""
    check_dot(BY_NAME[finding.kernel], target, finding.pair(), exact=True)
    observe.note("finding", f"{finding.name}: right at {target.id}")


# ------------------------------------------------------------------ which variant ran


@pytest.mark.parametrize("kernel", DOTS, ids=IDS)
def test_traced_vec_dot_variant(kernel: QuantDot, target) -> None:
    """Trace one call: record which VLEN variant executed (table: ``python -m
    cases.quant_variants``), and fail if it is not the one the source dispatches to at this
    VLEN -- in particular if the scalar twin ran although the tree has an RVV path."""
    found = V.scan(session().source.cpu_dir)
    entry = found.dots.get(kernel.name)
    if entry is None or entry.name != kernel.entry:
        pytest.skip(f"not in this tree: {found.path} defines no {kernel.entry} (ggml's generic serves it; "
                    "test_rvv_vec_dot_coverage lists it)")
    if entry.dispatch_note:
        pytest.skip(f"which variant serves VLEN {target.vlen} is unknown: {entry.dispatch_note}")
    vlen_bytes = int(target.server().hello.get("rvv_vlen_bytes", 0))
    assert vlen_bytes * 8 == target.vlen, f"the server runs at VLEN {vlen_bytes * 8}, not {target.vlen}"
    pair = QS.exact_pair(kernel.name, kernel.vec_dot_type, 2, seed=1, payload="random", subscales="random")
    tr = target.trace("quant_vec_dot", [V.type_id(target, kernel.name), pair.n, 0], [],
                      [In(pair.x), In(pair.y), Out(4)])
    label, problem = V.observed_variant(entry, tr.call, target.vlen)
    src = session().source
    table = V.record(f"{src.commit}-{src.content_hash()[:8]}", target.isa.name, target.vlen, target.stress,
                     kernel.name, label)
    observe.note("variant", label)
    observe.note("variant_table", str(table))
    assert problem is None, problem
