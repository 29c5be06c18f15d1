"""Kernel servers running under an emulator, one per (process, build, VLEN, stress mode, emulator).

The emulator is any :class:`harness.emulators.base.Emulator`: qemu-riscv64 (harness/emulators/qemu.py)
or Spike (harness/emulators/spike.py, the same server linked bare metal); both speak the same
protocol on stdin/stdout, and the pool asks the emulator for its command, binary and limits.

A :class:`Pool` belongs to its owner (the pytest session of a process: harness/plugin/targets.py; a
command or test that starts servers itself).  A server is started on first use and reused for every
later request (so each pytest-xdist worker has its own; under rvvdiff's target scheduling a worker keeps
only the server of the target it is on: :meth:`Pool.server`'s ``live_limit``).  Every request has a
deadline.  When the kernel crashes or hangs, the request raises an exception
that names the kernel, the signal or the timeout, and the server is restarted
on the next request: one bad kernel costs one case, never the session.
"""

from __future__ import annotations

import fcntl
import functools
import os
import signal
import struct
import tempfile
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.matrix import Point
from harness.core.proc import Process, deadline
from harness.emulators import executed
from harness.emulators import protocol as P
from harness.emulators.base import Emulator
from harness.emulators.qemu import cpu_props
from harness.toolchain.builds import Build


class KernelFailure(AssertionError):
    """A kernel call did not produce a result: crash, hang or out-of-bounds write.

    A subclass of AssertionError: in a test it is a failure of that case.
    """


class KernelCrash(KernelFailure):
    pass


class KernelHang(KernelFailure):
    pass


class GuardViolation(KernelFailure):
    pass


class ServerError(RuntimeError):
    """The server could not start, or the harness sent something it rejects (a harness bug)."""


class Unsupported(ServerError):
    """A valid request the emulator cannot run (more than one thread on Spike); not a kernel failure."""


_SIGNAL_MEANING = {
    signal.SIGILL: "the kernel used an extension the emulated CPU lacks (SIGILL: illegal instruction)",
    signal.SIGSEGV: "the kernel crashed with SIGSEGV (invalid memory access)",
    signal.SIGBUS: "the kernel crashed with SIGBUS (misaligned or invalid access)",
    signal.SIGFPE: "the kernel crashed with SIGFPE",
    signal.SIGABRT: "the kernel aborted (SIGABRT; an assertion in ggml?)",
}


