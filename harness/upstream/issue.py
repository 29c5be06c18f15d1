"""The issue text for ggml's maintainers: at most :data:`MAX_LINES` lines.

A title naming the function, VLENs, ISA builds and compilers (exactly those where the program was wrong,
as run: :mod:`harness.upstream.runs`), what goes wrong, who hits it, the program, the stock-toolchain
commands that build and run it with each compiler (clang-22, GCC 14), its verdict at every VLEN and ISA
build per compiler, and for a compiler whose build is right under QEMU's default tail/mask policy but
wrong with stress, how to see the bug there (:func:`stress_hint`); for a finding no public op
reaches, harness/upstream/direct.py writes the text instead.  The paragraphs every text shares (upstream, the fix
series, a real model, an enabling patch) are harness/upstream/paragraphs.py's.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from harness.core.config import ISA_BUILDS, IsaBuild
from harness.core.matrix import CANNOT_MAKE, ISAS, Point
from harness.emulators import qemu
from harness.emulators.spike import SpikePk
from harness.ggml import fix_catalogue
from harness.ggml.source import GgmlSource
from harness.report.failure import Case
from harness.upstream import stock
from harness.upstream.paragraphs import (
    build_paragraph,
    enable_line,
    fixed_with,
    model_lines,
    sentence,
    tree_line,
    upstream_lines,
)
from harness.upstream.public import Public
from harness.upstream.runs import Verdict
from harness.upstream.testcmd import wrapped

#: The issue text's length limit (the program and the table included).
MAX_LINES = 60
#: The order of ISA builds in titles and tables (ggml-cpu's vector builds, then SpacemiT's backend, ...).
_ORDER = list(ISAS)

def _vlens(found: list[int], tested: list[int]) -> str:
    found = sorted(set(found))
    if len(found) > 2 and found == sorted(set(tested)):
        return f"every VLEN ({found[0]}-{found[-1]})"
    return "VLEN " + (", ".join(map(str, found)) or "none")


def compilers_of(verdicts: list[Verdict]) -> list[str]:
    """The compilers of the verdicts, in the order they ran."""
    return list(dict.fromkeys(v.compiler for v in verdicts))


def _where(bad: list[Verdict], ran: list[Verdict]) -> str:
    """The VLENs and builds of the wrong runs ``bad`` among ``ran``: "every RVV build" only when every
    ISA build was run and was wrong."""
    builds = sorted({v.isa for v in bad}, key=_ORDER.index)
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


def title_of(function: str, verdicts: list[Verdict], stress: bool, trap: bool = False, crash: str = "") -> str:
    """The issue's title: exactly the VLENs, builds and compilers where the program was wrong, as run (in
    the recorded stress mode ``stress``; a compiler right there but wrong with stress says so); ``crash``: the
    signal a trap finding's call died of (the program "crashes", not "traps")."""
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
    said = f"crashes ({crash})" if trap and crash else "traps" if trap else "wrong result"
    spacemit = mine and all(ISAS[v.isa].backend == "spacemit" for v in mine)
    arch = "RISC-V RVV" + (", SpacemiT backend" if spacemit else "")
    return (f"{function} ({arch}): {said} at {where}"
            + (", when tail-agnostic elements are written with ones" if stress else ""))


