"""``rvvdiff gate HEAD --base BASE``: did this change make the RVV kernels worse?

The gate tests two trees with the same suite and judges HEAD against BASE:

1. **The diff** (harness/ggml/changes.py): the functions and macros that differ between BASE and
   HEAD as the ISA builds compile them, and the files the reader does not follow.
2. **HEAD** runs the suite (``--known-failures ignore``: raw outcomes) with ``--changes``: each
   test that owns a changed function (harness/ggml/changes.py: reaches it from its own entry points,
   not through another tested kernel) runs at the thorough budget, the other tests at the
   default (``--changed-only``: only the tests that reach a change).  Its failing examples land in an example database.
3. **BASE** runs every test that failed on HEAD in replay mode (the same shrunk examples from a
   copy of HEAD's database, and the fixed cases; nothing new is drawn), and every test that
   owns a change at the default budget (HEAD's failing examples first, then new draws: what
   BASE got wrong that HEAD gets right).  The tests that only reach a change through another
   kernel are not rerun on BASE: a fix shows in the tests of the kernel it fixes.
4. **HEAD again**, in replay mode, for the tests that failed on BASE and passed on HEAD: BASE's
   shrunk example is tried on HEAD before a fix is called a fix.

Each result lands in one list:

* **regression** - fails on HEAD, passes on BASE (or fails there another way) - blocks;
* **new kernel failing** - fails on HEAD in a kernel BASE does not have (not in that tree, or
  BASE cannot build / express that ISA build) - blocks;
* **pre-existing** - fails on both the same way (same comparison, or same kind of failure) -
  reported, with the known-failures entry that lists it;
* **fixed** - fails on BASE, passes on HEAD, BASE's example included - reported, with the
  known-failures entry to remove.

A changed RVV function or macro that no collected test reaches, or whose selected tests all
ended without a verdict on HEAD (skipped, or their ISA build failed), is an **uncovered change**
and blocks too (``--allow-uncovered NAME`` accepts one, for a change a reviewer judged harmless).
The exit status is 1 exactly when something blocks, 0 otherwise, 2 when the gate could not judge
(bad arguments, a run that did not complete).  ``<out>/gate/summary.md`` (appended to
``$GITHUB_STEP_SUMMARY``), ``summary.html`` and ``gate.json`` lead with the lists; each run's own
reports are in ``<out>/head``, ``<out>/base`` and ``<out>/head-replay``.

A failure found on both trees with different shrunk inputs is judged by HEAD's example: if it
fails on BASE the failure is pre-existing, even when HEAD also fails elsewhere for a new reason
that the same test's minimal example does not show (Hypothesis reports one failure per test).
"""

from __future__ import annotations

import argparse
import fnmatch
import html
import json
import os
import re
import shlex
import shutil
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.commands.runner import run_suite
from harness.core import settings
from harness.core.config import PROJECT_ROOT
from harness.core.errors import RvvdiffError
from harness.core.proc import own_session_env
from harness.ggml import changes, gitrev, known
from harness.ggml.source import resolve
from harness.report.html import cells, page
from harness.report.ids import parse_id, replay_argv, slug

ROOT = PROJECT_ROOT
LISTS = ("regression", "new kernel failing", "pre-existing", "fixed")
#: What the gate runs unless the pytest options given after HEAD say otherwise (later options win).
DEFAULT_PYTEST = ["--vlen", "all", "--isa", "all", "--rvv-stress", "both"]


class GateError(RvvdiffError, RuntimeError):
    """The gate cannot judge: the message says why and what to do."""


# ------------------------------------------------------------------ one pytest run


@dataclass
class Run:
    name: str  # "head", "base", "head-replay"
    tree: str
    report_dir: Path
    db: Path
    seconds: float = 0.0
    exit: int | None = None
    results: dict[str, dict[str, Any]] = field(default_factory=dict)

    def case(self, nodeid: str) -> dict[str, Any] | None:
        """The failure report of ``nodeid`` in this run (case.json), if one was written."""
        p = self.report_dir / "cases" / slug(nodeid) / "case.json"
        return json.loads(p.read_text()) if p.is_file() else None

    def replay(self, nodeid: str) -> str:
        """The command that replays ``nodeid`` on this run's tree with its saved examples."""
        argv = replay_argv(nodeid, ggml_src=self.tree, known_failures="ignore", example_db=str(self.db))
        return f"cd {shlex.quote(str(ROOT))} && .venv/bin/{shlex.join(argv)}"


