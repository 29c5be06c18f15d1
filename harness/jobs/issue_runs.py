"""The job behind ``rvvdiff report --upstream`` (harness/commands/report.py): a failure report made an issue
text for ggml's maintainers and checked true.

:func:`case_issue` takes a case directory, or makes one from a fix's finding (:func:`finding_case`: its
known-failure entry's reproducer run with ``--runxfail``), writes the public-API program
(harness/upstream/public.py, program.py) or, when there is none, a text that says why; :func:`enabled_issue`
does the same for a finding made live by a patch (``--enable``), through an exact repacked mul_mat.  Both
build and run the program with each compiler at every ISA build and VLEN, on the tree and on its fixed
tree (harness/upstream/runs.py), with the stock commands too, and write the issue text
(harness/upstream/issue.py); a finding no public op reaches gets its stock reproducer instead (:func:`direct_case`,
harness/upstream/direct.py).  The runs are kept beside the text (``runs.json``, harness/upstream/record.py) so that
:func:`rerender` writes the text again, on any checkout, without building or running.  Each returns the command's
exit status: 0 when the issue is true as written, 1 when it is not, 2 when there is no public form or nothing could
be built.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
import tempfile
import types
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from harness.core.config import ISA_BUILDS, PROJECT_ROOT, SPIKE_VLENS, VLENS, cache_dir
from harness.core.errors import RvvdiffError
from harness.core.matrix import COMPILER_NAMES, DEFAULT_COMPILER, DEFAULT_ISAS, ISAS, Point
from harness.core.proc import execute
from harness.emulators import registry
from harness.emulators.spike import spike_pk
from harness.ggml import fix_catalogue, known, patches, tree
from harness.ggml.source import resolve
from harness.report.failure import load_case
from harness.toolchain.compilers import ToolchainError, compiler
from harness.upstream import (
    direct,
    issue,
    paragraphs,
    program,
    public,
    record,
    runs,
    spacemit_direct,
    spacemit_ime,
    stock,
    stock_table,
)


@dataclass
class Request:
    """What ``rvvdiff report --upstream`` was asked for, its options parsed and checked."""

    vlen: tuple[int, ...]  # the QEMU VLENs the program runs at
    cc: list[str]  # the compilers that build it, each installed (:func:`compilers`)
    isa: tuple[str, ...] | None = None  # the ISA builds (None: every vector build)
    fix: str | None = None  # a fix of harness/data/fixes/ whose finding is the case
    fixed: str | None = None  # a fixed tree (default: the known-failure entry's fix applied)
    spike: bool = False  # also run under Spike at the VLENs QEMU does not run
    no_stock: bool = False  # do not build with the stock toolchain's commands
    enable: Path | None = None  # with ``fix``: the patch that makes the finding's code live
    out: Path | None = None  # where the texts go (default: CASE/upstream)
    #: the compilers whose table rows the stock commands build (harness/upstream/stock_table.py), not rvvdiff
    stock_table: tuple[str, ...] = ()


def _entry(nodeid: str, emulator: str, compiler: str, fix: str | None = None) -> known.Known | None:
    """The known-failure entry of a test (recorded on ``emulator``, built by ``compiler``): the one of ``fix`` if
    given (matching the test or not: a program made without a recorded case, ``--enable``), else one of this
    emulator only, else any."""
    found = [k for k in known.load() if k.matches(nodeid, emulator, compiler) or (fix and k.fix == fix and not k.seen_in)]
    return next((k for k in found if fix and k.fix == fix), None) or next(
        (k for k in found if k.emulator == emulator), None) or (found[0] if found else None)


def _built_by(case: dict) -> str:
    """The compiler of a recorded case's build (a report of before compilers were recorded: the default one)."""
    return case["target"].get("compiler") or DEFAULT_COMPILER


