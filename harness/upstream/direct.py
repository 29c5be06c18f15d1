"""The issue text of a finding no public op reaches, with a reproducer a maintainer runs without rvvdiff.

No public API reaches these functions, so the reproducer calls them the way ggml's own code would: either a short
program that includes ggml-cpu's header by path and calls the (inline) function (:data:`PROGRAMS`, built by the
stock compilers with no library and run under ``qemu-riscv64``: :func:`verify`), or the regression test of the
finding (:data:`BY_TEST`: ``repro.patch`` beside the issue text, a check added to test-quantize-fns, built with
ggml's CMake; its runs kept in the text's runs.json), or for a SpacemiT finding a program written from its shrunk
case that includes the backend's headers and links the spacemit build's libraries
(harness/upstream/spacemit_direct.py, ``repro.cpp`` beside the text).  :func:`direct_issue` writes the text: the
title from those runs (exactly the VLENs, builds and compilers where it was wrong), what goes wrong, why there is no
public program, upstream, the commands and the verdict table.  :data:`TRAP_CHECK` says, for a
trap finding, how to see it without a hart that traps.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from harness.core.config import ISA_BUILDS, VLENS
from harness.core.matrix import ISAS, Point
from harness.core.proc import execute
from harness.emulators import qemu
from harness.ggml import fix_catalogue, known
from harness.ggml.source import GgmlSource, resolve
from harness.upstream import paragraphs, spacemit_direct, stock, testcmd
from harness.upstream.issue import MAX_LINES, title_of, verdict_table
from harness.upstream.paragraphs import fixed_with, model_lines, reason_of, sentence, series_of, tree_line, upstream_lines
from harness.upstream.runs import Verdict

#: ggml_vec_dot_f16_unroll on one f16 element per row: exact result -30 (6 * -5), NaN where the accumulator's tail
#: is written with ones.
F16_UNROLL = r"""// ggml_vec_dot_f16_unroll (ggml-cpu's vec.h, inline; no code of the tree calls it yet) on n = 1:
// two rows of one f16 value times one f16 value. The exact result is 6 * -5 = -30 for both rows.
#include "vec.h"
#include <cstdio>

int main() {
    ggml_fp16_t x[2][1] = {{GGML_CPU_FP32_TO_FP16(6.0f)}, {GGML_CPU_FP32_TO_FP16(6.0f)}};
    ggml_fp16_t y[1] = {GGML_CPU_FP32_TO_FP16(-5.0f)};
    float s[2] = {0.0f, 0.0f};
    ggml_vec_dot_f16_unroll(1, sizeof(x[0]), s, x, y);
    printf("s = %g %g, expected -30 -30\n", s[0], s[1]);
    return s[0] == -30.0f && s[1] == -30.0f ? 0 : 1;
}
"""


@dataclass(frozen=True)
class Program:
    """A program that includes ggml-cpu's internal headers by path and calls the function directly."""

    source: str
    #: the ISA build whose ``-march`` the program is compiled with
    isa: str
    #: whether the finding shows only with tail/mask-agnostic elements written as ones
    stress: bool
    what: str


PROGRAMS: dict[str, Program] = {
    "vec_dot_f16_unroll_tail_agnostic": Program(F16_UNROLL, "zvfh", True, "it includes ggml-cpu's `vec.h` by path and "
                                                "calls the function on one element; no library is linked"),
}
#: Findings whose reproducer is a patch to test-quantize-fns beside the issue text (docs/upstream/<fix>/repro.patch:
#: a check that calls the function through an internal header, which the fix series' own test, through the public
#: API, cannot reach); its runs are the verdicts kept in runs.json.
BY_TEST = ("repack_q2_K_16x1_generic_gemm_layout",)
REPRO_PATCH = "repro.patch"

#: For a trap finding: how to see it without a hart that traps.
TRAP_CHECK = {
    "iq2_xxs_vl512_misaligned_load": (
        "The trap needs a hart that does not carry out misaligned vector element accesses, which the RVV "
        "specification allows to raise address-misaligned instead: Spike, the RISC-V ISA simulator, is one; no "
        "board was checked. Without such a hart the "
        "misalignment shows in the code: `block_iq2_xxs` is 66 bytes and `qs` starts at byte 2, so in the tensor's "
        "data (ggml aligns it to at least 16 bytes) the `qs` of every even block sits at 2 mod 4, and the kernel loads it with "
        "32-bit elements (`__riscv_vlseg2e32_v_u32mf2x2((const uint32_t*)q2_ptr, 8)`)."),
}


def march(isa: str) -> str:
    """The ``-march`` of an ISA build for a program compiled alone (``rv64gcv_zfh_zvfh``)."""
    exts = ISA_BUILDS[isa].march
    return "rv64gc" + exts[0] + "".join(f"_{e}" for e in exts[1:])


