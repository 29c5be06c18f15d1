"""The model family's two studies outside the suite (``rvvdiff model effects``, ``rvvdiff model noise``).

* **What each finding does to a real model**: the family's run where the finding's code runs, on the pinned
  tree as it is and with the finding's fix (harness/data/fixes/), both against the pinned tree's reference,
  or why no model of the family reaches the code.  Clang, the main job's run shape: about three CPU-minutes
  a run under QEMU, plus the fixed tree's tools build once per ISA build.  The rows go to
  docs/model-effects.json and to docs/model.md's table between ``<!-- model-effects -->`` markers; the
  findings' issue texts quote them (harness/upstream/paragraphs.py).
* **The noise between correct builds** that the family's bound is derived from (docs/model.md, "The bound"):
  each pair of builds believed correct on the pinned tree, SmolLM2 as shipped (Q4_1), the main job's run
  shape, the second build's logits held against the first's.  The figures are the spread that arithmetic
  order alone makes; the bound (cases/model.py, ``BOUND``) is a multiple of the largest, and a pair
  measured above the bound's base would mean re-deriving it, never a failure let through.

Both run under the emulator they are given (QEMU by default); one that cannot run llama.cpp's tools is
refused with its reason (harness/model/machine.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from cases import model as M
from harness.core.config import ISA_BUILDS, PROJECT_ROOT
from harness.core.matrix import ISAS, Point
from harness.emulators.base import Emulator
from harness.ggml import fix_catalogue, patches
from harness.ggml.source import resolve
from harness.model import machine, model_runs
from harness.model.perplexity import Kld

# ------------------------------------------------------------------ what each finding does to a model


@dataclass(frozen=True)
class Effect:
    """Where the model family reaches a finding's code: a model file, a VLEN, an ISA build, stress mode."""

    case: str
    vlen: int
    isa: str = "zvfh"
    stress: bool = False
    #: Repacking off (``-nr``) where the finding is in the vec_dot of a type ggml repacks at that VLEN.
    repack: bool = True
    #: ggml-cpu's graph fusion off (``GGML_CPU_DISABLE_FUSION=1``) where the finding is in a kernel of an op that
    #: ggml-cpu fuses before asking the backend that claims it (SpacemiT's RMS_NORM: cases/model.py, ``PATHS``).
    fuse: bool = True

    def where(self) -> str:
        return (f"{self.case}, VLEN {self.vlen}, {self.isa}{', stress' if self.stress else ''}"
                f"{', -nr' if not self.repack else ''}{', fusion off' if not self.fuse else ''}, clang")


class NotShown(str):
    """A finding whose code a model run may reach, but no run shows it (the runs named pass): said as such, not as
    unreached."""


#: What SpacemiT's findings that no model run shows have in common: the spacemit runs pass (cases/test_model.py).
_SPACEMIT_RUNS_PASS = ("SmolLM2's runs at the spacemit build (every VLEN, 1 and 4 threads, with and without stress, and "
                       "with ggml-cpu's fusion off but for the RMS norm finding's run) stay within the bound "
                       "(docs/spacemit.md): ")

#: Reasons several SpacemiT findings share (each said once).
_TCM_ONLY = ("the 2- and 4-row kernel runs only with SpacemiT's TCM buffer, which ggml never has "
             "(tls_context.tcm_buffer is null without SpacemiT's libspine_tcm)")
_IME_QUANTIZERS = ("the activation quantizers run only in the IME paths, off on the X60's core type the model family "
                   "runs under QEMU")
_IME2_LAYOUTS = ("it is in the 32-row layouts of IME2 cores (the A100), which the build has no kernels for (no public "
                 "assembler knows IME2)")

