"""``rvvdiff fixes``: a verified patch for every finding, checked against any tree it applies to.

``harness/data/fixes/<name>.patch`` fixes one finding of docs/findings.md (header: ``rvvdiff fix:`` title,
``finding``, ``functions``, ``tests``, ``bench``, ``vector-path``; then the diff, llama.cpp paths,
``patch -p1`` from a llama.cpp root, ``-p2`` from a ggml repository: harness/ggml/patches.py), and
``harness/data/fixes/<name>.md`` is its upstream-ready report.  The entries of known_failures.toml that name
the fix (``fix = "<name>"``) are the finding's expected failures.

``rvvdiff fixes list [--ggml-src TREE]``
    each fix and where it stands on the tree: applies, already in the tree, or no longer applies
    (and then whether the buggy code is still there -- the patch needs rebasing -- or changed:
    fixed upstream or moved).

``rvvdiff fixes check [NAME ...] [--ggml-src TREE] [--full] [--no-bench] [pytest options]``
    for each fix that applies: the PR gate (harness/commands/gate.py) with BASE = the tree and HEAD = the tree
    plus the patch, over every VLEN, ISA build and stress mode (``--vlen`` / ``--isa`` /
    ``--rvv-stress`` narrow it).  The tests that reach the change run (``--full``: every test),
    the thorough budget for those that own it and for the finding's tests.  A fix is *verified*
    when the gate blocks nothing (no regression, no failing new kernel, no uncovered change), the
    finding's tests ran, none fails on HEAD and at least one is named fixed (it failed on BASE),
    and the finding's known-failure entries apply to BASE and no longer to HEAD.  Then the speed:
    the largest call of each ``bench`` test (drawn on the patched tree) is timed inside the kernel
    server on both builds, alternately, the minimum of several rounds of repeated calls.

``rvvdiff fixes bench [NAME ...] [--ggml-src TREE] [pytest options]``
    only the speed, as ``check`` measures it (run it on a quiet machine).

``rvvdiff fixes check --together [--ggml-src TREE] [pytest options]``
    every fix that applies, applied together; the whole suite (every VLEN, ISA build, stress mode)
    with the known failures applied must pass with no expected failure left and no entry applying.

Reports: ``reports/fixes/summary.md`` and ``fixes.json``; per fix the gate's reports under
``reports/fixes/<name>/``.  Exit status: 0 when every fix checked is verified (or the tree already
has it), 1 when one fails its verification, 3 when none failed but one could not be checked (it
no longer applies, the selection does not reach the finding, or its timing failed).
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import json
import os
import pickle
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.build.builds import ensure_built
from harness.commands import gate
from harness.commands.bench import collect
from harness.commands.runner import read_results, run_suite
from harness.core import settings
from harness.core.config import DATA_DIR, ISA_BUILDS, PROJECT_ROOT
from harness.core.errors import UnknownName
from harness.core.proc import own_session_env
from harness.emulators import pool
from harness.emulators.qemu import qemu
from harness.ggml import known, patches
from harness.ggml.source import GgmlSource, resolve

FIXES_DIR = DATA_DIR / "fixes"


def fixes_dir() -> Path:
    """``$RVVDIFF_FIXES_DIR`` if set (the project's tests use their own), else ``harness/data/fixes/``."""
    return settings.path("FIXES_DIR") or FIXES_DIR

#: The main job's matrix: every VLEN, ISA build, stress mode (narrowed by the user's options).
MATRIX = ["--vlen", "all", "--isa", "all", "--rvv-stress", "both"]
BENCH_EXAMPLES = 100  # examples per bench test: enough to draw the sizes real models use
BENCH_ROUNDS = 5  # alternating before / after measurements; the minimum of each counts
BENCH_SECONDS = 0.02  # target time of one measurement (repeated calls inside the server)


class Fix(patches.Patch):
    @property
    def title(self) -> str:
        return self.meta.get("rvvdiff fix", self.name)

    @property
    def report(self) -> Path:
        return self.patch.with_suffix(".md")

    @functools.cached_property
    def entries(self) -> list[known.Known]:
        return [e for e in known.load() if e.fix == self.name]

    @functools.cached_property
    def tests(self) -> list[str]:
        """The finding's tests: its known-failure entries' globs and the header's ``tests``."""
        own = [t.strip() for t in self.meta.get("tests", "").split(",") if t.strip()]
        return list(dict.fromkeys([e.test for e in self.entries] + own))

    @property
    def bench(self) -> list[str]:
        return [t.strip() for t in self.meta.get("bench", "").split(",") if t.strip()]

    def is_finding_test(self, nodeid: str) -> bool:
        return any(fnmatch.fnmatchcase(nodeid, g) or nodeid.startswith(g) for g in self.tests)


def catalogue() -> dict[str, Fix]:
    return patches.catalogue(fixes_dir(), Fix)  # type: ignore[return-value]


def select(names: list[str]) -> list[Fix]:
    cat = catalogue()
    unknown = [n for n in names if n not in cat]
    if unknown:
        raise UnknownName(f"no fix {', '.join(unknown)}; known: {', '.join(cat) or '(none)'} (in {fixes_dir()})")
    return [cat[n] for n in names] if names else list(cat.values())


# ------------------------------------------------------------------ where a fix stands on a tree


@dataclass
class Standing:
    fix: str
    state: str  # applies, applied, conflict
    detail: str
    entries: list[str] = field(default_factory=list)  # "#n applies (fingerprint)" ...

    def describe(self) -> str:
        words = {"applies": "applies", "applied": "already in the tree",
                 "conflict": "no longer applies"}[self.state]
        return f"{self.fix}: {words}" + (f" -- {self.detail}" if self.detail else "")


def standing(fix: Fix, source: GgmlSource) -> Standing:
    state, said = patches.applies(fix, source)
    verdicts = [e.judge(source) for e in fix.entries]
    entries = [f"#{v.entry.number} {'applies' if v.applies else 'does not apply'} ({v.why})" for v in verdicts]
    detail = ""
    if state == "conflict":
        if any(v.applies for v in verdicts):
            detail = ("the buggy code is still there (a known-failure entry's fingerprint matches) but the patch "
                      "does not apply: the code around it moved; rebase the patch")
        else:
            detail = ("the functions the finding names changed or are gone: the bug may be fixed upstream or "
                      f"moved; run the finding's tests to see ({', '.join(fix.tests)})")
        detail += f". patch says: {' '.join(said.split())[:300]}"
    elif state == "applies" and ("offset" in said or "fuzz" in said):
        detail = f"with {' '.join(said.split())[:200]}"
    return Standing(fix.name, state, detail, entries)


# ------------------------------------------------------------------ one fix: the gate, then the speed


def verify(fix: Fix, source: GgmlSource, out: Path, pytest_args: list[str], *, full: bool, workers: str) -> dict[str, Any]:
    patched = patches.apply([fix], source, "fix")
    v = gate.gate(patched.root, str(source.root), f"the tree without {fix.name}", out, pytest_args,
                  changed_only=not full, also=tuple(fix.tests), workers=workers)
    gate.write(v, out)
    ran = {n: r for n, r in (read_results(out / "head") or {}).items()  # the finding's tests that ran to a verdict
           if fix.is_finding_test(n) and gate.state(r) in ("pass", "fail")}
    failing = sorted(n for n, r in ran.items() if gate.state(r) == "fail")
    fixed = [ln.nodeid for ln in v.of("fixed")]
    named = [n for n in fixed if fix.is_finding_test(n)]
    entries_base = {e.number: e.judge(source).applies for e in fix.entries}
    entries_head = {e.number: e.judge(patched).applies for e in fix.entries}
    problems = [f"{ln.list}: {ln.describe()}" for k in ("regression", "new kernel failing") for ln in v.of(k)]
    problems += [f"uncovered change: {n}" for n in v.uncovered]
    problems += [f"finding test still fails on the patched tree: {n}" for n in failing]
    problems += [f"known-failure entry #{n} still applies to the patched tree (the patch leaves its functions as they "
                 "were)" for n, a in entries_head.items() if a and entries_base.get(n)]
    inconclusive = []
    if not problems:
        if not [n for n, r in ran.items() if gate.state(r) == "pass"]:
            inconclusive.append("none of the finding's tests ran in this selection")
        elif not named:
            inconclusive.append("none of the finding's tests failed on the tree without the fix in this selection "
                                "(the selection does not reach the bug, or the tree does not have it)")
    result = "failed" if problems else "inconclusive" if inconclusive else "verified"
    return {"result": result, "problems": problems + inconclusive, "tree": str(patched.root),
            "finding_tests_ran": len(ran), "fixed": named, "also_fixed": [n for n in fixed if n not in named],
            "pre_existing": len(v.of("pre-existing")), "entries_base": entries_base, "entries_head": entries_head,
            "changes": [c["name"] for c in v.changes], "seconds": v.seconds,
            "runs": {k: {"tests": r["tests"], "ran": len(r["ran"]), "seconds": r["seconds"]} for k, r in v.runs.items()},
            "summary": str(out / "gate" / "summary.md")}


def bench(fix: Fix, source: GgmlSource, out: Path, pytest_args: list[str]) -> list[dict[str, Any]]:
    """Per bench test (VLEN x ISA build of the selection, stress off): the largest call drawn on the
    patched tree, timed inside the server on the tree and on the patched tree."""
    if not fix.bench:
        return []
    patched = patches.apply([fix], source, "fix")
    log = out / "bench" / "examples.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    args = [*MATRIX, *pytest_args, "--rvv-stress", "off", "--ggml-src", str(patched.root)]
    ids = [i for i in collect(args) if any(i.startswith(b) for b in fix.bench)]
    if not ids:
        raise RuntimeError(f"{fix.name}: no test matches its bench prefixes {fix.bench} in this selection")
    cp = run_suite([*ids, "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *args, "--max-examples", str(BENCH_EXAMPLES),
                    "--bench-log", str(log), "--example-db", str(out / "bench" / "db"), "--known-failures", "ignore"],
                   report_dir=out / "bench" / "run", output="capture", env=own_session_env())
    if cp.exit not in (0, 1) or not log.is_file():
        raise RuntimeError(f"the bench run of {fix.name} did not complete (pytest exit {cp.exit}):\n"
                           f"{cp.stdout[-2000:]}{cp.stderr[-2000:]}")
    rows = []
    pure = [json.loads(x) for x in log.read_text().splitlines() if '"kind": "pure"' in x]
    for p in pure:
        call = pickle.loads(Path(p["request"]).read_bytes())
        isa = ISA_BUILDS[call["isa"]]
        servers = {name: pool.server(ensure_built(src, isa), call["vlen"], False, qemu())
                   for name, src in (("before", source), ("after", patched))}
        single = max(p["single_s"], 1e-7)
        repeat = max(3, min(2000, int(BENCH_SECONDS / single)))
        times: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(BENCH_ROUNDS):
            for name, srv in servers.items():
                r = srv.call(call["kernel"], call["ip"], call["fp"], call["bufs"], repeat=repeat, timeout=600)
                times[name].append(r.kernel_ns * 1e-9 / repeat)
        before, after = min(times["before"]), min(times["after"])
        rows.append({"nodeid": p["nodeid"], "vlen": call["vlen"], "isa": call["isa"], "kernel": call["kernel"],
                     "ip": call["ip"], "bytes": p["bytes"], "repeat": repeat,
                     "before_us": before * 1e6, "after_us": after * 1e6, "ratio": after / before if before else None,
                     "spread": max(statistics.pstdev(t) / min(t) for t in times.values() if min(t) > 0)})
    return rows


# ------------------------------------------------------------------ all fixes together


def combined(fixes: list[Fix], source: GgmlSource) -> tuple[GgmlSource, list[Fix], list[Fix]]:
    """The tree with every fix that applies to ``source`` applied, those fixes, and those left out."""
    ok = [f for f in fixes if patches.applies(f, source)[0] == "applies"]
    return patches.apply(ok, source, "fix", name="all"), ok, [f for f in fixes if f not in ok]


def together(fixes: list[Fix], source: GgmlSource, out: Path, pytest_args: list[str], workers: str) -> dict[str, Any]:
    """Every applicable fix at once; the whole suite with the known failures applied."""
    tree, ok, left = combined(fixes, source)
    applying = [v for v in known.judge(known.load(), tree) if v.applies]
    out.mkdir(parents=True, exist_ok=True)
    run = run_suite(["cases", "-p", "no:cacheprovider", *MATRIX, *pytest_args, "--ggml-src", str(tree.root),
                     "--junitxml", str(out / "run" / "junit.xml"), "-n", workers], report_dir=out / "run",
                    env=own_session_env(), echo=f"\n=== rvvdiff fixes: all {len(ok)} applicable fixes together ({tree.root})")
    code, seconds, counts = run.exit, run.seconds, dict(run.counts())
    problems = []
    if code != 0:
        problems.append(f"pytest exit status {code} (report: {out / 'run' / 'summary.md'})")
    if counts.get("xfailed"):
        problems.append(f"{counts['xfailed']} expected failures left")
    problems += [f"known-failure entry #{v.entry.number} still applies ({v.why}): {v.entry.reason}" for v in applying]
    return {"result": "failed" if problems else "verified", "problems": problems, "fixes": [f.name for f in ok],
            "left_out": [f.name for f in left], "tree": str(tree.root), "outcomes": counts,
            "seconds": seconds}


# ------------------------------------------------------------------ report and command line


def summary_md(source: GgmlSource, standings: list[Standing], checks: dict[str, dict[str, Any]],
               benches: dict[str, list[dict[str, Any]]], together_run: dict[str, Any] | None, argv: list[str]) -> str:
    lines = ["# rvvdiff fixes", "", f"Tree: {source.describe()}", f"Command: `rvvdiff fixes {' '.join(argv)}`",
             f"Machine: {os.uname().nodename}, {os.cpu_count()} cores", ""]
    if together_run:
        t = together_run
        lines += [f"## All fixes together: {t['result']}", "",
                  f"{len(t['fixes'])} fixes applied ({', '.join(t['fixes'])}); left out (do not apply): "
                  f"{', '.join(t['left_out']) or 'none'}. Outcomes: "
                  + ", ".join(f"{v} {k}" for k, v in sorted(t["outcomes"].items())) + f"; {t['seconds']:.0f} s.", ""]
        lines += [f"- {p}" for p in t["problems"]] + [""]
    lines += ["## Per fix", "", "| fix | on this tree | verification | finding tests fixed | other changes | time |",
              "|---|---|---|---|---|---|"]
    for s in standings:
        c = checks.get(s.fix)
        if c is None:
            lines.append(f"| `{s.fix}` | {s.describe().split(': ', 1)[1]} | not run | | | |")
            continue
        lines.append(f"| `{s.fix}` | {s.state} | **{c['result']}** | {len(c['fixed'])} of {c['finding_tests_ran']} "
                     f"ran | {len(c['also_fixed'])} also fixed, {c['pre_existing']} pre-existing (other findings) | "
                     f"{c['seconds'].get('total', 0):.0f} s |")
    for s in standings:
        c = checks.get(s.fix)
        lines += ["", f"### {s.fix}", "", s.describe(), ""] + [f"- entry {e}" for e in s.entries]
        if c:
            lines += [f"- result: **{c['result']}**; gate summary: {c['summary']}",
                      f"- changed: {', '.join(c['changes'])}",
                      "- runs: " + "; ".join(f"{k} {r['ran']} ran of {r['tests']} in {r['seconds']:.0f} s"
                                            for k, r in c["runs"].items())]
            lines += [f"- problem: {p}" for p in c["problems"]]
            lines += [f"- fixed: `{n}`" for n in c["fixed"][:40]]
            if len(c["fixed"]) > 40:
                lines.append(f"- ... and {len(c['fixed']) - 40} more fixed")
            lines += [f"- also fixed: `{n}`" for n in c["also_fixed"]]
        rows = benches.get(s.fix)
        if rows:
            lines += ["", "| bench test | VLEN | ISA | call (ip) | before (us/call) | after (us/call) | after / before |",
                      "|---|---|---|---|---|---|---|"]
            for r in sorted(rows, key=lambda r: (r["nodeid"].split("[")[0], r["isa"], r["vlen"])):
                lines.append(f"| `{r['nodeid'].split('::')[-1].split('-vlen')[0]}]` | {r['vlen']} | {r['isa']} | {r['ip']} | "
                             f"{r['before_us']:.2f} | {r['after_us']:.2f} | {r['ratio']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff fixes", allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("list", "check", "bench"),
                   help="list: where each fix stands on the tree; check: verify (and time) each; bench: only time each")
    p.add_argument("names", nargs="*", help="fixes (default: all in harness/data/fixes/)")
    p.add_argument("--ggml-src", help="the tree to check against (default: the pinned tree)")
    p.add_argument("--full", action="store_true", help="run every test on each patched tree, not only those reaching the change")
    p.add_argument("--no-bench", action="store_true", help="skip the before / after timing")
    p.add_argument("--together", action="store_true", help="all applicable fixes at once, the whole suite")
    p.add_argument("--out", type=Path, default=PROJECT_ROOT / "reports" / "fixes")
    p.add_argument("--workers", default=settings.get("WORKERS") or "auto")
    a, pytest_args = p.parse_known_args(argv)
    source = resolve(a.ggml_src)
    fixes = select(a.names)
    standings = [standing(f, source) for f in fixes]
    for s in standings:
        print(s.describe())
        for e in s.entries:
            print(f"    entry {e}")
    if a.action == "list":
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    checks: dict[str, dict[str, Any]] = {}
    benches: dict[str, list[dict[str, Any]]] = {}
    bench_errors: dict[str, str] = {}
    together_run = None
    if a.together:
        together_run = together(fixes, source, a.out / "together", pytest_args, a.workers)
    else:
        for f, s in zip(fixes, standings):
            if s.state != "applies":
                continue
            if a.action == "check":
                checks[f.name] = verify(f, source, a.out / f.name, [*MATRIX, *pytest_args], full=a.full,
                                        workers=a.workers)
                print(f"rvvdiff fixes: {f.name}: {checks[f.name]['result']}", flush=True)
            if not a.no_bench and checks.get(f.name, {}).get("result") != "failed":
                try:
                    benches[f.name] = bench(f, source, a.out / f.name, pytest_args)
                except (RuntimeError, pool.KernelFailure) as e:  # the timing is lost, not the verdict
                    bench_errors[f.name] = str(e)
                    print(f"rvvdiff fixes: {f.name}: the timing failed: {e}", file=sys.stderr)
    md = summary_md(source, standings, checks, benches, together_run, argv)
    md += "".join(f"\nThe timing of {n} failed: {e}\n" for n, e in bench_errors.items())
    (a.out / "summary.md").write_text(md)
    (a.out / "fixes.json").write_text(json.dumps({"tree": source.describe(), "standings": [s.__dict__ for s in standings],
                                                  "checks": checks, "bench": benches, "bench_errors": bench_errors,
                                                  "together": together_run},
                                                 indent=1, default=str))
    print("\n" + md)
    results = [c["result"] for c in checks.values()] + ([together_run["result"]] if together_run else [])
    if "failed" in results:
        return 1
    if "inconclusive" in results or bench_errors or any(s.state == "conflict" for s in standings):
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
