"""The quant_dot family: quantized dot products (``ggml_vec_dot_<type>_<q8>`` in arch/riscv/quants.c)
against NumPy oracles -- the table, running and checking, the weight corpus, the findings' minimal
cases, the loop levels and the coverage scan.  The tests are in cases/test_quant_dot.py.

The table ``DOTS`` has one entry per record of oracles/quant_types.py with a dot product's row
(``vec_dot_type`` and ``bound``): the numbers ``(a, b)`` of the rule below, per type, and their
derivations live there.

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
variants of the tree and the generic twin; each record's ``DotBound`` says where its numbers
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

import functools
import hashlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cases import coverage
from cases import loops as L
from cases import quant_blocks as QB
from cases import quant_strategies as QS
from cases import quant_variants as V
from cases.strategies import KernelSpec
from harness.check import observe
from harness.check.compare import assert_within_bound, note_expected
from harness.core.config import cache_dir, locked
from harness.emulators.protocol import In, Out
from harness.ggml.tree import Tree
from harness.plugin.targets import session
from harness.toolchain import host
from oracles import dots as OD
from oracles import quant_types as QT
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
        """What the tree must have for this kernel's tests (harness/plugin/marks.py skips them as "not in
        this tree" otherwise): both ggml types and the entry point."""
        return f"GGML_TYPE_{self.name.upper()}", f"GGML_TYPE_{self.vec_dot_type.upper()}", self.entry

    def rounding_depth(self, n_blocks: int) -> int:
        a, b = self.depth
        return a + b * n_blocks

    def bound(self, n_blocks: int, expected: OD.DotExpected) -> float:
        k = self.rounding_depth(n_blocks)
        return gamma(k, U_F32) * expected.magnitude + 2.0 ** -149 * (expected.int_magnitude + k)

    def describe_bound(self, n_blocks: int) -> str:
        a, b = self.depth
        return (f"gamma(K) * sum|x_i y_i| + 2^-149 * (sum|int_i| + K), K = {a} + {b} * {n_blocks} blocks = "
                f"{self.rounding_depth(n_blocks)}: {self.derivation}")


#: One entry per record with a dot product's row, in the records' order (the test ids).
DOTS = [QuantDot(r.name, r.vec_dot_type, r.bound.depth, r.bound.derivation, r.bound.variants)
        for r in QT.dot_records() if r.bound is not None]