def compile_argv(prog: Program, cc: str, tree: Path, src: Path, exe: Path, printed: bool = False) -> list[str]:
    """The command that compiles the program with compiler ``cc`` (``printed``: Debian's names, the tree named
    ``llama.cpp``, else the compiler rvvdiff runs for it)."""
    inc = ["ggml/src/ggml-cpu", "ggml/src", "ggml/include"]
    root = "llama.cpp" if printed else str(tree)
    if cc == "clang":
        head = [stock.CLANGXX, f"--target={stock.TARGET}"]
    else:
        head = [stock.GXX if printed else stock._gcc14_tools()[1]]
    return [*head, f"-march={march(prog.isa)}", "-O2", *[f"-I{root}/{d}" for d in inc], str(src), "-static",
            "-o", str(exe)]


def verify(fix: str, trees: dict[str, GgmlSource], compilers: list[str], work: Path,
           vlens: tuple[int, ...] = VLENS) -> list[Verdict]:
    """The program of ``fix`` compiled by each stock compiler against each tree and run under qemu-riscv64 at every
    VLEN, with QEMU's default tail/mask policy and with agnostic elements written as ones."""
    prog = PROGRAMS[fix]
    work.mkdir(parents=True, exist_ok=True)
    src = work / "repro.cpp"
    src.write_text(prog.source)
    out = []
    for cc in compilers:
        for label, tree in trees.items():
            exe = work / f"repro-{label}-{cc}"
            absent = stock.missing(cc)  # the stock compiler not installed: every run of it says so, none is lost
            cp = (execute(compile_argv(prog, cc, Path(tree.root), src, exe), timeout=600).finished(f"compiling {src.name}")
                  if absent is None else None)
            for stress in (False, True):
                for vl in vlens:
                    if cp is None or not cp.ok:
                        why = absent if cp is None else cp.stderr.strip()[:300]
                        out.append(Verdict(label, prog.isa, vl, None, f"not built: {why}", "qemu", cc, stress))
                        continue
                    r = stock.run_exe(exe, Point(vl, prog.isa, stress, cc), timeout=120)
                    ok = r.returncode in (0, 1)
                    out.append(Verdict(label, prog.isa, vl, (r.returncode == 1) if ok else None,
                                       r.stdout.strip() if ok else f"exit {r.returncode}", "qemu", cc, stress))
    return out


def test_verdicts(fix: str) -> list[Verdict]:
    """The recorded runs of the regression test of ``fix``'s series as verdicts (before: "pinned", after: "fixed")."""
    ser = series_of(fix)
    lines = json.loads(testcmd.TEST_RUNS.read_text()).get(ser[1]["name"], []) if ser and testcmd.TEST_RUNS.is_file() else []
    return [Verdict("fixed" if r.fixed else "pinned", r.isa, vl, not ok, "; ".join(r.failed_at.get(vl, ())) if not ok else "",
                    "qemu", r.cc, r.stress) for r in testcmd.read_runs(lines) for vl, ok in r.vlens.items()]


def _numbers(verdicts: list[Verdict], stress: bool, test: bool) -> str:
    """The program's output where it was first wrong, or the checks of the regression test that failed there."""
    bad = next((v for v in verdicts if v.tree != "fixed" and v.failing and v.stress == stress), None)
    if not bad or not bad.text:
        return ""
    if test:
        return f"At VLEN {bad.vlen} the failing check: `{bad.text}`."
    lines = bad.text.splitlines()
    said = " / ".join(dict.fromkeys([lines[0], lines[-1]]))  # the first wrong value, and the count when printed
    return f"Output at VLEN {bad.vlen}: `{said}`."


