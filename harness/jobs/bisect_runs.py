"""The search of ``rvvdiff bisect`` (harness/commands/bisect.py): the first commit of a ggml history at which
a shrunk failure fails.

Given a failure (a report directory under ``<report-dir>/cases/``, or a test id with its
target) and two revisions GOOD and BAD of a git repository, ``git bisect`` chooses the commits
and each step replays the failure at one of them:

* the tree: :func:`harness.ggml.gitrev.checkout` moves one clone in rvvdiff's cache (slot
  ``bisect``) to the commit, so its build directory (harness/toolchain/builds.py keys it by path) rebuilds
  only what the step changed;
* the replay: ``pytest NODEID`` from rvvdiff's root with the failure's VLEN, ISA build and stress
  mode, ``--plan`` giving the test the ``replay`` budget (its explicit and fixed cases, then the
  examples saved in the database: no generation, no shrinking, so every step runs the same
  cases), ``--known-failures ignore`` (raw outcomes), and a private copy of the example database
  (Hypothesis deletes a saved example that passes, which would lose the failure at the first good
  step);
* the verdict, read from the run's ``results.json`` rather than guessed from the exit code:
  passed -> good, failed -> bad; skipped (a kernel not in this tree, an ISA build the tree cannot
  express), an error in set-up (the build failed), a test the tree does not collect, or no
  results at all -> skip (what ``git bisect run`` calls 125: git tries a commit nearby).

git bisect runs in a bare clone of its own (a temporary ``git clone --bare --shared``: nothing
is checked out there, ``BISECT_HEAD`` names the commit to test); the user's repository is only
read.  This process gives each verdict with ``git bisect good|bad|skip`` itself, as ``git
bisect run`` would, so the steps are timed and printed where they run.  GOOD must pass and BAD
fail before the search starts.  At the end: the first bad commit, the ggml-cpu files it
changed, and the replay lines at that commit and at its parent.  ``<out>/bisect.json`` keeps
every step (rewritten after each, so an interrupted bisect keeps what it learnt), ``<out>/steps/``
each step's pytest log and reports.  Exit status: 0 when the first bad commit was found; 1 when
an end does not behave as given (BAD passes, GOOD fails, either cannot be tested) or only
untestable commits are left; 2 for a wrong argument, repository or revision.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.core.config import PROJECT_ROOT, cache_dir
from harness.core.errors import RvvdiffError
from harness.core.proc import SubprocessError, own_session_env
from harness.core.runner import read_results, run_suite
from harness.ggml import gitrev
from harness.jobs.bisect_failure import BisectError, Failure
from harness.report.ids import replay_argv

ROOT = PROJECT_ROOT
SLOT = "bisect"
BUDGETS = ("replay", "default", "thorough")
#: Where a tree keeps its CPU backend: a llama.cpp checkout, a ggml repository.
CPU_DIRS = ("ggml/src/ggml-cpu", "src/ggml-cpu")


# ------------------------------------------------------------------ one step's verdict

@dataclass(frozen=True)
class StepVerdict:
    verdict: str  # "good", "bad" or "skip"
    outcome: str  # the test's outcome in results.json, or what happened instead
    reason: str


def _failure_line(report_dir: Path, nodeid: str) -> str:
    """The assertion of the failure report the step's run wrote for ``nodeid`` (empty if none)."""
    for p in sorted((report_dir / "cases").glob("*/case.json")):
        try:
            case = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if case.get("test") != nodeid:
            continue
        for line in (case.get("failure") or "").splitlines():
            if line.startswith("E "):
                return line[1:].strip()
    return ""


def verdict(report_dir: Path, nodeid: str, exit_code: int | None) -> StepVerdict:
    """The verdict of one step from the ``results.json`` its pytest run left in ``report_dir``
    (``exit_code`` None: the run timed out)."""
    if exit_code is None:
        return StepVerdict("skip", "timeout", "the run timed out")
    results = read_results(report_dir)
    if results is None:
        why = {4: "the test id is not in this tree (pytest: not found, or a usage error)",
               5: "pytest collected nothing"}.get(exit_code, "see the step's pytest.log")
        return StepVerdict("skip", "no results", f"pytest exited {exit_code} without results.json: {why}")
    r = results.get(nodeid)
    if r is None:
        return StepVerdict("skip", "not collected", "this tree's run did not collect the test")
    outcome, reason = r.get("outcome", ""), str(r.get("reason") or "")
    if outcome in ("passed", "xpassed"):
        return StepVerdict("good", outcome, reason)
    if outcome in ("failed", "xfailed"):
        return StepVerdict("bad", outcome, _failure_line(report_dir, nodeid) or reason)
    if outcome == "error":
        return StepVerdict("skip", outcome, "set-up failed (the ISA build did not build?): " + reason)
    return StepVerdict("skip", outcome or "unknown", reason)


