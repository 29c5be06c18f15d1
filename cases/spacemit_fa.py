"""SpacemiT's flash attention (ggml-cpu/spacemit/rvv_kernels.cpp) on 1-4 threads, at every VLEN of the spacemit
build: the fused op against the float64 oracle (oracles/attention.py) and against the materialised path of the
same build, as cases/flash_attn.py judges ggml's own kernels (its problems, oracle and checks are reused here).

Dispatch (spacemit/ime.cpp, ``tensor_traits_common::forward_flash_attn_ext_f16``; the backend's extra buffer type
claims every FLASH_ATTN_EXT): SpacemiT's kernels when Q is f32, K and V f16, DK and DV <= 128, precision default
or F32 and ``__riscv_vlenb() == 128`` (VLEN 1024) -- ``forward_flash_attn_ext_f16_tiled_vlen1024_vf16`` when
n_q >= 64 (GGML_FA_TILE_Q), else ``forward_flash_attn_ext_f16_one_chunk_vlen1024_vf16``; the n_q x H rows are cut
into one chunk per thread.  Otherwise (other VLENs, DK or DV > 128) ggml's own ``ggml_compute_forward_flash_attn_ext``
with its tiled / split-KV / one-chunk paths (cases/flash_attn.py), which SpacemiT's boards run at VLEN 256 too.
:func:`fa_path` is that rule; ``test_spacemit_fa_path`` checks it against QEMU's trace.

SpacemiT's arithmetic, from the kernels (the bound of each is oracles/attention.py's ``error_bound`` of the
problem the kernel solves):

* **tiled**: Q packed as fp16(f32(q * scale')), the scale (divided by the softcap, if any) folded in
  (``rvv_pack_f32_as_scaled_f16``); scores: fp16 x fp16 products (exact in f32) summed over DK in f32
  (vfwmacc), the softcap by ``rvv_tanh_approx_f32m2`` times c, + f32(slope * mask); weights by
  ``rvv_expf_approx_f32m2``; P.V: the f32 weights times V widened to f32, accumulated in f32 (vfmacc); S summed
  per 64-wide tile (vfredusum) and rescaled per tile by libm expf.  Oracle: ``reference(tiled_view(att),
  "f32")``, ``Arithmetic("f32")``.  The exp is within 1.9536 ulp and the tanh within 2.043 * 2^-24 absolute
  over their whole input ranges (measured, oracles/spacemit_fa.py).
* **one-chunk**: Q as fp16(q); scores: exact products (vfwmul) reduced in f32 (vfredusum), * scale (/ softcap),
  softcap by libm tanhf, + slope * mask; weights by libm expf; P.V in an fp16 vector (VKQ *= fp16(ms),
  VKQ += fp16(vs) v: vfmul / vfmacc in fp16), S in f32.  Oracle: ``reference(att, "f16")``,
  ``Arithmetic("f16")`` -- ggml's one-chunk f16 arithmetic, instruction for instruction.

So the tiled kernel's Q rounding is reproduced exactly (``tiled_view``: Q's error is not a bound term), its
weights P stay f32 (they are not packed to fp16: only Q is), and its exp / tanh errors fit the Delta terms of
the oracle (EXP_ULPS 2, TANH_ULPS 2 * 2^-23 absolute).  The S and numerator sums of the tiled kernel round each
term at most (tile's terms - 1) + 5 per tile times (sum, rescale, expf's rescale factor): within
gamma(2 n + 7), which ``Arithmetic("f32")`` allows.  The materialised side is the build's generic mul_mat ->
soft_max_ext -> mul_mat (Q and P rounded to fp16: cases/flash_attn_problems.py), with V given transposed
(``run_materialised``).  A row whose every position is masked comes out 0 from both SpacemiT kernels (S = 0
gives 1/S := 0).

TCM: both kernels take SpacemiT's tightly coupled memory (``tls_context.tcm_buffer``) as scratch when there is
one.  Through ggml under QEMU there is none (it comes from SpacemiT's libspine_tcm runtime, which a static binary
does not load), so the tiled kernel uses ggml's work buffer and the one-chunk kernel runs one query row at a time
(``..._inner_vlen1024_vf16_m1``).  Its 2- and 4-row kernels (``..._mrow<2>``, ``<4>``: decode with GQA, the query
heads of one K / V head together) run only with a TCM: ``test_spacemit_fa_tcm`` calls the kernels as ime.cpp calls
them with TCM blocks of sizes that take each branch (harness/server/k_spacemit_fa.cpp).  Their arithmetic is the
one-chunk kernel's with the tiled kernel's exp and tanh (fp16 Q, f32 scores, fp16 accumulator), so the same
oracle and bound.  See docs/spacemit.md, section "Flash attention".
"""

