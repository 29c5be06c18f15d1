"""SpacemiT's weight layouts (ggml-cpu/spacemit/repack.cpp) against NumPy: the bytes, and a round trip.

The backend repacks a weight tensor when llama.cpp loads it into its buffer type (``set_tensor`` calls the tensor
traits' ``repack``, i.e. ``ggml::cpu::riscv64_spacemit::repack<block, INTER_SIZE, NB_COLS>``).  The 32-row layouts
are selected only on IME2 cores (no public assembler builds IME2), so the kernel server calls the explicit
specialisations directly (harness/server/k_spacemit.cpp: ``spacemit_repack``), on a tensor whose memory is what the
buffer type allocates for it (the tree's own figure, asked with ``spacemit_alloc_size``); and the two RVV functions
the tree defines beside the _ref ones it calls (harness/server/k_spacemit_uncalled.cpp).  oracles/spacemit_repack.py
describes every layout.

Each call is checked three ways: its return value (-1 where the layout refuses the shape) and bytes against the
oracle's packing, bit for bit (nothing past the written bytes touched; the server's guards catch writes past the
allocation); and a round trip: the layout read back (the oracle's ``unpack``, the GEMM's reading) against the source
blocks decoded by oracles/quants.py's reading of ggml's formats -- q4_0 and q8_0 give back every scale and quant
exactly (the layout has the source's size, so every source byte lands once); q4_1 its scales and quants exactly and
its offset within the rounding of ``zp`` (|m + d zp| <= d (1/2 + 2^-8): the nearest integer to an fp16 quotient,
whose half-ulp is 2^-8 below 16); q6_K's requantized sub-blocks within half a step of the source values
(:func:`_assert_q6_round_trip`).

Domains: ``core`` (ne1 a multiple of 32, one or two matrices along ne2; random blocks, q4_1's blocks straddling 0 as
ggml's quantizer makes them, q6_K's scales not 0), ``tails`` (ne1 not a multiple of 32, one matrix),
``expert_tails`` (the same over two or three matrices, as MUL_MAT_ID's 3-d expert weights), ``zeros`` (q6_K: zero
sub-blocks), ``offset`` (q4_1: blocks that do not straddle 0, and d = 0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from cases import coverage
from cases import loops as L
from cases import quant_variants as V
from cases import strategies as S
from cases.vec_source import scan_rvv_file
from harness.check import observe
from harness.check.compare import assert_all_within, assert_bitwise_equal
from harness.emulators.protocol import In, Out
from harness.ggml.tree import Tree
from oracles import quants as Q
from oracles import spacemit_repack as SR

FILE = "src/ggml-cpu/spacemit/repack.cpp"
FILL = 0xA5  # protocol.Out's fill: bytes the repack must not touch


@dataclass(frozen=True, repr=False)
class Layout(S.KernelSpec):
    """One layout as a test reaches it: the adapter kernel, the repack function it ends in."""

    name: str
    function: str  # the static function of repack.cpp that writes it
    uncalled: bool = False  # the tree does not call it (k_spacemit_uncalled.cpp reaches it)

    @property
    def oracle(self) -> SR.Layout:
        return SR.LAYOUTS[self.name]

    @property
    def requires(self) -> tuple[str, ...]:
        return (self.function,)

    @property
    def k_unit(self) -> int:
        """K is a multiple of it: the source type's block, or 256 for the 32x256 layout (8 blocks at a time)."""
        return max(self.oracle.inter, SR.SRC_BLOCK[self.oracle.type])


LAYOUTS = {x.name: x for x in (
    Layout("q4_0_32x32", "repack_q4_0_to_q4_0_32_bl"),
    Layout("q4_0_32x256", "repack_q4_0_to_q4_0_256_32_bl_ref"),
    Layout("q4_1_32x32", "repack_q4_1_to_q4_1_32_bl"),
    Layout("q6_K_32x32", "repack_q6_k_to_q8_0_32_bl_ref"),
    Layout("q8_0_32x32", "repack_q8_0_to_q8_0_32_bl_ref"),
    Layout("q6_K_32x32_rvv", "repack_q6_k_to_q8_0_32_bl", uncalled=True),
    Layout("q8_0_32x32_rvv", "repack_q8_0_to_q8_0_32_bl", uncalled=True),
)}
DOMAINS = {name: ("core", "tails", "expert_tails", *{"q6_K": ("zeros",), "q4_1": ("offset",)}.get(x.oracle.type, ()))
           for name, x in LAYOUTS.items()}
