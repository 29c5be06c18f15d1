"""``rvvdiff report CASE_DIR --upstream``: a failure report as an issue text for ggml's maintainers.

Writes ``upstream/issue.md`` (at most 60 lines) and ``upstream/repro.c`` (ggml's public API only) into
the case directory (or ``--out``), after building the program against every ISA build of the tree
and running it at every QEMU VLEN, with the recorded tail/mask stress mode: the title names the VLENs
and builds where it fails, as run.  When the case's known-failure entry names a fix
(harness/data/fixes/), or with ``--fixed TREE``, the program also runs against the fixed tree.

Exit status: 0 when the program fails on the tree at the recorded target (and, with a fix, passes
on the fixed tree everywhere); 1 otherwise (the issue would not be true); 2 when there is no public
form (the reason is printed) or nothing could be built.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from harness.commands import fixes as F
from harness.core.config import ISA_BUILDS, VLENS, selection_type
from harness.ggml import known, patches
from harness.ggml.source import resolve
from harness.report import upstream as U
from harness.report.failure import load_case


def _entry(nodeid: str, emulator: str) -> known.Known | None:
    return next((k for k in known.load() if k.matches(nodeid, emulator)), None)


def _paragraph(md: str, label: str) -> str:
    """The paragraph of a fix report that starts with ``**label.**`` (the short reports' convention)."""
    m = re.search(rf"^\*\*{re.escape(label)}\.\*\*\s*(.+?)(?:\n\s*\n|\Z)", md, re.M | re.S)
    return " ".join(m.group(1).split()) if m else ""


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("case", type=Path, help="a directory under <report-dir>/cases/")
    p.add_argument("--upstream", action="store_true", required=True,
                   help="write the issue text and the public-API program (the only form so far)")
    p.add_argument("--fixed", default=None, metavar="TREE",
                   help="a fixed tree to run the program against (default: the known-failure entry's fix applied)")
    p.add_argument("--vlen", type=selection_type("--vlen", VLENS, "VLENs QEMU runs", argparse.ArgumentTypeError),
                   default=VLENS, metavar="LIST", help="'all' (default) or a comma list")
    p.add_argument("--isa", type=selection_type("--isa", tuple(ISA_BUILDS), "ISA builds", argparse.ArgumentTypeError),
                   default=None, metavar="LIST", help="'all' (default) or a comma list")
    p.add_argument("--no-stock", action="store_true",
                   help="do not build the program with the stock toolchain's commands (Debian's clang, ggml's CMake)")
    p.add_argument("--out", type=Path, default=None, help="default: CASE/upstream")
    a = p.parse_args(argv)
    case = load_case(a.case.resolve())
    try:
        pub = U.public_form(case)
    except U.NoPublicForm as e:
        print(f"rvvdiff report: no public-API program for {case.data['test']}: {e}")
        return 2
    tgt = case.data["target"]
    stress = bool(tgt.get("stress"))
    names = list(ISA_BUILDS)
    isas = list(a.isa) if a.isa else names
    src = resolve(None if case.data["ggml"]["label"].startswith("pinned") else case.data["ggml"]["root"])
    entry = _entry(case.data["test"], tgt.get("emulator", "qemu"))
    trees = {"pinned" if src.label.startswith("pinned") else "tree": src}
    fix_name = a.fixed or ""
    fix_md = ""
    if a.fixed:
        trees["fixed"] = resolve(a.fixed)
    elif entry and entry.fix:
        fx = F.catalogue().get(entry.fix)
        if fx is not None and patches.applies(fx, src)[0] == "applies":
            trees["fixed"] = patches.apply([fx], src, "fix", fx.name)
            fix_name = fx.name
            md = fx.patch.with_suffix(".md")
            fix_md = md.read_text() if md.exists() else ""
    out = (a.out or case.dir / "upstream").resolve()
    out.mkdir(parents=True, exist_ok=True)
    title = pub.function
    prog = out / "repro.c"
    prog.write_text(U.program(pub, title))
    verdicts = U.verify(prog, trees, isas, list(a.vlen), stress, out)
    for v in verdicts:
        state = {True: "WRONG", False: "ok", None: "not run"}[v.failing]
        print(f"  {v.tree:6} {v.isa:9} VLEN {v.vlen:5}: {state}" + ("" if v.failing is not None else f" ({v.text})"))
    cause = _paragraph(fix_md, "Root cause") or (re.sub(r"\s*\((docs|see)[^)]*\)", "", entry.reason) if entry else "")
    impact = _paragraph(fix_md, "Who hits it")
    fixed = [v for v in verdicts if v.tree == "fixed"]
    wrong = next((v for v in verdicts if v.tree != "fixed" and v.failing), None)
    isa_ex, vl_ex = (ISA_BUILDS[wrong.isa], wrong.vlen) if wrong else (ISA_BUILDS[tgt["isa"]], tgt["vlen"])
    stock_runs = [] if a.no_stock else [U.verify_stock(t, label, isa_ex, vl_ex, stress, prog, out)
                                        for label, t in trees.items()]
    for v in stock_runs:
        print(f"  {v.tree:6} {v.isa:9} VLEN {v.vlen:5}, built with the stock commands: "
              + {True: "WRONG", False: "ok", None: f"not run ({v.text})"}[v.failing])
    text = U.issue(case, pub, prog.read_text(), verdicts, stress=stress, isa_example=isa_ex, vlen_example=vl_ex,
                   tree=src, stock_runs=stock_runs, cause=cause, impact=impact, fix=fix_name)
    (out / "issue.md").write_text(text)
    print(f"rvvdiff report: {out / 'issue.md'} ({len(text.splitlines())} lines), {prog}")
    at = [v for v in verdicts if v.tree != "fixed" and v.isa == tgt["isa"] and v.vlen == tgt["vlen"]]
    true = (bool(at and at[0].failing) and all(v.failing is False for v in fixed)
            and all(v.failing is (v.tree != "fixed") for v in stock_runs))
    if not true:
        print("rvvdiff report: the program does not fail at the recorded target, or the fixed tree still fails: "
              "the issue would not be true as written (table above)")
    return 0 if true else 1