from __future__ import annotations

import re

import numpy as np

from cases import coverage
from cases import loops as L
from cases.flash_attn import attention_call, executed_path, judge_attention
from cases.flash_attn_problems import KV_TILE, Q_TILE, Problem, Shape
from cases.spacemit_fa_problems import (
    BY_NAME,
    F16,
    GENERIC,
    HEADS,
    KERNELS,
    LOOP_SHAPES,
    MAX_D,
    REAL_KV,
    REAL_SHAPES,
    SPACEMIT_VLEN,
    TAIL_HEADS,
    TcmCase,
    fa_path,
    fixed_tcm_cases,
    row_groups,
    tcm_sizes,
    tile_step,
)
from cases.spacemit_tree import absent
from cases.vec_op_cases import EXP_EDGES
from cases.vec_source import file_notes, rvv_paths, where
from harness.emulators.protocol import In
from harness.ggml.tree import Tree
from oracles import attention as A
from oracles import spacemit_fa as SF

#: The files of the kernels and of their dispatch (relative to the ggml directory).
KERNEL_FILE = "src/ggml-cpu/spacemit/rvv_kernels.cpp"
DISPATCH_FILE = "src/ggml-cpu/spacemit/ime.cpp"
VEC_H = "src/ggml-cpu/vec.h"


def fused_oracle(p: Problem, path: str) -> tuple[A.Reference, np.ndarray, str]:
    """The fused side's oracle, bound and derivation for a problem on ``path`` (as the module docstring says)."""
    if path == "spacemit-tiled":
        view = SF.tiled_view(p.att)
        ref = A.reference(view, "f32")
        return (ref, A.error_bound(view, ref, A.Arithmetic("f32")),
                "oracles.attention.error_bound(Arithmetic('f32')) of oracles.spacemit_fa.tiled_view (Q as the "
                "tiled kernel packs it: fp16 of f32(q * scale'))")
    q, arith = (("f16", A.Arithmetic("f16")) if path == "spacemit-one_chunk"
                else GENERIC[path].fused_arithmetic(p.shape.threads))
    ref = A.reference(p.att, q)
    return ref, A.error_bound(p.att, ref, arith), f"oracles.attention.error_bound({arith}) with Q as {q}"


def run_materialised(target, p: Problem) -> np.ndarray:
    """The materialised side with V given transposed (the attention request's fused = 2, llama.cpp's V cache
    without flash attention): no cont of a transposed V, which in this build is SpacemiT's
    forward_cont_with_permute -- the ops family's kernel, wrong under QEMU's rvv_vl_half_avl (docs/spacemit.md)."""
    ip, fp, bufs = attention_call(F16, p, False)
    bufs[2] = In(np.ascontiguousarray(p.v.transpose(0, 2, 1)))
    r = target.call("attention", [2, *ip[1:]], fp, bufs)
    return r.output(0, np.float32).reshape(p.shape.n_q, p.shape.heads, p.shape.dv)


def check_fa(target, p: Problem) -> None:
    """One problem on both sides, judged as cases/flash_attn.py judges ggml's (``judge_attention``)."""
    path = fa_path(p.shape, target.vlen)
    ref, bound, derivation = fused_oracle(p, path)
    judge_attention(F16, target, p, path, ref, bound, derivation,
                    ref_m=ref if path in ("spacemit-one_chunk", "one_chunk", "split") else None,
                    run_materialised=lambda: run_materialised(target, p))