# ------------------------------------------------------------------ the steps

@dataclass
class Step:
    commit: str
    subject: str  # "<short hash> <date> <subject>"
    role: str  # "BAD", "GOOD" (the checks before the search) or "bisect"
    verdict: str
    outcome: str
    reason: str
    seconds: float
    dir: str  # the step's pytest.log and reports


def pytest_args(failure: Failure, tree: Path, db: Path, plan: Path, extra: list[str]) -> list[str]:
    """The step's pytest arguments (run from rvvdiff's root, with the step's ``--report-dir``)."""
    return replay_argv(failure.nodeid, ggml_src=str(tree), known_failures="ignore", example_db=str(db),
                       compiler=failure.compiler, extra=["-p", "no:cacheprovider", "--plan", str(plan), *extra])


@dataclass
class Bisect:
    """One bisect of a failure between GOOD and BAD: its steps so far, the slot they move, what ``bisect.json``
    keeps."""

    failure: Failure
    repo: Path
    good: str
    bad: str
    out: Path
    budget: str = "replay"
    extra: list[str] = field(default_factory=list)
    step_timeout: float = 3600.0
    steps: list[Step] = field(default_factory=list)
    slot: Path | None = None  # the work tree gitrev.checkout moves from commit to commit
    result: dict[str, Any] = field(default_factory=dict)
    t0: float = field(default_factory=time.time)

    @classmethod
    def of(cls, failure: Failure, repo: Path, good: str, bad: str, *, out: Path, budget: str = "replay",
           extra: list[str] | None = None, step_timeout: float = 3600.0) -> Bisect:
        """A bisect of ``failure`` in the repository holding ``repo`` (:func:`repository`), between GOOD and
        BAD as full hashes, checked (:func:`revisions`); BisectError when either is wrong."""
        top = repository(repo)
        g, b = revisions(top, good, bad)
        return cls(failure, top, g, b, out, budget, [] if extra is None else extra, step_timeout)

    @property
    def db(self) -> Path:
        """The snapshot of the example database every step starts from."""
        return self.out / "example-db"

    @property
    def plan(self) -> Path:
        return self.out / "plan.json"

    def prepare(self) -> None:
        if self.db.resolve() in (self.failure.example_db.resolve(), *self.failure.example_db.resolve().parents):
            raise BisectError(f"--example-db {self.failure.example_db} is {self.db} itself, which each bisect "
                              f"rewrites: copy it elsewhere or give another --out")
        self.out.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.out / "steps", ignore_errors=True)
        shutil.rmtree(self.db, ignore_errors=True)
        if self.failure.example_db.is_dir():
            shutil.copytree(self.failure.example_db, self.db)
        else:
            self.db.mkdir(parents=True)
        self.plan.write_text(json.dumps({"tests": {self.failure.nodeid: self.budget}}, indent=1) + "\n")

    def saved_examples(self) -> int:
        return sum(1 for p in self.db.rglob("*") if p.is_file())

    def run_step(self, sha: str, role: str) -> Step:
        t = time.time()
        d = self.out / "steps" / f"{len(self.steps) + 1:02d}-{sha[:12]}"
        d.mkdir(parents=True, exist_ok=True)
        tree = self.slot = gitrev.checkout(self.repo, sha, SLOT)
        with tempfile.TemporaryDirectory(prefix="rvvdiff-bisect-") as tmp:
            db = Path(tmp) / "db"
            shutil.copytree(self.db, db)  # the run may delete examples: never the snapshot's
            code = run_suite(pytest_args(self.failure, tree, db, self.plan, self.extra), report_dir=d / "reports",
                             output=d / "pytest.log", env=own_session_env(), timeout=self.step_timeout).exit
        v = verdict(d / "reports", self.failure.nodeid, code)
        step = Step(sha, gitrev.subject(self.repo, sha), role, v.verdict, v.outcome, v.reason,
                    round(time.time() - t, 1), str(d))
        self.steps.append(step)
        print(f"  {role:6} {step.subject[:80]:80}  {step.verdict:4} ({step.seconds:.0f} s)"
              + (f": {_short(step.reason, 100)}" if step.reason and step.verdict != "good" else ""), flush=True)
        self.write()
        return step

    def replay_line(self, sha: str) -> str:
        """One shell line that replays the step's run at ``sha`` (the slot moved there, a fresh copy
        of the database snapshot)."""
        slot = self.slot
        run_db = self.out / "replay-db"
        argv = replay_argv(self.failure.nodeid, ggml_src=str(slot), known_failures="ignore", example_db=str(run_db),
                           compiler=self.failure.compiler, extra=["--plan", str(self.plan), *self.extra])
        return " && ".join([f"cd {shlex.quote(str(ROOT))}", shlex.join(["git", "-C", str(slot), "checkout", "-q",
                                                                         "--detach", "--force", sha]),
                            shlex.join(["rm", "-rf", str(run_db)]), shlex.join(["cp", "-r", str(self.db), str(run_db)]),
                            shlex.join(argv)])

    def write(self, status: str = "running") -> None:
        doc = {"status": status, "test": self.failure.nodeid,
               "target": {"vlen": self.failure.vlen, "isa": self.failure.isa, "stress": self.failure.stress},
               "from": self.failure.origin, "example_db": str(self.failure.example_db), "budget": self.budget,
               "repo": str(self.repo), "good": self.good, "bad": self.bad, "extra_pytest_args": self.extra,
               "seconds": round(time.time() - self.t0, 1), "steps": [asdict(s) for s in self.steps], **self.result}
        tmp = self.out / ".bisect.json.tmp"
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, self.out / "bisect.json")