def cc_label(v: Verdict) -> str:
    """A row's compiler: the stock compiler's own name (clang-22) where the row is the printed commands' build."""
    return (stock.NAMES if v.by == "stock" else stock.LABELS).get(v.compiler, v.compiler)


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
        cc = cc_label(v) + ("" if v.stress == stress else ", with stress" if v.stress else ", QEMU's default policy")
        emu = f"{v.emulator}, pk" if v.by == "stock" else v.emulator
        return (f"{v.tree} ({emu})" if both and v.emulator != "qemu" else v.tree), cc

    notes: dict[str, str] = {}
    for t in dict.fromkeys(row_of(v) for v in verdicts):
        groups: dict[tuple[str, ...], list[str]] = {}
        for i in sorted({v.isa for v in verdicts if row_of(v) == t}, key=_ORDER.index):
            cells = []
            for vl in vlens:
                m = [x for x in verdicts if row_of(x) == t and x.isa == i and x.vlen == vl]
                cells.append(verdict_word(m[0].failing, trap, m[0].text) if m else "not run")
                if m and cells[-1] == "not built":
                    why = re.sub(r"^\S+(?: 14)? cannot make the \w+ build: ", "", m[0].text.removeprefix("not built: "))
                    notes.setdefault(f"{t[1].split(',')[0]} cannot build {i}", why)
                elif m and cells[-1] == "not run" and m[0].text:  # the reason once, without its target
                    why = re.sub(r"\s*\(VLEN \d+[^()]*\)", "", m[0].text.splitlines()[0])
                    notes.setdefault(f"not run: {why}", "")
            groups.setdefault(tuple(cells), []).append(i)
        rows += [f"| {t[0]} | {t[1]} | {', '.join(isas)} | " + " | ".join(cells) + " |" for cells, isas in groups.items()]
    return rows + [""] * bool(notes) + [f"{k}: {_short(why)}" if why else k for k, why in notes.items()]


def _short(why: str, width: int = 320) -> str:
    """A build's reason for the issue: the compiler's own error when it names one (not rvvdiff's paths)."""
    m = re.search(r"\(([^()]*\berror:[^()]*)\)", why)
    why = " ".join((m.group(1) if m else why).split())
    return why if len(why) <= width else why[:width - 3] + "..."


def first_wrong(verdicts: list[Verdict]) -> tuple[Verdict | None, list[str]]:
    for v in verdicts:
        if v.tree != "fixed" and v.failing:
            return v, [ln for ln in v.text.splitlines() if ln.strip()]
    return None, []


def _pwd(line: str) -> str:
    """A printed line's single-quoted words that name ``$PWD`` (stock.py's ``PRINTED_DIR``: the header of rvvdiff's
    additions beside the program) double-quoted, so that the shell expands it."""
    return re.sub(r"'([^'\"\\`]*\$PWD[^'\"\\`]*)'", r'"\1"', line)


def build_lines(tree: GgmlSource, at: Point, spike_vlen: int | None = None) -> list[str]:
    """The stock-toolchain commands of ``at``'s compiler as a maintainer types them (:mod:`harness.upstream.stock`,
    ``printed``; as verified by :func:`verify_stock`), the program run at ``at``, with the tree named ``llama.cpp``
    (or ``ggml``) and the build directory ``rv`` (``rv-gcc`` for GCC 14); ``spike_vlen``: and the program run under
    Spike with riscv-pk at that VLEN, as the table's Spike rows ran it."""
    cc = at.compiler
    name = "llama.cpp" if tree.ggml != tree.root else "ggml"
    rv = Path("rv" if cc == "clang" else "rv-gcc")

    def rel(argv: list[str]) -> list[str]:
        return [a.replace(str(tree.root), name) for a in argv]

    cmake = stock.cmake_build(tree.root, at.isa, cc, rv, printed=True).without("CMAKE_EXPORT_COMPILE_COMMANDS")
    configure, build = cmake.configure_argv(), cmake.build_argv(stock.LIBRARIES, jobs=2)
    exe = Path("repro" if cc == "clang" else "repro-gcc")
    link = stock.link_argv(Path("repro.c"), exe, tree=tree.root, build_dir=rv, toolchain=cc, printed=True)
    run_ = [*stock.run_argv(exe, at, half_avl=at.stress)[:-1], f"./{exe}"]
    pk = [] if spike_vlen is None else [
        SpikePk("spike", "").printed(f"./{exe}", spike_vlen, qemu.cpu_props(at.isa, at.stress))]
    return ["```sh", *map(_pwd, wrapped(rel(configure), 160)), *wrapped(rel(build), 160), *wrapped(rel(link), 160),
            *wrapped(run_, 400), *(ln for a in pk for ln in wrapped(a, 400)), "```"]


