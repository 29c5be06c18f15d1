"""What each finding of the tree does to a real model: the model family's run where the finding's code runs,
on the tree as it is and with the finding's fix (harness/data/fixes/), or why no model of the family reaches
the code.

``python -m cases.model_effects [--only FIX ...] [--write]`` measures the reachable ones (clang, the main job's
run shape; about three CPU-minutes a run under QEMU, plus the fixed tree's tools build once per ISA build) and
writes the table into docs/model.md between ``<!-- model-effects -->`` markers; the findings' texts quote it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass

from cases import model as M
from harness.core.config import ISA_BUILDS, PROJECT_ROOT
from harness.ggml import fix_catalogue, patches
from harness.ggml.source import resolve


@dataclass(frozen=True)
class Effect:
    """Where the model family reaches a finding's code: a model file, a VLEN, an ISA build, stress mode."""

    case: str
    vlen: int
    isa: str = "zvfh"
    stress: bool = False
    #: Repacking off (``-nr``) where the finding is in the vec_dot of a type ggml repacks at that VLEN.
    repack: bool = True


#: Each finding of the pinned tree: where a model reaches it, or why none does.
EFFECTS: dict[str, Effect | str] = {
    "iq2_xxs_vl512_subblock_offsets": Effect("smollm2-iq2_xxs", 512),
    "iq2_xxs_vl512_misaligned_load": "it is in the same kernel at the same VLEN as the wrong sub-block offsets "
                                     "(iq2_xxs_vl512_subblock_offsets, whose effect on the model is measured), and "
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
                                "llama.cpp never runs the kernel (llama.cpp #28642 would change that)",
    "repack_q2_K_16x1_generic_gemm_layout": "the scalar generic GEMM of the q2_K 16x1 layout; llama.cpp repacks q2_K "
                                            "to 16x1 only in zvfh builds at VLEN 256, where the RVV GEMM runs instead",
}

RESULTS = PROJECT_ROOT / "docs" / "model-effects.json"


def measure(fix_name: str, effect: Effect) -> dict:
    """The run on the pinned tree and on the tree with the fix, against the pinned tree's reference."""
    pinned = resolve(None)
    fix = fix_catalogue.select([fix_name])[0]
    fixed = patches.apply([fix], pinned, "fix")
    base, name = effect.case.split("-", 1)
    case = M.Case(base, M.BY_NAME[name])
    isa = ISA_BUILDS[effect.isa]
    out = {"fix": fix_name, "case": effect.case, "vlen": effect.vlen, "isa": effect.isa, "stress": effect.stress,
           "compiler": "clang", "quantize": case.type.quantize, "repack": effect.repack}
    path = M.RunPath(effect.repack, 1)
    why = M.unreached(pinned, case, path, effect.vlen, isa, M.model_file(pinned, case))
    if why:  # a row that says so: the other findings are still measured
        return {**out, "unreached": f"{effect.case} does not reach the finding's code: {why}"}
    for label, tree in (("pinned", pinned), ("fixed", fixed)):
        try:
            k = M.check(tree, case, path, effect.vlen, isa, effect.stress, "clang", M.SHAPE, reference_source=pinned)
            out[label] = {"line": k.line(), "mean_kld": k.mean_kld, "same_top": k.same_top, "ppl_ratio": k.ppl_ratio,
                          "within": not M.BOUND.violations(k)}
        except Exception as e:  # noqa: BLE001 - a crash of the tool is this row's result
            out[label] = {"line": f"did not finish: {str(e).splitlines()[0][:200]}", "within": False}
    return out


def table(rows: dict[str, dict]) -> str:
    lines = ["| finding | where a model reaches it | the tree as it is | with its fix |", "|---|---|---|---|"]
    for name, e in EFFECTS.items():
        if isinstance(e, str):
            lines.append(f"| {name} | not reached: {e} | | |")
            continue
        r = rows.get(name)
        where = f"{e.case}, VLEN {e.vlen}, {e.isa}{', stress' if e.stress else ''}{', -nr' if not e.repack else ''}, clang"
        if r is None:
            lines.append(f"| {name} | {where} | not measured yet (`python -m cases.model_effects --only {name}`) | |")
        elif "unreached" in r:
            lines.append(f"| {name} | {where} | not reached: {r['unreached']} | |")
        else:
            lines.append(f"| {name} | {where} | {r['pinned']['line']} | {r['fixed']['line']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cases.model_effects", description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", help="a finding (repeatable; default: every reachable one)")
    ap.add_argument("--write", action="store_true", help="write docs/model-effects.json and docs/model.md's table")
    a = ap.parse_args(argv)
    rows = {n: r for n, r in (json.loads(RESULTS.read_text()) if RESULTS.exists() else {}).items()
            if "pinned" in r or "unreached" in r}
    for name in a.only or [n for n, e in EFFECTS.items() if isinstance(e, Effect)]:
        e = EFFECTS[name]
        if not isinstance(e, Effect):
            print(f"{name}: not reached: {e}")
            continue
        rows[name] = r = measure(name, e)
        print(f"{name}: not reached: {r['unreached']}" if "unreached" in r else
              f"{name}: as it is: {r['pinned']['line']}; with its fix: {r['fixed']['line']}", flush=True)
        if a.write:
            RESULTS.write_text(json.dumps(rows, indent=1) + "\n")
    if a.write:
        # One file the findings' texts can read: every finding, measured or why no model reaches it.
        RESULTS.write_text(json.dumps({**rows, **{n: {"fix": n, "not_reached": e} for n, e in EFFECTS.items()
                                                  if isinstance(e, str)}}, indent=1) + "\n")
        doc = PROJECT_ROOT / "docs" / "model.md"
        text = doc.read_text()
        head, _, rest = text.partition("<!-- model-effects -->")
        _, _, tail = rest.partition("<!-- /model-effects -->")
        doc.write_text(f"{head}<!-- model-effects -->\n{table(rows)}\n<!-- /model-effects -->{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
