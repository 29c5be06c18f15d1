"""How well the suite finds planted bugs, and how often it cries wolf: the runs behind ``rvvdiff mutants``
and ``rvvdiff audit`` (harness/commands/mutation.py).

Detection (:func:`detection`): for each mutant in ``harness/data/mutants/`` (a patch with a ``select:``
line naming the pytest arguments that should catch it), build the patched tree, run that selection at
every VLEN with the default example budget in one process (:func:`detect`), and record whether it was
caught, at which VLENs and ISA builds, the size of the shrunk case (from the failure reports) and the
time until the first failing test finished; the table (:func:`table`) goes to ``docs/mutants.md`` (and
``.json``).

Audit (:func:`audit`): run the whole suite several times on the unmodified tree with different
Hypothesis seeds and list every failure that is not a known failure; the target is none.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.config import PROJECT_ROOT, work_dir
from harness.core.matrix import AXIS, ISAS, WHOLE, Matrix, from_args
from harness.core.runner import run_suite
from harness.ggml import mutants
from harness.ggml.source import resolve
from harness.report.ids import parse_id
from harness.toolchain.builds import BuildError, IsaUnavailable, ensure_built
from harness.toolchain.compilers import ToolchainError
from harness.toolchain.compilers import selected as default_compiler

ROOT = PROJECT_ROOT


def _case_size(case: dict[str, Any]) -> str:
    call = case.get("call") or {}
    inputs = [b["size"] for b in call.get("buffers", []) if b["kind"] != "OUT"]
    return f"{call.get('kernel')} ip={call.get('ip')} inputs={'+'.join(map(str, inputs))} B"


def detect(m: mutants.Mutant, *, max_examples: int | None, out: Path, timeout: float,
           extra: list[str] = (), compilers: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
    """Build one mutant with ``compilers`` (``--cc``'s, parsed; None: the setting's) and run its
    selection (plus ``extra`` pytest arguments, e.g. a narrower --vlen / --isa for a fast check);
    return the row of the detection table."""
    meta = m.meta
    if "select" not in meta:
        return {"mutant": m.name, "class": meta.get("class", ""), "caught": None,
                "note": "no `select:` line in the patch header"}
    selected, rest = from_args(shlex.split(meta["select"]) + list(extra))
    tree = mutants.apply(m, resolve(None))
    run = selected.merged(Matrix(compilers=compilers, tree=str(tree.root)))
    t0 = time.perf_counter()
    try:
        for compiler, isa in run.builds():
            try:
                ensure_built(tree, ISAS[isa], compiler)
            except IsaUnavailable:  # (GCC 14 and zvfbfwma): the suite skips those targets with the reason
                continue
    except (BuildError, ToolchainError) as e:
        return {"mutant": m.name, "class": meta.get("class", ""), "caught": None,
                "note": f"the mutant does not build: {str(e).splitlines()[0]}"}
    build_s = time.perf_counter() - t0
    rdir = out / m.name
    args = [*rest, *run.pytest_args(), "-p", "no:xdist"]
    if max_examples:
        args += ["--max-examples", str(max_examples)]
    cp = run_suite([*args, "-p", "no:cacheprovider", "-q"], report_dir=rdir, output="capture",
                   timeout=timeout).check_timeout()
    run_s = cp.seconds
    results = list(cp.results.values())  # in the order the tests finished
    failed = [r for r in results if r["outcome"] in ("failed", "error")]
    elapsed, first = 0.0, None
    for r in results:  # completion order of a single process
        elapsed += r.get("duration", 0.0)
        if r["outcome"] in ("failed", "error") and first is None:
            first = elapsed
    by_compiler = _by_compiler(results, run.compilers)  # the select line's own --cc, else the command's
    vlens = sorted({parse_id(r["nodeid"]).vlen for r in failed if parse_id(r["nodeid"])})
    isas = sorted({parse_id(r["nodeid"]).isa for r in failed if parse_id(r["nodeid"])})
    sizes = []
    for case in sorted((rdir / "cases").glob("*/case.json")) if (rdir / "cases").exists() else []:
        sizes.append(_case_size(json.loads(case.read_text())))
    smallest = min(sizes, key=len) if sizes else ""
    return {
        "mutant": m.name, "class": meta.get("class", ""), "family": meta.get("family", ""),
        # caught only when every compiler that ran a test of the selection failed one
        "select": meta["select"], "caught": bool(failed) and all(f for f, _ in by_compiler.values()),
        "failed_tests": len(failed), "tests": len(results), "by_compiler": by_compiler,
        "vlens": vlens, "isas": isas, "shrunk_case": smallest, "time_to_detection_s": first,
        "run_s": round(run_s, 1), "build_s": round(build_s, 1), "expected_minimal": meta.get("expected-minimal", ""),
        "missed_before": meta.get("missed-before", ""),
        "pytest": cp.last_line() or cp.stderr[-300:],
    }


def _by_compiler(results: list[dict[str, Any]], compilers: Mapping[str, tuple[str, ...]] | None
                 ) -> dict[str, list[int]]:
    """compiler -> [failed tests, tests] of one mutant's run.  A run with one compiler has ids that
    name none: its tests are that compiler's (the one of ``compilers``, else the default)."""
    single = next(iter(compilers)) if compilers else default_compiler()
    out: dict[str, list[int]] = {}
    for r in results:
        tid = parse_id(r["nodeid"])
        if tid is None:
            continue
        row = out.setdefault(tid.compiler or single, [0, 0])
        row[0] += r["outcome"] in ("failed", "error")
        row[1] += 1
    return out