def _pytest(run: Run, extra: list[str], pytest_args: list[str], workers: str) -> Run:
    """Run the suite as ``run`` says; stream its output; read its results."""
    args = ["cases", "-p", "no:cacheprovider", *DEFAULT_PYTEST, *pytest_args, "--ggml-src", run.tree,
            "--known-failures", "ignore", "--example-db", str(run.db), "--junitxml", str(run.report_dir / "junit.xml"),
            *extra]
    if workers != "0" and not any(x in ("-n", "--numprocesses") or x.startswith(("-n", "--numprocesses="))
                                  for x in pytest_args):
        args += ["-n", workers]
    done = run_suite(args, report_dir=run.report_dir, env=own_session_env(), clean=True,
                     echo=f"\n=== rvvdiff gate: {run.name} ({run.tree})")
    run.exit, run.seconds = done.exit, done.seconds
    if run.exit not in (0, 1, 5):  # 5: nothing collected (a plan whose tests this selection lacks)
        raise GateError(f"the {run.name} run did not complete (pytest exit status {run.exit}); its output is above")
    run.results = done.results
    return run


# ------------------------------------------------------------------ outcomes


def state(r: dict[str, Any] | None, *, error: str = "fail") -> str:
    """fail, pass, absent (not in the tree), unrunnable (the build or emulator cannot run it), none;
    a set-up error (the build failed) is ``error`` ("fail" on HEAD: the change broke or kept
    broken a build; "unrunnable" where BASE is asked about a failure HEAD has)."""
    if r is None:
        return "none"
    o = r["outcome"]
    if o == "error":
        return error
    if o in ("failed", "xpassed"):
        return "fail"
    if o in ("passed", "xfailed"):
        return "pass"
    reason = r.get("reason", "")
    return "absent" if "not in this tree" in reason else "unrunnable"


def failure_kind(r: dict[str, Any], case: dict[str, Any] | None) -> str:
    """How a test failed, without the numbers: the comparison that failed, a build error, or the
    exception and the first words of its message (a crash, a hang, a write outside a buffer)."""
    if r["outcome"] == "error":
        return "build or set-up error"
    comp = (case or {}).get("comparison")
    if comp:  # the comparison's name without the element it found worst (s[2, 5] and s[2, 0] are one check)
        return f"{comp.get('mode')} comparison {_numberless(str(comp.get('name')))}"
    reason = r.get("reason", "")
    head, _, rest = reason.partition(":")
    return f"{head.strip()}: {' '.join(_numberless(rest).split()[:8])}".strip(": ")


def _numberless(text: str) -> str:
    """``text`` without its indices and numbers (not the digits of a name: ``q8_K`` stays)."""
    text = re.sub(r"\[[^\]]*\]", "[...]", text)
    return re.sub(r"\b0x[0-9a-f]+|(?<![\w.])[-+]?\d[\d.e+-]*", "#", text).strip()


@dataclass
class Line:
    list: str
    nodeid: str
    test: str
    kernel: str
    vlen: int | None
    isa: str
    stress: bool | None
    why: str
    replay: dict[str, str]
    known: list[str] = field(default_factory=list)

    def describe(self) -> str:
        where = (f"{self.kernel or '-'}, VLEN {self.vlen}, {self.isa}, stress {'on' if self.stress else 'off'}"
                 if self.vlen else "the build" if self.nodeid.startswith("ISA build") else "not a differential test")
        return f"`{self.nodeid}` ({where}): {self.why}"


def _line(kind: str, nodeid: str, why: str, runs: dict[str, Run], entries: list[known.Known]) -> Line:
    tid = parse_id(nodeid)
    replay = {n: runs[n].replay(nodeid) for n in ("head", "base") if n in runs}
    return Line(kind, nodeid, nodeid.split("::")[-1].split("[")[0], tid.kernel if tid else "",
                tid.vlen if tid else None, tid.isa if tid else "", tid.stress if tid else None, why, replay,
                [f"#{e.number} {e.test}: {e.reason}" for e in entries if e.matches(nodeid)])