def example(verdicts: list[Verdict], recorded: Point) -> Point:
    """Where the commands of ``recorded``'s compiler in the issue run the program: its first wrong run under QEMU
    on the tree (in the recorded mode, else with stress), else the recorded target."""
    mine = [v for v in verdicts if v.tree != "fixed" and v.compiler == recorded.compiler and v.emulator == "qemu"
            and v.failing]
    v = next((v for v in mine if v.stress == recorded.stress), None) or next(iter(mine), None)
    return v.point if v else recorded


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
            f"the bug shows where tail- and mask-agnostic elements are written as ones, as the RVV specification allows: "
            f"QEMU's `-cpu ...,{props}` (its run line above) makes it wrong at "
            f"{_where(ones, [v for v in verdicts if v.tree != 'fixed' and v.compiler == cc and v.stress])}.")

def title_function(function: str, fix: str = "") -> str:
    """The functions a title names: ``function``, or when the fix changes several kernels (its header's
    ``functions:``), each of them (``ggml_vec_dot_q3_K_q8_K, ggml_vec_dot_q6_K_q8_K and ggml_vec_dot_iq1_m_q8_K
    , _vl512 and _vl1024 variants``)."""
    fx = fix_catalogue.catalogue().get(fix) if fix else None
    names = [n.strip() for n in (fx.meta.get("functions", "") if fx else "").split(",") if n.strip()]
    bases = list(dict.fromkeys(re.sub(r"_vl\d+$", "", n) for n in names))
    if len(bases) < 2:
        return function
    tails = list(dict.fromkeys(m.group(0) for n in names if (m := re.search(r"_vl\d+$", n))))
    return ", ".join(bases[:-1]) + f" and {bases[-1]}" + (f", {' and '.join(tails)} variants" if tails else "")


def _unmade(verdicts: list[Verdict], cc: str, isa: IsaBuild) -> str:
    """Why compiler ``cc`` gets no commands: the build its commands would make is one it cannot make (and it is right
    in every build it can); '' when it gets them."""
    why = CANNOT_MAKE.get((cc, isa.name))
    wrong = any(v.failing for v in verdicts if v.compiler == cc and v.tree != "fixed")
    others = any(v.isa != isa.name for v in verdicts if v.compiler == cc and v.tree != "fixed")
    return "" if why is None or wrong else (f"No {stock.LABELS.get(cc, cc)} commands: {why}"
                                             + (", and its other builds are right (the table)." if others else "."))


#: The sentence of a finding that shows only where agnostic elements are written as ones.
STRESS_WORDS = (" It depends on what the hart writes into tail-agnostic elements: QEMU shows it with "
                "`rvv_ta_all_1s=true,rvv_ma_all_1s=true`; with QEMU's default it passes. The RVV specification lets a "
                "hart write ones there and no core is known to: a specification-conformance bug.")
#: The sentence of a finding whose call dies of a signal (an abort, an invalid access), by the signal.
CRASH_WORDS = (" The call dies of {0}, and so does the program: the table says \"trap\" where it died under QEMU, "
               "\"runs\" where it ran to the end (then it also checks its numbers and its result's guard bytes).")
#: The sentence of a trap finding.
TRAP_WORDS = (" The program stops with a trap where the hart refuses the access: Spike does (its table below); "
              "QEMU lets the access through, so under QEMU the program runs to the end and checks its numbers.")