def finding_case(fix: str, work: Path) -> Path:
    """The failure report of a fix's finding on the pinned tree: its known-failure entry's reproducer
    command (a pytest selection), run with ``--runxfail`` into ``work``."""
    entries = [e for e in known.load() if e.fix == fix and not e.seen_in]
    if not entries:
        raise RvvdiffError(f"no known-failure entry of the pinned tree names the fix {fix}")
    words = shlex.split(entries[0].reproducer.split("  (")[0])
    if words[:1] != ["pytest"]:
        raise RvvdiffError(f"entry #{entries[0].number}: its reproducer is not a pytest command: {entries[0].reproducer}")
    out = work / fix
    shutil.rmtree(out, ignore_errors=True)
    argv = [sys.executable, "-m", "pytest", *words[1:], "--runxfail", "-q", "-p", "no:cacheprovider",
            "--report-dir", str(out)]
    r = execute(argv, cwd=Path(__file__).resolve().parents[2], timeout=3600).finished(f"the reproducer of {fix}")
    cases = sorted((out / "cases").glob("*/case.json")) if (out / "cases").is_dir() else []
    if not cases:
        raise RvvdiffError(f"{fix}: its finding's test did not fail ({shlex.join(argv)}; exit {r.returncode}):\n"
                           + r.stdout[-800:])
    return cases[0].parent


def backend_builds(isa: str) -> list[str]:
    """The ISA builds a case recorded at ``isa`` runs its program at by default: those of its CPU backend (ggml-cpu's
    vector builds; SpacemiT's backend has the spacemit build alone)."""
    backend = ISAS[isa].backend
    return [n for n in DEFAULT_ISAS if ISAS[n].backend == backend]


def compilers(chosen: Mapping[str, tuple[str, ...]] | None) -> list[str]:
    """The compilers of ``--cc`` (parsed: a program is built whole, so ISA limits do not apply), each installed
    (else a ToolchainError naming its set-up command); by default every known one that is installed, with one
    line for each missing."""
    names, missing_ok = (list(COMPILER_NAMES), True) if chosen is None else (list(chosen), False)
    out = []
    for n in names:
        try:
            compiler(n)
        except ToolchainError as e:
            if not missing_ok:
                raise
            print(f"rvvdiff report: {n} not installed, the program runs without it: {e}")
            continue
        out.append(n)
    if not out:
        raise ToolchainError("no compiler of " + ", ".join(names) + " is installed")
    return out


def case_issue(req: Request, case_path: Path | None) -> int:
    """The issue text of the failure report in ``case_path`` (None: the finding of ``req.fix``, made afresh), or
    the text of why it has no public program; the exit status of ``rvvdiff report --upstream``."""
    if req.fix and (req.fix in direct.PROGRAMS or req.fix in direct.BY_TEST or req.fix in spacemit_direct.PROGRAMS):
        return direct_case(req)
    if req.fix in spacemit_ime.FIXES:  # only Spike with rvvdiff's IME1 library runs it: the replays and a board's program
        case = load_case(finding_case(req.fix, cache_dir() / "upstream-cases"))
        return spacemit_ime.write(req.fix, case, (req.out or UPSTREAM_DOCS / req.fix).resolve())
    if req.fix:
        case_dir = finding_case(req.fix, cache_dir() / "upstream-cases")
    else:
        case_dir = case_path.resolve()
    case = load_case(case_dir)
    out = (req.out or case.dir / "upstream").resolve()
    try:
        pub = public.public_form(case, tree.of(public.source_of(case)).types)
    except public.NoPublicForm as e:
        why = str(e)
        entry = _entry(case.data["test"], case.data["target"].get("emulator", "qemu"), _built_by(case.data), req.fix)
        ggml = public.source_of(case).ggml
        if entry and entry.functions and not any(public.callers(ggml, f) for f in entry.functions):
            why = (f"no code of this tree calls {', '.join(entry.functions)} (only its declaration and definition "
                   "name it), so no op reaches it; it is wrong for any future caller")
        print(f"rvvdiff report: no public-API program for {case.data['test']}: {why}; no stock reproducer either "
              "(harness/upstream/direct.py has none for it): no issue text written")
        return 2
    tgt = case.data["target"]
    stress = bool(tgt.get("stress"))
    isas = list(req.isa) if req.isa else backend_builds(tgt["isa"])
    src = public.source_of(case)
    entry = _entry(case.data["test"], tgt.get("emulator", "qemu"), _built_by(case.data), req.fix)
    if entry and entry.functions:  # the function the finding is about, not the op the test called
        pub.function = entry.functions[0]
    trees = {"pinned" if src.label.startswith("pinned") else "tree": src}
    fix_name = req.fixed or ""
    fix_md = ""
    if req.fixed:
        trees["fixed"] = resolve(req.fixed)
    elif entry and entry.fix:
        fx = fix_catalogue.catalogue().get(entry.fix)
        if fx is not None and patches.applies(fx, src)[0] == "applies":
            trees["fixed"] = patches.apply([fx], src, "fix", fx.name)
            fix_name = fx.name
            fix_md = fx.report.read_text() if fx.report.exists() else ""
    out.mkdir(parents=True, exist_ok=True)
    title = pub.function
    prog = out / "repro.c"
    prog.write_text(program.program(pub, title))
    with tempfile.TemporaryDirectory(prefix="rvvdiff-upstream-") as tmp:  # the executables; out keeps the texts
        return _judge(req, case, pub, prog, out=out, trees=trees, isas=isas, stress=stress, fix_name=fix_name,
                      fix_md=fix_md, work=Path(tmp))


