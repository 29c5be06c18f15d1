"""Measured cost on a board: the hardware's cycle and retired-instruction counters around warm calls.

Current Linux kernels disable user-mode ``rdcycle``, so the counts come from ``perf_event_open``: a small
reader on the board (harness/server/board_counters.c) opens the user-mode ``cycles`` and
``instructions`` counters of the kernel server's process and prints them each time it is asked.
:func:`measure` reads them around the same warm call made ``r1`` and ``r2`` times in a row (the server's
``repeat``) and takes the slope, so the request's own framing, copying and the reads cancel out; the
pair is repeated until the last three slopes agree within :data:`TOLERANCE`.  Without counter access
the reader says why and :class:`CounterAccess` is one line on how to enable it (docs/board.md).

``RVVDIFF_COUNTERS=fake:GHZ[:IPC]`` replaces the reader by :class:`FakeCounters`, a counter that ticks
at GHZ over the time the server reports inside kernels: the path the tests run (there is no RISC-V
hardware on the machines rvvdiff is developed on; this module was not run on silicon).
"""

from __future__ import annotations

import math
import statistics
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from harness.core import settings
from harness.core.proc import Process, deadline
from harness.emulators import protocol as P
from harness.emulators.board import Board, helper_program
from harness.emulators.pool import KernelServer
from harness.toolchain.compilers import ToolchainError

#: The last three slopes (cycles per call) agree within this fraction of their median: stable.
TOLERANCE = 0.02
#: Measuring pairs at most this many times; a call still unstable gets the median and its spread.
MAX_ROUNDS = 12
#: The longer run of a pair lasts about this long (seconds), from the warm call's kernel time.
TARGET_S = 0.02
#: Measured / estimated cycles beyond this factor (either way) is a disagreement listed by ``rvvdiff cost``.
DISAGREE = 1.5
#: Seconds the reader on the board has to answer (its first line comes after an ssh connection).
READER_TIMEOUT = 120.0


class CounterAccess(ToolchainError):
    """The hardware counters cannot be read: the one line says how to allow it."""


def access_hint(where: str, error: str, paranoid: str) -> str:
    """The one line of :class:`CounterAccess` for the reader's ``error`` and ``perf_event_paranoid``."""
    if any(s in error for s in ("not implemented", "No such file", "not supported", "No such device")):
        return (f"{where} offers no hardware counters to perf_event_open ({error}): its kernel exposes no PMU "
                "for this core (`perf list hw` on the board shows none; docs/board.md); QEMU user mode, the "
                "stand-in board's, has none either")
    return (f"{where}: perf_event_open refused the counters ({error}; kernel.perf_event_paranoid = {paranoid}): "
            "allow them with `sudo sysctl -w kernel.perf_event_paranoid=2` (persist it in /etc/sysctl.d/), "
            "or run as root or with CAP_PERFMON (docs/board.md)")


class Counters(ABC):
    """The cycles and retired instructions of one server so far."""

    @abstractmethod
    def read(self) -> tuple[int, int]:
        """(cycles, instret) counted in user mode since the counters were opened."""

    def close(self) -> None:
        return None


class BoardCounters(Counters):
    """harness/server/board_counters.c on the board, attached to the server's pid."""

    def __init__(self, board: Board, server: KernelServer) -> None:
        assert server.proc is not None
        pid = board.pid(server.proc, server.stderr_head())
        if pid is None:
            raise CounterAccess(f"{board.where()}: the server's pid on the board is unknown")
        self.where = board.where()
        argv = board.run_argv(board.place(helper_program("board_counters")), str(pid))
        self.proc = Process(argv, group=False)  # in the caller's session, as the server it reads
        first = self._line()
        if first != "ready":
            self.close()
            raise CounterAccess(self._error(first))

    def _line(self) -> str:
        try:
            return self.proc.readline(deadline(READER_TIMEOUT)).decode(errors="replace").strip()
        except TimeoutError:
            self.close()
            raise CounterAccess(f"{self.where}: the counter reader did not answer within {READER_TIMEOUT:g} s") from None

    def _error(self, line: str) -> str:
        if line.startswith("error="):
            error, _, paranoid = line.removeprefix("error=").rpartition(" paranoid=")
            return access_hint(self.where, error, paranoid)
        return f"{self.where}: the counter reader did not start: {line or 'no output'}"

    def read(self) -> tuple[int, int]:
        try:
            self.proc.write(b"r\n", deadline(READER_TIMEOUT))
        except (TimeoutError, EOFError):
            pass  # what it said instead is the next line, or none
        line = self._line()
        try:
            cycles, instret = (int(x) for x in line.split())
        except ValueError:
            raise CounterAccess(self._error(line)) from None
        return cycles, instret

    def close(self) -> None:
        self.proc.kill()