#: Each finding of the pinned tree: where a model reaches it, or why none does.
EFFECTS: dict[str, Effect | str] = {
    "iq2_xxs_vl512_subblock_offsets": Effect("smollm2-iq2_xxs", 512),
    "iq2_xxs_vl512_misaligned_load": "it is in the same kernel at the same VLEN as the wrong sub-block offsets "
                                     "(whose effect on the model is measured), and "
                                     "QEMU does not trap misaligned vector loads, so a model run shows only the offsets",
    "iq3_xxs_vl1024_subblock_offsets": Effect("smollm2-iq3_xxs", 1024),
    # llama-quantize's IQ2_S mix puts none of SmolLM2's tensors in IQ2_S (ffn_down goes to IQ2_XS / IQ3_S):
    # the model cut from it, whose rows are a multiple of 256, holds IQ2_S tensors.
    "iq2_s_vl1024_scale_nibbles_swapped": Effect("synth-iq2_s", 1024),
    # llama-quantize's Q3_K_M puts none of SmolLM2's tensors in q3_K (rows of 576 fall back): the cut model.
    "k_quants_vl512_agnostic_accumulator": Effect("synth-q3_k", 512, stress=True),
    # At VLEN 256 the zvfh build repacks q4_K (16x1): the vec_dot the finding is in runs with -nr.
    "q4_K_int16_subblock_sum": Effect("smollm2-q4_k", 256, repack=False),
    # The leftover loop runs only where a row is not a multiple of two registers (576 at VLEN 512 and 1024), and
    # mul_mat reaches the vec_dot only where tinyBLAS_RVV does not take the shape (K = 576 is not a multiple of
    # VLEN / 8 = 128 at VLEN 1024): at VLEN 128 the model never runs the leftovers (measured: the same figures).
    "vec_dot_bf16_tail_agnostic": Effect("smollm2-bf16", 1024, isa="zvfbfwma", stress=True),
    # Measured 2026-11-28 (SmolLM2 F16, VLEN 256, zvfh, stress, clang): the same figures with and without the fix.
    "vec_dot_f16_unroll_tail_agnostic": "nothing in the tree calls ggml_vec_dot_f16_unroll (ggml-cpu's vec.h defines it; "
                                        "no op of ggml-cpu calls it); measured: SmolLM2 F16 at VLEN 256 with stress gives "
                                        "the same figures with and without the fix (mean KLD 1e-05, same top token "
                                        "100 %)",
    "iq4_nl_odd_block_dropped": "it needs a row of an odd number of 32-blocks, and SmolLM2's rows (576 = 18 blocks, "
                                "1536 = 48) and those of the model cut from it (512, 1536) are all even",
    "mxfp4_odd_block_dropped": "it needs a row of an odd number of 32-blocks (as iq4_nl's), and llama-quantize's "
                               "MXFP4_MOE also keeps dense (non-expert) tensors out of mxfp4",
    "repack_q4_0_8x8_vlen512": "ggml's repack selection never picks q4_0 8x8 on RISC-V (only the 16x1 layouts, only "
                               "at VLEN 256): llama.cpp never runs the kernel (llama.cpp #28642 would change that)",
    "repack_q4_K_16x1_vlen512": "ggml's repack selection picks q4_K 16x1 only at VLEN 256: at 512, where the bug is, "
                                "llama.cpp never runs the kernel (a selection whose VLEN 512 arm, a TODO today, picks "
                                "q4_K 16x1 would change that)",
    # SpacemiT's build (its RVV ops; IME off on the X60's core type). SmolLM2's rows of 576 have a tail at VLEN 1024
    # (VLMAX(e32m4) = 128): every RMS norm of the model meets the tail-agnostic accumulators there -- once ggml-cpu's
    # fusion is off: with it, RMS_NORM + MUL is ggml-cpu's fused op, which never asks SpacemiT's backend.
    "spacemit_row_sums_tail_undisturbed": Effect("smollm2-q4_1", 1024, isa="spacemit", stress=True, fuse=False),
    "spacemit_norm_two_pass": "SmolLM2 (a Llama) normalises with RMS norm only; ggml_norm is LayerNorm's (GPT-2, "
                              "BERT, Phi-2 ...), which no model rvvdiff runs has",
    "spacemit_cpy_permute_rows": "llama.cpp's graph for SmolLM2 copies no transposed view with ggml_cpy (its KV cache "
                                 "is written with ggml_set_rows)",
    "spacemit_transpose_trip_vl": NotShown("the transposed cont it breaks needs a core whose vsetvli returns less than "
                                           "VLMAX (QEMU's rvv_vl_half_avl): SmolLM2's runs under the whole stress mode, "
                                           "that included, at every VLEN on 1 and 4 threads (and with fusion off at VLEN "
                                           "128-512) give the figures of the runs without it (docs/spacemit.md); whether "
                                           "llama.cpp's graph for it makes a transposed cont at all is not established"),
    # SpacemiT's other findings: where no model run of this family reaches their code, or none shows them.
    "spacemit_binary_mixed_formats": NotShown(_SPACEMIT_RUNS_PASS +
                                      "whether llama.cpp's graph for it adds, subtracts, multiplies or divides an f32 "
                                      "and an f16 tensor at all is not established"),
    "spacemit_binary_strided_src1": NotShown(_SPACEMIT_RUNS_PASS +
                                     "whether llama.cpp's graph for it gives a binary op a transposed or strided "
                                     "second source is not established"),
    "spacemit_repeat_dim1_source_offsets": NotShown(_SPACEMIT_RUNS_PASS +
                                            "whether llama.cpp's graph for it repeats a tensor over dims 2 or 3 is "
                                            "not established"),
    "spacemit_concat_f16": NotShown(_SPACEMIT_RUNS_PASS +
                            "the finding aborts the process, so no f16 concat along dim 0 runs in them"),
    "spacemit_fa_decode_null_mask": NotShown(_SPACEMIT_RUNS_PASS +
                                     "llama.cpp gives flash attention its KQ mask, and the finding needs none"),
    "spacemit_fa_tiled_softcap_padding": "it needs a logit softcap (Gemma 2's); SmolLM2 has none",
    "spacemit_fa_mrow_alibi_slope": _TCM_ONLY,
    "spacemit_fa_mrow_max_init": _TCM_ONLY,
    "spacemit_ime1_block_offsets": ("it is in the IME1 path (the K1's A60 cores), which runs only under Spike with "
                                    "rvvdiff's library, and Spike cannot run llama.cpp's tools (Linux programs that "
                                    "open files); it is measured per GEMM instead (docs/spacemit.md)"),
    "spacemit_quantize_ref_zero_block": _IME_QUANTIZERS,
    "spacemit_quantize_hp_ref_zero_block": _IME_QUANTIZERS,
    "spacemit_repack_expert_row_padding": _IME2_LAYOUTS,
    "spacemit_repack_q6_K_zero_subblock": _IME2_LAYOUTS,
    "repack_q2_K_16x1_generic_gemm_layout": "the scalar generic GEMM of the q2_K 16x1 layout; llama.cpp repacks q2_K "
                                            "to 16x1 only in zvfh builds at VLEN 256, where the RVV GEMM runs instead",
}