def _short(text: str, n: int = 160) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= n else text[:n - 3] + "..."


def repository(path: Path) -> Path:
    """The repository holding ``path``: its work tree's top, or the repository itself when bare."""
    if not Path(path).is_dir():
        raise BisectError(f"--repo {path}: no such directory")
    try:
        cp = gitrev.git(Path(path), "rev-parse", "--is-bare-repository", check=False, timeout=30)
    except FileNotFoundError:
        raise BisectError("git is not installed") from None
    if cp.returncode != 0:
        raise BisectError(f"--repo {path}: not a git checkout ({(cp.stderr or cp.stdout).strip()})")
    where = "--absolute-git-dir" if cp.stdout.strip() == "true" else "--show-toplevel"
    return Path(gitrev.git(Path(path), "rev-parse", where, timeout=30).stdout.strip()).resolve()


def revisions(repo: Path, good: str, bad: str) -> tuple[str, str]:
    """Full hashes of GOOD and BAD, checked: both known, GOOD an ancestor of BAD and not BAD."""
    try:
        g, b = gitrev.commit(repo, good), gitrev.commit(repo, bad)
    except gitrev.RevisionError as e:
        raise BisectError(f"unknown revision: {e}") from None
    if g == b:
        raise BisectError(f"--good {good} and --bad {bad} are the same commit {g[:12]}")
    cp = gitrev.git(repo, "merge-base", "--is-ancestor", g, b, check=False)
    if cp.returncode == 1:
        raise BisectError(f"--good {good} ({g[:12]}) is not an ancestor of --bad {bad} ({b[:12]}): the first bad "
                          f"commit must come after a good one (did you swap them?)")
    if cp.returncode != 0:
        raise BisectError(f"git merge-base --is-ancestor {g} {b} in {repo} failed: {cp.stderr.strip()}")
    return g, b


FIRST_BAD = re.compile(r"^([0-9a-f]{40}) is the first bad commit", re.M)
ONLY_SKIPPED = "There are only 'skip'ped commits left to test"


def _search(bs: Bisect, driver: Path) -> tuple[str | None, list[str]]:
    """git bisect in ``driver`` from the checked ends: (first bad commit, or None and the
    candidates git could not tell apart because they were skipped)."""
    out = gitrev.git(driver, "bisect", "start", "--no-checkout", bs.bad, bs.good).stdout
    while True:
        m = FIRST_BAD.search(out)
        if m:
            return m.group(1), []
        if ONLY_SKIPPED in out:
            return None, re.findall(r"^[0-9a-f]{40}$", out, re.M)
        sha = gitrev.git(driver, "rev-parse", "BISECT_HEAD").stdout.strip()
        v = bs.run_step(sha, "bisect").verdict
        cp = gitrev.git(driver, "bisect", v, sha, check=False)
        out = cp.stdout + cp.stderr
        if cp.returncode != 0 and ONLY_SKIPPED not in out:
            raise BisectError(f"git bisect {v} {sha} failed: {out.strip()}")


def _lock(repo: Path):
    """One bisect per repository at a time (they share the checkout slot); says so when waiting."""
    key = hashlib.sha256(str(repo).encode()).hexdigest()[:12]
    path = cache_dir() / "checkouts" / f"{repo.name}-{key}-bisect-run.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"rvvdiff bisect: waiting for another bisect of {repo} to finish ({path})", file=sys.stderr, flush=True)
        fcntl.flock(f, fcntl.LOCK_EX)
    return f


def run(bs: Bisect) -> int:
    """The whole bisect, one per repository at a time; its exit status: 0 when the first bad commit was found,
    1 when an end does not behave as given or only untestable commits are left, 2 when a step could not run
    (git, the file system, a subprocess), 130 when interrupted.  ``bisect.json`` says where it stopped."""
    lock = _lock(bs.repo)
    try:
        return _bisect(bs)
    except KeyboardInterrupt:
        bs.write("interrupted")
        print(f"\nrvvdiff bisect: interrupted; the steps so far are in {bs.out / 'bisect.json'}", file=sys.stderr)
        return 130
    except (RvvdiffError, OSError, SubprocessError) as e:
        bs.result["message"] = str(e)
        with contextlib.suppress(OSError):
            bs.write("error")
        print(f"rvvdiff bisect: {e}\n(the steps so far are in {bs.out / 'bisect.json'})", file=sys.stderr)
        return 2
    finally:
        lock.close()