def classify(head: Run, base: Run | None, again: Run | None,
             entries_head: list[known.Known], entries_base: list[known.Known]) -> list[Line]:
    """The four lists, from the three runs' results (see the module docstring)."""
    runs = {"head": head, **({"base": base} if base else {})}
    out: list[Line] = []
    base_results = base.results if base else {}
    for nodeid in sorted(set(head.results) | set(base_results)):
        h, b = head.results.get(nodeid), base_results.get(nodeid)
        hs = state(h)
        # BASE's build error explains nothing about a wrong result on HEAD (BASE cannot run it);
        # it is a failure next to HEAD's build error (pre-existing) or HEAD's pass (fixed)
        bs = state(b, error="unrunnable" if hs == "fail" and h["outcome"] != "error" else "fail")
        if hs == "fail":
            kind = failure_kind(h, head.case(nodeid))
            # (for a build error, which build and its first error)
            hk = kind + (f" ({h['reason'][:300]})" if h["outcome"] == "error" and h.get("reason") else "")
            if bs == "absent":
                out.append(_line("new kernel failing", nodeid, f"HEAD: {hk}; BASE does not have it ({b['reason']})",
                                 runs, entries_head))
            elif bs == "unrunnable":
                out.append(_line("new kernel failing", nodeid, f"HEAD: {hk}; BASE cannot run it ({b['reason']})",
                                 runs, entries_head))
            elif bs == "fail":
                bk = failure_kind(b, base.case(nodeid) if base else None)
                if bk == kind:
                    out.append(_line("pre-existing", nodeid, f"both: {hk}", runs, entries_base))
                else:
                    out.append(_line("regression", nodeid, f"HEAD: {hk}; BASE fails another way: {bk}",
                                     runs, entries_head))
            elif bs == "pass":
                out.append(_line("regression", nodeid, f"HEAD: {hk}; HEAD's example passes on BASE",
                                 runs, entries_head))
            else:
                out.append(_line("regression", nodeid, f"HEAD: {hk}; not replayed on BASE", runs,
                                 entries_head))
        elif hs == "pass" and bs == "fail":
            bk = failure_kind(b, base.case(nodeid) if base else None)
            a = again.results.get(nodeid) if again else None
            if state(a) == "fail":
                out.append(_line("pre-existing", nodeid,
                                 f"BASE: {bk}; HEAD's own examples passed, BASE's example fails on HEAD too",
                                 runs, entries_base))
            else:
                out.append(_line("fixed", nodeid, f"BASE: {bk}; passes on HEAD, BASE's example included",
                                 runs, entries_base))
    # A build that fails on BASE and builds on HEAD is a fix of its own: its tests are skipped on
    # BASE (no line above), so the build gets one.
    broken = {name: _broken_builds(r.results) for name, r in runs.items()}
    built_on_head = {(parse_id(n).isa if parse_id(n) else "") for n, r in head.results.items()
                     if r["outcome"] in ("passed", "failed")}
    for isa, why in sorted(broken.get("base", {}).items()):
        if isa not in broken["head"] and isa in built_on_head:
            cmd = {n: f"cd {shlex.quote(str(ROOT))} && .venv/bin/rvvdiff build --ggml-src {shlex.quote(r.tree)} "
                      f"--isa {isa}" for n, r in runs.items()}
            out.append(Line("fixed", f"ISA build {isa}", "", "", None, isa, None,
                            f"does not build on BASE ({why[:300]}); builds on HEAD", cmd))
    return out


def _broken_builds(results: dict[str, dict[str, Any]]) -> dict[str, str]:
    """ISA build -> the error of a run's build that failed (its first test carries it)."""
    out = {}
    for n, r in results.items():
        tid = parse_id(n)
        if r["outcome"] == "error" and tid and "ISA build" in r.get("reason", "") and "failed" in r.get("reason", ""):
            out.setdefault(tid.isa, r["reason"])
    return out


# ------------------------------------------------------------------ the gate


def untested(cov: dict[str, Any], results: dict[str, dict[str, Any]]) -> list[str]:
    """Changed RVV code whose covering tests were selected on HEAD but none of them ran to a
    verdict (every one skipped, or its build failed): covered on paper, tested by nothing."""
    out = []
    for c in cov.get("changes", []):
        if not c["rvv"] or c["kind"] == "removed":
            continue
        selected = [t for t, names in cov.get("covers", {}).items() if c["name"] in names and t in results]
        if selected and not any(results[t]["outcome"] in ("passed", "failed") for t in selected):
            out.append(c["name"])
    return out


@dataclass
class GateVerdict:
    head: str
    base: str
    lines: list[Line]
    changes: list[dict[str, Any]]
    covers: dict[str, list[str]]
    owns: dict[str, list[str]]
    uncovered: list[str]
    accepted: list[str]
    outside: list[str]
    notes: list[str]
    seconds: dict[str, float]
    runs: dict[str, dict[str, Any]]

    def of(self, kind: str) -> list[Line]:
        return [ln for ln in self.lines if ln.list == kind]

    @property
    def blocking(self) -> bool:
        return bool(self.of("regression") or self.of("new kernel failing") or self.uncovered)