RESULTS = PROJECT_ROOT / "docs" / "model-effects.json"
DOC = PROJECT_ROOT / "docs" / "model.md"


def measured() -> dict[str, dict]:
    """The rows docs/model-effects.json holds of findings measured or found unreached."""
    rows = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    return {n: r for n, r in rows.items() if "pinned" in r or "unreached" in r}


def measure(fix_name: str, effect: Effect, emulator: Emulator) -> dict:
    """The run where a model reaches a finding, on the pinned tree and on the tree with the fix, against the
    pinned tree's reference, under ``emulator``."""
    isa = ISAS[effect.isa]  # ggml-cpu's builds and SpacemiT's
    on = machine.on(emulator, Point(effect.vlen, isa, effect.stress, "clang"))
    pinned = resolve(None)
    fix = fix_catalogue.select([fix_name])[0]
    fixed = patches.apply([fix], pinned, "fix")
    base, name = effect.case.split("-", 1)
    case = M.Case(base, M.BY_NAME[name])
    out = {"fix": fix_name, "case": effect.case, "vlen": effect.vlen, "isa": effect.isa, "stress": effect.stress,
           "compiler": "clang", "quantize": case.type.quantize, "repack": effect.repack,
           "fuse": effect.fuse, "shipped": case.type.quantize is None and base == "smollm2"}
    path = M.RunPath(effect.repack, 1, effect.fuse)
    model = case.file(pinned)
    why = M.unreached(pinned, case, path, effect.vlen, isa, model)
    if why:  # a row that says so: the other findings are still measured
        return {**out, "unreached": f"{effect.case} does not reach the finding's code: {why}"}
    for label, tree in (("pinned", pinned), ("fixed", fixed)):
        try:
            k = model_runs.check(tree, model, on, path.shape(M.SHAPE), label=case.id, reference_source=pinned)
            out[label] = {"line": k.line(), "mean_kld": k.mean_kld, "same_top": k.same_top, "ppl_ratio": k.ppl_ratio,
                          "within": not M.BOUND.violations(k)}
        except Exception as e:  # noqa: BLE001 - a crash of the tool is this row's result
            out[label] = {"line": f"did not finish: {str(e).splitlines()[0][:200]}", "within": False}
    return out


