"""The runs of the cost suite behind ``rvvdiff cost`` (harness/commands/cost.py says what it prints and
writes): the cost suite (costs/) under Spike on HEAD and, with a BASE, on BASE, once per compiler,
each run a pytest run with ``--cost-log`` (:func:`run_costs`); the tables they make and the reports
written from them (:func:`write_report`: ``cost.md``, ``cost.json``, ``cost.html``).  :class:`Options`
holds what one such command measures, by the command's option names; :func:`measure` is the command
after its arguments are parsed, and what a fix's cost step runs (harness/jobs/fix_cost_runs.py)."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from harness.core import settings
from harness.core.errors import RvvdiffError
from harness.core.matrix import ISAS, Matrix, vlens_on
from harness.core.runner import NO_TESTS_COLLECTED, run_suite
from harness.cost.calibration import kernel_rows, model_rows
from harness.cost.prices import per_token
from harness.cost.tables import compiler_gaps, run_tally, suite_tables
from harness.ggml import changes, tree
from harness.ggml.source import resolve
from harness.toolchain.compilers import selected


class CostRunError(RvvdiffError):
    """A cost run that did not complete (pytest could not start or was killed)."""


class CostSelectionError(RvvdiffError):
    """What ``rvvdiff cost`` was asked to measure holds no case it can measure: said before any run."""


#: The matrix of ``rvvdiff cost`` where it gives no axis: under Spike (every VLEN it runs, the vector ISA
#: builds, the setting's compiler, the pinned tree).
COST_MATRIX = Matrix(emulator="spike")


@dataclass
class Options:
    """What one ``rvvdiff cost`` measures and how: the axes of its matrix (``matrix``: ``--vlen``, ``--isa``,
    ``--cc``, ``--emulator``, ``--ggml-src``, as parsed; :data:`COST_MATRIX` where it gives none) and its other
    options by the command's names (the command's defaults are these), in the order :meth:`argv` writes them."""

    matrix: Matrix = COST_MATRIX
    base: str | None = None
    changed_only: bool = False
    workers: str = "auto"  # -n
    k: str | None = None
    out: Path = Path("reports/cost")
    threshold: float = suite_tables.THRESHOLD * 100  # PCT
    block_slower: float | None = None  # PCT
    kernel_timeout: float = 120.0  # seconds, times Spike's slowdown
    cc_gap: float = compiler_gaps.GAP * 100  # PCT
    model: str | None = None
    clock_ghz: float = 1.6
    threads: int = 8
    no_estimates: bool = False

    @property
    def emulator(self) -> str:
        return self.matrix.emulator or str(COST_MATRIX.emulator)

    @property
    def head(self) -> str | None:
        """The tree measured (None: the pinned tree)."""
        return self.matrix.tree

    @property
    def vlens(self) -> tuple[int, ...]:
        """The VLENs measured under Spike (every one it runs unless ``--vlen`` says)."""
        return vlens_on("spike", self.matrix.vlens)

    def argv(self) -> list[str]:
        """The ``rvvdiff cost`` arguments of this run: the matrix (``--vlen``, ``--isa``, ``-n`` and ``--out``
        always), any other option where it differs from the default."""
        given = Matrix(vlens=self.vlens, isas=self.matrix.isa_builds, compilers=self.matrix.compilers,
                       emulator=None if self.emulator == COST_MATRIX.emulator else self.emulator, tree=self.head)
        out: list[str] = given.pytest_args()
        default = Options()
        for f in fields(self):
            value = getattr(self, f.name)
            flag = {"workers": "-n", "k": "-k"}.get(f.name, "--" + f.name.replace("_", "-"))
            if f.name == "matrix" or (f.name not in ("workers", "out") and value == getattr(default, f.name)):
                continue
            if isinstance(value, bool):
                out.append(flag)
            elif value is not None:
                out += [flag, str(value)]
        return out


def _suite_args(run_matrix: Matrix, args: Options, extra: Sequence[str]) -> list[str]:
    """The pytest arguments that select a run's cases: the cost suite, the matrix, ``-k``, ``extra``."""
    return ["costs", *run_matrix.pytest_args(), "--kernel-timeout", str(args.kernel_timeout),
            *(["-k", args.k] if args.k else []), *extra]