def _groups(nodeids: list[str]) -> list[str]:
    """Test ids folded over the target part: ``test_vec_dot[q4_0-*] (12)``."""
    n: dict[str, int] = defaultdict(int)
    for i in nodeids:
        tid = parse_id(i)
        key = (f"{tid.test}[{tid.kernel}-*]" if tid.kernel else f"{tid.test}[*]") if tid else i
        n[key] += 1
    return [f"{k} ({v})" for k, v in sorted(n.items())]


def summary_md(v: GateVerdict) -> str:
    status = "BLOCKS" if v.blocking else "passes"
    out = [f"# rvvdiff gate: {status}", "",
           f"- HEAD: {v.head}", f"- BASE: {v.base}",
           "- " + ", ".join(f"{k}: {len(v.of(k))}" for k in LISTS) + f", uncovered changes: {len(v.uncovered)}",
           "- time: " + ", ".join(f"{k} {s:.0f} s" for k, s in v.seconds.items()), ""]
    titles = {"regression": "Regressions (block)", "new kernel failing": "New kernels failing (block)",
              "pre-existing": "Pre-existing failures (do not block)", "fixed": "Fixed (do not block)"}
    for kind in LISTS:
        lines = v.of(kind)
        out += [f"## {titles[kind]}: {len(lines)}", ""]
        for ln in lines:
            out.append(f"- {ln.describe()}")
            for e in ln.known:
                out.append(f"  - known_failures.toml entry {e}" + (" — remove it" if kind == "fixed" else ""))
            if kind == "fixed" and not ln.known:
                out.append("  - no known_failures.toml entry lists it")
            for tree, cmd in ln.replay.items():
                out.append(f"  - replay on {tree.upper()}: `{cmd}`")
        out.append("")
    out += [f"## Uncovered changes (block): {len(v.uncovered)}", ""]
    by_name = {c["name"]: c for c in v.changes}
    ran = set(v.runs.get("head", {}).get("ran", ()))
    for n in v.uncovered:
        c = by_name.get(n, {})
        covering = [t for t, names in v.covers.items() if n in names]
        why = ("its tests were selected but none ran to a verdict on HEAD (skipped, or their build failed: see "
               "the HEAD run's report)" if covering and not ran.intersection(covering) else
               "no collected test reaches it; add a test (docs/architecture.md)")
        out.append(f"- `{n}` ({c.get('what')}, {c.get('kind')}, {c.get('file')}:{c.get('line')}): changed RVV code; "
                   f"{why}; or, once a reviewer judged it harmless, pass --allow-uncovered {n}")
    for n in v.accepted:
        out.append(f"- `{n}`: uncovered, accepted with --allow-uncovered")
    out += ["", f"## Changed functions and macros: {len(v.changes)}", ""]
    for c in v.changes:
        own = sorted(t for t, names in v.owns.items() if c["name"] in names and t in ran)
        other = sorted(t for t, names in v.covers.items() if c["name"] in names and t in ran and t not in own)
        parts = ([f"{len(own)} tests own it (thorough budget): " + ", ".join(_groups(own))] if own else []) + \
                ([f"{len(other)} more reach it through other tested kernels (default budget): "
                  + ", ".join(_groups(other))] if other else [])
        out.append(f"- `{c['name']}` ({c['what']}, {c['kind']}, {c['file']}:{c['line']}"
                   + (", RVV" if c["rvv"] else "") + f", builds {'/'.join(c['builds'])}): "
                   + ("; ".join(parts) if parts else "no test that ran reaches it"))
    if v.outside:
        out += ["", "Changed files the C reader does not follow (build files, other backends): "
                + ", ".join(f"`{p}`" for p in v.outside)]
    if v.notes:
        out += ["", "Reader notes (taken as not compiled): " + "; ".join(v.notes[:20])]
    out += ["", "Each run's own reports: " + ", ".join(f"{k}: `{r['report_dir']}` ({len(r['ran'])} tests ran)"
                                                    for k, r in v.runs.items()), ""]
    return "\n".join(out)


