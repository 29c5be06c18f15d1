"""The issue text of a SpacemiT IME1 finding: the GEMM behind MUL_MAT on the K1's cores with IME1
(spacemit/ime1_kernels.cpp, its layouts in spacemit/repack.cpp), which no QEMU runs.

Only Spike with rvvdiff's IME1 library (docs/ime.md) executes ``vmadot``, and Spike runs bare-metal programs: ggml's
public API cannot be run there as a Linux program.  So the text's verdicts are rvvdiff's own (:func:`verify`): the
finding's shrunk ``ggml_mul_mat`` call, with the weights in SpacemiT's buffer type as llama.cpp places them (the kernel
server's ``repack_mul_mat``, placement 2), replayed on the spacemit build of the pinned and the fixed tree under Spike
with the library, at VLEN 256 and the A60's core type, judged against the type's product (the case's expected values
and bounds).  Beside them the text gives the same call through ggml's public API (``repro.c``, :func:`public_form`),
written for a K1 board, where the backend finds the cores with IME1 itself; it is not run here (no board), and the
text says what it prints there when the board computes what Spike computed.  :func:`write` makes the text and its
``runs.json``, :func:`rerender` writes the text again from them.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np

from harness.core.matrix import ISAS, Point
from harness.emulators import registry
from harness.ggml import fix_catalogue, known, patches, tree
from harness.ggml.source import GgmlSource, resolve
from harness.report.failure import Case
from harness.report.replay import replay_on
from harness.toolchain.builds import ensure_built
from harness.upstream import issue, paragraphs, program, record, stock
from harness.upstream.public import MulMat, source_of
from harness.upstream.public_base import expected_of
from harness.upstream.runs import Verdict

ISA = "spacemit"
#: The VLEN of the cores with IME1 (the K1's): their kernels take vmadot's unit from e8 m1 at 256.
VLEN = 256
#: SpacemiT's buffer type, where llama.cpp places the weights on a core with IME (the kernel server's placement 2).
BUFT = "CPU_RISCV64_SPACEMIT"
#: The fixes whose finding only the IME1 GEMM shows.
FIXES = ("spacemit_ime1_block_offsets",)
#: The boards with the K1 (SpacemiT's llama-bench tables in docs/build-riscv64-spacemit.md).
BOARDS = "a K1 board (Banana Pi BPI-F3, Milk-V Jupiter, MUSE Pi)"
EMULATED = (
    "No QEMU implements SpacemiT's IME, so the IME1 GEMM (spacemit/ime1_kernels.cpp, `vmadot`) ran under Spike, the "
    "RISC-V ISA simulator, with rvvdiff's extension library for IME1 (`xsmtvdot`: written from SpacemiT's public "
    "specification, spacemit-com/riscv-ime-extension-spec, and checked against its example program and worked cases "
    "of each instruction), at VLEN 256 with the core type `SPACEMIT_CORE_ARCH=0xA03C` (the A60's, IME1 on). Spike runs "
    "bare-metal programs, so the table's calls are rvvdiff's kernel server, built from each tree's spacemit build: the "
    f"same `ggml_mul_mat` on the same bytes, the weights in SpacemiT's buffer type ({BUFT}) as llama.cpp places them. "
    f"The program below is that call through ggml's public API for {BOARDS}, where the backend reads each core's type "
    "from /proc/cpuinfo and takes the IME1 path on the cores that have it; it was not run on a board.")


def public_form(case: Case) -> MulMat:
    """The case's ``repack_mul_mat`` call (placement 2) as ``ggml_mul_mat`` with the weights in :data:`BUFT`."""
    t_id, k, m, n, batch, placement, _threads = (int(v) for v in case.call["ip"])
    if batch != 1 or placement != 2:
        raise ValueError(f"the program is written for a 2-D mul_mat with the weights in {BUFT} (batch {batch}, "
                         f"placement {placement})")
    t = {v: name for name, v in tree.of(source_of(case)).types.items()}[t_id]
    exp, bound = expected_of(case, m * n)
    w, x = case.arrays["buf0"].tobytes(), case.arrays["buf1"].tobytes()
    return MulMat(t, "f32", k, m, n, w, x, expected=exp, bound=bound, repack=True, buft=BUFT,
                  what=f"mul_mat of {m} {t.upper()} rows in {BUFT} and {n} F32 rows, k = {k}")


def _printed(got: np.ndarray, exp: np.ndarray, bound: np.ndarray) -> str:
    """What the program prints for results ``got``: its first wrong lines and its count, as program.py writes them."""
    bad = [i for i in range(exp.size) if not (got[i] == exp[i] or abs(got[i] - exp[i]) <= bound[i])]
    lines = [f"C[{i}] = {got[i]:.9g}, expected {exp[i]:.9g} (bound {bound[i]:.3g})" for i in bad[:4]]
    return "\n".join([f"weights in {BUFT}", *lines, f"VLEN {VLEN}: {len(bad)} of {exp.size} wrong"])


def verify(case: Case, trees: dict[str, GgmlSource], pub: MulMat) -> list[Verdict]:
    """The case's call replayed on each tree's spacemit build (clang) under Spike with the IME1 library at VLEN 256;
    a verdict's text is what the program prints where a board computes what Spike computed."""
    spike = registry.get("spike")
    at = Point(VLEN, ISA, False, "clang", "spike")
    out = []
    for label, src in trees.items():
        r = replay_on(case, ensure_built(src, at.isa, at.compiler), at, spike)
        text = r.text
        if r.outputs is not None and r.failing is not None:
            got = np.frombuffer(r.outputs[0], np.float32).astype(np.float64)[:pub.expected.size]
            text = _printed(got, pub.expected, pub.bound)
        out.append(Verdict(label, ISA, VLEN, r.failing, text, "spike", "clang", False, "rvvdiff"))
    return out