class FakeCounters(Counters):
    """A counter ticking at ``ghz`` over the server's time inside kernels (``ipc`` instructions per cycle)."""

    def __init__(self, server: KernelServer, ghz: float, ipc: float = 1.0) -> None:
        self.server, self.ghz, self.ipc = server, ghz, ipc

    def read(self) -> tuple[int, int]:
        cycles = round(self.server.kernel_s * 1e9 * self.ghz)
        return cycles, round(cycles * self.ipc)


def counters_for(board: Board, server: KernelServer) -> Counters:
    """The counter source of ``server``: the board's reader, or ``RVVDIFF_COUNTERS=fake:GHZ[:IPC]``."""
    spec = settings.get("COUNTERS") or ""
    if not spec:
        return BoardCounters(board, server)
    kind, _, rest = spec.partition(":")
    try:
        if kind != "fake":
            raise ValueError
        ghz, _, ipc = rest.partition(":")
        return FakeCounters(server, float(ghz), float(ipc or 1.0))
    except ValueError:
        raise CounterAccess(f"RVVDIFF_COUNTERS={spec!r}: unset it (the board's counters) or give fake:GHZ[:IPC]") from None


@dataclass(frozen=True)
class Measured:
    """The counted cost of one warm call: the median slope of the stable rounds."""

    cycles: float
    instret: float
    #: The two repeat counts of each round.
    repeats: tuple[int, int]
    rounds: int
    #: (max - min) / median of the last three cycle slopes.
    spread: float

    @property
    def stable(self) -> bool:
        return self.spread <= TOLERANCE


def _spread(xs: Sequence[float]) -> float:
    mid = statistics.median(xs)
    return (max(xs) - min(xs)) / mid if mid > 0 else math.inf


def measure(server: KernelServer, counters: Counters, kernel: str, ip: Sequence[int] = (), fp: Sequence[float] = (),
            bufs: Sequence[P.Buf] = (), *, timeout: float = 60.0) -> tuple[P.Response, Measured]:
    """The warm call's response and its cycles and instructions per call (module docstring)."""
    first = server.call(kernel, ip, fp, bufs, timeout=timeout)  # warm: caches, pages, ggml's tables
    once_s = max(first.kernel_ns * 1e-9, 1e-7)
    r2 = max(4, min(10_000, math.ceil(TARGET_S / once_s)))
    r1 = 1
    cyc: list[float] = []
    ins: list[float] = []
    last = first
    for _ in range(MAX_ROUNDS):
        counts = []
        for r in (r1, r2):
            c0, i0 = counters.read()
            last = server.call(kernel, ip, fp, bufs, repeat=r, timeout=timeout)
            c1, i1 = counters.read()
            counts.append((c1 - c0, i1 - i0))
        (ca, ia), (cb, ib) = counts
        cyc.append((cb - ca) / (r2 - r1))
        ins.append((ib - ia) / (r2 - r1))
        if len(cyc) >= 3 and _spread(cyc[-3:]) <= TOLERANCE:
            break
    tail_c, tail_i = cyc[-3:], ins[-3:]
    return last, Measured(statistics.median(tail_c), statistics.median(tail_i), (r1, r2), len(cyc),
                          _spread(tail_c) if len(tail_c) == 3 else math.inf)


@dataclass(frozen=True)
class Disagreement:
    case: str
    core: str
    measured: float
    estimated: float

    @property
    def ratio(self) -> float:
        return self.measured / self.estimated

    def describe(self) -> str:
        return (f"{self.case}: measured {self.measured:,.0f} cycles, estimated {self.estimated:,.0f} on {self.core} "
                f"({self.ratio:.2f}x)")


def disagreements(rows: Iterable[Mapping], factor: float = DISAGREE) -> list[Disagreement]:
    """The rows (``case``, ``measured_cycles``, ``estimates``: core -> {"cycles": ...}) whose measured cycles
    and an estimate differ by more than ``factor`` either way, the largest first."""
    found = []
    for row in rows:
        m = row.get("measured_cycles")
        for core, est in (row.get("estimates") or {}).items():
            e = est.get("cycles") if isinstance(est, Mapping) else est
            if m and e and max(m / e, e / m) > factor:
                found.append(Disagreement(row["case"], core, float(m), float(e)))
    return sorted(found, key=lambda d: -max(d.ratio, 1 / d.ratio))
