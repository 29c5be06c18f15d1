"""Running subprocesses, rvvdiff's one door to them: argv lists, no shell, a deadline on every call, logged.

Three shapes of call:

- :func:`run`: a command that must succeed (a build step, a version query): its result, or
  :class:`CommandError`, whose message carries everything needed to rerun it.
- :func:`execute`: a command whose exit status is a verdict (a probe, a patch's dry run, a test run): a
  :class:`Result` with its exit status (None when it timed out), its output (text or bytes) and its
  duration; neither a failure nor a timeout is raised (:meth:`Result.check` and :meth:`Result.finished`
  raise them on request).
- :class:`Process`: a long-lived child talked to over its pipes (a kernel server, a counter reader on a
  board): reads and writes under a deadline, ended and reaped by :meth:`Process.close` or at the end of a
  ``with`` block.

A child of :func:`run` and :func:`execute` runs in a session of its own (``group=True``), so a timeout or
an interrupt kills it and everything it started; ``group=False`` keeps it in the caller's session (a run
the user watches, whose Ctrl-C reaches it as it reaches the caller).  Every other module of harness/,
cases/, costs/ and oracles/ starts its processes through this one (tests/test_proc.py checks it).
"""

from __future__ import annotations

import logging
import os
import resource
import selectors
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from harness.core import settings
from harness.core.errors import RvvdiffError

log = logging.getLogger("rvvdiff")

#: Where a child's stream goes: a pipe (captured into the result, or talked to), nowhere, or (stderr
#: only) stdout's stream.  A file object goes there too; None inherits the caller's stream.
PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
STDOUT = subprocess.STDOUT
#: The exceptions of the standard library's subprocess module, for a caller that raises or catches them.
TimeoutExpired = subprocess.TimeoutExpired
SubprocessError = subprocess.SubprocessError

#: Seconds a killed child's pipes get to deliver the rest of its output before they are closed.
REAP_S = 5.0

Stream = int | IO[Any] | None
#: Changes to this process's environment for a child: a value sets the variable, None removes it.
Env = Mapping[str, str | None]


def own_session_env() -> dict[str, str]:
    """The environment for a pytest run started from rvvdiff (the gate's runs, a bisect step): a
    session of its own, not the caller's ``RVVDIFF_SESSION`` (build-failure markers are per session)."""
    return settings.without("SESSION")


def _text(s: str | bytes | None) -> str:
    return s.decode(errors="replace") if isinstance(s, bytes) else (s or "")


class CommandError(RvvdiffError, RuntimeError):
    """A command failed or timed out; the message carries everything needed to rerun it."""

    def __init__(self, argv: Sequence[str], returncode: int | None, stdout: str | bytes, stderr: str | bytes, *,
                 cwd: str | os.PathLike[str] | None = None, what: str = "command", tail: int = 60,
                 timeout: float | None = None):
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout = _text(stdout)
        self.stderr = stderr = _text(stderr)
        after = f" after {timeout:g} s" if timeout is not None else ""
        status = f"timed out{after}" if returncode is None else f"exited with code {returncode}"
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


@dataclass(frozen=True)
class Result:
    """What a command that ended (or timed out) left."""

    argv: list[str]
    #: Its exit status (negative: killed by that signal); None: it timed out and was killed.
    returncode: int | None
    #: Its output (str, or bytes with ``text=False``; empty when the stream was not captured).
    stdout: Any
    stderr: Any
    #: Seconds from its start to its end.
    seconds: float
    #: The timeout it ran under (None: none).
    timeout: float | None = None
    cwd: str | os.PathLike[str] | None = None

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def error(self, what: str = "command") -> CommandError:
        return CommandError(self.argv, self.returncode, self.stdout, self.stderr, cwd=self.cwd, what=what,
                            timeout=self.timeout)

    def finished(self, what: str = "command") -> Result:
        """This result, or :class:`CommandError` if it timed out (a probe whose exit status is its answer)."""
        if self.timed_out:
            raise self.error(what)
        return self

    def check(self, what: str = "command") -> Result:
        """This result, or :class:`CommandError` if it timed out or exited with a non-zero status."""
        if not self.ok:
            raise self.error(what)
        return self