def direct_issue(fix: str, ggml: dict, verdicts: list[Verdict], entry: known.Known | None, why: str,
                 source: str = "") -> str:
    """The issue text of ``fix``, a finding no public op reaches, from the verdicts of its reproducer (``source``: the
    program of a SpacemiT finding, harness/upstream/spacemit_direct.py)."""
    fx = fix_catalogue.catalogue()[fix]
    fn = (entry.functions[0] if entry and entry.functions else fx.meta.get("functions", "").split(",")[0].strip())
    scalar = "scalar" in fx.meta.get("vector-path", "")
    prog = PROGRAMS.get(fix) or (Program(source, spacemit_direct.ISA, False, spacemit_direct.PROGRAMS[fix].what)
                                 if fix in spacemit_direct.PROGRAMS else None)
    stress = prog.stress if prog else any(v.stress for v in verdicts)
    title = title_of(fn, verdicts, stress).replace("(RISC-V RVV)", "(RISC-V, scalar code)" if scalar else "(RISC-V RVV)")
    if spacemit_direct.PROGRAMS.get(fix) and spacemit_direct.PROGRAMS[fix].wrong:
        title = title.replace("wrong result", spacemit_direct.PROGRAMS[fix].wrong, 1)
    head = [f"### {title}, when called directly (no op of this tree reaches it)",
            "", f"**What goes wrong.** {sentence(reason_of(entry))}",
            "", f"**Why no public reproducer.** {sentence(why[:1].upper() + why[1:])}",
            *upstream_lines(fix), *model_lines(fix), "",
            tree_line(ggml["label"], ggml["commit"], fix not in spacemit_direct.PROGRAMS)]
    ccs = list(dict.fromkeys(v.compiler for v in verdicts))
    names = " and ".join(stock.NAMES.get(c, c) for c in ccs)
    if prog and fix in spacemit_direct.PROGRAMS:
        bad = next((v for v in verdicts if v.failing and v.tree != "fixed"), None)
        built = paragraphs.build_paragraph(ISAS[prog.isa], ccs)
        body = [f"The program, `repro.cpp` ({prog.what}):", "```cpp", *prog.source.rstrip("\n").splitlines(), "```",
                *[ln.replace("`repro.c`", "`repro.cpp`") for ln in built],
                "Built against the spacemit build's static libraries (ggml's CMake, clang; Debian: "
                f"`{stock.APT_INSTALL.split(' -y ')[1]}`; qemu-user >= 10) and run:", "```sh",
                *spacemit_direct.body_lines(resolve(None), bad.vlen if bad else 1024), "```"]
        how = ("the program compiled as above by rvvdiff's clang (zig's, not Debian's clang-22) against rvvdiff's "
               "spacemit build of each tree (ggml's CMake, the options and additions above), run under QEMU "
               f"{qemu.qemu().version}")
    elif prog:
        body = [f"The program, `repro.cpp` ({prog.what}):", "```cpp", *prog.source.rstrip("\n").splitlines(), "```",
                f"Built with {names} (Debian: `{stock.APT_INSTALL.split(' -y ')[1]}`; GCC 14: "
                f"`{stock.GCC_APT_INSTALL.split(' -y ')[1]}`; qemu-user >= 10) and run:", "```sh"]
        for cc in ccs:
            exe = "repro" if cc == "clang" else "repro-gcc"
            body.append(shlex.join(compile_argv(prog, cc, Path("llama.cpp"), Path("repro.cpp"), Path(exe), True)))
        bad = next((v for v in verdicts if v.failing and v.tree != "fixed" and v.stress == stress), None)
        if bad:
            body.append(shlex.join(["qemu-riscv64", "-cpu", stock.cpu_value(Point(bad.vlen, prog.isa, stress)), "./repro"]))
        body += ["```"]
        how = f"the program built by {names} as above, run under QEMU {qemu.qemu().version}"
    else:
        body = [f"The reproducer, `{REPRO_PATCH}` beside this text, adds a check to tests/test-quantize-fns.cpp that "
                "calls the function directly (through ggml-cpu's `repack.h`, included by path, which the patch makes "
                "declare what it calls): a reproducer, not a test to merge; the fix series' own test goes through the "
                f"public API, which cannot reach this function. In a llama.cpp checkout, after `patch -p1 < {REPRO_PATCH}`:",
                "```sh"]
        runs = _runs_of(verdicts)
        body += [*testcmd.build_lines(runs), *testcmd.run_lines(runs), "```"]
        other = testcmd.other_compilers(runs)
        body += [other] if other else []
        how = f"test-quantize-fns built by {names} with ggml's CMake, run under QEMU"
    numbers = _numbers(verdicts, stress, prog is None)
    table = [f"{numbers + ' ' if numbers else ''}The table: {how}"
             + (f" (fixed: with {fixed_with(fix)})" if any(v.tree == "fixed" for v in verdicts) else "") + ":", "",
             *verdict_table(verdicts, stress=stress)]
    text = head + [""] + body + table
    if len(text) > MAX_LINES and prog:
        text = head + ["", f"The program, `repro.cpp` ({prog.what}; {len(prog.source.splitlines())} lines), is "
                           "attached."] + body[body.index("```cpp") + len(prog.source.splitlines()) + 2:] + table
    return "\n".join(text).rstrip() + "\n"


def _runs_of(verdicts: list[Verdict]) -> list[testcmd.TestRun]:
    """Verdicts of a regression test's runs back as :class:`testcmd.TestRun` (one per tree, compiler and mode)."""
    out: dict[tuple, dict] = {}
    for v in verdicts:
        d = out.setdefault((v.tree, v.compiler, v.isa, v.stress), {"vlens": {}, "what": []})
        d["vlens"][v.vlen] = not v.failing
        d["what"] += [w for w in v.text.split("; ") if w and v.failing]
    return [testcmd.TestRun(tree == "fixed", (), stock.NAMES.get(cc, cc), cc, isa, stress, d["vlens"],
                            tuple(dict.fromkeys(d["what"]))) for (tree, cc, isa, stress), d in out.items()]


def trap_check(fix: str) -> str:
    return TRAP_CHECK.get(fix, "")