def summary_html(v: GateVerdict, md: str) -> str:
    rows = []
    for kind in (*LISTS,):
        for ln in v.of(kind):
            rows.append("<tr>" + cells("td", (
                kind, ln.nodeid, ln.kernel, ln.vlen or "", ln.isa, "on" if ln.stress else "off", ln.why,
                "\n".join(ln.known))) + "<td>" + "<br>".join(
                f"<b>{t}</b> <code>{html.escape(c)}</code>" for t, c in ln.replay.items()) + "</td></tr>")
    for n in v.uncovered:
        rows.append(f"<tr><td>uncovered change</td><td>{html.escape(n)}</td>" + "<td></td>" * 7 + "</tr>")
    head = cells("th", ("list", "test", "kernel", "VLEN", "ISA build", "stress", "why", "known failure", "replay"))
    return page("rvvdiff gate", "body{font-family:sans-serif}td{vertical-align:top;border-top:1px solid #ccc;padding:3px}"
                "code{font-size:80%}", [f"<h1>rvvdiff gate: {'BLOCKS' if v.blocking else 'passes'}</h1>",
                                        f"<table><tr>{head}</tr>{''.join(rows)}</table>",
                                        f"<h2>Summary</h2><pre>{html.escape(md)}</pre>"])


def resolve_base(head_dir: Path, base: str | None, target_branch: str | None) -> tuple[str, str]:
    """(BASE's path, how it was chosen): a directory, a revision of HEAD's checkout, or the
    merge-base of HEAD with the branch it targets."""
    if base and Path(base).is_dir():
        return str(Path(base).resolve()), f"directory {base}"
    repo = gitrev.toplevel(head_dir)
    if repo is None:
        raise GateError(f"{head_dir} is not a git checkout, so BASE must be a directory: give --base PATH"
                        + (f" ({base!r} is not a directory)" if base else ""))
    if base:
        sha = gitrev.commit(repo, base)
        how = f"revision {base} of {repo} ({gitrev.subject(repo, sha)})"
    else:
        sha, branch = gitrev.merge_base(repo, target_branch)
        how = f"merge-base of HEAD with {branch} ({gitrev.subject(repo, sha)})"
    return str(gitrev.checkout(repo, sha, "base")), how


def gate(head_dir: Path, base_dir: str, base_how: str, out: Path, pytest_args: list[str], *,
         changed_only: bool = False, allow_uncovered: tuple[str, ...] = (), also: tuple[str, ...] = (),
         workers: str = "auto") -> GateVerdict:
    """The three runs and the verdict.  ``also``: node-id globs that run on HEAD whatever they reach
    and on BASE whenever they ran on HEAD (a finding's tests, when a fix is judged)."""
    head_src, base_src = resolve(str(head_dir)), resolve(base_dir)
    g = out / "gate"
    if g.exists():
        shutil.rmtree(g)
    g.mkdir(parents=True)
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    diff = changes.diff(base_src, head_src)
    seconds["diff"] = time.perf_counter() - t0
    (g / "changes.json").write_text(json.dumps(diff.to_json(), indent=1))
    print(f"rvvdiff gate: HEAD {head_src.describe()}\n              BASE {base_src.describe()} ({base_how})\n"
          f"  {len(diff.changes)} changed functions / macros ({sum(c.rvv for c in diff.changes)} with an RVV path) "
          f"in {seconds['diff']:.1f} s", flush=True)
    for c in diff.changes:
        print(f"    {c.describe()}")

    head = _pytest(Run("head", str(head_src.root), out / "head", g / "db-head"),
                   ["--changes", str(g / "changes.json"), *(["--changed-only"] if changed_only else []),
                    *(x for a in also for x in ("--also-run", a))],
                   pytest_args, workers)
    seconds["head"] = head.seconds
    cov_path = head.report_dir / "covers.json"
    cov = json.loads(cov_path.read_text()) if cov_path.is_file() else {"covers": {}, "uncovered": [], "changes": []}

    plan = {n: "replay" for n, r in head.results.items() if state(r) == "fail"}
    named = [n for n in head.results if any(fnmatch.fnmatchcase(n, a) for a in also)]
    for n in [*cov.get("owns", {}), *named]:
        if n in head.results and state(head.results[n]) in ("pass", "fail"):
            plan[n] = "default"  # HEAD's saved examples replay first (the reuse phase)
    def planned(name: str, tree: str, tests: dict[str, str], db_from: str) -> Run:
        """Run ``tests`` (id -> budget) on ``tree`` with a copy of run ``db_from``'s example database."""
        (g / f"plan-{name}.json").write_text(json.dumps({"tests": tests}, indent=1))
        if (g / f"db-{db_from}").is_dir():
            shutil.copytree(g / f"db-{db_from}", g / f"db-{name}")
        r = _pytest(Run(name, tree, out / name, g / f"db-{name}"), ["--plan", str(g / f"plan-{name}.json")],
                    pytest_args, workers)
        seconds[name] = r.seconds
        return r

    base = again = None
    if plan:
        base = planned("base", str(base_src.root), plan, "head")
        back = {n: "replay" for n, r in base.results.items()
                if state(r) == "fail" and state(head.results.get(n)) == "pass"}
        if back:
            again = planned("head-replay", str(head_src.root), back, "base")

    entries = known.load()
    verdicts_head, verdicts_base = known.judge(entries, head_src), known.judge(entries, base_src)
    lines = classify(head, base, again, [x.entry for x in verdicts_head if x.applies],
                     [x.entry for x in verdicts_base if x.applies])
    uncovered = [n for n in cov.get("uncovered", []) if n not in allow_uncovered]
    uncovered += [n for n in untested(cov, head.results) if n not in allow_uncovered and n not in uncovered]
    seconds["total"] = time.perf_counter() - t0
    runs = {r.name: {"tree": r.tree, "report_dir": str(r.report_dir), "seconds": r.seconds, "exit": r.exit,
                     "tests": len(r.results),
                     "ran": sorted(n for n, x in r.results.items() if x["outcome"] in ("passed", "failed"))}
            for r in (head, base, again) if r}
    return GateVerdict(head_src.describe(), f"{base_src.describe()} ({base_how})", lines, cov.get("changes", []),
                   cov.get("covers", {}), cov.get("owns", {}), uncovered,
                   [n for n in cov.get("uncovered", []) if n in allow_uncovered],
                   diff.outside, diff.notes, seconds, runs)