@dataclass
class KernelServer:
    build: Build
    vlen: int
    stress: bool
    emulator: Emulator
    #: Where the server logs the code it executes (--rvv-coverage: harness/emulators/executed.py), or None.
    log_dir: Path | None = None
    proc: Process | None = None
    hello: dict[str, str] = field(default_factory=dict)
    #: Wall time spent in requests (Python side) and inside kernels (server side), for the time profile.
    wall_s: float = 0.0
    kernel_s: float = 0.0
    requests: int = 0
    starts: int = 0

    def __post_init__(self) -> None:
        # The emulator as it runs this build (its extension libraries, ISA extras and environment on Spike).
        self.emulator = self.emulator.for_build(self.build)

    # ------------------------------------------------------------ identity

    @property
    def point(self) -> Point:
        """Where it runs: its VLEN, its build's ISA build and compiler, its stress mode, its emulator."""
        return Point(self.vlen, self.build.isa, self.stress, self.build.compiler, self.emulator.name)

    @property
    def props(self) -> dict[str, bool]:
        return cpu_props(self.build.isa, self.stress)

    @property
    def cpu(self) -> str:
        """The emulator's CPU string (QEMU's -cpu argument, Spike's --isa string)."""
        return self.emulator.cpu(self.vlen, self.props)

    @functools.cached_property
    def program(self) -> Path:
        """The server binary the emulator runs: the build's Linux program, or its bare-metal link for Spike (linked once)."""
        return self.emulator.server_binary(self.build)

    @property
    def argv(self) -> list[str]:
        return self.emulator.command(self.program, self.vlen, self.props)

    def describe(self) -> str:
        return (f"VLEN {self.vlen}, ISA build {self.build.isa.name}" + (", tail/mask stress" if self.stress else "")
                + (f", {self.emulator.named_as}" if self.emulator.named_as else ""))

    # ---------------------------------------------------------- lifecycle

    def start(self, timeout: float = 120.0) -> None:
        lacking = self.emulator.lacking(self.props)
        if lacking:
            raise ServerError(f"{self.emulator.describe()} cannot provide {', '.join(lacking)} ({self.describe()})"
                              + self.emulator.lacking_hint)
        if self.vlen not in self.emulator.vlens:
            raise ServerError(f"{self.emulator.describe()} does not emulate VLEN {self.vlen} (it runs "
                              f"{', '.join(map(str, self.emulator.vlens))})" + self.emulator.vlen_hint)
        argv = self.argv
        log = executed.log_for(self.log_dir, self.program, self.point, self.starts + 1) if self.emulator.logs_exec else None
        if log is not None:
            argv = self.emulator.exec_log_command(self.program, self.vlen, self.props, log)
        self._log = log
        self._stderr = tempfile.TemporaryFile()
        # Appending: Spike's runtime reopens /dev/stderr, and both writers must not overwrite each other.
        fcntl.fcntl(self._stderr.fileno(), fcntl.F_SETFL, os.O_APPEND)
        # In the caller's session (a Ctrl-C at the terminal reaches it as before); a crash leaves no core file.
        self.proc = Process(argv, stderr=self._stderr, group=False, core_dumps=False, env=self.build.isa.env or None)
        self.starts += 1
        try:
            r = self._exchange(P.encode_hello(), "hello", timeout)
        except KernelFailure as e:
            raise ServerError(f"the kernel server did not start ({self.describe()}): {e}\n  command: "
                              + " ".join(self.argv)) from None
        self.hello = dict(line.split("=", 1) for line in r.message.splitlines() if "=" in line)
        if self.hello.get("protocol") != str(P.VERSION):
            raise ServerError(f"kernel server speaks protocol {self.hello.get('protocol')}, harness {P.VERSION}")
        got = int(self.hello.get("rvv_vlen_bytes", "0")) * 8
        if got != (self.vlen if self.build.isa.qemu.get("v") else 0):  # a build without V detects none
            self.stop()
            raise ServerError(f"asked {self.emulator.name} for VLEN {self.vlen} but ggml detected VLEN {got} "
                              f"(ggml_cpu_get_rvv_vlen); command: {' '.join(self.argv)}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.close(farewell=P.encode_quit(), grace=5)
        self.proc = None
        self._compact_log()

    def _compact_log(self) -> None:
        """--rvv-coverage: the ended server's execution log becomes its PCs (harness/emulators/executed.py); Spike's
        are on its stderr (:meth:`Emulator.exec_log_end`), read before the next start replaces that file."""
        log, self._log = getattr(self, "_log", None), None
        if log is not None:
            self.emulator.exec_log_end(log, self._stderr_bytes())
            executed.compact(log)

    def _kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.emulator.killed(self.stderr_head())
            self.proc = None
            self._compact_log()

    def stderr_head(self, n: int = 200) -> bytes:
        """The first bytes the server (or its emulator, or ssh) wrote to stderr."""
        try:
            self._stderr.seek(0)
            return self._stderr.read(n)
        except (OSError, AttributeError, ValueError):
            return b""

    def _stderr_bytes(self) -> bytes:
        """Everything on the server's stderr so far."""
        try:
            self._stderr.seek(0)
            return self._stderr.read()
        except (OSError, AttributeError, ValueError):
            return b""

    def _stderr_tail(self, n: int = 2000) -> str:
        """The end of what the server (or its emulator) wrote on stderr, without an execution log (Spike's -g)."""
        return self.emulator.server_stderr(self._stderr_bytes().decode(errors="replace"))[-n:].strip()

    # ---------------------------------------------------------- requests

    def call(self, kernel: str, ip: Sequence[int] = (), fp: Sequence[float] = (), bufs: Sequence[P.Buf] = (),
             *, repeat: int = 1, timeout: float = 60.0) -> P.Response:
        """Run one kernel call; raise :class:`KernelFailure` if it crashes, hangs or writes out of bounds."""
        if self.proc is not None and self.proc.poll() is not None:
            # Died between calls (a dropped board connection, a kill from outside): said, not hidden by a
            # silent restart; the next call starts a fresh server.
            raise self._crash(f"{kernel} (the server was found dead before this call)")
        if self.proc is None:
            self.start()
        r = self._exchange(P.encode_call(kernel, ip, fp, bufs, repeat), kernel, timeout)
        self.kernel_s += r.kernel_ns * 1e-9
        if r.status == P.Status.GUARD:
            raise GuardViolation(f"{r.message} [{self.describe()}]")
        if r.status == P.Status.UNSUPPORTED:
            raise Unsupported(f"{r.message} [{self.describe()}]")
        if r.status != P.Status.OK:
            raise ServerError(f"kernel server rejected {kernel} ({P.Status(r.status).name}): {r.message}")
        return r

    def _exchange(self, request: bytes, what: str, timeout: float) -> P.Response:
        assert self.proc is not None
        t0 = time.perf_counter()
        until = deadline(timeout)
        read = functools.partial(self.proc.read, until=until)
        try:
            self.proc.write(request, until)
            head = read(P.RESPONSE_HEADER.size)
            magic, status, ns, msg_len = P.RESPONSE_HEADER.unpack(head)
            if magic != P.RESPONSE_MAGIC:
                raise ServerError(f"garbled response from the kernel server (magic {magic:#x}) after {what}")
            msg = read(msg_len).decode(errors="replace")
            (n_out,) = struct.unpack("<I", read(4))
            outs = []
            for _ in range(n_out):
                (size,) = struct.unpack("<Q", read(8))
                outs.append(read(size))
        except TimeoutError:
            self._kill()
            raise KernelHang(f"{what} did not finish within {timeout:g} s and was killed "
                             f"[{self.describe()}]; the server is restarted for the next case") from None
        except EOFError:
            raise self._crash(what) from None
        finally:
            self.wall_s += time.perf_counter() - t0
            self.requests += 1
        return P.Response(P.Status(status), ns, msg, outs)

    def _crash(self, what: str) -> KernelFailure:
        assert self.proc is not None
        rc = self.proc.wait(10)
        if rc is None:
            self._kill()
        else:
            self.proc.close()  # reaped: its pipes are closed
        tail = self.emulator.explain(self.program, self._stderr_tail())
        self.proc = None
        self._compact_log()  # --rvv-coverage: what it executed before it died counts
        if rc is not None:
            rc = self.emulator.signal_of(rc)
        if lost := self.emulator.lost(rc):
            meaning = lost
        elif rc is not None and rc < 0:
            sig = signal.Signals(-rc)
            meaning = _SIGNAL_MEANING.get(sig, f"the kernel server died of {sig.name}")
        else:
            meaning = f"the kernel server exited with code {rc}"
        msg = f"{what}: {meaning} [{self.describe()}; {self.emulator.cpu_flag} {self.cpu}]"
        if tail:
            msg += f"\n  emulator/server stderr: {tail}"
        return KernelCrash(msg + "\n  the server is restarted for the next case")


def _stop_all(servers: dict[tuple[str, int, bool, str], KernelServer]) -> None:
    for s in list(servers.values()):
        s.stop()
    servers.clear()


class Pool:
    """The kernel servers of one owner (the pytest session of a process, a command or test that starts
    servers itself), one per (build, VLEN, stress mode, emulator): started on first use and reused.

    :meth:`shutdown` stops them (the owner's end: the session's, the end of a ``with`` block); so does
    the pool being collected or the interpreter exiting while they run.
    """

    def __init__(self, log_dir: Path | None = None) -> None:
        self._servers: dict[tuple[str, int, bool, Emulator], KernelServer] = {}
        #: Where its servers log the code they execute (--rvv-coverage: harness/emulators/executed.py), or None.
        self.log_dir = log_dir
        weakref.finalize(self, _stop_all, self._servers)

    def server(self, build: Build, at: Point, emulator: Emulator, *, live_limit: int | None = None) -> KernelServer:
        """The (lazily started) server of ``build`` (made for ``at``'s ISA build by its compiler) at ``at``'s VLEN
        and stress mode under ``emulator``.

        ``live_limit``: the most servers the caller wants running (None: no limit).  An xdist worker that
        runs its tests target by target (harness/plugin/workers.py) keeps one: the server of the target
        it is on; the least recently used others are stopped when a server starts, and started again
        (counted) only if their target comes back.
        """
        key = (build.key + build.isa.name, at.vlen, at.stress, emulator)
        s = self._servers.pop(key, None)
        if s is None or s.build.server != build.server:
            s = KernelServer(build, at.vlen, at.stress, emulator, self.log_dir)
        self._servers[key] = s  # the most recently used last
        if not s.alive():
            if live_limit is not None:
                live = [o for o in self._servers.values() if o is not s and o.alive()]
                for idle in live[:max(0, len(live) - live_limit + 1)]:
                    idle.stop()
            s.start()
        return s

    def servers(self) -> list[KernelServer]:
        return list(self._servers.values())

    def shutdown(self) -> None:
        """Stop every server (each starts again if asked for)."""
        _stop_all(self._servers)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