def table(rows: dict[str, dict]) -> str:
    """docs/model.md's table: every finding, measured or why no model reaches it."""
    lines = ["| finding | where a model reaches it | the tree as it is | with its fix |", "|---|---|---|---|"]
    for name, e in EFFECTS.items():
        if isinstance(e, str):
            lines.append(f"| {name} | {'not shown' if isinstance(e, NotShown) else 'not reached'}: {e} | | |")
            continue
        r = rows.get(name)
        if r is None:
            lines.append(f"| {name} | {e.where()} | not measured yet (`rvvdiff model effects --only {name}`) | |")
        elif "unreached" in r:
            lines.append(f"| {name} | {e.where()} | not reached: {r['unreached']} | |")
        else:
            lines.append(f"| {name} | {e.where()} | {r['pinned']['line']} | {r['fixed']['line']} |")
    return "\n".join(lines)


def save(rows: dict[str, dict]) -> None:
    """Keep the rows measured so far in docs/model-effects.json (a long study survives an interruption)."""
    RESULTS.write_text(json.dumps(rows, indent=1) + "\n")


def write(rows: dict[str, dict]) -> None:
    """docs/model-effects.json with every finding (measured, or why no model reaches it: one file the
    findings' texts read) and docs/model.md's table."""
    said = {n: {"fix": n, "not_shown" if isinstance(e, NotShown) else "not_reached": str(e)}
            for n, e in EFFECTS.items() if isinstance(e, str)}
    RESULTS.write_text(json.dumps({**rows, **said}, indent=1) + "\n")
    head, _, rest = DOC.read_text().partition("<!-- model-effects -->")
    _, _, tail = rest.partition("<!-- /model-effects -->")
    DOC.write_text(f"{head}<!-- model-effects -->\n{table(rows)}\n<!-- /model-effects -->{tail}")

# ------------------------------------------------------------------ the noise between correct builds


#: The model the noise is measured on: SmolLM2 as shipped.
NOISE_CASE = M.Case("smollm2", M.BY_NAME["q4_1"])


@dataclass(frozen=True)
class Pair:
    """Two builds believed correct, the second's logits held against the first's."""

    what: str
    #: The compiler whose generic riscv64 build is the reference.
    compiler: str
    #: Another compiler whose generic build is held against it; None: ``compiler``'s zvfh build at ``vlen``.
    other: str | None = None
    vlen: int = 128


PAIRS: dict[str, Pair] = {
    "gcc14-generic-vs-clang-generic": Pair("GCC 14's generic riscv64 against clang's", "clang", other="gcc14"),
    "gcc14-zvfh-128": Pair("GCC 14's zvfh build at VLEN 128 against GCC 14's generic riscv64", "gcc14"),
    "clang-zvfh-128": Pair("clang's zvfh build at VLEN 128 against clang's generic riscv64", "clang"),
}


def noise(pair: Pair, emulator: Emulator) -> Kld:
    """What llama-perplexity reports of ``pair`` on the pinned tree, under ``emulator``."""
    on = machine.on(emulator, Point(pair.vlen, ISA_BUILDS["zvfh"], False, pair.compiler))
    source = resolve(None)
    model = NOISE_CASE.file(source)
    if pair.other is not None:
        return model_runs.generic_against_generic(source, model, M.SHAPE, on, pair.other, label=NOISE_CASE.id)
    return model_runs.check(source, model, on, M.SHAPE, label=NOISE_CASE.id)


def noise_line(name: str, k: Kld) -> str:
    """A pair's line, beside the bound's base."""
    return (f"{name}: {PAIRS[name].what}: {k.line()}; {k.seconds:.0f} s (the bound's base: mean KLD {M.NOISE_MEAN}, "
            f"top token lost at {M.NOISE_TOP:.1f} % of positions)")