def write(v: GateVerdict, out: Path) -> Path:
    g = out / "gate"
    md = summary_md(v)
    (g / "summary.md").write_text(md)
    (g / "summary.html").write_text(summary_html(v, md))
    (g / "gate.json").write_text(json.dumps({**asdict(v), "blocking": v.blocking}, indent=1, default=str))
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as f:
            f.write(md + "\n")
    return g / "summary.md"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="rvvdiff gate", allow_abbrev=False,
        description="Judge a HEAD tree against its BASE: regressions and failing new kernels "
        "block, pre-existing failures do not, fixes are named; the tests that reach a change run at the thorough "
        "budget. Options rvvdiff gate does not know go to pytest (e.g. --vlen 512 --isa zvfh, -k ...).")
    p.add_argument("head", help="the tree under review: a llama.cpp or ggml checkout")
    p.add_argument("--base", help="BASE: a directory, or a revision of HEAD's git checkout "
                                  "(default: the merge-base of HEAD with the branch it targets)")
    p.add_argument("--target-branch", help="the branch HEAD targets, for the default BASE (default: "
                                           "origin/$GITHUB_BASE_REF, else the first of origin/master, origin/main, master, main)")
    p.add_argument("--changed-only", action="store_true", help="run only the tests that reach a change")
    p.add_argument("--allow-uncovered", default="", metavar="NAMES",
                   help="comma list of changed RVV functions / macros accepted without a test")
    p.add_argument("--out", default=str(ROOT / "reports"), help="where the reports go (default: reports/)")
    p.add_argument("--workers", default=settings.get("WORKERS") or "auto",
                   help="pytest-xdist workers per run (default: $RVVDIFF_WORKERS or auto; 0: no xdist)")
    a, pytest_args = p.parse_known_args(argv)
    head_dir = Path(a.head).resolve()
    try:
        if not head_dir.is_dir():
            raise GateError(f"HEAD {a.head}: no such directory (give a llama.cpp or ggml checkout)")
        base_dir, how = resolve_base(head_dir, a.base, a.target_branch)
        out = Path(a.out).resolve()
        v = gate(head_dir, base_dir, how, out, pytest_args, changed_only=a.changed_only,
                 allow_uncovered=tuple(x for x in a.allow_uncovered.split(",") if x), workers=a.workers)
    except RvvdiffError as e:
        print(f"rvvdiff gate: {e}", file=sys.stderr)
        return 2
    path = write(v, out)
    print("\n" + summary_md(v))
    print(f"rvvdiff gate: {'BLOCKS' if v.blocking else 'passes'} ({path})")
    return 1 if v.blocking else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