def issue(case: Case, pub: Public, src_text: str, verdicts: list[Verdict], *, recorded: Point, tree: GgmlSource,
          stock_runs: list[Verdict] = (), cause: str = "", impact: str = "", fix: str = "", trap: bool = False,
          enable: str = "", trap_check: str = "") -> str:
    """The issue text (markdown): :data:`MAX_LINES` at most with the program inline, else the program is
    named as an attachment (``repro.c``).  Build commands and table rows for every compiler of ``verdicts``, its
    commands run where it is wrong, else at the ``recorded`` target (whose stress mode the text is about);
    ``trap_check``: for a trap finding, how to see it without a hart that traps."""
    stress = recorded.stress
    ggml = case.data["ggml"]
    ccs = compilers_of(verdicts)
    wrong, out = first_wrong([v for v in verdicts if v.stress == stress])
    crash = getattr(pub, "signal", "") if trap else ""
    head = [f"### {title_of(title_function(pub.function, fix), verdicts, stress, trap, crash)}"
            + (", once ggml's repack selection picks its layout (enable.patch)" if enable else ""),
            f"**What goes wrong.** {sentence(cause or (case.data.get('comparison') or {}).get('name', ''))}"
            + (STRESS_WORDS if stress else "") + (CRASH_WORDS.format(crash) if crash else TRAP_WORDS if trap else "")]
    if impact:
        head += ["", f"**Who hits it.** {impact}"]
    head += upstream_lines(fix) + model_lines(fix) + enable_line(enable)
    what = (f"The program ({pub.what}, with {getattr(pub, 'inputs', 'the inputs of a shrunk case')}; ggml's public "
            "API only)")
    ours = all(ISAS[v.isa].backend == "cpu" for v in verdicts)  # (NEWEST compared ggml-cpu's own RVV files)
    head += ["", tree_line(ggml["label"], ggml["commit"], newest=ours)]
    head += [ln for isa in dict.fromkeys(v.isa for v in verdicts) for ln in build_paragraph(ISAS[isa], ccs)]
    prog = [f"{what}:", "```c", *src_text.rstrip("\n").splitlines(), "```"]
    tail = []
    for cc in ccs:
        where = example(verdicts, replace(recorded, compiler=cc))
        unmade = _unmade(verdicts, cc, where.isa)
        # the Spike line where the bug shows under Spike with riscv-pk (a trap: only there)
        spike_at = next((v.vlen for v in verdicts if v.compiler == cc and v.by == "stock" and v.emulator != "qemu"
                         and v.tree != "fixed" and v.failing), None)
        tail += [unmade] if unmade else [_install_line(cc)[:-1] + _pk_install(spike_at) + ":",
                                         *build_lines(tree, where, spike_at)]
        hint = stress_hint(verdicts, stress, cc)
        if hint:
            tail.append(hint)
    if trap and not crash:
        tail += ["Under QEMU this runs to the end: QEMU does not trap misaligned vector accesses. " + trap_check
                 + _spike_rows(verdicts)]
    said = {True: "trap" if trap else "wrong", False: "no trap" if trap else "right", None: "not run"}
    ran = ""
    shown = [v for v in stock_runs if not (v.failing is None and "not built" in v.text)]
    if shown:
        ran = "These commands, run here: " + "; ".join(
            f"{stock.NAMES.get(v.compiler, v.compiler)}, {v.tree} tree{', with stress' if v.stress != stress else ''}"
            f" {said[v.failing]}" + (f" (`{' / '.join(v.text.splitlines()[:3])}`)" if v.text and v.failing is not None
                                     else f" ({v.text.split(':')[0]})" if v.text else "")
            for v in shown) + ". "
        if any(v.failing is not None for v in shown):
            wrong = None  # its output is in that line
    on_spike = sorted({v.vlen for v in verdicts if v.emulator != "qemu"})
    spike = ("" if not on_spike else f"; Spike at VLEN {on_spike[0]}-{on_spike[-1]}, rows of their own"
             if on_spike[0] <= 1024 else f"; VLEN {' and '.join(map(str, on_spike))} under Spike")
    built = measured_by(verdicts)
    tail += [ran + (f"Output at VLEN {wrong.vlen}, {wrong.isa} build: `" + " / ".join(out[:3]) + "`. " if wrong else "")
             + f"The table (QEMU {qemu.qemu().version}{spike}): the program built {built}, run "
             + _ran_where(verdicts)
             + (f" (fixed: with {fixed_with(fix)})" if fix and any(v.tree == "fixed" for v in verdicts) else "")
             + (" (with stress: `rvv_ta_all_1s`, `rvv_ma_all_1s`)" if any(v.stress != stress for v in verdicts) else "")
             + ":", "", *verdict_table(verdicts, trap, stress)]
    text = head + prog + tail
    if len(text) > MAX_LINES:
        text = head + [f"{what}, `repro.c` ({len(prog) - 3} lines), is attached."] + tail
    return "\n".join(text).rstrip() + "\n"


