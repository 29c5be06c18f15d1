"""The paragraphs every text for upstream shares, by finding: what upstream already has about it
(:data:`UPSTREAM`, :func:`upstream_lines`), which fix series carries its fix (:func:`series_of`) and how a text names
that fix (:func:`fixed_with`), what it does to a
real model (:func:`model_lines`, read from docs/model-effects.json each time a text is written, so that a re-render
after that file changes is one command), what an enabling patch does (:func:`enable_line`); and the readers of a
short fix report (:func:`paragraph`) and of a known-failure entry (:func:`reason_of`).
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from harness.core.config import ISA_BUILDS, PROJECT_ROOT, IsaBuild
from harness.ggml import fix_catalogue, known
from harness.toolchain import additions

#: The newest llama.cpp checked, and what it still has (read from its sources: the RVV files
#: arch/riscv/quants.c, arch/riscv/repack.cpp, vec.h, vec.cpp and repack.h are byte-identical to the pinned
#: tree's; repack.cpp differs only in two new null members of the CPU_REPACK buffer type's table).  Said once, on
#: the tree line of each text (:func:`tree_line`).
NEWEST = "llama.cpp b11434, the newest tree checked, has the same code"

#: Why pull request #22754's own testing (test-quantize-fns under QEMU) did not see a finding of its variants.
_MISSED_22754 = {
    "k_quants_vl512_agnostic_accumulator": "q3_K and q6_K are in that test, but QEMU leaves agnostic elements "
        "undisturbed unless asked, and iq1_m has no CPU from_float, which the test skips",
    "iq2_xxs_vl512_subblock_offsets": "iq2_xxs has no CPU from_float, and the test skips such types",
    "iq2_xxs_vl512_misaligned_load": "QEMU does not trap misaligned vector loads, and the test skips iq2_xxs (no CPU "
        "from_float)",
    "iq3_xxs_vl1024_subblock_offsets": "iq3_xxs has no CPU from_float, and the test skips such types",
    "iq2_s_vl1024_scale_nibbles_swapped": "iq2_s has no CPU from_float, and the test skips such types",
}

#: The fixes of SpacemiT's backend (ggml-cpu/spacemit/), all of whose code came with one pull request: what each
#: finding is, in the words its Upstream paragraph searched for.
SPACEMIT_FINDINGS = {
    "spacemit_norm_two_pass": "the SpacemiT norm's one-pass variance",
    "spacemit_row_sums_tail_undisturbed": "the tail-agnostic accumulators of SpacemiT's rms_norm and sum_rows",
    "spacemit_cpy_permute_rows": "SpacemiT's transposed cpy",
    "spacemit_transpose_trip_vl": "the vl of SpacemiT's transposes",
    "spacemit_binary_mixed_formats": "SpacemiT's binary ops of mixed formats",
    "spacemit_binary_strided_src1": "SpacemiT's binary ops with a strided src1",
    "spacemit_repeat_dim1_source_offsets": "SpacemiT's repeat of one row over dims 2-3",
    "spacemit_concat_f16": "SpacemiT's f16 concat",
    "spacemit_fa_tiled_softcap_padding": "the softcap of the padding in SpacemiT's tiled flash attention",
    "spacemit_fa_decode_null_mask": "SpacemiT's flash attention without a mask",
    "spacemit_fa_mrow_max_init": "the running maximum of SpacemiT's 2- / 4-row flash attention",
    "spacemit_fa_mrow_alibi_slope": "the ALiBi slope of SpacemiT's 2- / 4-row flash attention",
    "spacemit_quantize_ref_zero_block": "a zero block in SpacemiT's quantize_a_nrow_i8_ref",
    "spacemit_quantize_hp_ref_zero_block": "zero blocks in SpacemiT's quantize_a_nrow_i8_hp_ref",
    "spacemit_repack_q6_K_zero_subblock": "zero q6_K sub-blocks in SpacemiT's q8_0 repack",
    "spacemit_repack_expert_row_padding": "the expert rows of SpacemiT's buffer size",
    "spacemit_ime1_block_offsets": "the zero points of SpacemiT's IME1 q4_1 / q4_K layouts",
}

#: What upstream already has about a finding (threads read before writing), by fix name.
UPSTREAM = {
    "iq4_nl_odd_block_dropped": "Reported as llama.cpp issue #29131 (open, label bug-unconfirmed), from SpacemiT K1 "
        "hardware (X60 cores, VLEN 256, GCC 14.2): its differential test finds the RVV iq4_nl and mxfp4 dots wrong "
        "exactly at odd block counts (nb = 1: RVV 0 where the generic code gives -3.514065) and MUL_MAT failing "
        "there; this report adds every VLEN and ISA build under QEMU with both compilers, and the fix.",
    "mxfp4_odd_block_dropped": "Reported as llama.cpp issue #29131 (open, label bug-unconfirmed), from SpacemiT K1 "
        "hardware (X60 cores, VLEN 256, GCC 14.2): its differential test finds the RVV iq4_nl and mxfp4 dots wrong "
        "exactly at odd block counts (nb = 1: RVV 0 where the generic code gives 4.612122) and MUL_MAT failing "
        "there; this report adds every VLEN and ISA build under QEMU with both compilers, and the fix.",
    **{fix: "No upstream issue or pull request about it found (searched). The variant came with pull request "
            f"#22754 (merged), which added the VLEN 512 and 1024 variants of these dots and tested them with "
            f"test-quantize-fns under QEMU: {missed}."
       for fix, missed in _MISSED_22754.items()},
    "repack_q4_0_8x8_vlen512": "No code of this tree selects the q4_0 8x8 layout on RISC-V "
        "(ggml_repack_get_optimal_repack_type picks it only for AVX2 or SVE), so no op reaches these kernels today. "
        "Open pull request #28642 (\"ggml-cpu: add Q4_0 8x8 gemv/gemm for riscv vlenb=16 case\") enables them in "
        "that selection and adds a VLEN 128 body: once it lands, a hart with VLEN 512 or more that it lets select the "
        "layout runs the VLEN >= 256 body shown wrong here. It extends the same two functions the fix changes "
        "(expect a conflict between the two patches).",
    "repack_q4_K_16x1_vlen512": "No code of this tree reaches these kernels at VLEN 512 or 1024: the selection's "
        "`switch (__riscv_vlenb() * 8)` picks q4_K 16x1 only at 256 (`case 512: { break; } // TODO`). A change "
        "that fills those TODO arms with the 16x1 layout makes the bug live; the open pull request #20723 (\"extend "
        "RVV repack GEMM and GEMV to other VLENs\") proposes other tilings there instead.",
    "repack_q2_K_16x1_generic_gemm_layout": "No code of this tree calls ggml_gemm_q2_K_16x1_q8_K_generic: the q2_K "
        "16x1 layout exists only in zvfh builds, where mul_mat calls the RVV GEMM. It becomes live when a build "
        "selects the 16x1 layout without that RVV GEMM (a port of the layout to another architecture, or a "
        "selection that falls back to the generic GEMM), or when a test compares the generic GEMM with the RVV one.",
    **{fix: f"No upstream issue or pull request about {what} found (searched). The code came with pull request "
            "#15288 (merged), which added SpacemiT's backend for the X60 with llama-bench figures; llama.cpp's "
            "CI builds the backend with SpacemiT's toolchain and runs no test of it (build-cross.yml)."
       for fix, what in SPACEMIT_FINDINGS.items()},
    "vec_dot_f16_unroll_tail_agnostic": "Not reported. The RVV body came with pull request #17318 (merged); in "
        "the thread of the open pull request #17483, another Zvfh version of the function, a reviewer notes that it "
        "appears to be unused and its author agrees that it is unused in the main code path. It becomes live with "
        "its first caller.",
}



def series_of(fix: str) -> tuple[int, dict] | None:
    """The number (1-based, in file order) and the entry of the fix series of harness/data/series.toml holding
    ``fix``."""
    path = Path(__file__).resolve().parents[1] / "data" / "series.toml"
    if not path.is_file():
        return None
    for n, s in enumerate(tomllib.loads(path.read_text()).get("series", []), 1):
        if fix in s.get("fixes", []):
            return n, s
    return None


def fixed_with(fix: str) -> str:
    """How a text for upstream names the change that fixes ``fix``: its commit's subject in the series that carries it
    (never rvvdiff's own name of the finding), or "the fix" for a fix that no series carries."""
    ser = series_of(fix)
    subject = ser[1].get("subjects", {}).get(fix, "") if ser else ""
    return f'the commit "{subject}"' if subject else "the fix"


def upstream_lines(fix: str) -> list[str]:
    """The **Upstream.** paragraph (what upstream has about the finding) and the **Fix.** line (the series that
    carries the fix and its regression test, by its pull-request title); [] for a name that is no fix."""
    ser = series_of(fix)
    if fix not in UPSTREAM and ser is None:
        return []
    fx = fix_catalogue.catalogue().get(fix)
    fn = (fx.meta.get("functions", "").split(",")[0].strip() if fx else "") or "it"
    said = UPSTREAM.get(fix, f"No upstream issue or pull request about `{fn}` found (searched).")
    out = ["", f"**Upstream.** {said}"]
    if ser:
        n, entry = ser
        test = ("which the series' regression test cannot show" if fix in entry.get("unreached", {}) else
                "with no regression test in ggml's suite (the series' page says why)" if entry.get("test_note") else
                "after a check for tests/test-quantize-fns.cpp that fails without it")
        out += ["", f"**Fix.** Pull request series {n}, \"{entry['title']}\": the fix, {test}."]
    return out


def tree_line(label: str, commit: str, newest: bool = True) -> str:
    """The tree a text was checked on, and (``newest``: for ggml-cpu's RVV files, which :data:`NEWEST` compared)
    that the newest tree checked has the same code."""
    return f"Tree: {label}, commit {commit}" + (f" ({NEWEST})." if newest else ".")


#: Why a build's programs need each variable of its environment (``IsaBuild.env``) under QEMU.
_ENV_WORDS = {
    "SPACEMIT_CORE_ARCH": "the core type, read from /proc/cpuinfo's marchid, else from this variable, and without "
                          "either the program aborts before `main`; 0x503C is the X60: its RVV ops on, its IME paths off, "
                          "as no QEMU emulates IME",
    "SPACEMIT_MEM_BACKEND": "the memory pool takes posix_memalign instead of mapping 512 MiB of transparent huge pages "
                            "per buffer: the same kernels on the same bytes",
}


def build_paragraph(isa: IsaBuild, compilers: list[str]) -> list[str]:
    """For an ISA build beyond ggml's own options (SpacemiT's backend): its CMake options, what rvvdiff adds to its
    build with clang (the header it names attached beside the program: harness/upstream/stock.py's
    ``addition_files``) and the environment its programs run with, as the commands below give them; [] for the
    others."""
    adds = additions.additions(isa, "clang") if "clang" in compilers else ()
    if not isa.env and not adds:
        return []
    own = " ".join(f"`-D{k}={v}`" for k, v in isa.cmake.items() if k not in ISA_BUILDS["zvfh"].cmake)
    text = f"**The {isa.name} build.** ggml's options for it: {own} (in the commands below)."
    if adds:
        files = ", ".join(f"`{p.name}`" for a in adds for _, p in a.files)
        text += (" With clang the tree needs more, in `CMAKE_C_FLAGS` / `CMAKE_CXX_FLAGS` below: "
                 "`-Xclang -std=gnu++20` (spacemit/rvv_kernels.h declares C++20 `auto` parameters, the tree compiles "
                 "C++17: clang rejects them, GCC accepts them as an extension), and IME1's mnemonics under LLVM's "
                 f"names (`-target-feature +xsmtvdot` and {files}, attached beside `repro.c`: assembler macros mapping "
                 "`vmadot` and its forms onto `smt.vmadot`), without which the tree's FindSMTIME probe finds no IME "
                 "and spacemit/ime.cpp stops at its `#error`.")
    if isa.env:
        text += " Its programs run with " + " and ".join(
            f"`{k}={v}`" + (f" ({_ENV_WORDS[k]})" if k in _ENV_WORDS else "") for k, v in isa.env.items()) + "."
    return ["", text, ""]


#: What each finding does to a real model (written by ``rvvdiff model effects --write``; a checkout's docs).
MODEL_EFFECTS = PROJECT_ROOT / "docs" / "model-effects.json"


def _model_words(line: str, perplexity: bool = True) -> str:
    """A model run's figures in an issue's words: ``same top token 0.00 %, mean KLD 13.1, ..., PPL ratio
    89200.3284 (14 positions)`` -> ``the same top token at 0 % of 14 positions, mean KL divergence 13.1,
    perplexity x 89200``.  ``perplexity=False`` for the model cut from SmolLM2's weights (hidden 512 of 576): it
    predicts no text, every token of the text has a probability near zero under any build, and its perplexity
    ratio follows the logits of tokens the model never predicts, not the build (the figures that weigh by what
    the model predicts, KL divergence and the top token, stay)."""
    m = re.match(r"same top token ([\d.]+) %, mean KLD ([^,]+), .*PPL ratio ([\d.]+|nan|inf) \((\d+) positions\)", line)
    if not m:
        return line
    if m.group(2) == "nan":  # the run's logits are NaN: no figure but the top token means anything
        return (f"the logits are NaN (the same top token at {float(m.group(1)):g} % of {m.group(4)} positions; "
                "KL divergence and perplexity NaN)")
    ratio = float(m.group(3))
    words = f"the same top token at {float(m.group(1)):g} % of {m.group(4)} positions, mean KL divergence {m.group(2)}"
    if not perplexity:
        return words
    return words + (f", perplexity x {ratio:.3f}" if ratio < 10 else f", perplexity x {ratio:.3g}" if ratio < 1000
                    else f", perplexity x {ratio:,.0f}")


def model_lines(fix: str) -> list[str]:
    """The **On a real model.** paragraph: what the finding does to SmolLM2-135M run by llama.cpp's own
    llama-perplexity under QEMU against ggml's generic C, before and after the fix, or why no model reaches it
    ([] when it was not measured, or outside a checkout)."""
    effects = json.loads(MODEL_EFFECTS.read_text()) if MODEL_EFFECTS.is_file() else {}
    e = effects.get(fix)
    if e is None:
        return []
    if "not_shown" in e:
        return ["", f"**On a real model.** No model run shows it: {sentence(e['not_shown'])}"]
    if "not_reached" in e or "unreached" in e:
        return ["", f"**On a real model.** No model run reaches this code: {sentence(e.get('not_reached') or e['unreached'])}"]
    base, _, qtype = e["case"].partition("-")
    real = base == "smollm2"
    model = "SmolLM2-135M-Instruct" if real else "a model cut from SmolLM2-135M's weights (rows a multiple of 256)"
    made = e.get("quantize") or qtype.upper()
    made = made if made == qtype.upper() else f"{made} (its {qtype.upper()} tensors)"
    # The model as its publisher ships it (SmolLM2's Q4_1: measure() writes "shipped"), else llama-quantize's.
    file = f"as shipped ({made})" if e.get("shipped") else f"requantized to {made} by llama-quantize"
    how = (f"{model[0].upper()}{model[1:]} {file}, run by llama.cpp's llama-perplexity under "
           f"QEMU at VLEN {e['vlen']} ({e['compiler']}, {e['isa']} build{', tail/mask stress' if e['stress'] else ''}"
           f"{', repacking off: -nr' if e.get('repack') is False else ''}"
           f"{', ggml-cpu fusing no ops: GGML_CPU_DISABLE_FUSION=1' if e.get('fuse') is False else ''}) "
           "against the same tree built without V")
    if e["pinned"]["line"] == e["fixed"]["line"]:
        return ["", f"**On a real model.** {how}: {_model_words(e['pinned']['line'], real)}, the same figures with the fix: "
                    "the condition did not arise on this model and text (a model shows this finding only where its "
                    "weights and activations meet it)."]
    return ["", f"**On a real model.** {how}: {_model_words(e['pinned']['line'], real)}; with the fix: "
                f"{_model_words(e['fixed']['line'], real)}."]


def enable_line(enable: str) -> list[str]:
    """For a program run on trees with an enabling patch: what the patch does (its header, the lines before the
    diff) and that both trees of the table carry it."""
    head = " ".join(enable.split("\n--- ", 1)[0].split()) if enable else ""
    if not enable:
        return []
    return ["", f"**Reaching it.** {sentence(head)} Both trees of the table below (pinned and fixed) carry "
                "`enable.patch` (attached; `patch -p1 -d llama.cpp < enable.patch` before the build commands); without "
                "it, at VLEN 512 and 1024 the weights stay in CPU memory (the program prints where they are) and the "
                "program passes."]


def paragraph(md: str, label: str) -> str:
    """The paragraph of a short fix report that starts with ``**label.**``, on one line ('' if none)."""
    m = re.search(rf"^\*\*{re.escape(label)}\.\*\*\s*(.+?)(?:\n\s*\n|\Z)", md, re.M | re.S)
    return " ".join(m.group(1).split()) if m else ""


def sentence(s: str) -> str:
    s = s.strip()
    return s if not s or s.endswith((".", "!", "?")) else s + "."


def reason_of(entry: known.Known | None) -> str:
    """An entry's reason without its pointers into rvvdiff's docs."""
    return re.sub(r"\s*\((docs|see)[^)]*\)", "", entry.reason) if entry else ""