BY_NAME = {k.name: k for k in DOTS}
IDS = [k.name for k in DOTS]
GRID_DOTS = [k for k in DOTS if k.name in QB.GRID_SWEEPS]

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
    expected = OD.dot(kernel.name, pair.x, kernel.vec_dot_type, pair.y)
    if exact and not expected.exact:
        raise AssertionError(f"harness: the exact-by-construction row pair is not exact ({expected}) [{pair!r}]")
    nb = pair.n_blocks
    bound = 0.0 if expected.exact else kernel.bound(nb, expected)
    derivation = ("exact by construction (power-of-two scales, every partial sum an fp32 number)"
                  if expected.exact else kernel.describe_bound(nb))
    # The failure report (and `rvvdiff repro`, --c) replays the example's last call: the twin runs
    # first, so that the last call is the RVV kernel's unless only the twin is wrong (run again below).
    twin = run_dot(kernel, target, pair, 1)
    note_expected(expected.value, bound, name=f"{kernel.entry}(x, y)", context=f"{kernel.entry}, n={pair.n}, "
                  f"{target.id}; {_hex_rows(pair)}", derivation=derivation)  # kept if the RVV call crashes
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
    kernels reuse a corpus and a change to a quantizer makes a new one; read once per process and tree."""
    return _sources_hash_of(session().source.ggml / "src")


@functools.cache
def _sources_hash_of(src: Path) -> str:
    h = hashlib.sha256()
    for rel in ("ggml-quants.c", "ggml-quants.h", "ggml-common.h"):
        h.update((src / rel).read_bytes())
    return h.hexdigest()[:16]


#: Deadline of the corpus's quantize_chunk calls where the emulated build makes them (no host build).
#: ggml's IQ1 / IQ2 quantizers build their grid tables on first use, which takes minutes under QEMU:
#: over 120 s (the kernel deadline) for iq1_s in the v build in a CI rehearsal whose 2 cores were
#: shared with other runs.  This is set-up made once per quantizer source, not a kernel under test.
CORPUS_TIMEOUT = 1200.0


def weight_corpus(target, name: str) -> dict[tuple[str, int], np.ndarray]:
    """Rows of ``name`` made by ``ggml_quantize_chunk`` (with an importance matrix of ones) from
    the float rows of WEIGHT_DATA x WEIGHT_BLOCKS, made once per quantizer source and kept in the cache.

    The rows are made by the tree's own quantizers built for the host (harness/toolchain/host.py): they are
    scalar reference code, so the host's rows are valid rows of the type, and the IQ1 / IQ2 grid tables
    that take minutes under QEMU take seconds there (one host process per type).  Where the host cannot build them, the emulated
    build makes the rows (the reason is noted in the test's report and warned once)."""
    f = Q.fmt(name)
    src_hash = _quantizer_sources_hash()
    try:
        exe = host.quantizer(session().source)
        maker, why_not = "host", None
    except host.HostBuildUnavailable as e:
        exe, maker, why_not = None, "emulated", str(e)
    path = cache_dir() / "quant_corpus" / src_hash / maker / f"{name}.npz"
    with locked(path.with_suffix(".lock")):
        if not path.exists():
            if why_not is not None:
                observe.note("corpus", f"made under the emulator: {why_not}")
                warnings.warn(f"the weight corpus of {name} is made under the emulator (slow): {why_not}",
                              stacklevel=2)
            rows = {}
            sizes = [nb * max(f.block, 256) if f.block < 256 and nb == 33 else nb * f.block for nb in WEIGHT_BLOCKS]
            floats = [np.stack([_weight_floats(k, n, seed=nb) for k in WEIGHT_DATA])
                      for nb, n in zip(WEIGHT_BLOCKS, sizes)]
            ones = [np.ones(n, np.float32) for n in sizes]
            row_bytes = [Q.row_bytes(name, n) for n in sizes]
            if exe is not None:
                made = host.quantize(exe, V.type_id(target, name), floats, ones, row_bytes)
            else:
                made = [target.call("quantize_chunk", [V.type_id(target, name), len(WEIGHT_DATA), n], [],
                                    [In(src), In(one), Out(len(WEIGHT_DATA) * rb)], timeout=CORPUS_TIMEOUT)
                        .output(0, np.uint8).reshape(len(WEIGHT_DATA), -1)
                        for n, src, one, rb in zip(sizes, floats, ones, row_bytes)]
            for nb, out in zip(WEIGHT_BLOCKS, made):
                for k, row in zip(WEIGHT_DATA, out):
                    rows[f"{k}-{nb}"] = row
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.stem + ".tmp.npz")
            np.savez(tmp, **rows)
            tmp.replace(path)
        with np.load(path) as z:
            return {(k.rsplit("-", 1)[0], int(k.rsplit("-", 1)[1])): z[k] for k in z.files}


# ------------------------------------------------------------------ findings: minimal reproducers


def block_row(name: str, nb: int = 1, *, fill: dict[int, int] | None = None) -> np.ndarray:
    """``nb`` blocks of ``name``: bytes from ``fill`` (offset -> value, in every block), zero
    elsewhere, and the block scale d = 1 (its other float scales 0)."""
    f = Q.fmt(name)
    b = np.zeros((nb, f.nbytes), np.uint8)
    for off, v in (fill or {}).items():
        b[:, off] = v
    lay = QB.LAYOUTS[name]
    one16 = np.float16(1.0).view(np.uint16)
    if lay.fp32:
        b[:, lay.fp32[0]:lay.fp32[0] + 4] = np.array([1.0], np.float32).view(np.uint8)
    if lay.fp16:
        b[:, lay.fp16[0]:lay.fp16[0] + 2] = np.array([one16], np.uint16).view(np.uint8)
    if lay.e8m0:
        b[:, lay.e8m0[0]] = 128
    if lay.iq1_m_scale:
        QB.set_iq1_m_scale(b, np.full(nb, one16, np.uint16))
    return b