def _merged(saved: Path, rows: list[dict[str, Any]], meta: dict[str, Any],
            order: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``--only``: the re-run rows replace theirs in the saved table; the other mutants' rows stay."""
    if not saved.exists():
        return rows, meta
    old = json.loads(saved.read_text())
    fresh = {r["mutant"]: r for r in rows}
    kept = {r["mutant"]: r for r in old.get("rows", []) if r["mutant"] not in fresh}
    merged = [r for n in order for r in [fresh.get(n) or kept.get(n)] if r is not None]
    note = f"{', '.join(fresh)} re-run with --only ({meta['machine']}, {meta['wall']})"
    return merged, {**old.get("meta", {}), "re-run": note}


def table(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = ["# Planted bugs: detection", "",
             "Regenerate with `.venv/bin/rvvdiff mutants run` (every mutant) or `--only NAME`.", "",
             *[f"- {k}: {v}" for k, v in meta.items()], "",
             "The last column, where filled, says why the strategies before the loop-size audit (cases/loops.py)",
             "missed the bug: that planted bug shows the gap is closed.", "",
             "| mutant | class | caught | per compiler (failed / tests) | VLENs | ISA builds | shrunk case | first detection "
             "| run | expected minimal | missed by the earlier strategy |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        caught = {True: f"yes ({r.get('failed_tests')}/{r.get('tests')} tests)", False: "**NO**",
                  None: r.get("note", "?")}[r["caught"]]
        ttd = r.get("time_to_detection_s")
        per = ", ".join(f"{c} {'**' if not f else ''}{f}/{n}{'**' if not f else ''}"
                        for c, (f, n) in sorted(r.get("by_compiler", {}).items()))
        lines.append(f"| `{r['mutant']}` | {r['class']} | {caught} | {per} | {' '.join(map(str, r.get('vlens', [])))} | "
                     f"{' '.join(r.get('isas', []))} | {r.get('shrunk_case', '')} | "
                     f"{'' if ttd is None else f'{ttd:.1f} s'} | {r.get('run_s', '')} s | {r.get('expected_minimal', '')} | "
                     f"{r.get('missed_before', '')} |")
    return "\n".join(lines) + "\n"


def detection(cat: dict[str, mutants.Mutant], only: list[str] | None, *, max_examples: int | None, out: Path,
              report_dir: Path, timeout: float, compilers: Mapping[str, tuple[str, ...]] | None) -> int:
    """``rvvdiff mutants run``: each mutant of ``only`` (default: all of ``cat``) detected, the table
    written to ``out`` (merged into the saved one when ``only`` names some); the command's exit status."""
    names = only or list(cat)
    unknown = [n for n in names if n not in cat]
    if unknown:
        print(f"rvvdiff mutants: unknown mutant(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    work = report_dir
    rows = []
    t0 = time.perf_counter()
    for n in names:
        row = detect(cat[n], max_examples=max_examples, out=work, timeout=timeout, compilers=compilers)
        print(f"{n}: caught={row['caught']} vlens={row.get('vlens')} shrunk={row.get('shrunk_case')} "
              f"first={row.get('time_to_detection_s')} run={row.get('run_s')}s", flush=True)
        rows.append(row)
    src = resolve(None)  # named by label and commit: a committed table names no path of the machine it ran on
    meta = {"machine": f"{os.uname().nodename}, {os.cpu_count()} cores",
            "ggml": f"{src.label} (ggml {src.version}, commit {src.commit})",
            "examples per test": max_examples or "default",
            **({"compilers": AXIS["compilers"].write(compilers)} if compilers else {}),
            "wall": f"{time.perf_counter() - t0:.0f} s"}
    rows, meta = _merged(out.with_suffix(".json"), rows, meta, list(cat)) if only else (rows, meta)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table(rows, meta))
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"wrote {out}")
    return 0 if all(r["caught"] for r in rows) else 1


def audit(runs: int, first_seed: int, pytest_args: list[str], out: Path) -> int:
    """``rvvdiff audit``: the full suite ``runs`` times from Hypothesis seed ``first_seed`` on; the table written
    to ``out``; the command's exit status."""
    rows = []
    for i in range(runs):
        seed = first_seed + i
        rdir = work_dir() / "reports" / "audit" / f"seed{seed}"
        cp = run_suite(["cases", "-n", "auto", *WHOLE.pytest_args(), f"--hypothesis-seed={seed}", *pytest_args,
                        "-p", "no:cacheprovider", "-q"], report_dir=rdir, output="capture", timeout=4 * 3600).check_timeout()
        results = list(cp.results.values())
        bad = [r for r in results if r["outcome"] in ("failed", "error", "xpassed")]
        rows.append({"seed": seed, "wall_s": round(cp.seconds), "tests": len(results),
                     "unexplained": [(r["nodeid"], r["reason"]) for r in bad],
                     "known": sum(r["outcome"] == "xfailed" for r in results),
                     "pytest": cp.last_line()})
        print(f"seed {seed}: {len(bad)} unexplained failures; {rows[-1]['pytest']}", flush=True)
    lines = ["# False-positive audit", "",
             "The full suite (`--vlen all --isa all --rvv-stress both`) on the unmodified pinned tree, once per "
             "Hypothesis seed; every failure that is not a listed known failure is shown. Target: none.",
             "Regenerate with `.venv/bin/rvvdiff audit --runs N`.", "",
             "| seed | tests | known failures (xfail) | unexplained failures | wall | pytest |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['seed']} | {r['tests']} | {r['known']} | {len(r['unexplained'])} | {r['wall_s']} s | {r['pytest']} |")
    for r in rows:
        for nodeid, reason in r["unexplained"]:
            lines.append(f"\n- seed {r['seed']}: `{nodeid}`: {reason}")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return 0 if not any(r["unexplained"] for r in rows) else 1