def tcm_branch(c: TcmCase) -> str:
    """What a TCM case runs, by the kernel's conditions (the trace cannot tell: the row kernels are inlined)."""
    if c.kernel == "tiled":
        return "scratch in the TCM" if c.tcm >= tcm_sizes("tiled", c.problem.shape)["fits"] else "ggml's work buffer"
    g = row_groups(c)
    steps = {n: tile_step(c.problem.shape, n, c.tcm) for n in (4, 2)}
    return ", ".join(f"{g[n]} rows by the {n}-row kernel" + (f" (TCM tiles of {steps[n] or 'one'} position"
                                                             f"{'s' if steps[n] else ''})" if n > 1 else "")
                     for n in (4, 2, 1) if g[n])


def check_tcm(target, c: TcmCase) -> None:
    """A TCM case: the kernel called with its TCM (harness/server/k_spacemit_fa.cpp), judged like check_fa's
    fused side (the same arithmetic: the row kernels round and accumulate as the one-row kernel does, with the
    tiled kernel's exp and tanh), against the materialised path through ggml."""
    p = c.problem
    path = f"spacemit-{c.kernel}"
    ref, bound, derivation = fused_oracle(p, path)

    def run() -> np.ndarray:
        ip, fp, bufs = attention_call(F16, p, True)
        r = target.call("spacemit_fa", [BY_NAME[c.kernel].code, c.tcm, *ip[1:]], fp, bufs)
        return r.output(0, np.float32).reshape(p.shape.n_q, p.shape.heads, p.shape.dv)

    judge_attention(F16, target, p, f"{path} with {c.tcm} bytes of TCM: {tcm_branch(c)}", ref, bound, derivation,
                    ref_m=ref if c.kernel == "one_chunk" else None, run_fused=run,
                    run_materialised=lambda: run_materialised(target, p))


# ------------------------------------------------------------------ the exp model against the kernel

#: Every EXP_STRIDE-th non-positive float32 (a prime: every exponent, many mantissas) checks the model's bits.
EXP_STRIDE = 65521


def exp_inputs() -> list[np.ndarray]:
    """The exp's inputs in the kernels (x <= 0, -inf) that test_spacemit_fa_exp_model checks: the regime edges
    of cases/vec_op_cases.py, then every EXP_STRIDE-th bit pattern of oracles/spacemit_fa.py's range."""
    edges = EXP_EDGES[np.signbit(EXP_EDGES)]
    return [np.concatenate([edges, np.array([-0.0, -np.inf], np.float32)]),
            *SF.float32_range(*SF.EXP_INPUTS, stride=EXP_STRIDE)]


# ------------------------------------------------------------------ paths

#: Probe shapes per kernel (at VLEN 1024 they must take SpacemiT's kernel, elsewhere ggml's path by its rule):
#: at the Q-tile threshold, the largest heads, a decode where ggml would split the KV range, an odd DV.
FA_PROBES = {
    "tiled": [Shape(64, 65, 128, 128, 2, 1, 2), Shape(129, 64, 80, 6, 1, 1, 1)],
    "one_chunk": [Shape(63, 64, 64, 64, 2, 1, 2), Shape(1, 512, 128, 128, 4, 2, 2), Shape(2, 100, 72, 6, 1, 1, 1)],
}
#: At VLEN 1024 beyond the kernels' head sizes (ggml's path runs): DK 256 (Gemma), DV 256.
FALLBACK_PROBES = [Shape(64, 64, 256, 256, 1, 1, 1), Shape(1, 600, 128, 256, 2, 1, 2)]


def traced_path(calls: frozenset[str]) -> str:
    """The path a QEMU trace shows: SpacemiT's kernel (its symbol ran, ggml's flash attention did not), else
    ggml's path as cases/flash_attn.py reads it."""
    mine = [k.name for k in KERNELS if any(k.function in c for c in calls)]
    generic = any("ggml_compute_forward_flash_attn_ext" in c for c in calls)
    if mine:
        return f"spacemit-{mine[0]}" if len(mine) == 1 and not generic else f"unclear ({mine}, generic: {generic})"
    return executed_path(calls)