#: Where the committed issue texts are (``rvvdiff report --rerender`` without ``--out`` writes every one again).
UPSTREAM_DOCS = PROJECT_ROOT / "docs" / "upstream"


def _no_caller(fix: str) -> str:
    entry = _entry("", "qemu", DEFAULT_COMPILER, fix)
    fns = ", ".join(entry.functions) if entry and entry.functions else fix
    return (f"no code of this tree calls {fns} (only its declaration and definition name it), so no op reaches it; "
            "it is wrong for any future caller")


def direct_case(req: Request) -> int:
    """``--fix NAME`` for a finding no public op reaches: its stock reproducer (harness/upstream/direct.py) run on the
    pinned and the fixed tree, or its series' recorded regression-test runs, and the issue text."""
    fx = fix_catalogue.catalogue()[req.fix]
    src = resolve(None)
    out = (req.out or UPSTREAM_DOCS / req.fix).resolve()
    out.mkdir(parents=True, exist_ok=True)
    why, source = _no_caller(req.fix), ""
    if req.fix in spacemit_direct.PROGRAMS:  # the program written from the finding's shrunk case
        case = load_case(finding_case(req.fix, cache_dir() / "upstream-cases"))
        source = spacemit_direct.PROGRAMS[req.fix].write(case)
        (out / "repro.cpp").write_text(source)
        for f in stock.addition_files(ISAS[spacemit_direct.ISA], "clang"):
            shutil.copyfile(f, out / f.name)  # (the printed commands name it beside the program)
        trees = {"pinned": src, "fixed": patches.apply([fx], src, "fix", fx.name)}
        with tempfile.TemporaryDirectory(prefix="rvvdiff-direct-") as tmp:
            verdicts = spacemit_direct.verify(req.fix, source, trees, req.cc, tuple(req.vlen), Path(tmp))
        why = spacemit_direct.why(req.fix)
    elif req.fix in direct.PROGRAMS:
        trees = {"pinned": src, "fixed": patches.apply([fx], src, "fix", fx.name)}
        ccs = [c for c in req.cc if c in ("clang", "gcc14")]
        with tempfile.TemporaryDirectory(prefix="rvvdiff-direct-") as tmp:
            verdicts = direct.verify(req.fix, trees, ccs, Path(tmp), tuple(req.vlen))
    else:
        verdicts = direct.test_verdicts(req.fix)
    for v in verdicts:
        print(f"  {v.tree:6} {v.compiler:6} {v.isa:9} VLEN {v.vlen:5}{' stress' if v.stress else ''}: "
              + issue.verdict_word(v.failing, text=v.text))
    (out / "repro.c").unlink(missing_ok=True)
    rec = {"direct": True, "fix": req.fix, "ggml": {"label": src.label, "commit": src.commit},
           "why": why, "verdicts": [vars(v) for v in verdicts]}
    (out / record.RECORD).write_text(json.dumps(record.unlocal(rec), indent=1) + "\n")
    return _write_direct(out, rec)


