"""Running subprocesses: argv lists, no shell, always a timeout, logged."""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.core import settings
from harness.core.errors import RvvdiffError

log = logging.getLogger("rvvdiff")


def own_session_env() -> dict[str, str]:
    """The environment for a pytest run started from rvvdiff (the gate's runs, a bisect step): a
    session of its own, not the caller's ``RVVDIFF_SESSION`` (build-failure markers are per session)."""
    return settings.without("SESSION")


class CommandError(RvvdiffError, RuntimeError):
    """A command failed or timed out; the message carries everything needed to rerun it."""

    def __init__(self, argv: Sequence[str], returncode: int | None, stdout: str, stderr: str,
                 cwd: str | os.PathLike[str] | None = None, what: str = "command", tail: int = 60):
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        status = "timed out" if returncode is None else f"exited with code {returncode}"
        parts = [f"{what} {status}:", f"  argv: {shlex.join(self.argv)}"]
        if cwd is not None:
            parts.append(f"  cwd: {cwd}")
        for label, text in (("stdout", stdout), ("stderr", stderr)):
            lines = text.rstrip().splitlines()
            if lines:
                shown = lines[-tail:]
                more = f" (last {len(shown)} of {len(lines)} lines)" if len(lines) > len(shown) else ""
                parts.append(f"  {label}{more}:")
                parts.extend("    " + line for line in shown)
        super().__init__("\n".join(parts))


def run(argv: Sequence[str | os.PathLike[str]], *, timeout: float, cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None, what: str = "command",
        log_file: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` and return its result; raise :class:`CommandError` on failure or timeout.

    ``log_file`` (optional) receives the command line and its full output, so a
    long build log survives for inspection while the exception shows the tail.
    """
    args = [os.fspath(a) for a in argv]
    log.info("run: %s", shlex.join(args))
    full_env = None if env is None else {**os.environ, **env}
    try:
        cp = subprocess.run(args, cwd=cwd, env=full_env, capture_output=True, text=True,
                            timeout=timeout, errors="replace")
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise CommandError(args, None, out, err, cwd, what) from None
    if log_file is not None:
        with open(log_file, "a") as f:
            f.write(f"$ {shlex.join(args)}\n{cp.stdout}{cp.stderr}\n[exit {cp.returncode}]\n")
    if cp.returncode != 0:
        raise CommandError(args, cp.returncode, cp.stdout, cp.stderr, cwd, what)
    return cp