def _fill(start: int, stop: int, value: int) -> dict[int, int]:
    return {i: value for i in range(start, stop)}


def _activations(name: str, n: int, lo: int, hi: int, q: int = 1) -> np.ndarray:
    """Activations ``name`` with d = 1 and quants ``q`` on elements [lo, hi), 0 elsewhere."""
    qs = np.zeros(n, np.int64)
    qs[lo:hi] = q
    f = Q.fmt(name)
    y = block_row(name, n // f.block)
    QB.write_quants(QT.record(name), y, qs.reshape(-1, f.block), np.ones(y.shape[0], np.float32))
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
            lambda: _pair("q3_K", block_row("q3_K", fill={**_fill(0, 32, 0xFF), **_fill(32, 96, 0x55),
                                                     **_fill(96, 104, 0x11), **_fill(104, 108, 0xAA)}), 0, 256)),
    Finding("q6_K_vl512_agnostic_accumulator", "q6_K",  # VLEN 512, 1024, stress only
            lambda: _pair("q6_K", block_row("q6_K", fill={**_fill(0, 128, 0x11), **_fill(128, 192, 0xAA),
                                                     **_fill(192, 208, 1)}), 0, 256)),
    Finding("iq1_m_vl512_agnostic_accumulator", "iq1_m",  # VLEN 512, 1024, stress only
            lambda: _pair("iq1_m", block_row("iq1_m"), 0, 256)),
    # One block (an odd count): x = 2 everywhere (E8M0 128, nibbles 2), y = 1: 64; RVV gives 0.
    Finding("mxfp4_odd_block_dropped", "mxfp4",  # every VLEN
            lambda: _pair("mxfp4", block_row("mxfp4", fill={i: 0x22 for i in range(1, 17)}), 0, 32)),
    # One block: x = 1 (d 1, nibbles 8 -> kvalue 1), y = 1: 32; RVV gives 0.
    Finding("iq4_nl_odd_block_dropped", "iq4_nl",  # every VLEN
            lambda: _pair("iq4_nl", block_row("iq4_nl", fill={i: 0x88 for i in range(2, 18)}), 0, 32)),
    # Sub-block 0: scale 1, nibbles 15, y = 69: sum 32 * 15 * 69 = 33120 > 32767; RVV gives -32416.
    Finding("q4_K_int16_subblock_sum", "q4_K",  # VLEN 256, 512, 1024 (vl256)
            lambda: _pair("q4_K", block_row("q4_K", fill={4: 1, **{16 + i: 0x0F for i in range(128)}}), 0, 32, 69)),
    # Every element 1 (grid entry 0 = 8s, scale 2*0+1, d/8), y = 1 on sub-block 2 only: 32.
    Finding("iq2_xxs_vl512_subblock_offsets", "iq2_xxs",  # VLEN 512, 1024 (vl512)
            lambda: _pair("iq2_xxs", block_row("iq2_xxs"), 64, 96)),
    # Sub-block 0: low nibble scale 0 (ls 1) for elements 0-15, high nibble 1 (ls 3) for 16-31; y = 1 on 0-15: 16.
    Finding("iq2_s_vl1024_scale_nibbles_swapped", "iq2_s",  # VLEN 1024
            lambda: _pair("iq2_s", block_row("iq2_s", fill={74: 0x10}), 0, 16)),
    # Every element 1 (grid entry 0 = 4s, scale 1, d/4), y = 1 on sub-block 2 only: 32.
    Finding("iq3_xxs_vl1024_subblock_offsets", "iq3_xxs",  # VLEN 1024
            lambda: _pair("iq3_xxs", block_row("iq3_xxs"), 64, 96)),
]