# ------------------------------------------------------------------ loop sizes (docs/spacemit.md)

def _tiles(n: int, step: int) -> list[int]:
    return [min(step, n - i) for i in range(0, n, step)]


def drawn(vlen: int) -> dict[str, L.Drawn]:
    """What the tests draw of each size the SpacemiT kernels' loops iterate over (every run: LOOP_SHAPES and
    REAL_SHAPES; one thread walks a head's query rows in 64-row tiles)."""
    tiled = [LOOP_SHAPES["tiled"], *(sh for _, sh in REAL_SHAPES["tiled"])]
    chunk = [LOOP_SHAPES["one_chunk"], *(sh for _, sh in REAL_SHAPES["one_chunk"])]
    rows = sorted({t for sh in tiled if sh.threads == 1 for t in _tiles(sh.n_q, Q_TILE)})
    kv = sorted({t for sh in tiled for t in _tiles(sh.n_kv, KV_TILE)})
    return {
        "q rows (tiled)": L.Drawn(sorted({sh.n_q for sh in tiled if sh.threads == 1}), Q_TILE, 140),
        "n_kv (tiled)": L.Drawn(sorted({sh.n_kv for sh in tiled}), 1, 200),
        "tile rows": L.Drawn(rows, 1, Q_TILE),
        "KV tile rows": L.Drawn(kv, 1, KV_TILE),
        "dk (tiled)": L.Drawn(sorted({sh.dk for sh in tiled}), min(TAIL_HEADS), MAX_D),
        "n_kv (one-chunk)": L.Drawn(sorted({sh.n_kv for sh in chunk}), 1, max(REAL_KV)),
        **{f"n_kv (TCM tiles of {n})": L.Drawn(_tcm_kv(n), 1, max(REAL_KV)) for n in (16, 64)},
    }


def _tcm_kv(step: int) -> list[int]:
    """KV lengths of the fixed TCM cases whose 4-row kernel walks TCM tiles of ``step`` positions."""
    return sorted({c.problem.shape.n_kv for c in fixed_tcm_cases(KERNELS[1])
                   if tile_step(c.problem.shape, 4, c.tcm) == step and row_groups(c)[4]})


