"""Targets (VLEN x ISA build x stress mode x compiler) and the session every differential test of a process shares."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import reject
from hypothesis.control import currently_in_test_context

from harness.check import observe
from harness.check.compare import OutputsDiffer, assert_same_outputs
from harness.core import settings
from harness.core.config import ISA_BUILDS, IsaBuild, static_twin
from harness.core.matrix import DEFAULT_COMPILER, Point
from harness.cost.measure import board_counters
from harness.cost.measure.spike_count import Cost
from harness.cost.measure.spike_runs import measure as measure_call
from harness.cost.measure.spike_runs import traffic_at
from harness.emulators import pool, registry
from harness.emulators import protocol as P
from harness.emulators.base import Emulator
from harness.emulators.board import Board
from harness.emulators.trace import Trace, trace_call
from harness.ggml.source import GgmlSource, SourceError, resolve
from harness.toolchain.builds import Build, BuildError, BuildFailedEarlier, IsaUnavailable, ensure_built, failed_reason
from harness.toolchain.compilers import ToolchainError, twin_gap

#: Why a stress target does not trace when the run has the target without stress too: which functions a
#: call runs is decided by scalar code on the shapes and the build (ggml's VLEN dispatch reads vlenb, not
#: vector data), and the stress properties change only the values of tail and inactive elements, which
#: the family's value tests check at the stress target.  One QEMU start with translation logging per
#: probe is the dearest step of the suite; the trace runs once per VLEN, ISA build and compiler.
TRACED_WITHOUT_STRESS = ("traced at the same VLEN, ISA build and compiler without stress (which functions run does "
                         "not depend on tail or inactive element values, which the value tests check here)")
#: Why a dynamically linked kernel server (a dispatch variant's build, riscv64_v) is not traced.
UNTRACED_SHARED = ("the kernel server of this build is linked against the variant's shared libraries, and QEMU's "
                   "-d in_asm log names the functions of the main program only, not those of its shared libraries: "
                   "which function ran is checked on the static v build of the same code")


class Session:
    """What every differential test of this process reaches: the tree, the emulator, the builds, the
    kernel servers and the most of them it keeps running, and what the running test observed.

    The pytest plugin's session (:class:`harness.plugin.session.RvvdiffSession`, made in
    pytest_configure) is one; the differential test modules reach the one of the run in progress
    through :func:`session`: the owner of the observation attached in this process (a pytest run
    inside a test, pytester's in-process runs: the innermost).
    """

    def __init__(self, config: pytest.Config, live_limit: int | None = None) -> None:
        self.config = config
        #: The builds made, by (ISA build, compiler) name.
        self.builds: dict[tuple[str, str], Build] = {}
        #: (ISA build, compiler) pairs this process will not use, with the one-line reason their tests are skipped.
        self.unusable: dict[tuple[str, str], str] = {}
        #: The kernel servers of this process (harness/emulators/pool.py), stopped when the session ends.
        self.pool = pool.Pool()
        #: The most kernel servers this process keeps running (None: no limit; harness/plugin/workers.py).
        self.live_limit = live_limit
        #: What the running test observed (harness/check/observe.py): attached while the session runs.
        self.observation = observe.Observation(owner=self)

    def begin(self) -> None:
        """This session is the run in progress (pytest_configure)."""
        observe.attach(self.observation)

    def end(self) -> None:
        """Its run is over (pytest_unconfigure): its servers stop, and the run it interrupted, if any, is
        in progress again."""
        observe.detach(self.observation)
        self.pool.shutdown()

    @staticmethod
    def current() -> Session | None:
        """The session of the pytest run in progress in this process, if any."""
        owner = observe.current().owner
        return owner if isinstance(owner, Session) else None

    @functools.cached_property
    def source(self) -> GgmlSource:
        """The tree under test (--ggml-src), resolved on first use; a bad --ggml-src is a usage error."""
        try:
            return resolve(self.config.getoption("ggml_src"))
        except SourceError as e:
            raise pytest.UsageError(str(e)) from None

    @property
    def timeout(self) -> float:
        """--kernel-timeout, times the emulator's slowdown (Spike interprets where QEMU translates)."""
        return float(self.config.getoption("kernel_timeout")) * registry.kind(self.config.getoption("emulator")).timeout_factor

    @functools.cached_property
    def emulator(self) -> Emulator:
        """The emulator every kernel server of this session runs under (--emulator)."""
        return emulator_for(self.config)

    def server(self, target: Target, emulator: Emulator | None = None, *, beside: bool = False) -> pool.KernelServer:
        """The kernel server of ``target`` in this process (harness/emulators/pool.py), started on first use; under
        ``emulator`` instead of the session's when given (a second opinion: Spike without a matrix library).
        ``beside``: a server that runs beside the running target's (its static twin, called after it for every
        call): starting it stops no other, or the two would stop each other on every call under the live limit."""
        return self.pool.server(self.build(target.isa, target.compiler), target, emulator or self.emulator,
                                live_limit=None if beside else self.live_limit)

    def build(self, isa: IsaBuild, compiler: str = DEFAULT_COMPILER) -> Build:
        """The build for ``isa`` by ``compiler``, made on first use (in the test's setup, before any
        Hypothesis example).

        One outcome per (ISA build, compiler) and session: a tree whose CMake cannot express ``isa``, a
        compiler that rejects its -march or is not installed, or a -march that needs an extension the
        emulator lacks, skips the test with the reason; a build that fails raises its full error in the
        first test that needs it (in whichever process of the session), and every other test of that
        build is skipped with a line pointing at it.
        """
        key = (isa.name, compiler)
        b = self.builds.get(key)
        if b is not None:
            return b
        if key in self.unusable:
            pytest.skip(self.unusable[key])
        error = None
        try:
            b = ensure_built(self.source, isa, compiler)
        except (IsaUnavailable, BuildFailedEarlier, ToolchainError) as e:
            self.unusable[key] = str(e)
        except BuildError as e:
            error = str(e)
            self.unusable[key] = failed_reason(self.source, isa, error, compiler)
        if error is not None:  # raised outside the except clause: no chained harness traceback
            pytest.fail(error, pytrace=False)
        if key in self.unusable:
            pytest.skip(self.unusable[key])
        gap = self.emulator.gap(b)
        if gap:
            self.unusable[key] = gap
            pytest.skip(gap)
        self.builds[key] = b
        return b

    def twin(self, target: Target) -> Target | None:
        """The static twin of ``target`` (harness/core/config.py's ``static_twin``: the same VLEN, stress mode, compiler
        and emulator, the static ISA build of the same code), its build made; None when ``target``'s build has none, or
        the compiler's two builds cannot be held to the same bytes (``twin_gap``), or the twin's build cannot be made
        here (the reason kept in :attr:`unusable`).  A twin whose build fails fails the test (:meth:`build`)."""
        name = static_twin(target.isa)
        if name is None or twin_gap(target.compiler):
            return None
        twin = dataclasses.replace(target, isa=ISA_BUILDS[name])
        if (name, target.compiler) in self.unusable:
            return None
        try:
            self.build(twin.isa, twin.compiler)
        except pytest.skip.Exception:
            return None
        return twin


def session() -> Session:
    """The session of the pytest run in progress (for the differential test modules)."""
    s = Session.current()
    if s is None:
        raise RuntimeError("rvvdiff: no pytest session is configured (is the plugin loaded?)")
    return s


@dataclass(frozen=True, repr=False)
class Target(Point):
    """Where a differential test runs its kernel (a :class:`~harness.core.matrix.Point`: one VLEN, one ISA build,
    one stress mode, the build of one compiler (its name: harness/toolchain/compilers.py's ``COMPILERS``, or
    ``user``), the session's emulator), and how the test reaches it."""

    #: The id ends in the compiler's name (the run selected more than one compiler).
    named: bool = field(default=False, compare=False)

    @property
    def id(self) -> str:
        return self.name(self.named)

    def server(self) -> pool.KernelServer:
        return session().server(self)

    def needs_vector(self, what: str) -> None:
        """Skip a test that asks which RVV code runs (``what``) on a build without V, saying why: rv64gc
        compiles none of the tree's RVV code; its kernels are ggml's generic C, which the other tests
        of the target still check against their oracles."""
        if not self.isa.vector:
            pytest.skip(f"{what}: the {self.isa.name} build has no vector extension and compiles none of the tree's "
                        "RVV code (ggml's generic C runs; the vector builds answer this)")

    @property
    def features(self) -> dict[str, bool]:
        """Extensions the build was compiled for, as the server reports them (``feature.zvfh`` ...)."""
        h = self.server().hello
        return {k.split(".", 1)[1]: v == "1" for k, v in h.items() if k.startswith("feature.")}

    def call(self, kernel: str, ip: Sequence[int] = (), fp: Sequence[float] = (),
             bufs: Sequence[P.Buf] = (), *, repeat: int = 1, timeout: float | None = None,
             emulator: Emulator | None = None) -> P.Response:
        """One kernel call under the session's deadline (--kernel-timeout), or ``timeout`` seconds for
        a call known to be long (set-up work such as building a corpus, not a kernel under test); on a server
        under ``emulator`` when given (:meth:`Session.server`)."""
        sess = session()
        missing = sess.build(self.isa, self.compiler).missing_kernel(kernel)
        if missing:  # its adapter does not compile against this tree: the server has no such kernel
            pytest.skip(missing)
        srv = sess.server(self, emulator)
        seen = sess.observation
        w0, k0 = srv.wall_s, srv.kernel_s
        record = {"kernel": kernel, "ip": list(ip), "fp": list(fp), "bufs": list(bufs), "outputs": None,
                  "message": "", "argv": srv.argv}
        seen.keep("call", record)
        try:
            r = srv.call(kernel, ip, fp, bufs, repeat=repeat, timeout=max(timeout or 0, sess.timeout))
            record["outputs"], record["message"], record["kernel_ns"] = r.outputs, r.message, r.kernel_ns
        except pool.Unsupported as e:
            record["message"] = str(e)
            seen.record("unsupported", 1)
            _cannot_run_here()
            raise
        except pool.KernelFailure as e:
            record["message"] = str(e)
            raise
        finally:
            seen.record("calls", 1)
            seen.record("request_s", srv.wall_s - w0)
            seen.record("kernel_s", srv.kernel_s - k0)
        twin = sess.twin(self) if emulator is None else None
        if twin is not None:
            self._held_to(twin, r, kernel, ip, fp, bufs, repeat=repeat, timeout=max(timeout or 0, sess.timeout))
        return r

    def _held_to(self, twin: Target, r: P.Response, kernel: str, ip: Sequence[int], fp: Sequence[float],
                 bufs: Sequence[P.Buf], *, repeat: int, timeout: float) -> None:
        """The same call on ``twin`` (the static build of the same code): its output bytes must be ``r``'s
        (harness/check/compare.py's ``assert_same_outputs``, :class:`OutputsDiffer` otherwise)."""
        __tracebackhide__ = True
        sess = session()
        if sess.build(twin.isa, twin.compiler).missing_kernel(kernel):
            return  # the twin has no such kernel: nothing to hold the call to
        srv = sess.server(twin, beside=True)
        w0 = srv.wall_s
        builds = (f"{self.isa.name} by {self.compiler}", f"its static twin {twin.isa.name} by {twin.compiler}")
        try:
            t = srv.call(kernel, ip, fp, bufs, repeat=repeat, timeout=timeout)
        except pool.KernelFailure as e:
            raise OutputsDiffer(f"{kernel}: returned on {builds[0]}, failed on {builds[1]} [{self.id}]: {e}",
                                kernel=kernel, buffer=-1, index=-1, builds=builds) from None
        finally:
            observe.record("request_s", srv.wall_s - w0)
        assert_same_outputs(r.outputs, t.outputs, kernel=kernel, builds=builds, context=self.id)

    def measure(self, kernel: str, ip: Sequence[int] = (), fp: Sequence[float] = (),
                bufs: Sequence[P.Buf] = (), *, emulator: Emulator | None = None) -> tuple[P.Response, Cost]:
        """One call counted by the emulator (harness/cost/measure/spike_count.py): its warm response and cost; under
        ``emulator`` instead of the session's when given (as :meth:`call`)."""
        emu = emulator or session().emulator
        if isinstance(emu, Board):  # a board: its hardware counters (harness/cost/measure/board_counters.py)
            return self._counted(emu, kernel, ip, fp, bufs)
        if not emu.counts:
            raise pytest.UsageError(f"the cost measure counts instructions under Spike; {emu.label} cannot: "
                                    "run with --emulator spike (install: ci/setup.sh --spike)")
        build = session().build(self.isa, self.compiler)
        missing = build.missing_kernel(kernel)
        if missing:
            pytest.skip(missing)
        if self.vlen not in emu.vlens:
            pytest.skip(f"{emu.label} does not emulate VLEN {self.vlen}")
        call, what = (kernel, list(ip), list(fp), list(bufs)), f"{kernel} [{self.id}, {emu.named_as or emu.label}]"
        r, cost = measure_call(emu.for_build(build), build, self.vlen, call, timeout=session().timeout, what=what)
        if (which := settings.get("COST_TRAFFIC") or "") not in ("", "0"):
            only = None if which == "1" else frozenset(which.split(","))
            cost = dataclasses.replace(cost, traffic=traffic_at(emu.for_build(build), build, self.vlen, call,
                                                                timeout=session().timeout, what=what, only=only))
        return r, cost

    def _counted(self, board: Board, kernel: str, ip: Sequence[int], fp: Sequence[float],
                 bufs: Sequence[P.Buf]) -> tuple[P.Response, Cost]:
        srv = self.server()
        try:
            source = board_counters.counters_for(board, srv)
        except board_counters.CounterAccess as e:
            no_access = str(e)
        else:
            no_access = ""
        if no_access:
            pytest.fail(no_access, pytrace=False)
        try:
            r, m = board_counters.measure(srv, source, kernel, ip, fp, bufs, timeout=session().timeout)
        finally:
            source.close()
        n = round(m.instret)
        return r, Cost(instret=n, cycles=round(m.cycles), executed=n, vector=0, vector_work=0)

    def trace(self, kernel: str, ip: Sequence[int] = (), fp: Sequence[float] = (),
              bufs: Sequence[P.Buf] = ()) -> Trace:
        """Run one call in a fresh, logging QEMU and return the functions it executed."""
        if not session().emulator.traces:
            pytest.skip("a trace of the functions a call executes needs QEMU's -d logging: this check runs on QEMU")
        if self.stress and False in session().config.getoption("rvv_stress"):
            pytest.skip(TRACED_WITHOUT_STRESS)
        if self.server().build.runtime is not None:
            pytest.skip(UNTRACED_SHARED)
        started = time.perf_counter()
        try:
            return trace_call(self.server(), kernel, ip, fp, bufs, timeout=session().timeout)
        finally:  # a traced probe is emulated work too (one logging QEMU per probe): the timing table counts it so
            observe.record("emulated_s", time.perf_counter() - started)

    def __repr__(self) -> str:
        return f"Target({self.id!r})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # Hypothesis's printer of failing examples
        p.text(repr(self))


def _cannot_run_here() -> None:
    """A request the emulator cannot run (threads on Spike): a Hypothesis example is rejected and
    another drawn.  Outside Hypothesis the :class:`pool.Unsupported` goes on: a fixed case of
    ``explore(after=...)`` is passed over, anything else skips its test with the reason
    (:meth:`harness.plugin.session.RvvdiffSession.pytest_runtest_makereport`)."""
    if currently_in_test_context():
        reject()


def emulator_for(config: pytest.Config) -> Emulator:
    """The emulator --emulator names; not installed is a usage error that says how to install it."""
    try:
        return registry.get(config.getoption("emulator"))
    except ToolchainError as e:
        raise pytest.UsageError(str(e)) from None


def server_stats(of: pool.Pool) -> list[dict[str, Any]]:
    """The request counts and times of ``of``'s servers (for the summary; sent on by xdist workers)."""
    return [{"server": s.describe(), "requests": s.requests, "wall_s": s.wall_s, "kernel_s": s.kernel_s,
             "starts": s.starts} for s in of.servers()]