# ------------------------------------------------------------------ loop levels (cases/loops.py)

#: Size variables of the quantized dot products' loops: blocks per row by block size, and the
#: elements of one block, which fix the trip counts of the loops inside a block.
_ROW_VARS = {"blocks of 32": 32, "blocks of 128 (q1_0)": 128, "super-blocks of 256": 256}


def _drawn(vlen: int) -> dict[str, L.Drawn]:
    """What cases/test_quant_dot.py::test_vec_dot draws at ``vlen`` (the same at every VLEN):
    every run the block counts of ``QS.every_run_counts`` (``QS.edge_pairs`` before the draws,
    ``QS.loop_pairs`` after them), at random ``QS.block_counts``; a block is always whole."""
    out = {}
    for var, unit in _ROW_VARS.items():
        lo, hi = QS.block_count_range(unit)
        out[var] = L.Drawn(QS.every_run_counts(unit), lo, hi)
    out["elements of a super-block"] = L.Drawn((256,), 256, 256)
    out["elements of a q1_0 block"] = L.Drawn((128,), 128, 128)
    return out


def _dot_loops() -> list[L.Loop]:
    """The loop levels of every RVV vec_dot of arch/riscv/quants.c (pinned tree), grouped where
    the loop structure is the same.  Row loops step in blocks (super-blocks for the K, TQ and
    IQ types); the loops inside a block have trip counts fixed by the block size, so every
    row crosses them (``remainder=False``)."""
    r32, r128, r256 = QS.real_counts(32), QS.real_counts(128), QS.real_counts(256)
    sb = "elements of a super-block"
    one = lambda v: 1  # noqa: E731 -- one block per trip
    every = (128, 256, 512, 1024)  # the VLENs at which some kernel of a row runs that loop

    def inner(kernels: str, step: int, vlens: tuple[int, ...], src: str, what: str) -> L.Loop:
        return L.Loop(kernels, f"inside a super-block: {what}", sb, lambda v: step,
                      remainder=False, vlens=vlens, source=f"quants.c:{src}")

    return [
        L.Loop("q4_0, q4_1, q5_0, q5_1, q8_0 (one body, every VLEN)", "row: one block per trip", "blocks of 32",
               one, remainder=False, real=r32, source="quants.c:ggml_vec_dot_q4_0_q8_0 (and q4_1, q5_0, q5_1, q8_0)"),
        L.Loop("iq4_nl, mxfp4 (_vl128; _vl256 at VLEN >= 256)",
               "row: two blocks per trip, no leftover loop (known finding: odd counts drop the last block)",
               "blocks of 32", lambda v: 2, real=r32,
               source="quants.c:ggml_vec_dot_iq4_nl_q8_0_vl128/_vl256, ggml_vec_dot_mxfp4_q8_0_vl128/_vl256"),
        L.Loop("q1_0 (_vl128; _vl256 at VLEN >= 256)", "row: one 128-element block per trip", "blocks of 128 (q1_0)",
               one, remainder=False, real=r128, source="quants.c:ggml_vec_dot_q1_0_q8_0_vl128/_vl256"),
        L.Loop("q1_0 (_vl128, _vl256)", "inside a block: 4 trips, one q8_0 block of 32 each", "elements of a q1_0 block",
               lambda v: 32, remainder=False, source="quants.c:ggml_vec_dot_q1_0_q8_0_vl128/_vl256"),
        L.Loop("q2_K, q3_K, q4_K, q5_K, q6_K, tq1_0, tq2_0, iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, "
               "iq4_xs (every variant)", "row: one super-block per trip", "super-blocks of 256", one,
               remainder=False, real=r256, source="quants.c:ggml_vec_dot_<type>_q8_K[_vlN]"),
        inner("q2_K _vl128, _vl256; q3_K _vl128 ... _vl1024; q6_K _vl128 ... _vl1024; iq1_m _vl128, _vl256", 128,
              every, "ggml_vec_dot_q2_K_q8_K_vl*, q3_K_vl*, q6_K_vl*, iq1_m_q8_K_vl128/_vl256",
              "2 trips over 128-element halves (j / ib < QK_K/128)"),
        inner("tq2_0 (_vl128; _vl256 at VLEN >= 256)", 128, every, "ggml_vec_dot_tq2_0_q8_K_vl128/_vl256",
              "2 trips over 32 bytes of qs = 128 elements (j += 32)"),
        inner("q4_K _vl256 (VLEN >= 256), q5_K (one body)", 64, every,
              "ggml_vec_dot_q4_K_q8_K_vl256, ggml_vec_dot_q5_K_q8_K", "4 trips over 64-element quarters (j < QK_K/64)"),
        inner("iq2_xxs _vl128, _vl256 (ib32 += 2); iq2_xs _vl128 (ib64); iq3_xxs _vl128, _vl256; iq4_xs _vl128", 64,
              (128, 256), "ggml_vec_dot_iq2_xxs_q8_K_vl128/_vl256, iq2_xs_vl128, iq3_xxs_vl128/_vl256, iq4_xs_vl128",
              "4 trips over 64 elements"),
        inner("iq2_xs _vl256, iq3_xxs _vl512, iq4_xs _vl256", 128, (256, 512),
              "ggml_vec_dot_iq2_xs_q8_K_vl256, iq3_xxs_vl512, iq4_xs_vl256", "2 trips over 128-element halves"),
        inner("iq2_s: _vl128 (ib < 8), _vl256 (ib < 4), _vl512 (ib < 2); iq3_s: _vl128, _vl256, _vl512 (likewise)",
              32, every, "ggml_vec_dot_iq2_s_q8_K_vl128/256/512, iq3_s_q8_K_vl128/256/512",
              "8 trips over 32 elements at _vl128 (4 over 64 at _vl256, 2 over 128 at _vl512)"),
        inner("iq2_xxs _vl512 (VLEN >= 512), iq2_xs _vl512 (VLEN >= 512), iq3_xxs _vl1024", 32, (512, 1024),
              "ggml_vec_dot_iq2_xxs_q8_K_vl512, iq2_xs_vl512, iq3_xxs_vl1024", "8 trips over 32-element sub-blocks (j < 8)"),
        inner("tq1_0 _vl128", 32, (128,), "ggml_vec_dot_tq1_0_q8_K_vl128",
              "a peeled trip and t < 4 over the trits of 32 bytes (160 elements, step 32), then of 16 bytes (80, step 16)"),
    ]