def _environment(env: Env | None) -> dict[str, str] | None:
    """This process's environment with ``env``'s changes (None: unchanged, inherited)."""
    if env is None:
        return None
    out = dict(os.environ)
    for k, v in env.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def _no_core_dumps() -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _start(args: list[str], *, stdin: Stream, stdout: Stream, stderr: Stream, cwd: str | os.PathLike[str] | None,
           env: Env | None, text: bool, group: bool, core_dumps: bool) -> subprocess.Popen[Any]:
    log.info("run: %s", shlex.join(args))
    return subprocess.Popen(args, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd, env=_environment(env),
                            text=text or None, errors="replace" if text else None, start_new_session=group,
                            preexec_fn=None if core_dumps else _no_core_dumps)


def _kill(p: subprocess.Popen[Any], group: bool) -> None:
    """Kill ``p`` if it still runs, with its process group when it leads one (not reaped here)."""
    if p.poll() is not None:
        return
    try:
        if group:
            os.killpg(p.pid, signal.SIGKILL)
        else:
            p.kill()
    except (ProcessLookupError, PermissionError):
        pass


def execute(argv: Sequence[str | os.PathLike[str]], *, timeout: float | None, input: bytes | str | None = None,
            stdin: Stream = None, stdout: Stream = PIPE, stderr: Stream = PIPE,
            cwd: str | os.PathLike[str] | None = None, env: Env | None = None, text: bool = True,
            group: bool = True, core_dumps: bool = True) -> Result:
    """Run ``argv`` to its end and return its :class:`Result`: a non-zero exit or a timeout is not raised.

    ``timeout``: seconds (None only for a run the user watches and can interrupt); when it passes the
    child is killed, with its process group under ``group``, and the result has ``returncode`` None and
    the output so far.  An interrupt of the caller kills the child the same way and goes on.
    ``input``: written to the child's stdin, which is then closed; else ``stdin`` (a file, DEVNULL, or None:
    the caller's).  ``stdout`` / ``stderr``: PIPE (captured into the result), a file, DEVNULL, STDOUT
    (stderr only) or None (the caller's).  ``text``: the output decoded (errors replaced) and ``input``
    encoded; else bytes.  ``core_dumps=False``: the child writes no core file (its crash is expected and
    said otherwise).  ``env``: changes to this process's environment (:data:`Env`).
    """
    args = [os.fspath(a) for a in argv]
    t0 = time.monotonic()
    p = _start(args, stdin=PIPE if input is not None else stdin, stdout=stdout, stderr=stderr, cwd=cwd, env=env,
               text=text, group=group, core_dumps=core_dumps)
    with p:
        try:
            out, err = p.communicate(input, timeout=timeout)
            code: int | None = p.returncode
        except subprocess.TimeoutExpired:
            _kill(p, group)
            try:
                out, err = p.communicate(timeout=REAP_S)
            except subprocess.TimeoutExpired:  # something outside its group holds the pipes: the output is lost
                out = err = None
            code = None
        except BaseException:  # an interrupt: the child ends with its caller
            _kill(p, group)
            p.wait()
            raise
    empty = "" if text else b""
    return Result(args, code, out or empty, err or empty, time.monotonic() - t0, timeout, cwd)


def run(argv: Sequence[str | os.PathLike[str]], *, timeout: float, cwd: str | os.PathLike[str] | None = None,
        env: Env | None = None, what: str = "command", log_file: Path | None = None) -> Result:
    """Run ``argv`` and return its text result; raise :class:`CommandError` on failure or timeout.

    ``log_file`` (optional) receives the command line and its full output, so a
    long build log survives for inspection while the exception shows the tail.
    """
    r = execute(argv, timeout=timeout, cwd=cwd, env=env).finished(what)
    if log_file is not None:
        with open(log_file, "a") as f:
            f.write(f"$ {shlex.join(r.argv)}\n{r.stdout}{r.stderr}\n[exit {r.returncode}]\n")
    return r.check(what)


def deadline(seconds: float) -> float:
    """The deadline ``seconds`` from now, as :class:`Process`'s reads and writes take it."""
    return time.monotonic() + seconds