def _write_direct(out: Path, rec: dict) -> int:
    entry = _entry("", "qemu", DEFAULT_COMPILER, rec["fix"])
    verdicts = [runs.Verdict(**v) for v in rec["verdicts"]]
    source = _text(out / "repro.cpp") if rec["fix"] in spacemit_direct.PROGRAMS else ""
    text = direct.direct_issue(rec["fix"], rec["ggml"], verdicts, entry, rec["why"], source)
    (out / "issue.md").write_text(text)
    print(f"rvvdiff report: {out / 'issue.md'} ({len(text.splitlines())} lines)")
    wrong = any(v.failing for v in verdicts if v.tree != "fixed")
    return 0 if wrong and not any(v.failing for v in verdicts if v.tree == "fixed") else 1


def _text(path: Path) -> str:
    return path.read_text() if path.is_file() else ""


def rerender(out: Path | None) -> int:
    """Write ``out``'s issue text again from the runs kept beside it (``runs.json``: the generator's wording, or
    docs/model-effects.json, changed; the runs did not): no build, no run.  A text written before runs were kept
    gets its ``runs.json`` read back from its own table first (:func:`harness.upstream.record.bootstrap`).  ``out``
    None: every text of docs/upstream."""
    if out is None:
        dirs = sorted(d for d in UPSTREAM_DOCS.iterdir() if (d / "issue.md").is_file())
        return max([rerender(d) for d in dirs] or [2])
    if not (out / record.RECORD).is_file() and "The program: " in _text(out / "issue.md"):
        print(f"rvvdiff report: {out}: {record.RECORD} read back from the text's own table and output lines")
        record.bootstrap(out, out.name)
    if not (out / record.RECORD).is_file():
        print(f"rvvdiff report: --rerender: no {record.RECORD} in {out}: run `rvvdiff report --upstream` first")
        return 2
    rec = json.loads((out / record.RECORD).read_text())
    if rec.get("direct"):
        return _write_direct(out, rec)
    if rec.get("ime1"):
        return spacemit_ime.rerender(out, rec)
    case, pub, prog, verdicts, kwargs = record.load(out, resolve(None))
    kwargs["trap_check"] = direct.trap_check(kwargs.get("fix", ""))
    text = issue.issue(case, pub, prog, verdicts, **kwargs)
    (out / "issue.md").write_text(text)
    print(f"rvvdiff report: {out / 'issue.md'} ({len(text.splitlines())} lines), from {record.RECORD}")
    return 0