def _board_lines(src: GgmlSource) -> list[str]:
    """The commands: the spacemit build by clang (ggml's CMake, rvvdiff's additions), the program, then on the board."""
    lines = issue.build_lines(src, Point(VLEN, ISA, False, "clang"))
    return [*lines[:-2], "# on the board, as a user of it:", "./repro", "```"]


def text(fix: str, ggml: dict, verdicts: list[Verdict], entry: known.Known | None, source: str) -> str:
    """The issue text of ``fix`` from the Spike verdicts and the program's ``source``."""
    fn = entry.functions[0] if entry and entry.functions else fix
    title = issue.title_of(fn, verdicts, False).replace("RISC-V RVV, SpacemiT backend", "RISC-V, SpacemiT backend, IME1")
    title = title.replace(" under Spike,", " under Spike with IME1 emulated,")
    bad = next((v for v in verdicts if v.failing and v.tree != "fixed"), None)
    ok = next((v for v in verdicts if v.failing is False and v.tree == "fixed"), None)
    isa = dataclasses.replace(ISAS[ISA], env={})  # on a board the backend reads the core type from /proc/cpuinfo
    head = [f"### {title}",
            "", f"**What goes wrong.** {paragraphs.sentence(paragraphs.reason_of(entry))}",
            "", f"**What was emulated.** {EMULATED}",
            *paragraphs.upstream_lines(fix), *paragraphs.model_lines(fix), "",
            paragraphs.tree_line(ggml["label"], ggml["commit"], False)]
    prog = ["", f"The program, `repro.c` (ggml's public API: {source.splitlines()[0].split(': ', 1)[-1]}):",
            "```c", *source.rstrip("\n").splitlines(), "```"]
    body = [*paragraphs.build_paragraph(isa, ["clang"]),
            f"Built against the spacemit build's static libraries (ggml's CMake, clang; Debian: "
            f"`{stock.APT_INSTALL.split(' -y ')[1]}`) and run on the board:", *_board_lines(resolve(None))]
    said = []
    if bad:
        said += ["On a board that computes what the emulated IME1 computed, the program prints on this tree:", "```",
                 *bad.text.splitlines(), "```"]
    if ok:
        said.append(f"With the fix: `{ok.text.splitlines()[-1]}`.")
    table = [*said, "", f"The table: rvvdiff's kernel server built by zig's clang (not the commands' clang-22) from "
             f"each tree's spacemit build (the options and additions above), the call under Spike with rvvdiff's IME1 library "
             f"(fixed: with {paragraphs.fixed_with(fix)}):", "", *issue.verdict_table(verdicts)]
    out = head + prog + body + table
    if len(out) > issue.MAX_LINES:
        n = len(source.splitlines())
        out = head + ["", f"The program, `repro.c` (ggml's public API, {n} lines), is attached."] + body + table
    return "\n".join(out).rstrip() + "\n"


def write(fix: str, case: Case, out: Path) -> int:
    """The program, the verdicts on the pinned and the fixed tree, ``runs.json`` and ``issue.md`` in ``out``; 0 when the
    pinned tree is wrong and the fixed one right."""
    fx = fix_catalogue.catalogue()[fix]
    src = resolve(None)
    pub = public_form(case)
    entry = next((e for e in known.load() if e.fix == fix and not e.seen_in), None)
    pub.function = entry.functions[0] if entry and entry.functions else fix
    source = program.program(pub, pub.function)
    out.mkdir(parents=True, exist_ok=True)
    (out / "repro.c").write_text(source)
    for f in stock.addition_files(ISAS[ISA], "clang"):  # the printed commands name it beside the program
        shutil.copyfile(f, out / f.name)
    trees = {"pinned": src, "fixed": patches.apply([fx], src, "fix", fx.name)}
    verdicts = verify(case, trees, pub)
    for v in verdicts:
        print(f"  {v.tree:6} clang spacemit VLEN {v.vlen} (Spike, IME1): " + issue.verdict_word(v.failing, text=v.text))
    rec = {"ime1": True, "fix": fix, "ggml": {"label": src.label, "commit": src.commit},
           "verdicts": [vars(v) for v in verdicts]}
    (out / record.RECORD).write_text(json.dumps(record.unlocal(rec), indent=1) + "\n")
    return rerender(out, rec)


def rerender(out: Path, rec: dict) -> int:
    """``issue.md`` again from ``runs.json`` (``rec``) and the committed ``repro.c``."""
    fix = rec["fix"]
    entry = next((e for e in known.load() if e.fix == fix and not e.seen_in), None)
    verdicts = [Verdict(**v) for v in rec["verdicts"]]
    body = text(fix, rec["ggml"], verdicts, entry, (out / "repro.c").read_text())
    (out / "issue.md").write_text(body)
    print(f"rvvdiff report: {out / 'issue.md'} ({len(body.splitlines())} lines)")
    wrong = any(v.failing for v in verdicts if v.tree != "fixed")
    return 0 if wrong and not any(v.failing for v in verdicts if v.tree == "fixed") else 1