_AT = (SPACEMIT_VLEN,)
L.register(L.Family(
    name="spacemit_fa", doc="docs/spacemit.md",
    loops=[
        L.Loop("forward_flash_attn_ext_f16_tiled_vlen1024_vf16", "Q tiles (64 rows of one head and chunk)",
               "q rows (tiled)", lambda vlen: Q_TILE, vlens=_AT, source=f"spacemit/rvv_kernels.cpp:{KERNELS[0].function}"),
        L.Loop("forward_flash_attn_ext_f16_tiled_vlen1024_vf16", "KV tiles (64 positions, the last padded)",
               "n_kv (tiled)", lambda vlen: KV_TILE, vlens=_AT, source=f"spacemit/rvv_kernels.cpp:{KERNELS[0].function}"),
        L.Loop("rvv_qk_dot_tile_f16_x4 / rvv_pv_accumulate_f16_x4, then _x1", "a tile's rows, 4 at a time",
               "tile rows", lambda vlen: 4, vlens=_AT, source=f"spacemit/rvv_kernels.cpp:{KERNELS[0].function}"),
        L.Loop("rvv_transposed_s16_mn_to_nm (K tile, inline assembly)", "a KV tile's rows, 8 at a time (vssseg8)",
               "KV tile rows", lambda vlen: 8, vlens=_AT, source="spacemit/rvv_kernels.cpp:rvv_transposed_s16_mn_to_nm"),
        L.Loop("rvv_transposed_s16_mn_to_nm (K tile, inline assembly)", "DK in e16m1 steps (64 at VLEN 1024)",
               "dk (tiled)", lambda vlen: vlen // 16, remainder=False, real=HEADS, vlens=_AT,
               source="spacemit/rvv_kernels.cpp:rvv_transposed_s16_mn_to_nm"),
        L.Loop("forward_flash_attn_ext_f16_one_chunk_vlen1024_vf16 (_inner_..._m1)", "KV positions per query (scalar)",
               "n_kv (one-chunk)", lambda vlen: 1, remainder=False, real=(2048,), vlens=_AT,
               source=f"spacemit/rvv_kernels.cpp:{KERNELS[1].function}"),
        *(L.Loop("flash_attn_ext_f16_one_chunk_inner_vlen1024_vf16_mrow<4> (TCM)",
                 f"KV positions in TCM tiles of {n} (a TCM with room for {n})", f"n_kv (TCM tiles of {n})",
                 lambda vlen, n=n: n, vlens=_AT, source="spacemit/rvv_kernels.cpp:"
                 "flash_attn_ext_f16_one_chunk_inner_vlen1024_vf16_mrow") for n in (16, 64)),
    ],
    drawn=drawn,
    notes=(
        "VLEN 1024 only: at VLEN 128-512 the same shapes run ggml's own flash attention, whose loops are the "
        "flash_attn family's (docs/attention.md).",
        "Fixed by construction at VLEN 1024 (one trip, DK and DV <= 128): every vector over DK or DV (vle16 f16m2, "
        "vfwmul / vfredusum f32m4 with vl = DK; rvv_pv_accumulate_f16's e16m2 loop over DV, 128 a trip) and over a "
        "KV tile (e16m1 / e32m2: 64, e32m4: 128 a trip; the softmax, softcap, max and mask loops).  The DK steps "
        "of the K transpose: two full trips need DK = 128, the kernels' maximum, so there is no remainder after "
        "two; DK 65-127 give one trip and a remainder (drawn: 72, 80, 96, 100, 127).",
        "Sizes of every run: LOOP_SHAPES, REAL_SHAPES and fixed_tcm_cases in cases/spacemit_fa_problems.py; the "
        "drawn ranges are fa_shapes'.  The real decodes' 2048 positions are one fp16 accumulator each (the "
        "one-chunk kernel has no split-KV path).",
        "TCM tiles: the 2- and 4-row kernels walk the KV positions in tiles of as many positions as the TCM holds "
        "(a multiple of 8, at most 64), or one position at a time below 8; the drawn TCM sizes give none, one at a "
        "time, 16 and 64 (tcm_sizes), the fixed cases cross tiles of 16 and of 64 twice with a remainder.",
    )))


# ------------------------------------------------------------------ what the tree has (cases/coverage.py)

#: Functions of rvv_kernels.cpp with an RVV path that belong to flash attention and that no test runs, and why.
UNREACHED = {
    "rvv_qk_dot_tile": "the tiled kernel's f32 K / V branch, which ime.cpp never takes (it sends only f16 K / V)",
    "rvv_pv_accumulate": "the tiled kernel's f32 K / V branch, which ime.cpp never takes",
}
#: The dispatch conditions of ime.cpp this module's rule (fa_path) assumes, as the tree writes them.
DISPATCH = (r"__riscv_vlenb\(\)\s*==\s*128", r"DK\s*<=\s*128", r"DV\s*<=\s*128", r"neq1\s*>=\s*Q_TILE_SZ",
            r"k->type\s*==\s*GGML_TYPE_F16\s*&&\s*v->type\s*==\s*GGML_TYPE_F16")


def _tokens(body: str) -> str:
    return re.sub(r"[\s{}]+", "", re.sub(r"//[^\n]*", "", body))


def exp_differs(src, body: str) -> str | None:
    """Why oracles/spacemit_fa.py's exp no longer models ``rvv_expf_approx_f32m2`` (its ``body``), or None: it
    must have the model's constants and be ggml's ``ggml_v_expf_m2`` (vec.h) token for token (braces aside), so
    that the measurements of both -- through the kernel over all 2^32 inputs (docs/vec_ops.md) and of the model
    over the non-positive ones -- are its own."""
    consts = tuple(re.findall(r"0x[0-9a-fA-F.]+p[+-]?\d+", body))
    if consts != SF.EXP_CONSTANTS:
        return f"its constants {consts} are not EXP_CONSTANTS"
    ggml = rvv_paths(src, (VEC_H,)).get("ggml_v_expf_m2")
    if ggml is not None and _tokens(ggml.function.body) != _tokens(body):
        return "it is no longer ggml_v_expf_m2's body"
    return None