#: Real models' K (576: SmolLM2; 1024-4096; 11008 an FFN) in whole source blocks of each type.
REAL_K = (576, 1024, 2048, 4096, 11008)


# ------------------------------------------------------------------ inputs


@dataclass(frozen=True)
class RCase:
    """One repack: the layout, the tensor's shape, the data's seed and kind."""

    layout: str
    ne: tuple[int, int, int]
    seed: int = 0
    kind: str = "random"  # random | zeros | offset

    @property
    def type(self) -> str:
        return LAYOUTS[self.layout].oracle.type


def _fp16(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float16).view(np.uint16)


def make_blocks(case: RCase) -> np.ndarray:
    """The tensor's ggml blocks (rows x blocks x bytes, uint8) for ``case``."""
    t = case.type
    ne0, ne1, ne2 = case.ne
    n = ne1 * ne2 * (ne0 // SR.SRC_BLOCK[t])
    rng = np.random.default_rng(case.seed)
    b = rng.integers(0, 256, (n, SR.SRC_BYTES[t]), dtype=np.uint8)  # q4_0 / q8_0: any bytes (copied bit for bit)
    scale = np.exp2(rng.uniform(-12, 4, n))
    if t == "q4_1":  # d = (max - min) / 15 >= 0, m = min: -m / d in [0, 15] when the block straddles 0
        d = scale
        m = -d * rng.uniform(0, 15, n)
        if case.kind == "offset":  # above 0 (m > d / 2), below it (m < -15.5 d), or constant (d = 0)
            side = rng.integers(0, 3, n)
            m = np.where(side == 0, d * rng.uniform(0.6, 40, n), np.where(side == 1, -d * rng.uniform(15.6, 40, n), m))
            d = np.where(side == 2, 0.0, d)
            m = np.where(side == 2, rng.standard_normal(n), m)
        b[:, 0:2] = _fp16(d).reshape(-1, 1).view(np.uint8)
        b[:, 2:4] = _fp16(m).reshape(-1, 1).view(np.uint8)
    elif t == "q6_K":  # any quants, int8 scales not 0 (ggml's quantizer makes 0 only for zero values); d finite
        sc = rng.integers(1, 128, (n, 16)) * rng.choice([-1, 1], (n, 16))
        b[:, 192:208] = sc.astype(np.int8).view(np.uint8)
        b[:, 208:210] = _fp16(scale * rng.choice([-1.0, 1.0], n)).reshape(-1, 1).view(np.uint8)
        if case.kind == "zeros":  # per block: d = 0, a zero pair of scales, or a sub-block of quants 32 (value 0)
            how = rng.integers(0, 4, n)
            b[how == 0, 208:210] = 0
            bi = rng.integers(0, 8, n)
            rows = np.flatnonzero(how == 1)
            b[rows, 192 + 2 * bi[rows]] = 0
            b[rows, 193 + 2 * bi[rows]] = 0
            for r in np.flatnonzero(how == 2):  # 6-bit quant 32: low nibble 0, high pair 2
                half, idx, l = bi[r] // 4, bi[r] % 4, np.arange(32)
                ql = b[r, 64 * half + 32 * (idx % 2) + l]
                b[r, 64 * half + 32 * (idx % 2) + l] = (ql & 0xF0) if idx < 2 else (ql & 0x0F)
                qh = b[r, 128 + 32 * half + l]
                b[r, 128 + 32 * half + l] = (qh & ~np.uint8(3 << (2 * idx))) | np.uint8(2 << (2 * idx))
    return b.reshape(ne1 * ne2, -1, SR.SRC_BYTES[t])


def _k_sizes(layout: Layout) -> list[int]:
    return [k for k in REAL_K if k % layout.k_unit == 0]


@st.composite
def repack_cases(draw: st.DrawFn, layout: Layout, domain: str) -> RCase:
    """A tensor of 1-6 blocks along K (q4_0 32x256, q6_K: 1-2), ne1 a multiple of 32 (32, 64, 96) over ne2 = 1-2
    matrices, or not (tails: 1-100 rows, one matrix; expert_tails: two or three, as MUL_MAT_ID's experts)."""
    if domain not in DOMAINS[layout.name]:
        raise ValueError(f"repack_cases: {layout.name} has no domain {domain!r}; it has {DOMAINS[layout.name]}")
    unit = layout.k_unit
    ne0 = unit * draw(st.integers(1, 2 if unit == 256 else 6), label="blocks")
    if domain in ("tails", "expert_tails"):
        ne1 = draw(st.integers(1, 100).filter(lambda v: v % SR.GROUP), label="ne1")
        ne2 = draw(st.integers(2, 3), label="ne2") if domain == "expert_tails" else 1
    else:
        ne1 = SR.GROUP * draw(st.integers(1, 3), label="groups")
        ne2 = draw(st.integers(1, 2), label="ne2")
    kind = domain if domain in ("zeros", "offset") else "random"
    return RCase(layout.name, (ne0, ne1, ne2), draw(st.integers(0, 2**32 - 1), label="seed"), kind)


def fixed_cases(layout: Layout, domain: str) -> list[RCase]:
    """Every run: (core) 64 rows of real models' K, 96 rows of two K-blocks; (tails) 2 groups and a remainder of
    rows; (expert_tails) 40 rows over two matrices."""
    unit = layout.k_unit
    if domain == "core":
        return ([RCase(layout.name, (k, 64, 1), seed=10 + i) for i, k in enumerate(_k_sizes(layout))]
                + [RCase(layout.name, (2 * unit, 96, 1), seed=9)])
    if domain == "tails":
        return [RCase(layout.name, (2 * unit, 2 * SR.GROUP + 5, 1), seed=7)]
    if domain == "expert_tails":
        return [RCase(layout.name, (unit, 40, 2), seed=8)]
    return []


#: The shrunk reproducers of the pinned tree's findings, run first in their (layout, domain) on every run.
FINDING_EXAMPLES: dict[tuple[str, str], tuple[RCase, ...]] = {
    # zp = clamp(nearest(-m / d), 0, 15): a block above 0 (m > 0) or a constant one (d = 0) loses its offset m
    ("q4_1_32x32", "offset"): (RCase("q4_1_32x32", (32, 32, 1), kind="offset"),),
    # a zero sub-block (step 0): s / 0, NaN converted to int8 (_ref: undefined in C, -1 here; RVV: 127)
    ("q6_K_32x32", "zeros"): (RCase("q6_K_32x32", (256, 32, 1), kind="zeros"),),
    ("q6_K_32x32_rvv", "zeros"): (RCase("q6_K_32x32_rvv", (256, 32, 1), kind="zeros"),),
    # two matrices of 17 rows: the repack pads the 34 flattened rows to 64, the buffer type allocates 34 + 15
    ("q6_K_32x32", "expert_tails"): (RCase("q6_K_32x32", (256, 17, 2)),),
    ("q8_0_32x32", "expert_tails"): (RCase("q8_0_32x32", (32, 17, 2)),),
}


# ------------------------------------------------------------------ running and checking


def alloc_size(target, type_: str, ne: tuple[int, int, int]) -> int:
    """What the tree's buffer type allocates for the tensor (``ggml_backend_buft_get_alloc_size``): asked, not
    computed here, since a tree that fixes the expert tails allocates more than :func:`SR.alloc_bytes`, the pinned
    tree's figure."""
    r = target.call("spacemit_alloc_size", [V.type_id(target, type_), *ne], [], [])
    return int(re.search(r"^alloc_size=(\d+)$", r.message, re.M).group(1))


def run(layout: Layout, target, src: np.ndarray, ne: tuple[int, int, int]) -> tuple[int, np.ndarray]:
    """(return value, the whole allocation after the call)."""
    o = layout.oracle
    size = alloc_size(target, o.type, ne)
    if layout.uncalled:
        kernel, ip = "spacemit_repack_uncalled", [V.type_id(target, o.type), *ne]
    else:
        kernel, ip = "spacemit_repack", [V.type_id(target, o.type), o.inter, SR.GROUP, *ne]
    r = target.call(kernel, ip, [], [In(src), Out(size, FILL)])
    m = re.search(r"^ret=(-?\d+)$", r.message, re.M)
    return int(m.group(1)) if m else -99, r.output(0, np.uint8)


#: |q - x / step| <= 1/2 + Q6_SLACK: x = a * s exactly; the repack rounds a * s, amax / 127, s / step and a * (s /
#: step) (four float32 roundings), |x / step| <= 127: 127 * 4u (1 + u)^4 < 2^-15.
Q6_SLACK = 2.0 ** -15


def _assert_q6_round_trip(src: np.ndarray, back: dict[str, np.ndarray], context: str) -> None:
    """Each requantized sub-block of 32 holds its source values ``x``: quants within 1/2 + :data:`Q6_SLACK` of
    ``x / step`` (0 where step is 0), ``d`` within its fp16 rounding of ``step = max |x| / 127`` (2^-11 relative and
    two float32 roundings, 2^-25 absolute below 2^-14)."""
    x = Q.dequantize("q6_K", src.reshape(-1)).reshape(-1, back["d"].shape[1], 32)
    step = np.abs(x).max(axis=2) / 127
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.where(step[..., None] > 0, x / np.where(step > 0, step, 1)[..., None], 0)
    bound = np.broadcast_to(np.where(step[..., None] > 0, 0.5 + Q6_SLACK, 0.0), x.shape)
    assert_all_within(back["q"].astype(np.float64), exact, bound,
                      name="q8_0 quants (round trip)", context=context,
                      derivation="x / step rounded, four float32 roundings: 1/2 + 2^-15 (cases/spacemit_layouts.py)")
    d = back["d"].view(np.float16).astype(np.float64)
    assert_all_within(d, step, step * (2.0 ** -11 + 2.0 ** -22) + 2.0 ** -25, name="q8_0 d (round trip)",
                      context=context, derivation="fp16(step) after two float32 roundings")


def assert_round_trip(layout: Layout, src: np.ndarray, got: np.ndarray, ne: tuple[int, int, int], context: str) -> None:
    """The layout read back gives the source blocks' values (module docstring)."""
    o = layout.oracle
    rows = ne[1] * ne[2]
    back = SR.unpack(o, got, ne[0], rows)
    if o.type == "q6_K":
        _assert_q6_round_trip(src, back, context)
        return
    dec = Q.decode(o.type, src.reshape(-1))
    nb = ne[0] // 32
    d_src = np.ascontiguousarray(src[..., 0:2]).view("<u2")[..., 0]
    assert_bitwise_equal(back["d"], d_src, name="d (round trip)", context=context)
    q_src = (dec.q + (8 if o.type == "q4_0" else 0)).reshape(rows, nb, 32)  # q4_0: nibbles, not nibble - 8
    assert_bitwise_equal(back["q"], q_src, name="q (round trip)", context=context)
    if o.type == "q4_1":
        d = d_src.view(np.float16).astype(np.float64)
        m = np.ascontiguousarray(src[..., 2:4]).view(np.float16)[..., 0].astype(np.float64)
        assert_all_within(-d * back["zp"], m, np.abs(d) * (0.5 + 2.0 ** -8), name="offset -d zp (round trip)",
                          context=context, derivation="zp is -m / d rounded to fp16, then to the nearest integer: "
                                                      "|m + d zp| <= d (1/2 + 2^-8) while -m / d is in [-1/2, 15.5]")


def check_repack(case: RCase, target) -> None:
    """Run ``case`` at ``target``: return value, bytes as the oracle packs them, nothing else touched, round trip."""
    layout = LAYOUTS[case.layout]
    o = layout.oracle
    src = make_blocks(case)
    ne = case.ne
    ret, got = run(layout, target, src, ne)
    n = SR.written_bytes(o, *ne)
    observe.note("path", f"{layout.function}{' (not called by the tree)' if layout.uncalled else ''}")
    context = f"{layout.function}: {case.type} tensor ne=({ne[0]}, {ne[1]}, {ne[2]}), {case.kind} blocks, {target.id}"
    want = 0 if n else -1
    assert ret == want, f"{layout.function} returned {ret}, but should return {want} [{context}]"
    assert_bitwise_equal(got[n:], np.full(got.size - n, FILL, np.uint8), name="bytes past the repacked blocks",
                         context=context)
    if not n:
        return
    rows = SR.rows_written(o, ne[1], ne[2])
    expected = SR.unpack(o, SR.pack(o, src, *ne), ne[0], rows)
    for name, g in SR.unpack(o, got[:n], ne[0], rows).items():
        assert_bitwise_equal(g, expected[name], name=f"{layout.name}.{name}", context=context)
    assert_round_trip(layout, src, got[:n], ne, context)


# ------------------------------------------------------------------ loop sizes (docs/spacemit.md)


def _drawn(vlen: int) -> dict[str, L.Drawn]:
    every_rows = sorted({c.ne[1] * c.ne[2] for x in LAYOUTS.values() for d in DOMAINS[x.name] for c in fixed_cases(x, d)})
    every_k = sorted({c.ne[0] // SR.SRC_BLOCK[c.type] for x in LAYOUTS.values() for c in fixed_cases(x, "core")
                      if c.type != "q6_K"})
    return {"rows (ne1 ne2)": L.Drawn(every_rows, 1, 300), "blocks of 32 along K": L.Drawn(every_k, 1, 6),
            "scales of a group": L.Drawn((SR.GROUP,), SR.GROUP, SR.GROUP)}


def _vlmax_e16m1(vlen: int) -> int:
    return vlen // 16


L.register(L.Family(
    name="spacemit_layouts", doc="docs/spacemit.md",
    loops=[
        L.Loop("repack_q6_k_to_q8_0_32_bl_ref, repack_q8_0_to_q8_0_32_bl_ref", "groups of 32 rows (b += 32), the "
               "last one zero-padded", "rows (ne1 ne2)", lambda v: SR.GROUP, source="spacemit/repack.cpp"),
        L.Loop("the RVV layouts, repack_q4_0_to_q4_0_256_32_bl_ref", "groups of 32 rows (b += 32; ne1 % 32 != 0 "
               "refused)", "rows (ne1 ne2)", lambda v: SR.GROUP, remainder=False, source="spacemit/repack.cpp"),
        L.Loop("every layout", "block indices along K (x++)", "blocks of 32 along K", lambda v: 1, remainder=False,
               real=(18, 32, 64, 128, 344), source="spacemit/repack.cpp"),
        L.Loop("repack_q4_0_to_q4_0_32_bl, repack_q4_1_to_q4_1_32_bl, repack_q8_0_to_q8_0_32_bl",
               "the 32 scales of a group, vsetvl e16m1 (strided loads)", "scales of a group", _vlmax_e16m1,
               remainder=False, vlens=(128, 256), source="spacemit/repack.cpp"),
    ],
    drawn=_drawn,
    notes=("The scale loop takes the group's 32 scales in 4 / 2 / 1 / 1 trips at VLEN 128 / 256 / 512 / 1024 (32 is a "
           "multiple of VLMAX(e16m1) at every VLEN: no remainder); the quants of a row are one vsetvl of 8 (q4: two "
           "stride-2 loads of 8 bytes) or of 32 (q8_0 copy, e8m2: one trip from VLEN 128), and q6_K's 16-value halves "
           "one vsetvl of 16 (e8m1, VLMAX >= 16 from VLEN 128).",)))


# ------------------------------------------------------------------ what the tree has (cases/coverage.py)


@coverage.register("spacemit_layouts")
def scan(inv: Tree) -> coverage.FamilyScan:
    """spacemit/repack.cpp: a function with an RVV path that the table does not know is uncovered."""
    return scan_rvv_file(inv, "spacemit_layouts", FILE, list(LAYOUTS.values()), {x.function for x in LAYOUTS.values()},
                         "cases/spacemit_layouts.py")