def run_costs(tree: str | None, out: Path, name: str, args: Options, extra: list[str] = (), *,
              compiler: str | None = None, isas: tuple[str, ...] | None = None, emulator: str = "spike",
              vlens: tuple[int, ...] | None = None) -> tuple[dict[suite_tables.Key, dict], dict[str, str], float]:
    """Measure the selected cases on ``tree`` (built by ``compiler``, a name of harness/core/matrix.py's
    ``COMPILER_NAMES``; None: the selected one) in ``isas`` (default: the matrix's) on ``emulator`` at
    ``vlens`` (default: the matrix's under Spike): (rows, unmeasured case -> reason, seconds).  Every
    case the run selected is a row or an unmeasured case (harness/cost/tables/run_tally.py counts them)."""
    log = out / f"{name}.jsonl"
    log.unlink(missing_ok=True)
    run_matrix = Matrix(vlens=vlens or args.vlens, isas=args.matrix.isa_builds if isas is None else isas,
                        compilers={compiler: tuple(ISAS)} if compiler else None, emulator=emulator, tree=tree)
    argv = [*_suite_args(run_matrix, args, extra), "--cost-log", str(log), "-n", str(args.workers), "-q"]
    run = run_suite(argv, report_dir=out / f"{name}-report", output=out / f"{name}.log", clean=True,
                    echo=f"rvvdiff cost: measuring {name} ({tree or 'the pinned tree'}"
                         + (f", {compiler}" if compiler else "") + ")")
    if not run.has_results:
        raise CostRunError(f"the {name} run did not complete (exit {run.exit}); its log: {run.log}\n"
                           f"  command: {shlex.join(run.argv)}")
    rows = suite_tables.read_rows(log)
    return rows, suite_tables.unmeasured(run.results, f"{name}: ", rows), run.seconds


def check_selection(args: Options, specs: Sequence[per_token.Spec], extra: Sequence[str], out: Path) -> int:
    """Before any run: the number of tests of the cost suite the options select on HEAD (a collection,
    nothing built or measured), or :class:`CostSelectionError` saying why none can be measured: a
    ``--model`` type a tree does not have, a ``-k`` (or ``--changed-only``) that selects no case.  The cases no
    build of the run can measure are deselected at collection (harness/plugin/costlog.py): each reason is printed
    (SpacemiT's cases at ``--isa v``, at a compiler that cannot make the spacemit build), so the runs measure
    every case they select."""
    for spec in specs:
        for which, tree_arg in (("HEAD", args.head), ("BASE", args.base)):
            if which == "BASE" and not args.base:
                continue
            src = resolve(tree_arg)
            if spec.type not in tree.of(src).types:
                raise CostSelectionError(f"--model {args.model}: ggml type {spec.type!r} is not in {which}'s tree "
                                         f"({src.describe()}), so its model-shaped case cannot be measured there; "
                                         "give a type both trees have")
    on = Matrix(vlens=args.vlens, isas=args.matrix.isa_builds, compilers=args.matrix.compilers, emulator="spike",
                tree=args.head)
    run = run_suite([*_suite_args(on, args, extra), "--collect-only", "-q"], report_dir=out / "selection",
                    output="capture", clean=True)
    ids = [ln for ln in run.stdout.splitlines() if "::test_cost[" in ln]
    deselected = [ln.removeprefix("rvvdiff: ") for ln in run.stdout.splitlines()
                  if ln.startswith(f"rvvdiff: {run_tally.DESELECTED} ")]
    for line in deselected:
        print(f"rvvdiff cost: {line}", flush=True)
    if ids:
        return len(ids)
    if run.exit != NO_TESTS_COLLECTED:
        said = [ln for ln in (run.stdout + run.stderr).strip().splitlines() if ln.strip()][-12:]
        raise CostRunError(f"collecting the cost suite failed (exit {run.exit}):\n  " + "\n  ".join(said)
                           + f"\n  command: {shlex.join(run.argv)}")
    where = shlex.join(on.pytest_args())
    if args.changed_only:
        raise CostSelectionError("no case of the cost suite (costs/) reaches the change between BASE and HEAD"
                                 + (f" among those -k {args.k!r} selects" if args.k else "") + f" ({where}): "
                                 "nothing to measure")
    if args.k:
        hint = (" (the model-shaped cases exist only with --model SPEC)" if "model" in args.k and not specs else "")
        raise CostSelectionError(f"-k {args.k!r} selects no case of the cost suite (costs/) at {where}{hint}; "
                                 f"`pytest costs --collect-only -q {where}` lists the case ids")
    raise CostSelectionError(f"no case of the cost suite (costs/) at {where}: nothing to measure")