def _is_fa(name: str) -> bool:
    return "flash_attn" in name or name.startswith(("rvv_", "reduce_sum"))


@coverage.register("spacemit_fa")
def scan(inv: Tree) -> coverage.FamilyScan:
    """spacemit/rvv_kernels.cpp's flash-attention functions (names with flash_attn, rvv_ and reduce_sum): one
    with an RVV path the tests neither run nor name in UNREACHED is uncovered; the exp's constants must be the
    ones oracles/spacemit_fa.py models, and ime.cpp's dispatch the one fa_path assumes (else uncovered: the
    bound or the path rule no longer describes the tree); a tree without the backend is not in this tree."""
    src = inv.source
    out = coverage.FamilyScan("spacemit_fa")
    if not (src.ggml / KERNEL_FILE).is_file():
        out.not_in_tree.append(absent(src, KERNEL_FILE))
        return out
    for k in KERNELS:
        out.lacks(inv, k)
    found = rvv_paths(src, (KERNEL_FILE,))
    for name, reason in sorted(UNREACHED.items()):
        if name in found:
            out.notes.append(f"{name} ({where(src, found[name].function)}): not tested: {reason}")
    exp = found.get("rvv_expf_approx_f32m2")
    if exp is not None and (why := exp_differs(src, exp.function.body)):
        out.uncovered.append(coverage.Uncovered("rvv_expf_approx_f32m2", where(src, exp.function),
                                                f"{why}: re-express it in oracles/spacemit_fa.py and remeasure "
                                                "EXP_POLY_ULPS / TANH_POLY_ABS"))
    dispatch = (src.ggml / DISPATCH_FILE).read_text(errors="replace") if (src.ggml / DISPATCH_FILE).is_file() else ""
    lost = [d for d in DISPATCH if not re.search(d, dispatch)]
    if lost:
        out.uncovered.append(coverage.Uncovered("forward_flash_attn_ext_f16", DISPATCH_FILE,
                                                f"ime.cpp's dispatch lacks {lost}: fa_path no longer describes it"))
    for name, r in sorted(found.items()):
        if _is_fa(name) and name not in UNREACHED and name not in TESTED:
            out.uncovered.append(coverage.Uncovered(name, where(src, r.function),
                                                    f"{r.describe()}; no test knows it (cases/spacemit_fa.py)"))
    out.notes += file_notes(src, (KERNEL_FILE,))
    return out


#: The flash-attention functions with an RVV path that the tests run (through the two kernels; the row kernels
#: and their add-max helpers with a TCM only: test_spacemit_fa_tcm).
TESTED = ("flash_attn_ext_f16_one_chunk_inner_vlen1024_vf16_m1", "flash_attn_ext_f16_one_chunk_inner_vlen1024_vf16_mrow",
          "rvv_add_max_inplace_f32", "rvv_softcap_add_max_inplace_f32", "reduce_sum_f32m4_vlen1024",
          "reduce_sum_f32m2_vlen1024", "rvv_expf_approx_f32m2", "rvv_tanh_approx_f32m2",
          "rvv_softcap_tanh_inplace_f32", "rvv_softmax_exp_inplace_f32", "rvv_zero_f32", "rvv_scale_f32",
          "rvv_add_inplace_f32", "rvv_max_f32", "rvv_pack_f32_as_scaled_f16", "rvv_pack_scaled_f16_as_f32",
          "rvv_pack_scaled_f32_as_f32", "rvv_qk_dot_tile_f16_x1", "rvv_qk_dot_tile_f16_x4",
          "rvv_pv_accumulate_f16_x1", "rvv_pv_accumulate_f16_x4")
