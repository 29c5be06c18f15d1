"""SpacemiT's IME1 GEMMs (ggml-cpu/spacemit/ime1_kernels.cpp, the K1's A60 cores) under Spike with rvvdiff's IME1
library, against NumPy (oracles/spacemit_ime1.py), and the same products through the build's generic path.

What runs: ``ggml_mul_mat`` / ``ggml_mul_mat_id`` with the weights in SpacemiT's buffer type, as llama.cpp places them
(the kernel server's ``repack_mul_mat`` / ``repack_mul_mat_id``, placement 2, harness/server/k_repack.cpp): the
device takes the op there when ``ggml_riscv64_spacemit_get_optimal_repack_type`` has traits for the weights -- on
an IME1 core (``SPACEMIT_CORE_ARCH=0xA03C``, which Spike with the library gets: harness/emulators/spike.py) q4_0,
q4_1 and q4_K with ``ne[1] % 16 == 0``, repacked 16 rows at a time (``tensor_traits<block, 32, 16>``) -- else the
weights stay in the CPU buffer and ggml's generic mul_mat runs (``ggml_vec_dot_<type>_<q8>`` of the build's
ggml-cpu).  Each call notes where the weights went; :func:`route` says where they should.

Checks, per call, on the path that ran:

* IME1: the activations as the kernel quantized them (the head of the work buffer, returned by the server) equal
  :func:`oracles.spacemit_ime1.quantize`'s bytes (a bit-exact oracle of ``quantize_a_row_i8`` /
  ``quantize_a_4row_i8``); then every output is within the product's bound of the exact value computed from the
  oracle's activations and the weights as a 16-row layout holds them: the tree's (``d (q - zp)``; the integer block
  dots exact, the fp32 accumulation within gamma(nb + 1)) or, for q4_1 and q4_K, the one that keeps each block's
  offset as a float (``d q + m``: the fix spacemit_ime1_block_offsets; gamma(2 nb + 1)): oracles/spacemit_ime1.py.
  An output that is neither's fails as "the product of neither 16-row layout".
* IME1 against the format (:func:`check_format`, q4_1 and q4_K): the same result against what ggml's type means
  (oracles/quants.py's decoding), within what a kernel computing the type's split ``d q + m`` keeps.  The tree's
  layouts round q4_1's offset (and q4_K's sub-block mins) to a whole number of steps: a finding (docs/spacemit.md);
  with the offsets kept (the fix spacemit_ime1_block_offsets) q4_1 is right, q4_K still off by its fp16 ``d sc``.
* generic: the result against the exact product of ggml's decoded weights and the kernel's own quantized
  activations (q8_0 / q8_1 / q8_K, from the work buffer), within the vec_dot's bound (oracles/quant_types.py).

IME1 exists only under Spike with the library at VLEN 256 (the A60's): elsewhere the tests skip and say why.  The
second opinion (:func:`check_generic` on a Spike without the library: ``SPACEMIT_CORE_ARCH=0x503C``, the X60) runs
the same cases through the generic path of the same build.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest
from hypothesis import strategies as st

from cases import loops as L
from cases import quant_blocks as QB
from cases import quant_variants as V
from cases import strategies as S
from cases.spacemit_gemm_data import ACTS, activations, block_of, model_weights
from cases.spacemit_tree import BACKEND
from harness.check import observe
from harness.check.compare import assert_all_within, assert_bitwise_equal
from harness.emulators.protocol import In, Out
from harness.plugin.targets import session
from oracles import quant_types as QT
from oracles import quants as Q
from oracles import spacemit_ime1 as IME
from oracles.bounds import gamma
from oracles.repack import oracle_error, products

TYPES = IME.TYPES
#: Weight rows one repacked block interleaves (NB_COLS of the IME1 traits): the kernels' column tile.
NB_COLS = 16
#: The VLEN of the IME1 cores (the K1's A60): the kernels' vmadot takes its 4x4x8 unit from e8 m1 at 256.
VLEN = 256
#: The buffer types the weights can end in (the server's note "weights").
IME1_BUFT, CPU = "CPU_RISCV64_SPACEMIT", "CPU"
#: Placement 2 of repack_mul_mat: SpacemiT's buffer type (harness/server/k_repack.cpp).
PLACEMENT = 2
#: Real models' mul_mat shapes (k = ne00, n = ne01): SmolLM2-135M (576 / 1536) and Qwen3-0.6B (1024 / 3072).
REAL_SHAPES = ((576, 576), (576, 1536), (1536, 576), (1024, 1024), (1024, 3072))
NOT_IME1 = "IME1 runs under Spike with rvvdiff's extension: --emulator spike"
#: repack.cpp's function that writes each type's 16-row layout (repack<block, 32, 16>).
REPACKS = {"q4_0": "repack_q4_0_to_q4_0_16_bl", "q4_1": "repack_q4_1_to_q4_1_16_bl", "q4_K": "repack_q4_k_to_q4_1_16_bl"}
#: What every IME1 call runs besides its op's forward and its type's repack: the buffer type's size (it allocates the
#: layout), the IME1 GEMM (called through a std::function, which the gate's call graph does not follow) and the
#: activation quantizers.
IME1_CODE = ("ggml_backend_cpu_riscv64_spacemit_nbytes", "gemm_kernel_i8i4", "quantize_a_row_i8", "quantize_a_4row_i8")


@dataclass(frozen=True, repr=False)
class Gemm(S.KernelSpec):
    """One weight type of the IME1 GEMM as a test reaches it: ``op``, the member of ``tensor_traits<block, 32, 16>``
    (ime.cpp) that computes it, reached from ggml's graph through the extra buffer type's traits (a virtual call the
    gate's call graph does not follow, so the family names the code it runs)."""

    name: str
    op: str = "forward_mul_mat"

    #: ``x60``: the case runs on the X60's core type, which the backend takes from SPACEMIT_CORE_ARCH (ime_env.cpp)
    x60: bool = False

    @property
    def requires(self) -> tuple[str, ...]:
        return (self.op, REPACKS[self.name], *IME1_CODE)

    @property
    def tree_needs(self) -> tuple[str, ...]:
        """The backend before 2026-05 (ime.cpp and ime1_kernels.cpp only) has neither MUL_MAT_ID (ggml-cpu's own
        repack.cpp has a forward_mul_mat_id, hence the file) nor a core type: IME1 runs on every core."""
        return ((f"{BACKEND}/ime.cpp:{self.op}",) if self.op != "forward_mul_mat" else ()) + \
            ((f"{BACKEND}/ime_env.cpp",) if self.x60 else ())


#: The IME1 tests' parameters: mul_mat (forward_mul_mat) and mul_mat_id (forward_mul_mat_id) per weight type, and
#: mul_mat on the X60's core type.
MUL_MAT = tuple(Gemm(t) for t in REPACKS)
MUL_MAT_ID = tuple(Gemm(t, "forward_mul_mat_id") for t in REPACKS)
X60 = tuple(Gemm(t, x60=True) for t in REPACKS)


@dataclass(frozen=True)
class GemmCase:
    """One mul_mat: ``m`` activation rows of ``k`` times ``n`` weight rows of ``type``; the data from ``seed``:
    weights ``drawn`` (any block the format holds: quant_blocks' recipes) or ``model`` (blocks as ggml's quantizers
    make them from real weights: q4_1 / q4_K offsets inside the block's range), activations of ``acts``."""

    type: str
    k: int
    n: int
    m: int
    seed: int = 0
    weights: str = "model"
    acts: str = "gaussian"
    scales: tuple[str, ...] = ("normal",)

    def __repr__(self) -> str:
        return (f"GemmCase({self.type} k={self.k} n={self.n} m={self.m}, seed={self.seed}, {self.weights} weights "
                f"{'/'.join(self.scales) if self.weights == 'drawn' else ''}, {self.acts} activations)")


@dataclass(frozen=True)
class MoeCase:
    """One mul_mat_id: ``n_expert`` matrices of ``n`` rows of ``k``, ``n_used`` of them per token chosen by ``ids``
    (``n_tokens x n_used``), ``x_rows`` activation rows per token (1: shared, as up / gate; ``n_used``: down)."""

    type: str
    k: int
    n: int
    n_expert: int
    n_used: int
    x_rows: int
    ids: tuple[int, ...]
    seed: int = 0

    @property
    def n_tokens(self) -> int:
        return len(self.ids) // self.n_used


#: quant_blocks' scale classes but the largest fp16 (65504 overflows q4_K's fp16(d * sc) and the fp32 sums).
SCALE_CLASSES = tuple(c for c in QB.SCALE_CLASSES if c != "max")


def weights(case: GemmCase, rows: int | None = None) -> np.ndarray:
    rows = case.n if rows is None else rows
    if case.weights == "model":
        return model_weights(case.type, rows, case.k, case.seed)
    recipe = QB.RowRecipe(case.seed, case.scales, "random", "random")
    return QB.weight_row(case.type, rows * case.k // block_of(case.type), recipe).reshape(rows, -1)


# ------------------------------------------------------------------ where the product runs


def route(case: GemmCase | MoeCase) -> str:
    """Where the weights go on an IME1 core (``ggml_riscv64_spacemit_get_optimal_repack_type``): SpacemiT's buffer
    type for q4_0 / q4_1 / q4_K with ``ne[1] % 16 == 0``, else the CPU buffer (the generic path)."""
    return IME1_BUFT if case.type in TYPES and case.n % NB_COLS == 0 else CPU


def ime1_or_skip(target) -> None:
    """Skip, saying why, where IME1 cannot run: another emulator than Spike, Spike without the library, another
    VLEN than the A60's."""
    emu = session().emulator
    if emu.name != "spike":
        pytest.skip(f"{NOT_IME1} (this run: --emulator {emu.name})")
    if not getattr(emu, "matrix", ()):
        pytest.skip(f"{NOT_IME1}; its library cannot be built here: {getattr(emu, 'matrix_unavailable', '')}")
    if target.vlen != VLEN:
        pytest.skip(f"IME1 runs at VLEN {VLEN} (the K1's A60 cores); its kernels take vmadot's 4x4x8 unit from e8 m1 "
                    f"there: not at VLEN {target.vlen}")


def without_ime1():
    """The session's Spike without the IME1 library: the spacemit build on the X60's core type (0x503C)."""
    return dataclasses.replace(session().emulator, matrix=())


def _notes(message: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in message.splitlines() if "=" in line)


def vec_dot_type(name: str) -> str:
    return QT.record(name).vec_dot_type


def _work_head(path: str, name: str, m: int, k: int) -> int:
    """Bytes of the quantized activations at the head of the work buffer on ``path``."""
    if path == IME1_BUFT:
        return IME.work_bytes(m, k)
    vdt = vec_dot_type(name)
    return m * k // block_of(vdt) * Q.fmt(vdt).nbytes


def run_gemm(target, case: GemmCase, w: np.ndarray, x: np.ndarray, path: str, emulator=None
             ) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
    """mul_mat(W, X) with W placed in SpacemiT's buffer type as llama.cpp places it: ``(m, n)`` result, the head of
    the work buffer (the quantized activations of ``path``), the server's notes."""
    ip = [V.type_id(target, case.type), case.k, case.n, case.m, 1, PLACEMENT, 1]
    head = _work_head(path, case.type, case.m, case.k)
    r = target.call("repack_mul_mat", ip, [], [In(w), In(x), Out(4 * case.m * case.n), Out(head)], emulator=emulator)
    return r.output(0, np.float32).reshape(case.m, case.n), np.frombuffer(r.outputs[1], np.uint8), _notes(r.message)


def _placed(notes: dict[str, str], want: str, ctx: str) -> None:
    observe.note("path", f"{notes.get('weights')} ({notes.get('traits')})")
    assert notes.get("weights") == want, (f"weights in {notes.get('weights')} (traits {notes.get('traits')}), but "
                                          f"should be in {want} [{ctx}]")


#: The 16-row layouts an IME1 result may come from: the tree's (offsets rounded into integer zero points) and the
#: one that keeps each block's offset as a float (the fix spacemit_ime1_block_offsets; q4_1 and q4_K only).
LAYOUTS = (("the tree's zero points", False), ("block offsets kept", True))


def _worst(got: np.ndarray, value: np.ndarray, bound: np.ndarray) -> float:
    """The largest error / bound (what assert_all_within would judge), not recorded."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        err = np.abs(got - value)
        ratio = np.where(bound > 0, err / np.where(bound > 0, bound, 1.0), np.where(err == 0, 0.0, np.inf))
    ratio = np.where((got == value) | (np.isnan(got) & np.isnan(value)), 0.0, np.where(np.isnan(ratio), np.inf, ratio))
    return float(ratio.max()) if ratio.size else 0.0


def _layout_product(name: str, w: np.ndarray, scale: np.ndarray, qa: np.ndarray, offsets: bool, n: int,
                    rows: list[tuple[int, int]] | None) -> tuple[np.ndarray, np.ndarray]:
    d, q, zp, m = IME.layout_weights(name, w, offsets=offsets)
    kept = m if offsets else None
    if rows is None:
        return IME.product(d, q, zp, scale, qa, kept)
    parts = [IME.product(d[e * n:(e + 1) * n], q[e * n:(e + 1) * n], zp[e * n:(e + 1) * n], scale[r:r + 1],
                         qa[r:r + 1], None if kept is None else kept[e * n:(e + 1) * n]) for r, e in rows]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _check_ime1_values(got: np.ndarray, head: np.ndarray, w: np.ndarray, x: np.ndarray, name: str, ctx: str,
                       *, grouped: bool = True, rows: list[tuple[int, int]] | None = None) -> None:
    """The quantized activations bit for bit, then every output within the IME1 product's bound for one of the
    16-row layouts (:data:`LAYOUTS`: the tree's, or with block offsets kept; q4_0 has one). ``rows``: mul_mat_id's
    (activation row, expert) per output row (None: every activation row with the weights ``w``)."""
    scale, qa = IME.quantize(x)
    want = IME.work_image(scale, qa, grouped=grouped)
    free = IME.unread(scale, grouped=grouped)  # an all-zero block's values: they multiply its zero scale
    if np.size(head) == want.size:  # (a wrong size is the assertion's to report)
        want[free] = np.asarray(head)[free]
    assert_bitwise_equal(head, want, name="quantized activations (work buffer)",
                         context=f"{ctx}; quantize_a_{'4row_' if grouped and len(x) >= 4 else 'row_'}i8")
    nb = x.shape[1] // IME.BLOCK
    layouts = LAYOUTS if name in IME.OFFSET_TYPES else LAYOUTS[:1]
    tries = []
    for label, offsets in layouts:
        value, bound = _layout_product(name, w, scale, qa, offsets, got.shape[-1], rows)
        tries.append((label, offsets, value, bound, _worst(got.reshape(value.shape).astype(np.float64), value, bound)))
    label, offsets, value, bound, ratio = min(tries, key=lambda t: t[-1])
    derivation = (f"IME1: integer block dots exact, fp32 fma over {nb} blocks: gamma({nb + 1}) sum|D_b d_b s_b| + "
                  "2^-149 (sum|D_b| + nb)" if not offsets else
                  f"IME1 with block offsets: the integer GEMM, then fp32 fma of each block's offset over {nb} blocks: "
                  f"gamma({2 * nb + 1}) sum|D_b d_b s_b| + gamma({nb + 1}) sum|m_b s_b S_b| + 2^-149 (sum|D_b| + "
                  "sum|m_b| + 2 nb)") + " (oracles/spacemit_ime1.py)"
    if ratio <= 1:
        observe.note("layout", label)
        context = ctx
    else:
        misses = "; ".join(f"{t[0]} {t[-1]:.3g} x its bound" for t in tries)
        context = f"{ctx}; Y is the product of neither 16-row layout ({misses}); shown: {label}"
    assert_all_within(got.reshape(value.shape).astype(np.float64), value, bound, name="Y", context=context,
                      derivation=derivation)


def _check_generic_values(got: np.ndarray, head: np.ndarray, w: np.ndarray, case: GemmCase, ctx: str) -> None:
    """The generic mul_mat (``ggml_vec_dot_<type>_<q8>`` per output) against ggml's decoded weights times the
    activations as ggml quantized them (the work buffer), within the vec_dot's bound."""
    vdt = vec_dot_type(case.type)
    acts = head.reshape(case.m, -1)
    p = products(case.type, w, vdt, acts)
    nb = case.k // block_of(case.type)
    a, b = QT.record(case.type).bound.depth
    depth = a + b * nb
    bound = gamma(depth) * p.magnitude + 2.0 ** -149 * (p.int_magnitude + depth) + oracle_error(case.k, p.magnitude)
    assert_all_within(got.astype(np.float64), p.value, bound, name="Y", context=ctx,
                      derivation=f"ggml_vec_dot_{case.type}_{vdt}: gamma({a} + {b} * {nb}) sum|w a| "
                                 f"(oracles/quant_types.py: {QT.record(case.type).bound.derivation})")


def check_gemm(case: GemmCase, target) -> None:
    """One mul_mat on the IME1 core: where the weights went (:func:`route`), then that path's checks."""
    w, x = weights(case), activations(case.acts, case.m, case.k, case.seed + 1)
    path = route(case)
    got, head, notes = run_gemm(target, case, w, x, path)
    ctx = f"ggml_mul_mat, {case!r}, {target.id}, IME1 core (SPACEMIT_CORE_ARCH=0xA03C)"
    _placed(notes, path, ctx)
    if path == IME1_BUFT:
        _check_ime1_values(got, head, w, x, case.type, ctx)
    else:
        _check_generic_values(got, head, w, case, ctx)


def check_format(case: GemmCase, target) -> None:
    """The IME1 result against the product ggml's type means: its decoded weights times the kernel's quantized
    activations (the tree's IME1 layouts round q4_1's offsets and q4_K's mins into integer zero points and miss it;
    with the offsets kept, q4_K's layout still rounds ``d sc`` and ``dmin mn`` to fp16: docs/spacemit.md)."""
    w, x = weights(case), activations(case.acts, case.m, case.k, case.seed + 1)
    got, head, notes = run_gemm(target, case, w, x, IME1_BUFT)
    ctx = f"ggml_mul_mat against {case.type}'s own values, {case!r}, {target.id}"
    _placed(notes, IME1_BUFT, ctx)
    scale, qa = IME.quantize(x)
    value, bound = IME.format_product(case.type, w, scale, qa)
    assert_all_within(got.astype(np.float64), value, bound, name="Y", context=ctx,
                      derivation=f"{case.type}'s decoded weights (oracles/quants.py) times the quantized activations; "
                                 f"what a kernel computing the type's split d q + m in IME1's order keeps: "
                                 f"gamma({2 * (case.k // IME.BLOCK) + 2}) sum_b |d_b s_b D_b| + |m_b s_b S_b| "
                                 "(oracles/spacemit_ime1.py)")


def check_generic(case: GemmCase, target) -> None:
    """The second opinion: the same mul_mat on the X60's core type (Spike without the IME1 library) runs ggml's
    generic path with the weights in the CPU buffer."""
    w, x = weights(case), activations(case.acts, case.m, case.k, case.seed + 1)
    got, head, notes = run_gemm(target, case, w, x, CPU, emulator=without_ime1())
    ctx = f"ggml_mul_mat, {case!r}, {target.id}, X60 core (SPACEMIT_CORE_ARCH=0x503C, Spike without IME1)"
    _placed(notes, CPU, ctx)
    _check_generic_values(got, head, w, case, ctx)


def check_moe(case: MoeCase, target) -> None:
    """mul_mat_id on the IME1 core: its rows quantized one by one (quantize_a_row_i8), each output row the IME1
    product of its token's activation row and its expert."""
    w = model_weights(case.type, case.n * case.n_expert, case.k, case.seed)
    x = activations("gaussian", case.n_tokens * case.x_rows, case.k, case.seed + 1)
    ids = np.asarray(case.ids, np.int32)
    ip = [V.type_id(target, case.type), case.k, case.n, case.n_expert, case.n_used, case.x_rows, case.n_tokens,
          PLACEMENT, 1]
    r = target.call("repack_mul_mat_id", ip, [], [In(w), In(x), In(ids), Out(4 * len(ids) * case.n),
                                                   Out(IME.work_bytes(len(x), case.k))])
    ctx = f"ggml_mul_mat_id, {case!r}, {target.id}, IME1 core"
    _placed(_notes(r.message), route(case), ctx)
    rows = [(t * case.x_rows + u % case.x_rows, int(ids[t * case.n_used + u]))
            for t in range(case.n_tokens) for u in range(case.n_used)]
    _check_ime1_values(r.output(0, np.float32).reshape(len(rows), case.n), np.frombuffer(r.outputs[1], np.uint8), w,
                       x, case.type, ctx, grouped=False, rows=rows)


# ------------------------------------------------------------------ strategies and fixed cases


def _ks(name: str) -> st.SearchStrategy[int]:
    blk = block_of(name)
    return st.integers(1, max(1, 320 // blk)).map(lambda b: b * blk)


@st.composite
def gemm_cases(draw: st.DrawFn, name: str, *, ime1_only: bool = False) -> GemmCase:
    """A mul_mat of ``name``: k of 1-10 blocks of 32 (q4_K: 1 super-block), 1-4 column tiles of 16 (or, one draw
    in five, a width the IME1 traits refuse: the generic path), 1-13 activation rows (groups of 4 and leftovers),
    drawn or model weights and every activation kind."""
    k = draw(_ks(name), label="k")
    tiles = draw(st.integers(1, 4), label="tiles")
    n = tiles * NB_COLS
    if not ime1_only and draw(st.integers(0, 4), label="odd_width") == 0:
        n = draw(st.integers(1, 63).filter(lambda v: v % NB_COLS), label="n")
    m = draw(st.integers(1, 13), label="m")
    kind = draw(st.sampled_from(("model", "drawn")), label="weights")
    scales = tuple(draw(QB.scale_class_lists(SCALE_CLASSES), label="scales")) if kind == "drawn" else ("normal",)
    return GemmCase(name, k, n, m, draw(st.integers(0, 2**31 - 1), label="seed"), kind,
                    draw(st.sampled_from(ACTS), label="acts"), scales)


def loop_shapes(name: str) -> list[tuple[int, int, int]]:
    """(k, n, m) every run checks: two column tiles; two K blocks (q4_K: two super-blocks); the row quantizer's
    4-block loop twice and a block over; 2 groups of 4 rows and one row over; 16-row tasks twice and a row over
    (n / m <= 64); a width the IME1 traits refuse (generic)."""
    blk = block_of(name)
    k2 = max(2 * IME.BLOCK, 2 * blk)
    k_row = 9 * IME.BLOCK if blk == IME.BLOCK else 2 * blk  # 288: two trips of 128 and a block
    return [(k2, 2 * NB_COLS, 1), (k_row, NB_COLS, 1), (k2, 2 * NB_COLS, 9), (k2, 3 * NB_COLS, 33),
            (k_row, NB_COLS, 6), (k2, NB_COLS + 1, 5)]


def real_shapes(name: str) -> list[tuple[int, int]]:
    """The real models' (k, n) a type can hold (q4_K needs k % 256 == 0: SmolLM2's 576 is not)."""
    return [(k, n) for k, n in REAL_SHAPES if k % block_of(name) == 0]


def fixed_cases(name: str, *, ime1_only: bool = False) -> list[GemmCase]:
    """Every run, after the draws: :func:`loop_shapes`, then the real models' shapes for one token and (the
    smallest) for a prompt of 7."""
    out = [GemmCase(name, k, n, m, seed=100 + i, acts=ACTS[i % len(ACTS)])
           for i, (k, n, m) in enumerate(loop_shapes(name)) if not ime1_only or n % NB_COLS == 0]
    real = real_shapes(name)
    out += [GemmCase(name, k, n, 1, seed=200 + i) for i, (k, n) in enumerate(real)]
    out.append(GemmCase(name, *real[0], 7, seed=300))
    return out


#: mul_mat_id shapes every run checks: (k, n, n_expert, n_used, x_rows, ids): experts unused, every expert used,
#: shared and per-expert activation rows.
MOE_SHAPES = ((64, 32, 4, 2, 1, (0, 3, 2, 0, 3, 1)), (256, 16, 3, 2, 2, (1, 2, 2, 0)),
              (288, 48, 8, 2, 1, (5, 7)))


def moe_cases(name: str) -> list[MoeCase]:
    blk = block_of(name)
    return [MoeCase(name, max(k, blk) // blk * blk, n, e, u, x, ids, seed=400 + i)
            for i, (k, n, e, u, x, ids) in enumerate(MOE_SHAPES)]


#: The shrunk reproducer of the zero-point finding per type: one 16-row matrix of one block, run first.
FINDING_EXAMPLES = {"q4_1": GemmCase("q4_1", 32, 16, 1, seed=7), "q4_K": GemmCase("q4_K", 256, 16, 1, seed=7)}


# ------------------------------------------------------------------ loop sizes (docs/spacemit.md)


LOOPS = (
    L.Loop("IME1 GEMM (q4_0 / q4_1 / q4_K)", "column tiles of 16 (NB_COLS: the M1 kernel's n loop, forward_mul_mat's "
           "ni loop)", "columns (n)", step=lambda vlen: NB_COLS, remainder=False, real=(576, 1024, 1536, 3072),
           vlens=(VLEN,), source="spacemit/ime1_kernels.cpp:SQ4BitGemmM1Kernel_CompInt8_ScaleFp16_Impl"),
    L.Loop("IME1 GEMM (q4_0 / q4_1 / q4_K)", "K blocks of 32 (BLOCK_COUNTK_LOOP / LOOP_K, 2 vmadot pairs each)",
           "k", step=lambda vlen: IME.BLOCK, remainder=False, real=(576, 1024, 1536),
           vlens=(VLEN,), source="spacemit/ime1_kernels.cpp:SQ4BitGemmM4Kernel_CompInt8_ScaleFp16_Impl"),
    L.Loop("quantize_a_row_i8", "4 blocks (128 values) a trip, then block by block", "k", step=lambda vlen: 128,
           real=(576, 1024, 1536), vlens=(VLEN,), source="spacemit/ime1_kernels.cpp:quantize_a_row_i8"),
    L.Loop("IME1 GEMM (q4_0 / q4_1 / q4_K)", "rows in groups of 4 (quantize_a_4row_i8, M4 kernel), then one by one "
           "(quantize_a_row_i8, M1 kernel)", "rows (m)", step=lambda vlen: IME.GROUP, vlens=(VLEN,),
           source="spacemit/ime.cpp:forward_mul_mat"),
    L.Loop("IME1 GEMM (q4_0 / q4_1 / q4_K)", "row tasks of 16 (gemm_m_stride, when n / m <= 64)", "rows (m)",
           step=lambda vlen: 16, vlens=(VLEN,), source="spacemit/ime.cpp:forward_mul_mat"),
)


@cache
def _drawn(vlen: int) -> dict[str, L.Drawn]:
    cases = [c for t in TYPES for c in fixed_cases(t)]
    return {"columns (n)": L.Drawn(sorted({c.n for c in cases if c.n % NB_COLS == 0}), NB_COLS, 4 * NB_COLS),
            "k": L.Drawn(sorted({c.k for c in cases}), IME.BLOCK, 320),
            "rows (m)": L.Drawn(sorted({c.m for c in cases}), 1, 13)}


L.register(L.Family(
    name="spacemit_gemm", doc="docs/spacemit.md", loops=LOOPS, drawn=_drawn,
    notes=("IME1 runs at VLEN 256 only (the A60's). The fixed cases run after the draws in test_spacemit_gemm; the "
           "real models' shapes are SmolLM2's and Qwen3-0.6B's (q4_K: those with k % 256 == 0).",)))