#: Which compiler built the table's programs, per compiler of the matrix, where rvvdiff built them (the commands above
#: use the stock ones, harness/upstream/stock.py's ``NAMES``).
_MEASURED_BY = {"clang": "zig's clang (its \"clang\" rows; the commands above use Debian's clang-22)",
                "gcc14": "Debian's GCC 14 (the compiler of the commands above)"}


def measured_by(verdicts: list[Verdict]) -> str:
    """Who built the table's programs, as its sentence says it: the commands above (rows ``by="stock"``; under Spike,
    with riscv-pk) and rvvdiff's own builds (under Spike, linked for bare metal)."""
    parts = []
    stock_ccs = list(dict.fromkeys(v.compiler for v in verdicts if v.by == "stock"))
    if stock_ccs:
        names = " and ".join(stock.NAMES.get(c, c) for c in stock_ccs)
        pk = any(v.by == "stock" and v.emulator != "qemu" for v in verdicts)
        parts.append(f"by the commands above with {names}" + (" (under Spike: `spike ... pk ./repro`, riscv-pk built "
                                                               "without V)" if pk else ""))
    mine = list(dict.fromkeys(v.compiler for v in verdicts if v.by != "stock"))
    if mine:
        bare = any(v.by != "stock" and v.emulator != "qemu" for v in verdicts) and stock_ccs
        parts.append("by rvvdiff with " + " and ".join(_MEASURED_BY.get(c, c) for c in mine)
                     + (", whose Spike rows are linked for bare metal" if bare else ""))
    return "; ".join(parts)


def _pk_install(spike_at: int | None) -> str:
    """What the Spike line of the commands needs besides them."""
    return "" if spike_at is None else ("; for the last line, Spike (riscv-software-src/riscv-isa-sim) and its proxy "
                                        "kernel riscv-pk, built for rv64gc as its default is")


def _spike_rows(verdicts: list[Verdict]) -> str:
    """For a trap finding: what stops the program in the table's Spike rows."""
    pk = [v for v in verdicts if v.emulator != "qemu" and v.by == "stock" and v.failing and v.tree != "fixed"]
    if not any("access fault!" in v.text for v in pk):  # (what pk says of an access it cannot emulate)
        return ""
    return (" Under Spike with riscv-pk (the last command) the program stops at the misaligned load: Spike raises "
            "address-misaligned, and pk, built without the vector extension as its default is, cannot emulate a "
            "vector access and ends the program (`Load access fault!`, exit status 255); a pk built with V emulates "
            "the access element by element, as a kernel that emulates misaligned vector accesses would, and the "
            "program runs to the end.")


def _ran_where(verdicts: list[Verdict]) -> str:
    """Where the program ran under QEMU: "at every VLEN and ISA build" only when every ISA build was run."""
    qemu = [v for v in verdicts if v.emulator == "qemu"]
    vlens = sorted({v.vlen for v in qemu})
    builds = sorted({v.isa for v in qemu}, key=_ORDER.index)
    at = f"VLEN {vlens[0]}-{vlens[-1]}" if len(vlens) > 1 else f"VLEN {vlens[0]}" if vlens else "no VLEN"
    if set(builds) == set(ISA_BUILDS):
        return f"in every ISA build at {at}"
    return f"in the {'/'.join(builds)} build{'s' * (len(builds) > 1)} only, at {at}"