L.register(L.Family(
    name="quant_dot", doc="docs/quants.md", loops=_dot_loops(), drawn=_drawn,
    notes=(
        "Sizes are those of `test_vec_dot` (`edge_pairs` and `loop_pairs` every run, `pairs` at random); `test_vec_dot_exact` "
        "checks the same counts every run up to the longest row a type can make exact (4096 elements for q6_K "
        "and iq4_xs, 14336 for most), and `test_vec_dot_weights` rows of 1, 2, 3 and 33 (x 8 for blocks of 32) blocks.",
        "Loops with one trip per super-block by construction are not listed: iq1_m, iq4_xs _vl512 / _vl1024 "
        "(ib < QK_K/256); q4_K _vl128, iq1_s, iq2_s _vl1024, iq3_s ... are straight-line code per super-block. "
        "Strip-mining with vsetvl inside a block does not occur in the dot products: every vl is a constant.",
        "iq4_nl and mxfp4 step over block pairs without a leftover loop: the odd counts of every run (1, 3, 5) "
        "fail there, as the known finding says (known_failures.toml; the test ids stay the same).",
    )))


# ------------------------------------------------------------------ coverage (cases/coverage.py)


@coverage.register("quant_dot")
def _coverage(inv: Tree) -> coverage.FamilyScan:
    """The quantized dot products' scan of the tree: its RVV ``ggml_vec_dot_<type>_<q8>`` and their
    ``_vlN`` variants against DOTS (:func:`cases.quant_variants.dot_coverage`)."""
    return V.dot_coverage(inv, DOTS)