def _bisect(bs: Bisect) -> int:
    """Check the ends, search, print the result; 0 when the first bad commit was found."""
    bs.prepare()
    f = bs.failure
    print(f"rvvdiff bisect: {f.nodeid} (VLEN {f.vlen}, {f.isa}{', stress' if f.stress else ''}) in {bs.repo}")
    print(f"  good {gitrev.subject(bs.repo, bs.good)}\n  bad  {gitrev.subject(bs.repo, bs.bad)}")
    n = bs.saved_examples()
    print(f"  example database: {f.example_db} ({n} file{'s' if n != 1 else ''}"
          + ("; none saved: only the test's explicit and fixed cases replay" if n == 0 else "")
          + f"), budget {bs.budget}; each step's log and reports in {bs.out / 'steps'}", flush=True)
    bad = bs.run_step(bs.bad, "BAD")
    if bad.verdict != "bad":
        what = "passes" if bad.verdict == "good" else f"cannot be tested ({bad.outcome}: {_short(bad.reason)})"
        return _stop(bs, f"BAD {bad.subject} {what}: nothing to bisect (see {bad.dir}/pytest.log). The failure "
                         "does not reproduce there with this database and budget; check BAD, or --example-db.")
    good = bs.run_step(bs.good, "GOOD")
    if good.verdict != "good":
        what = "fails as well" if good.verdict == "bad" else f"cannot be tested ({good.outcome}: {_short(good.reason)})"
        return _stop(bs, f"GOOD {good.subject} {what}: give an older --good where the test passes "
                         f"(see {good.dir}/pytest.log)")
    with tempfile.TemporaryDirectory(prefix="rvvdiff-bisect-git-") as tmp:
        driver = Path(tmp) / "driver.git"
        gitrev.git(bs.repo, "clone", "-q", "--bare", "--shared", str(bs.repo), str(driver))
        first, candidates = _search(bs, driver)
        log = gitrev.git(driver, "bisect", "log", check=False).stdout
    bs.result["git_bisect_log"] = log
    if first is None:
        bs.result["candidates"] = candidates
        print(f"\nrvvdiff bisect: the first bad commit is one of {len(candidates)} commits that could not be tested:")
        for c in candidates:
            print(f"  {gitrev.subject(bs.repo, c)}")
        bs.write("skipped")
        return 1
    return _found(bs, first)


def _stop(bs: Bisect, message: str) -> int:
    print(f"\nrvvdiff bisect: {message}", file=sys.stderr)
    bs.result["message"] = message
    bs.write("stopped")
    return 1


def _found(bs: Bisect, first: str) -> int:
    fields = gitrev.git(bs.repo, "log", "-1", "--format=%H%n%P%n%cI%n%aI%n%an%n%s", first).stdout.split("\n")
    sha, parents, committed, authored, author, subject = fields[:6]
    parent = parents.split()[0]
    files = gitrev.git(bs.repo, "diff", "--name-only", parent, sha, "--", *CPU_DIRS).stdout.split()
    n_all = len(gitrev.git(bs.repo, "diff", "--name-only", parent, sha).stdout.split())
    at, before = bs.replay_line(sha), bs.replay_line(parent)
    bs.result.update({"first_bad": {"commit": sha, "parent": parent, "merge": len(parents.split()) > 1,
                                    "committed": committed, "authored": authored, "author": author,
                                    "subject": subject, "ggml_cpu_files": files, "files_changed": n_all},
                      "replay": {"first_bad": at, "parent": before}})
    bs.write("found")
    total = time.time() - bs.t0
    print(f"\nrvvdiff bisect: first bad commit after {len(bs.steps)} steps ({total / 60:.1f} min):\n"
          f"  {sha}\n  committed {committed[:10]} (authored {authored[:10]}, {author})\n  {subject}"
          + ("\n  (a merge: the first parent is taken as its good side)" if len(parents.split()) > 1 else ""))
    print(f"  ggml-cpu files it changed ({len(files)} of {n_all}):" if files else
          f"  it changes no file under {' or '.join(CPU_DIRS)} ({n_all} files elsewhere)")
    for p in files:
        print(f"    {p}")
    print(f"replay at the first bad commit (fails):\n  {at}\nreplay at its parent {parent[:12]} (passes):\n  {before}")
    print(f"steps: {bs.out / 'bisect.json'}")
    return 0