def enabled_issue(req: Request) -> int:
    """``--fix NAME --enable PATCH``: the finding's code made live by PATCH on the pinned and the fixed tree, shown
    by an exact repacked mul_mat (:func:`public.exact_repack`) at every VLEN, the recorded target being the
    fix's first wrong VLEN in its first zvfh build."""
    fx = fix_catalogue.catalogue()[req.fix]
    entry = _entry("", "qemu", req.cc[0], req.fix)
    fn = entry.functions if entry else ()
    m = re.match(r"ggml_gem[vm]_([a-z0-9]+_[a-zA-Z0-9]+?)_\d+x\d+_", fn[0] if fn else "")
    try:
        pub = public.exact_repack(m.group(1) if m else "")
    except public.NoPublicForm as e:
        print(f"rvvdiff report: --enable: {e}")
        return 2
    pub.function = " / ".join(fn)
    src = resolve(None)
    enable = patches.Patch("enable", req.enable.resolve())
    if patches.applies(enable, src)[0] != "applies":
        print(f"rvvdiff report: --enable {req.enable}: does not apply to {src.label}")
        return 2
    trees = {"pinned": patches.apply([enable], src, "enable", f"{fx.name}-enable"),
             "fixed": patches.apply([fx, enable], src, "fix", f"{fx.name}+enable")}
    said = fx.meta.get("wrong-vlens", "").replace("all", ",".join(map(str, req.vlen)))
    wrong = [int(v) for v in said.split(",") if v.strip().isdigit() and int(v) in req.vlen] or [req.vlen[-1]]
    isas = list(req.isa) if req.isa else list(ISA_BUILDS)
    first = next((i for i in fx.cost_isas if i in isas), isas[0])
    data = {"test": "", "ggml": {"label": src.label, "commit": src.commit},
            "target": {"isa": first, "vlen": wrong[0], "compiler": req.cc[0], "emulator": "qemu"},
            "comparison": {"name": "C"}}
    case = types.SimpleNamespace(data=data, dir=None)
    out = req.out.resolve() if req.out else None
    if out is None:
        print("rvvdiff report: --enable needs --out DIR")
        return 2
    out.mkdir(parents=True, exist_ok=True)
    prog = out / "repro.c"
    prog.write_text(program.program(pub, pub.function))
    if req.enable.resolve() != (out / "enable.patch").resolve():
        shutil.copyfile(req.enable, out / "enable.patch")
    with tempfile.TemporaryDirectory(prefix="rvvdiff-upstream-") as tmp:
        return _judge(req, case, pub, prog, out=out, trees=trees, isas=isas, stress=False, fix_name=fx.name,
                      fix_md=fx.report.read_text() if fx.report.exists() else "", work=Path(tmp))


