"""The SpacemiT flash-attention family's kernel table, dispatch rule and problems (cases/spacemit_fa.py is the
family's definition: oracles, checks, paths, loops, coverage): the shapes and TCM sizes the strategies draw,
the fixed problems of every run and the findings' problems.  The data (masks, softcap, sinks, ALiBi, Q's spread,
V's offset) are cases/flash_attn_problems.py's."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from hypothesis import strategies as st

from cases import strategies as S
from cases.flash_attn import finding_problems
from cases.flash_attn_problems import (
    ADAPTER_CALLS,
    CASES,
    KV_TILE,
    Q_TILE,
    Options,
    Problem,
    Shape,
    fused_path,
    make_problem,
    problems,
)

#: ime.cpp takes SpacemiT's kernels at this VLEN only (``__riscv_vlenb() == 128``), for DK, DV up to MAX_D.
SPACEMIT_VLEN = 1024
MAX_D = 128
#: ggml's own f16 cases (cases/flash_attn_problems.py) by path: the arithmetic of the generic kernels, and the
#: materialised side's (every f16 case rounds Q and P to fp16 there).
GENERIC = {c.path: c for c in CASES if c.k == c.v == "f16"}
F16 = GENERIC["one_chunk"]  # the problems' K / V types and the server request's


@dataclass(frozen=True, repr=False)
class FaKernel(S.KernelSpec):
    """One of SpacemiT's two flash-attention kernels (at VLEN 1024; the same shapes run ggml's elsewhere)."""

    name: str  # tiled / one_chunk
    function: str
    code: int  # the spacemit_fa request's kernel number (harness/server/k_spacemit_fa.cpp)

    @property
    def requires(self) -> tuple[str, ...]:
        """The kernel, the dispatch that picks it, and what the server's attention adapter calls."""
        return (*ADAPTER_CALLS, "forward_flash_attn_ext_f16", self.function)

    @property
    def entry_points(self) -> tuple[str, ...]:
        return (self.function,)


KERNELS = [FaKernel("tiled", "forward_flash_attn_ext_f16_tiled_vlen1024_vf16", 1),
           FaKernel("one_chunk", "forward_flash_attn_ext_f16_one_chunk_vlen1024_vf16", 0)]
BY_NAME = {k.name: k for k in KERNELS}


def fa_path(sh: Shape, vlen: int) -> str:
    """What the spacemit build runs for f16 K / V (cases/spacemit_fa.py's rule): ``spacemit-tiled``,
    ``spacemit-one_chunk``, or the generic path of cases/flash_attn.py (tiled / split / one_chunk)."""
    if vlen == SPACEMIT_VLEN and sh.dk <= MAX_D and sh.dv <= MAX_D:
        return "spacemit-tiled" if sh.n_q >= Q_TILE else "spacemit-one_chunk"
    return fused_path("f16", "f16", sh.n_q, sh.n_kv, sh.dv)


# ------------------------------------------------------------------ shapes and problems

#: Head sizes SpacemiT's kernels take (DK, DV <= 128): real models' (64 SmolLM2 / Llama-3.2-1B, 80 Phi-2,
#: 96 Phi-3, 128 Qwen3 / Llama) and tails of the 64-wide e16m1 steps over DK (failures shrink towards 64).
HEADS = (64, 80, 96, 128)
TAIL_HEADS = (1, 5, 40, 72, 100, 127)
#: KV lengths at the edges of 64-wide tiles and 8-row groups (rvv_transposed_s16_mn_to_nm), and real decodes.
EDGE_KV = (1, 2, 7, 8, 9, 63, 64, 65, 127, 128, 129, 191, 192, 193)
REAL_KV = (512, 1024, 2048)
#: Multiply-adds per example (query rows x KV positions x (DK + DV)): QEMU at VLEN 1024 runs the fused and the
#: materialised side in about 1 s per 10^6 on this machine's shared cores.
MAX_WORK = 400_000
#: Mask kinds a model sends (llama.cpp always passes a mask) and the API's no-mask call: one domain each, so a
#: finding of one leaves the other gating.
DOMAINS = {"masked": ("causal", "padding", "random", "rows", "tiles"), "unmasked": ("none",)}
#: Query counts of decodes (GQA groups of 2 or 4 query heads are what the one-chunk kernel's TCM paths batch).
DECODE_NQ = st.sampled_from([1, 1, 1, 2, 3])