class Process:
    """A long-lived child talked to over its pipes (the module docstring).

    ``stdin`` / ``stdout`` / ``stderr`` as for :func:`execute`.  The pipes carry bytes and do not block:
    :meth:`write`, :meth:`read` and :meth:`readline` wait on them until a deadline (:func:`deadline`),
    raising TimeoutError when it passes and EOFError when the child closed its end.  ``group``: the child
    leads a process group of its own, which :meth:`kill` kills whole.
    """

    def __init__(self, argv: Sequence[str | os.PathLike[str]], *, stdin: Stream = PIPE, stdout: Stream = PIPE,
                 stderr: Stream = PIPE, cwd: str | os.PathLike[str] | None = None, env: Env | None = None,
                 group: bool = True, core_dumps: bool = True) -> None:
        self.argv = [os.fspath(a) for a in argv]
        self.group = group
        self._p = _start(self.argv, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd, env=env, text=False,
                         group=group, core_dumps=core_dumps)
        self._pending = bytearray()  # read from stdout beyond what was asked for (readline)
        self._ready: dict[int, selectors.BaseSelector] = {}
        for f, event in ((self._p.stdin, selectors.EVENT_WRITE), (self._p.stdout, selectors.EVENT_READ)):
            if f is not None:
                os.set_blocking(f.fileno(), False)
                sel = self._ready[event] = selectors.DefaultSelector()
                sel.register(f.fileno(), event)

    @property
    def pid(self) -> int:
        return self._p.pid

    @property
    def returncode(self) -> int | None:
        return self._p.returncode

    def poll(self) -> int | None:
        """Its exit status once it has exited, else None."""
        return self._p.poll()

    def alive(self) -> bool:
        return self._p.poll() is None

    def wait(self, timeout: float) -> int | None:
        """Its exit status once it exits within ``timeout`` seconds; None if it still runs then."""
        try:
            return self._p.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    # ------------------------------------------------------------ talking to it

    def _wait_for(self, event: int, until: float) -> None:
        sel = self._ready[event]
        while True:
            left = until - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if sel.select(left):
                return

    def write(self, data: bytes, until: float) -> None:
        """Write all of ``data`` to its stdin by ``until``."""
        assert self._p.stdin is not None
        fd = self._p.stdin.fileno()
        view = memoryview(data)
        while view:
            self._wait_for(selectors.EVENT_WRITE, until)
            try:
                n = os.write(fd, view)
            except BlockingIOError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                raise EOFError from None
            view = view[n:]

    def _chunk(self, most: int, until: float) -> bytes:
        """The next bytes it wrote to stdout (at most ``most``; b"" when it closed its end)."""
        assert self._p.stdout is not None
        while True:
            self._wait_for(selectors.EVENT_READ, until)
            try:
                return os.read(self._p.stdout.fileno(), most)
            except BlockingIOError:
                continue

    def read(self, n: int, until: float) -> bytes:
        """Exactly ``n`` bytes of its stdout by ``until``."""
        out = bytearray(self._pending[:n])
        del self._pending[:n]
        while len(out) < n:
            chunk = self._chunk(min(n - len(out), 1 << 20), until)
            if not chunk:
                raise EOFError
            out += chunk
        return bytes(out)

    def readline(self, until: float) -> bytes:
        """Its next line of stdout, newline included, by ``until``; at its end what is left (b"" then on)."""
        while b"\n" not in self._pending:
            chunk = self._chunk(1 << 16, until)
            if not chunk:
                line = bytes(self._pending)
                self._pending.clear()
                return line
            self._pending += chunk
        n = self._pending.index(b"\n") + 1
        line = bytes(self._pending[:n])
        del self._pending[:n]
        return line

    # ------------------------------------------------------------ ending it

    def kill(self) -> int:
        """Kill it (its process group too under ``group``), reap it and close the pipes; its exit status."""
        _kill(self._p, self.group)
        self._p.wait()
        self._release()
        return self._p.returncode

    def close(self, farewell: bytes = b"", grace: float = 5.0) -> int:
        """End it: ``farewell`` (its protocol's goodbye) written to its stdin, which is closed; ``grace``
        seconds to exit, then :meth:`kill`.  Reaped, the pipes closed; its exit status."""
        if self._p.poll() is None:
            until = deadline(grace)
            try:
                if farewell:
                    self.write(farewell, until)
                if self._p.stdin is not None:
                    self._p.stdin.close()
                self.wait(max(0.0, until - time.monotonic()))
            except (OSError, ValueError, TimeoutError, EOFError):
                pass
        return self.kill()

    def _release(self) -> None:
        for sel in self._ready.values():
            sel.close()
        self._ready.clear()
        for f in (self._p.stdin, self._p.stdout, self._p.stderr):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass

    def __enter__(self) -> Process:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
        else:  # an error or an interrupt while talking to it: no goodbye
            self.kill()
