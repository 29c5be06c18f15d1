"""One run of the suite started by a command, and the results it leaves.

Every command that runs the differential tests (gate, bisect, fixes, trees, bench, mutants,
audit; spike-check can, with ``output="capture"`` and :meth:`SuiteRun.check_timeout`) starts
``python -m pytest`` from rvvdiff's root through :func:`run_suite` and reads the ``results.json``
the plugin writes at the end of a run (harness/report/summary.py) through :func:`read_results`:
one entry per test, ``nodeid``, ``outcome`` (passed, failed, error, skipped, xfailed, xpassed),
``reason`` and ``duration``, in the order the tests finished.  What a command selects of the matrix
it passes as :meth:`harness.core.matrix.Matrix.pytest_args` writes it.

Where the run's output goes is the caller's choice: ``"stream"`` (the terminal: a long run the user
watches), ``"capture"`` (kept in :attr:`SuiteRun.stdout` / ``stderr``), or a file (the command
line first, then everything pytest printed).  With a ``timeout`` the run gets a session of its own
and, when it times out or the caller is interrupted, the whole session is killed (pytest and the
emulators it started); :attr:`SuiteRun.exit` is then None.  Without one, pytest shares the caller's
session (Ctrl-C reaches it as it reaches the caller, and the run is then killed: harness/core/proc.py's
``execute``).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.core.config import PROJECT_ROOT
from harness.core.errors import RvvdiffError
from harness.core.proc import PIPE, STDOUT, TimeoutExpired, execute

Results = dict[str, dict[str, Any]]  # node id -> its entry in results.json
#: pytest's exit status when its selection holds no test (``pytest.ExitCode.NO_TESTS_COLLECTED``).
NO_TESTS_COLLECTED = 5


class SuiteTimeout(RvvdiffError, TimeoutExpired):
    """A run that did not finish within its timeout, for a caller that cannot go on without it
    (:meth:`SuiteRun.check_timeout`)."""

    def __str__(self) -> str:
        return (f"pytest did not finish within {self.timeout:.0f} s (killed): {shlex.join(self.cmd)}; "
                f"rerun it alone to see where it hangs, or give a longer timeout")


def read_results(report_dir: Path) -> Results | None:
    """The entries of ``report_dir/results.json`` by node id (in the file's order), or None when the
    run left no readable file (it did not get to its end, or collected nothing)."""
    try:
        return {r["nodeid"]: r for r in json.loads((Path(report_dir) / "results.json").read_text())}
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass
class SuiteRun:
    """What a pytest run left: its exit status (None: it timed out), its results, its output."""

    argv: list[str]
    exit: int | None
    seconds: float
    report_dir: Path | None = None
    results: Results = field(default_factory=dict)
    has_results: bool = False  # results.json was there and readable
    stdout: str = ""  # with output="capture"
    stderr: str = ""
    log: Path | None = None  # with output=<a file>
    timeout: float | None = None

    @property
    def timed_out(self) -> bool:
        return self.exit is None

    def check_timeout(self) -> SuiteRun:
        """This run, or :class:`SuiteTimeout` if it timed out."""
        if self.exit is None:
            raise SuiteTimeout(self.argv, self.timeout or 0.0, self.stdout, self.stderr)
        return self

    def counts(self) -> Counter[str]:
        """How many tests ended with each outcome."""
        return Counter(r["outcome"] for r in self.results.values())

    def last_line(self) -> str:
        """pytest's closing line (``3 passed, 1 failed in 9.1s``) from the captured output, or ''."""
        out = self.stdout.strip()
        return out.splitlines()[-1] if out else ""


def suite_argv(args: Sequence[str | os.PathLike[str]], report_dir: Path | None = None) -> list[str]:
    """The command that runs pytest with ``args`` (a leading ``pytest``, as
    :func:`harness.report.ids.replay_argv` writes it, is the program's name) and, when given,
    ``--report-dir report_dir``."""
    args = [os.fspath(a) for a in args]
    if args[:1] == ["pytest"]:
        args = args[1:]
    return [sys.executable, "-m", "pytest", *args, *(["--report-dir", str(report_dir)] if report_dir else [])]


def run_suite(args: Sequence[str | os.PathLike[str]], *, report_dir: Path | None = None,
              output: Literal["stream", "capture"] | Path = "stream", env: Mapping[str, str] | None = None,
              timeout: float | None = None, clean: bool = False, echo: str | None = None) -> SuiteRun:
    """Run pytest with ``args`` from rvvdiff's root and read its results.

    ``report_dir``: passed as ``--report-dir`` and where ``results.json`` is read (``clean``: removed
    first, so nothing of an earlier run is read as this one's).  ``env``: the whole environment
    (default: this process's).  ``echo``: printed, with the command line, before the run starts."""
    argv = suite_argv(args, report_dir)
    if clean and report_dir is not None and report_dir.exists():
        shutil.rmtree(report_dir)
    if echo is not None:
        print(f"{echo}\n    {shlex.join(argv)}", flush=True)
    env = dict(env) if env is not None else None
    log = output if isinstance(output, Path) else None
    t0 = time.perf_counter()
    stdout = stderr = ""
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w") as f:
            f.write(f"$ cd {shlex.quote(str(PROJECT_ROOT))} && {shlex.join(argv)}\n")
            f.flush()
            code = _run(argv, env, timeout, stdout=f, stderr=STDOUT)[0]
    elif output == "capture":
        code, stdout, stderr = _run(argv, env, timeout, stdout=PIPE, stderr=PIPE)
    else:
        code = _run(argv, env, timeout, stdout=None, stderr=None)[0]
    seconds = time.perf_counter() - t0
    results = read_results(report_dir) if report_dir is not None else None
    return SuiteRun(argv, code, seconds, report_dir, results or {}, results is not None, stdout, stderr, log,
                    timeout)


def _run(argv: list[str], env: dict[str, str] | None, timeout: float | None, **streams: Any
         ) -> tuple[int | None, str, str]:
    """(exit status or None on a timeout, stdout, stderr) of ``argv``; see the module docstring."""
    changes = None if env is None else {**dict.fromkeys(os.environ.keys() - env.keys()), **env}  # env is the whole one
    # No timeout: a run the user watches and ends with Ctrl-C, in the caller's session.
    r = execute(argv, cwd=PROJECT_ROOT, env=changes, timeout=timeout, group=timeout is not None, **streams)
    return r.returncode, r.stdout, r.stderr