@st.composite
def fa_shapes(draw: st.DrawFn, kernel: FaKernel, n_q: st.SearchStrategy[int] | None = None) -> Shape:
    """Shapes of ``kernel`` at VLEN 1024 (n_q >= 64 tiled, < 64 one-chunk -- or ``n_q``'s; one query often):
    head sizes of real models and tails, KV lengths at tile edges and of real decodes, GQA ratios 1-4 and 8 over
    1-3 K/V heads, 1-4 threads; heads reduced to keep an example within MAX_WORK."""
    dk = draw(st.one_of(st.sampled_from(HEADS), st.sampled_from(TAIL_HEADS)), label="dk")
    dv = draw(st.one_of(st.just(dk), st.sampled_from(HEADS + TAIL_HEADS)), label="dv")
    if kernel.name == "tiled":
        n_q = draw(st.one_of(st.sampled_from([64, 65, 67, 68, 127, 128, 129]), st.integers(Q_TILE, 140)), label="n_q")
        n_kv = draw(st.one_of(st.sampled_from(EDGE_KV), st.integers(1, 200)), label="n_kv")
    else:
        n_q = draw(n_q if n_q is not None else
                   st.one_of(st.sampled_from([1, 1, 2, 3, 4, 5, 63]), st.integers(1, Q_TILE - 1)), label="n_q")
        real = [st.sampled_from(REAL_KV)] if n_q <= 2 else []
        n_kv = draw(st.one_of(st.sampled_from(EDGE_KV), st.integers(1, 300), *real), label="n_kv")
        n_kv = min(n_kv, max(1, MAX_WORK // (n_q * (dk + dv))))
    kv_heads = draw(st.integers(1, 3), label="kv_heads")
    ratio = draw(st.sampled_from([1, 2, 3, 4, 8]), label="gqa")
    threads = draw(st.integers(1, 4), label="threads")
    while kv_heads * ratio > 1 and kv_heads * ratio * n_q * n_kv * (dk + dv) > MAX_WORK:
        ratio, kv_heads = (ratio - 1, kv_heads) if ratio > 1 else (1, kv_heads - 1)
    return Shape(n_q, n_kv, dk, dv, kv_heads * ratio, kv_heads, threads)


def fa_problems(kernel: FaKernel, domain: str, n_q: st.SearchStrategy[int] | None = None
                ) -> st.SearchStrategy[Problem]:
    """Problems of ``kernel``'s shapes with ``domain``'s masks (cases/flash_attn_problems.py draws the rest)."""
    if domain not in DOMAINS:
        raise ValueError(f"fa_problems: domain must be one of {sorted(DOMAINS)}, not {domain!r}")
    return problems(F16, shape=fa_shapes(kernel, n_q), masks=DOMAINS[domain])


def fixed_problem(sh: Shape, mask: str, seed: int, *, softcap: float = 0.0, sinks: bool = True,
                  max_bias: float = 0.0) -> Problem:
    """A fixed problem: scale 1/sqrt(DK), Q of unit spread, V centred (an fp16 accumulator of 2048 positions
    stays far inside fp16's range), one mask for every head (ALiBi with ``max_bias``)."""
    opts = Options(mask, 0 if mask == "none" else 1, max_bias, softcap, sinks,
                   float(np.float32(1 / np.sqrt(sh.dk))), 1.0, 0.0)
    return make_problem(F16, sh, opts, seed)


#: Real models' attention (name, shape): prefill on the tiled kernel, decode of a 2048-cell KV cache on the
#: one-chunk kernel.  SmolLM2-135M: DK 64, 9 heads over 3 K/V heads; Qwen3-0.6B: DK 128, 16 over 8.
REAL_SHAPES = {
    "tiled": (("SmolLM2 prefill", Shape(128, 128, 64, 64, 9, 3, 4)),
              ("Qwen3-0.6B prefill", Shape(64, 96, 128, 128, 16, 8, 4))),
    "one_chunk": (("SmolLM2 decode", Shape(1, 2048, 64, 64, 9, 3, 4)),
                  ("Qwen3-0.6B decode", Shape(1, 2048, 128, 128, 16, 8, 3))),
}
#: The loop-crossing shapes: tiled: 139 query rows on one thread (Q tiles 64, 64, 11: the 4-row unroll twice and
#: a remainder of 3 in the last) x 149 positions (KV tiles 64, 64, 21: the transpose's 8-row groups twice and a
#: remainder of 5 in the last), DK 128 (the transpose's 64-wide DK steps, two full); one-chunk: 5 queries x 300
#: positions, DK 72 (one 64-wide step and a tail), DV 100.
LOOP_SHAPES = {"tiled": Shape(139, 149, 128, 128, 1, 1, 1), "one_chunk": Shape(5, 300, 72, 100, 2, 1, 2)}


def fixed_problems(kernel: FaKernel, domain: str) -> list[Problem]:
    """The problems every run checks after the draws: the loop-crossing shape (causal in ``masked``, no mask
    and a softcap in ``unmasked``), and in ``masked`` the real models' shapes (padding mask: a KV cache with
    unused cells)."""
    loop = LOOP_SHAPES[kernel.name]
    if domain == "unmasked":
        return [fixed_problem(loop, "none", 1, softcap=50.0)]
    return [fixed_problem(loop, "causal", 1)] + [fixed_problem(sh, "padding", 2 + i) for i, (_, sh) in
                                                 enumerate(REAL_SHAPES[kernel.name])]


# ------------------------------------------------------------------ TCM (harness/server/k_spacemit_fa.cpp)

@dataclass(frozen=True)
class TcmCase:
    """A problem run by one kernel called directly with ``tcm`` bytes of TCM per thread (0: none)."""

    kernel: str
    tcm: int
    problem: Problem

    def __repr__(self) -> str:
        return f"TcmCase({self.kernel!r}, tcm={self.tcm}, {self.problem!r})"

    def _repr_pretty_(self, p, cycle) -> None:  # Hypothesis's printer of failing examples
        p.text(repr(self))


def _kv_bytes(sh: Shape) -> int:
    return 2 * (sh.dk + sh.dv)  # one position's K and V row in fp16


def tile_step(sh: Shape, rows: int, tcm: int) -> int:
    """KV positions per TCM tile of the one-chunk kernel's ``rows``-row kernel (``..._mrow<rows>``: fp16 Q and
    accumulators first, then per position ``rows`` scores, a K and a V row and a mask value; at most 64 a tile,
    a multiple of 8); below 8 it takes one position at a time (0)."""
    room = tcm - rows * _kv_bytes(sh)
    fit = max(room, 0) // (4 * rows + _kv_bytes(sh) + 4)
    return min(64, fit) & ~7


def tiled_scratch(sh: Shape) -> int:
    """Bytes of the tiled kernel's per-thread scratch (its ``base_size``): with a TCM at least this large the
    kernel works in the TCM, else in ggml's work buffer."""
    floats = Q_TILE * sh.dk + 2 * Q_TILE * KV_TILE + Q_TILE * sh.dv + KV_TILE * sh.dv + KV_TILE * sh.dk
    return 4 * floats + 16  # + CACHE_LINE_SIZE_F32 (64 / 4), counted in bytes by the kernel


def tcm_sizes(kernel: str, sh: Shape) -> dict[str, int]:
    """TCM sizes that take each branch: one-chunk: none (one row at a time), ``rows`` (4-row kernel one position
    at a time), ``tiles16`` (4-row kernel in TCM tiles of 16 positions), ``tiles64`` (256 KiB: tiles of 64);
    tiled: none, ``short`` (a byte short of its scratch: ggml's work buffer), ``fits`` (exactly its scratch)."""
    if kernel == "tiled":
        return {"none": 0, "short": tiled_scratch(sh) - 1, "fits": tiled_scratch(sh)}
    k = _kv_bytes(sh)
    return {"none": 0, "rows": 4 * k + 1, "tiles16": 4 * k + 16 * (16 + k + 4) + 4, "tiles64": 1 << 18}


@st.composite
def tcm_cases(draw: st.DrawFn, kernel: FaKernel) -> TcmCase:
    """A masked problem of ``kernel`` (one-chunk: decodes mostly, whose GQA groups the TCM kernels batch) and one
    of its TCM sizes (``tcm_sizes``)."""
    p = draw(fa_problems(kernel, "masked", DECODE_NQ if kernel.name == "one_chunk" else None), label="problem")
    sizes = tcm_sizes(kernel.name, p.shape)
    return TcmCase(kernel.name, sizes[draw(st.sampled_from(sorted(sizes)), label="tcm")], p)


def row_groups(c: TcmCase) -> dict[int, int]:
    """How many query rows the one-chunk kernel runs in its 4-, 2- and 1-row kernels for ``c`` (its conditions
    replayed: a TCM of more than ``rows`` K and V rows, the rows in one thread's chunk, one query index, one
    mask row and one K / V head)."""
    sh, p = c.problem.shape, c.problem
    nr, nth = sh.n_q * sh.heads, sh.threads
    dr = -(-nr // nth)
    mask_heads = p.opts.mask_heads
    out = {4: 0, 2: 0, 1: 0}

    def same(ir: int, n: int) -> bool:
        rows = [(r % sh.n_q, r // sh.n_q) for r in range(ir, ir + n)]  # (iq1, head)
        group = sh.heads // sh.kv_heads
        return mask_heads > 0 and all(q == rows[0][0] and h % mask_heads == rows[0][1] % mask_heads and
                                      h // group == rows[0][1] // group for q, h in rows)

    for ir0 in range(0, nr, dr):
        ir1, ir = min(ir0 + dr, nr), ir0
        while ir < ir1:
            step = next((n for n in (4, 2) if c.tcm > n * _kv_bytes(sh) and ir < ir1 - (n - 1) and same(ir, n)), 1)
            out[step] += step
            ir += step
    return out


#: The TCM problems every run checks (after the draws): the one-chunk kernel's 4-row kernel in tiles of 16 over
#: 37 positions (two tiles and 5), its 2- and 1-row kernels one position at a time (6 heads over 3 on two
#: threads: pairs and single rows), tiles of 64 over 133 positions and a real GQA decode (Llama-3-8B: 32 heads
#: over 8, DK 128, 4-row groups); the tiled kernel with its scratch in the TCM and a byte short of it.
def fixed_tcm_cases(kernel: FaKernel) -> list[TcmCase]:
    if kernel.name == "tiled":
        sh = LOOP_SHAPES["tiled"]
        return [TcmCase("tiled", tcm_sizes("tiled", sh)[k], fixed_problem(sh, "causal", 7)) for k in ("fits", "short")]
    shapes = ((Shape(1, 37, 64, 64, 8, 2, 1), "tiles16"), (Shape(1, 37, 72, 100, 6, 3, 2), "rows"),
              (Shape(1, 133, 128, 128, 4, 1, 1), "tiles64"), (Shape(1, 512, 128, 128, 32, 8, 4), "tiles64"))
    return [TcmCase("one_chunk", tcm_sizes("one_chunk", sh)[k], fixed_problem(sh, "causal", 8 + i))
            for i, (sh, k) in enumerate(shapes)]


# ------------------------------------------------------------------ findings: minimal reproducers

@dataclass(frozen=True, repr=False)
class Finding(S.KernelSpec):
    """A bug of the pinned tree as its smallest problem, in the test that shows it (docs/spacemit.md;
    harness/data/known_failures.toml): a (kernel, domain) test through ggml, or with ``tcm`` bytes of TCM."""

    name: str  # kernel-domain-what: the domain test's id is a prefix, so one known-failure glob takes both
    kernel: str
    problem: Problem
    tcm: int = 0  # run with this TCM (harness/server/k_spacemit_fa.cpp) when > 0, else through ggml
    #: The tests of the kernel it runs first in (domains of test_spacemit_fa, "tcm": test_spacemit_fa_tcm);
    #: default: the one its name says.
    tests: tuple[str, ...] = ()

    @property
    def requires(self) -> tuple[str, ...]:
        return BY_NAME[self.kernel].requires

    @property
    def domains(self) -> tuple[str, ...]:
        return self.tests or (self.name.split("-")[1],)


def _negative_rows() -> Problem:
    """Decode of 2 query heads over one K / V head, every score near -20 (K ~ 1, Q = -2.5, scale 1/8, DK 64),
    causal mask: the one-chunk kernel's 2-row kernel with a TCM."""
    p = fixed_problem(Shape(1, 8, 64, 64, 2, 1, 1), "causal", 0, sinks=False)
    rng = np.random.default_rng(0)
    k = (1 + 0.1 * rng.standard_normal(p.k.shape[:2] + (64,))).astype(np.float16)
    q = np.full(p.q.shape, -2.5, np.float32)
    return replace(p, q=q, k=k.view(np.uint16), att=replace(p.att, q=q.astype(np.float64), k=k.astype(np.float64)))


FINDINGS = [
    # The tiled kernel applies the softcap to the padding columns of the last KV tile after setting them to
    # -inf (tanh(-inf) * c = -c): without a mask, which would add -inf back, each padding column weighs
    # exp(-c - M).  One KV position and 63 of padding, Q wide (sigma 30) so that many rows' maxima sit near
    # -softcap: those outputs shrink towards V / 64.  cases/flash_attn.py's tiled finding (ggml's own tiled
    # path had the bug until 2026-08; SpacemiT's copy of it still has it).
    Finding("tiled-unmasked-softcap_padding", "tiled", finding_problems(GENERIC["tiled"])[0]),
    # The one-chunk kernel computes whether the next rows share the mask row (mp_equal_2, for its 2- and
    # 4-row kernels) from mask->ne[2] before it looks at its TCM: with no mask and one query (the next row is
    # the next head, or the end, with the same iq1) it reads through a null pointer: SIGSEGV.
    Finding("one_chunk-unmasked-decode_null_mask", "one_chunk", fixed_problem(Shape(1, 1, 64, 64, 1, 1, 1), "none",
                                                                            0, sinks=False)),
    # The 2- and 4-row kernels declare ``float M[QLEN] = { -INFINITY }``: only row 0's running maximum starts at
    # -inf, rows 1..QLEN-1 start at 0.  A row whose scores all lie far below 0 then keeps M = 0, its weights
    # exp(s) underflow in the fp16 accumulator (fp16(exp(-20)) = 0) while S keeps them: head 1 comes out 0.
    Finding("one_chunk-tcm-mrow_max_starts_at_zero", "one_chunk", _negative_rows(), tcm=1 << 18),
    # The caller computes the ALiBi slope of the first row's head (h = iq2) and the 2- and 4-row kernels add
    # slope * mask to every row's scores: the other rows are other heads, whose slopes differ.  Decode, 2 query
    # heads over 1 K / V head, causal ALiBi mask (max_bias 8: slopes 1/16 and 1/256), every row's maximum above
    # 0 (so the finding above plays no part): head 1 gets head 0's slope.
    Finding("one_chunk-tcm-mrow_alibi_first_row_slope", "one_chunk",
            fixed_problem(Shape(1, 8, 64, 64, 2, 1, 1), "causal", 0, sinks=False, max_bias=8.0), tcm=1 << 18),
    # The tiled kernel transposes each K tile with rvv_transposed_s16_mn_to_nm (inline assembly), which advances
    # its destination by VLMAX rows per trip over DK whatever vl the trip's vsetvli gave: RVV lets vsetvli give
    # ceil(AVL / 2) when VLMAX < AVL < 2 VLMAX (QEMU's rvv_vl_half_avl, part of the stress mode), so for DK 65-127
    # at VLEN 1024 (64 a trip) K dimensions are dropped and others land in the wrong rows.  Stress mode only;
    # every test of the tiled kernel runs it first.
    Finding("tiled-stress-k_transpose_vl", "tiled", fixed_problem(Shape(64, 70, 80, 64, 1, 1, 1), "causal", 3),
            tests=("masked", "unmasked", "tcm", "stress")),
]


def finding_examples(kernel: FaKernel, domain: str) -> list[Problem]:
    """The findings of (kernel, domain) as explicit examples of its test: it fails on them first, on every run
    where the bug is (VLEN 1024, or its stress mode), whatever the draws."""
    return [f.problem for f in FINDINGS if f.kernel == kernel.name and domain in f.domains and not f.tcm]


def tcm_finding_examples(kernel: FaKernel) -> list[TcmCase]:
    """The findings that test_spacemit_fa_tcm of ``kernel`` runs first (with their TCM, or none)."""
    return [TcmCase(f.kernel, f.tcm, f.problem) for f in FINDINGS if f.kernel == kernel.name and "tcm" in f.domains]