def measure(args: Options, specs: Sequence[per_token.Spec] = ()) -> int:
    """``rvvdiff cost`` under Spike once its options are checked (``specs``: ``--model``'s, parsed): the
    runs, the reports, the lists printed; the command's exit status."""
    if specs:
        settings.put("COST_MODEL", args.model)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    extra: list[str] = []
    if args.changed_only:
        diff = changes.diff(resolve(args.base), resolve(args.head))
        (out / "changes.json").write_text(json.dumps(diff.to_json(), indent=1))
        print(f"rvvdiff cost: {len(diff.changes)} changed functions / macros: "
              + ", ".join(c.describe() for c in diff.changes[:8]), flush=True)
        extra = ["--changes", str(out / "changes.json"), "--changed-only"]
    n = check_selection(args, specs, extra, out)
    print(f"rvvdiff cost: {n} case{'s' if n > 1 else ''} selected" + (" on each tree" if args.base else ""), flush=True)
    compilers = args.matrix.compilers or {selected(): tuple(ISAS)}
    several = len(compilers) > 1
    tables: dict[str, suite_tables.CostTable] = {}
    seconds = 0.0
    for cc, allowed in compilers.items():
        tag, named = (f"-{cc}" if several else ""), (cc if args.matrix.compilers else None)
        isas = tuple(i for i in args.matrix.isa_builds if i in allowed)  # a compiler's NAME:ISA+ISA limit
        if not isas:
            print(f"rvvdiff cost: {cc}: none of the ISA builds selected is among its own ({', '.join(allowed)})")
            continue
        head, missing, head_s = run_costs(args.head, out, f"head{tag}", args, extra, compiler=named, isas=isas)
        base: dict[suite_tables.Key, dict] = {}
        seconds += head_s
        if args.base:
            base, missing_base, base_s = run_costs(args.base, out, f"base{tag}", args, extra, compiler=named, isas=isas)
            missing.update(missing_base)
            seconds += base_s
        tables[cc] = suite_tables.CostTable(head, base, missing, args.threshold / 100, cc if several else "")
    write_report(out, tables, seconds, args.cc_gap / 100)
    slower = [m for t in tables.values() for m in t.moves()[0]]
    tally = run_tally.Tally.of(tables.values(), bool(args.base))
    for cc, table in tables.items():
        counted = run_tally.Tally.of([table], bool(args.base)) if several else tally
        print(f"rvvdiff cost: {counted.summary()}" + (f" ({cc})" if several else "") + f"; {out / 'cost.md'}")
        if args.base:
            s, f = table.moves()
            print(f"  slower: {len(s)}, faster: {len(f)} (beyond {args.threshold:g} %)")
            for m in s[:20]:
                print(f"    slower: {m.describe()}")
            for m in f[:20]:
                print(f"    faster: {m.describe()}")
            if any(m.on_cores for m in s + f):
                print(f"  est.: {kernel_rows.summary()}")
        for line in counted.reasons():
            print(f"  not measured: {line}")
    if several:
        found = compiler_gaps.gaps({cc: t.head for cc, t in tables.items()}, args.cc_gap / 100)
        print(f"rvvdiff cost: {len(found)} calls where one compiler's code is more than {args.cc_gap:g} % dearer:")
        for g in found[:40]:
            print(f"    {g.describe()}")
    if specs:
        for cc, table in tables.items():
            try:
                lines = per_token.report(table.as_json(), specs, args.clock_ghz, args.threads)
            except per_token.ModelCostError as e:
                lines = [f"model-shaped cases ({cc}): {e}"]
            if args.base:
                lines.append(f"  est.: {model_rows.summary()}")
            (out / (f"model-{cc}.md" if several else "model.md")).write_text("\n".join(lines) + "\n")
            print("\n".join(lines))
    print(f"rvvdiff cost: measured in {seconds:.0f} s")
    blocking = args.block_slower is not None and any(m.ratio > 1 + args.block_slower / 100 for m in slower)
    if blocking:
        print(f"rvvdiff cost: blocking: a case is slower by more than {args.block_slower:g} %", file=sys.stderr)
    return finish(tally, blocking)


def finish(tally: run_tally.Tally, blocking: bool) -> int:
    """The exit status of a cost command (harness/cost/tables/run_tally.py), with one line on stderr when not every
    selected case was measured: how many, and by what outcome (each reason is a "not measured" line above)."""
    if not tally.complete:
        print(f"rvvdiff cost: incomplete: {tally.summary()}: {tally.counts() or 'nothing selected'}; each reason "
              "is a 'not measured' line above", file=sys.stderr)
    return run_tally.exit_status(tally, blocking)


def write_report(out: Path, tables: dict[str, suite_tables.CostTable], seconds: float, gap: float) -> None:
    """``cost.md``, ``cost.json`` and the HTML page(s) of the tables, one per compiler measured: with one,
    exactly the single table's; with several, the compiler comparison first and a page per compiler."""
    if len(tables) == 1:
        table = next(iter(tables.values()))
        md = table.markdown()
        (out / "cost.md").write_text(md)
        (out / "cost.json").write_text(json.dumps({**table.as_json(), "seconds": round(seconds, 1)}, indent=1))
        (out / "cost.html").write_text(table.html(md))
        return
    heads = {cc: t.head for cc, t in tables.items()}
    found = compiler_gaps.gaps(heads, gap)
    parts = {cc: t.markdown(title=f"Cost per VLEN: {cc}") for cc, t in tables.items()}
    (out / "cost.md").write_text(compiler_gaps.markdown(heads, found, gap) + "\n" + "\n".join(parts.values()))
    (out / "cost.json").write_text(json.dumps({**compiler_gaps.as_json(heads, found, gap),
                                               "per_compiler": {cc: t.as_json() for cc, t in tables.items()},
                                               "seconds": round(seconds, 1)}, indent=1))
    for cc, t in tables.items():
        (out / f"cost-{cc}.html").write_text(t.html(parts[cc]))