def _judge(req: Request, case, pub: public.Public, prog: Path, *, out: Path, trees: dict, isas: list[str],
           stress: bool, fix_name: str, fix_md: str, work: Path) -> int:
    """Build and run the program everywhere (each tree, compiler, ISA build of ``isas`` and VLEN, in the stress mode
    ``stress``), write the issue text into ``out``; 0 when it is true as written."""
    tgt = case.data["target"]
    src = next(iter(trees.values()))
    entry = _entry(case.data["test"], tgt.get("emulator", "qemu"), _built_by(case.data), req.fix)
    # A finding that is a trap (the call crashed where the test ran, the oracle's value kept): every run is
    # judged by whether it traps, and Spike, where such traps show, runs every VLEN.
    trap = bool((case.data.get("comparison") or {}).get("crashed")) or bool(getattr(pub, "crashed", False))
    verdicts = []
    for cc in req.cc:
        table = stock_table.verify if cc in req.stock_table else runs.verify
        targets = [Point(v, i, stress, cc) for i in isas for v in req.vlen]
        mine = table(prog, trees, targets, work, trap=trap)
        if (not stress and not trap and not any(v.failing for v in mine if v.tree != "fixed")
                and any(v.failing is not None for v in mine)):  # (a compiler that built nothing: no rerun)
            # right everywhere under QEMU's default policy: does it show with agnostic elements written as ones?
            mine += table(prog, {k: t for k, t in trees.items() if k != "fixed"},
                          [replace(t, stress=True) for t in targets], work)
        verdicts += mine
    if req.spike:
        try:
            spike = registry.get("spike")
            pk = spike_pk() if set(req.cc) & set(req.stock_table) else None
        except ToolchainError as e:
            print(f"rvvdiff report: --spike: {e}")
            return 2
        for cc in req.cc:
            table = stock_table.verify if cc in req.stock_table else runs.verify
            targets = [Point(v, i, stress, cc, "spike") for i in isas for v in SPIKE_VLENS if trap or v not in VLENS]
            verdicts += table(prog, trees, targets, work, emulator=pk if cc in req.stock_table else spike, trap=trap)
    for v in verdicts:
        word = issue.verdict_word(v.failing, trap, v.text)
        state = word.upper() if v.failing else word
        print(f"  {v.tree:6} {v.compiler:6} {v.isa:9} VLEN {v.vlen:5}{' stress' if v.stress != stress else ''}: "
              f"{state}" + ("" if v.failing is not None else f" ({v.text})"))
    cause = paragraphs.paragraph(fix_md, "Root cause") or paragraphs.reason_of(entry)
    impact = paragraphs.paragraph(fix_md, "Who hits it")
    fixed = [v for v in verdicts if v.tree == "fixed"]
    # The recorded target, by its compiler when it was among those run (else the first that was).
    built_by = _built_by(case.data)
    recorded = Point(tgt["vlen"], tgt["isa"], stress, built_by if built_by in req.cc else req.cc[0],
                     tgt.get("emulator", "qemu"))
    # (the stock commands run the program under QEMU, which lets a trap finding's access through)
    stock_runs = []
    for cc in ([] if req.no_stock or trap else req.cc):
        where = issue.example(verdicts, replace(recorded, compiler=cc, emulator="qemu"))
        if cc in req.stock_table:  # the table's own rows there are the commands' runs
            stock_runs += [v for v in verdicts if v.by == "stock" and v.point == where]
            continue
        stock_runs += [runs.verify_stock(t, label, where, prog, work) for label, t in trees.items()]
    for v in stock_runs:
        print(f"  {v.tree:6} {v.compiler:6} {v.isa:9} VLEN {v.vlen:5}{' stress' if v.stress else ''}, built with the "
              "stock commands: " + {True: "WRONG", False: "ok", None: f"not run ({v.text})"}[v.failing])
    enable = (out / "enable.patch").read_text() if req.enable is not None else ""
    for f in {f for cc in req.cc for isa in isas for f in stock.addition_files(ISAS[isa], cc)}:
        shutil.copyfile(f, out / f.name)  # (the printed commands name it beside the program: the spacemit build)
    kwargs = dict(recorded=recorded, tree=src, stock_runs=stock_runs, cause=cause, impact=impact, fix=fix_name, trap=trap,
                  enable=enable)
    record.dump(out, case.data, pub, prog.read_text(), verdicts, kwargs)
    text = issue.issue(types.SimpleNamespace(data=case.data), pub, prog.read_text(), verdicts, **kwargs,
                       trap_check=direct.trap_check(fix_name))
    (out / "issue.md").write_text(text)
    print(f"rvvdiff report: {out / 'issue.md'} ({len(text.splitlines())} lines), {prog}")
    at = [v for v in verdicts if v.tree != "fixed" and v.point == recorded]

    def agrees(s: runs.Verdict) -> bool:  # a stock run says what rvvdiff's build of that compiler says there
        same = [v for v in verdicts if (v.tree, v.compiler, v.isa, v.vlen, v.stress, v.emulator)
                == (s.tree, s.compiler, s.isa, s.vlen, s.stress, "qemu") and v.failing is not None]
        return s.failing is None or not same or same[0].failing == s.failing

    # "not run" cells (Spike has no stress mode; a kernel that traps there) say so in the table and judge nothing
    true = (bool(at and at[0].failing) and not any(v.failing for v in fixed)
            and (not fixed or any(v.failing is False for v in fixed)) and all(map(agrees, stock_runs)))
    for (t, cc, isa), why in {(v.tree, v.compiler, v.isa): v.text for v in verdicts if v.failing is None}.items():
        print(f"  not run: {t} {cc} {isa}: {why.splitlines()[0] if why else ''}")
    if not true:
        print("rvvdiff report: the program does not fail at the recorded target, or the fixed tree still fails: "
              "the issue would not be true as written (table above)")
    return 0 if true else 1
