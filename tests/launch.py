"""How the harness's own tests start ``rvvdiff`` and pytest: one way, here (tests/test_launch.py fails on another).

:func:`rvvdiff` runs the command line, :func:`pytest_child` a pytest session (by default the suite's, from the
checkout), :func:`pytest_in` one in a ``pytester`` directory (the test files a test wrote there).  Every child

* runs this checkout's code: its directory and the checkout's root come first on ``PYTHONPATH`` (``env`` may
  say otherwise: the wheel's test);
* is a session of its own, as a user's run is: without the ``RVVDIFF_SESSION`` of the run that starts it (its
  build-failure markers are per session);
* gets no stdin and a timeout, past which it is killed with everything it started (harness/core/proc.py);
* is printed (argv, directory, exit status, stdout, stderr) into the test's captured output, so a test that fails
  on it shows the whole run.

Each returns a :class:`Run`.  A child that exits with another status than the expected one (``code``; None: any),
or times out, fails the test at once with its argv, exit status, stdout and stderr.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.core import proc

ROOT = Path(__file__).resolve().parent.parent
#: How the command line and pytest start: this interpreter, the modules of the checkout (``PYTHONPATH``).
RVVDIFF = (sys.executable, "-m", "harness.commands.cli")
PYTEST = (sys.executable, "-m", "pytest")
#: The exit status a caller expects: one, any of several, or None (any; the caller judges it).
Code = int | Collection[int] | None
#: Lines of each stream a failure message shows (the whole run is in the test's captured output).
TAIL = 120


@dataclass(frozen=True)
class Run:
    """A child that ended: its argv, exit status (None: it timed out), output and where it ran."""

    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    cwd: Path
    seconds: float
    timeout: float

    def describe(self, tail: int | None = None) -> str:
        """The run in words: argv, directory, exit status, then stdout and stderr (their last ``tail`` lines)."""
        status = f"timed out after {self.timeout:g} s" if self.returncode is None else f"exit status {self.returncode}"
        out = [f"$ {shlex.join(self.argv)}", f"  in {self.cwd}: {status}, {self.seconds:.1f} s"]
        for name, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            lines = text.splitlines()
            shown = lines if tail is None else lines[-tail:]
            cut = f" (last {len(shown)} of {len(lines)} lines)" if len(shown) < len(lines) else ""
            out += [f"--- {name}{cut}:", *shown]
        return "\n".join(out)

    def fail(self, why: str) -> None:
        """Fail the test: ``why``, then the run (:meth:`describe`)."""
        __tracebackhide__ = True
        pytest.fail(f"{why}\n{self.describe(TAIL)}", pytrace=False)

    def expect(self, code: Code) -> Run:
        """This run, or the test failed when it timed out or its exit status is not ``code``."""
        __tracebackhide__ = True
        if self.returncode is None:
            self.fail("the child timed out")
        wanted = None if code is None else {code} if isinstance(code, int) else set(code)
        if wanted is not None and self.returncode not in wanted:
            self.fail(f"exit status {self.returncode}, expected {' or '.join(map(str, sorted(wanted)))}")
        return self

    def outcomes(self) -> dict[str, int]:
        """The counts of pytest's last summary line (``{"passed": 2, "errors": 1, ...}``, nouns plural)."""
        __tracebackhide__ = True
        try:
            return pytest.RunResult.parse_summary_nouns(self.stdout.splitlines())
        except ValueError as e:
            self.fail(str(e))
            raise

    def assert_outcomes(self, passed: int = 0, skipped: int = 0, failed: int = 0, errors: int = 0, xpassed: int = 0,
                        xfailed: int = 0, warnings: int | None = None, deselected: int | None = None) -> None:
        """The summary line's counts are these, as ``pytest.RunResult.assert_outcomes`` holds them (a count not
        given is 0; warnings and deselected are compared only when given)."""
        __tracebackhide__ = True
        expected = {"passed": passed, "skipped": skipped, "failed": failed, "errors": errors, "xpassed": xpassed,
                    "xfailed": xfailed, "warnings": warnings, "deselected": deselected}
        expected = {k: v for k, v in expected.items() if v is not None}
        seen = self.outcomes()
        got = {k: seen.get(k, 0) for k in expected}
        if got != expected:
            self.fail(f"outcomes {got}, expected {expected}")


def _start(command: Sequence[str | os.PathLike[str]], args: Sequence[str | os.PathLike[str]], *, code: Code,
           env: Mapping[str, str | None] | None, cwd: Path, timeout: float) -> Run:
    """Run ``command`` with ``args`` as the module docstring says."""
    __tracebackhide__ = True
    pythonpath = [str(cwd), str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    changes = {"RVVDIFF_SESSION": None, "PYTHONPATH": os.pathsep.join(dict.fromkeys(pythonpath)), **(env or {})}
    r = proc.execute([*command, *args], timeout=timeout, stdin=proc.DEVNULL, cwd=cwd, env=changes)
    run = Run(r.argv, r.returncode, r.stdout, r.stderr, Path(cwd), r.seconds, timeout)
    print(run.describe())
    return run.expect(code)


def rvvdiff(*args: str | os.PathLike[str], code: Code = 0, env: Mapping[str, str | None] | None = None,
            cwd: Path = ROOT, timeout: float = 1800, command: Sequence[str | os.PathLike[str]] = RVVDIFF) -> Run:
    """``rvvdiff ARGS`` from ``cwd``: its :class:`Run`, or the test failed if its exit status is not ``code``.
    ``env``: changes to this process's environment (None removes a variable); ``command``: another ``rvvdiff``
    (an installed wheel's)."""
    __tracebackhide__ = True
    return _start(command, args, code=code, env=env, cwd=cwd, timeout=timeout)


def pytest_child(*args: str | os.PathLike[str], code: Code = 0, env: Mapping[str, str | None] | None = None,
                 cwd: Path = ROOT, timeout: float = 1800,
                 command: Sequence[str | os.PathLike[str]] = PYTEST) -> Run:
    """``pytest ARGS -p no:cacheprovider`` from ``cwd`` (default: the checkout, so ``cases/...`` is the suite):
    its :class:`Run`, or the test failed if its exit status is not ``code``.  ``command``: another pytest (an
    installed wheel's interpreter)."""
    __tracebackhide__ = True
    return _start(command, [*args, "-p", "no:cacheprovider"], code=code, env=env, cwd=cwd, timeout=timeout)


def pytest_in(pytester: pytest.Pytester, *args: str | os.PathLike[str], code: Code = 0,
              env: Mapping[str, str | None] | None = None, timeout: float = 1800) -> Run:
    """pytest on the files a test wrote with ``pytester``, in its directory, with a ``--basetemp`` of its own
    there, as ``pytester.runpytest_subprocess`` runs it."""
    __tracebackhide__ = True
    return pytest_child(f"--basetemp={pytester.path / 'basetemp'}", *args, code=code, env=env, cwd=pytester.path,
                        timeout=timeout)
