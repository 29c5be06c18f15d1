"""The pytest plugin: options, targets (VLEN x ISA build x stress mode), report header and summary.

A differential test asks for the ``target`` argument; the plugin
parametrizes it over the selected VLENs, ISA builds and stress modes, so test
ids read ``test_vec_dot[f16-vlen512-zvfh]`` and ``-k`` selects by kernel,
VLEN or build.  Builds and servers are made lazily, in whichever process
(pytest-xdist worker) first needs them, under a file lock.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
import os
import pickle
import shlex
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from . import budget, known, observe, pool, report, tree
from . import protocol as P
from .build import (Build, BuildError, BuildFailedEarlier, IsaUnavailable, adapter_kernels, build_dir,
                    emulation_gap, ensure_built, failed_reason, failure_marker, failure_summary,
                    forget_session, session_note, tree_name)
from .config import ISA_BUILDS, SPIKE_VLENS, STRESS_PROPS, VLENS, IsaBuild, selection_type
from .source import SDIST_SPEC, GgmlSource, SourceError, resolve
from . import spike as spike_mod
from .spike import SLOWDOWN as SPIKE_SLOWDOWN
from .spike import Spike
from .toolchain import SERVER_DIR, Qemu, ToolchainError, describe
from .trace import Trace, trace_call

# ------------------------------------------------------------------ options


_parse_vlen_list = selection_type("--vlen", SPIKE_VLENS, "VLENs rvvdiff can emulate: 2048 and 4096 on Spike only",
                                  pytest.UsageError)


def parse_vlens(value: str) -> tuple[int, ...] | None:
    """A comma list of VLENs, or None for 'all': every VLEN of the chosen emulator (resolved in
    pytest_configure, once --emulator is known)."""
    return None if value.strip() == "all" else _parse_vlen_list(value)
parse_isas = selection_type("--isa", tuple(ISA_BUILDS), "ISA builds", pytest.UsageError)


def parse_stress(value: str) -> tuple[bool, ...]:
    modes = {"off": (False,), "on": (True,), "both": (False, True)}
    if value not in modes:
        raise pytest.UsageError(f"--rvv-stress {value!r}: use off, on or both")
    return modes[value]


def _positive(kind: type, option: str):
    def parse(value: str):
        try:
            v = kind(value)
        except ValueError:
            raise pytest.UsageError(f"{option} {value!r}: expected a positive number") from None
        if v <= 0:
            raise pytest.UsageError(f"{option} {value!r}: expected a positive number")
        return v
    return parse


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("rvvdiff", "rvvdiff: differential testing of ggml's RISC-V Vector kernels")
    g.addoption("--vlen", type=parse_vlens, default=None, metavar="LIST",
                help=f"VLENs to emulate: 'all' (default: {', '.join(map(str, VLENS))} on QEMU, also 2048 and 4096 "
                     f"on Spike) or a comma list of them")
    g.addoption("--emulator", choices=("qemu", "spike"), default="qemu",
                help="qemu (default): qemu-riscv64 user mode; spike: Spike, the RISC-V reference simulator "
                     "(bare metal, one thread, no tail/mask stress; VLEN up to 4096; install: ci/setup.sh --spike)")
    g.addoption("--isa", type=parse_isas, default=tuple(ISA_BUILDS), metavar="LIST",
                help=f"ISA builds: 'all' (default) or a comma list of {', '.join(ISA_BUILDS)}")
    g.addoption("--rvv-stress", type=parse_stress, default=(False,), nargs="?", const=(True,), metavar="MODE",
                help="QEMU tail/mask stress (agnostic elements set to all ones, vl = half the AVL): "
                     "off (default), on (also the bare flag) or both")
    g.addoption("--ggml-src", default=None, metavar="PATH",
                help="llama.cpp or ggml checkout to test (default: the pinned tree, fetched once)")
    g.addoption("--max-examples", type=_positive(int, "--max-examples"), default=None, metavar="N",
                help="Hypothesis examples per differential test (default: 25, or 200 with --thorough)")
    g.addoption("--thorough", action="store_true",
                help="the nightly budget: 200 examples per test instead of 25 (about 5x the run time)")
    g.addoption("--report-dir", default="reports", metavar="DIR",
                help="where failure reports (case.json, inputs.npz, README.md per failing test) and the run's "
                     "summary.md / summary.html / results.json go (default: reports/ under the rootdir)")
    g.addoption("--bench-log", default=None, metavar="FILE",
                help="(used by `rvvdiff bench`) append one JSON line per Hypothesis example with its time split, "
                     "and per test the largest call timed again, repeated, inside the server")
    g.addoption("--example-db", default=None, metavar="DIR",
                help="Hypothesis's example database (default: .hypothesis/ under the rootdir); a failing example "
                     "saved there replays first on the next run, on any tree")
    g.addoption("--known-failures", choices=("apply", "ignore"), default="apply",
                help="apply (default): the entries of known_failures.toml that apply to the tree are strict "
                     "expected failures; ignore: raw outcomes (the PR gate and rvvdiff bisect judge them)")
    g.addoption("--changes", default=None, metavar="FILE",
                help="a diff of two trees (written by rvvdiff gate): the tests that reach a changed function run "
                     "at the thorough budget; <report-dir>/covers.json says which")
    g.addoption("--changed-only", action="store_true",
                help="with --changes: run only the tests that reach a change")
    g.addoption("--also-run", action="append", default=[], metavar="GLOB",
                help="with --changed-only: also run the tests whose node id matches GLOB (fnmatch; repeatable), "
                     "at the thorough budget (rvvdiff fixes: a finding's tests)")
    g.addoption("--plan", default=None, metavar="FILE",
                help='run only the tests a JSON plan names, each at its budget: {"tests": {"<node id>": '
                     '"default" | "thorough" | "replay"}} (replay: no new examples, the saved ones and the fixed cases)')
    g.addoption("--kernel-timeout", type=_positive(float, "--kernel-timeout"), default=120.0, metavar="SECONDS",
                help="deadline of one kernel call before it counts as hung (default: 120)")


#: Examples per test.  The default keeps the main job (every family, VLEN, ISA build, stress off
#: and on) at about 14 minutes on 2 cores (README, figures); --thorough is for nightly runs.
DEFAULT_MAX_EXAMPLES = 25
THOROUGH_MAX_EXAMPLES = 200


def max_examples(config: pytest.Config) -> int:
    return config.getoption("max_examples") or (
        THOROUGH_MAX_EXAMPLES if config.getoption("thorough") else DEFAULT_MAX_EXAMPLES)

# ------------------------------------------------------------------ session


@dataclass
class Session:
    """What every differential test of this process shares: the tree, the emulator, the builds."""

    config: pytest.Config
    source: GgmlSource
    builds: dict[str, Build]
    #: ISA builds this process will not use, with the one-line reason their tests are skipped.
    unusable: dict[str, str] = field(default_factory=dict)

    @property
    def timeout(self) -> float:
        return float(self.config.getoption("kernel_timeout")) * (SPIKE_SLOWDOWN if self.on_spike else 1)

    @property
    def on_spike(self) -> bool:
        return self.config.getoption("emulator") == "spike"

    @functools.cached_property
    def emulator(self) -> Qemu | Spike:
        """The emulator every kernel server of this session runs under (--emulator)."""
        return _emulator(self.config)

    def build(self, isa: IsaBuild) -> Build:
        """The build for ``isa``, made on first use (in the test's setup, before any Hypothesis example).

        One outcome per ISA build and session: a tree whose CMake cannot express ``isa``, or whose
        -march needs an extension QEMU lacks, skips the test with the reason; a build that fails
        raises its full error in the first test that needs it (in whichever process of the
        session), and every other test of that ISA build is skipped with a line pointing at it.
        """
        b = self.builds.get(isa.name)
        if b is not None:
            return b
        if isa.name in self.unusable:
            pytest.skip(self.unusable[isa.name])
        error = None
        try:
            b = ensure_built(self.source, isa)
        except (IsaUnavailable, BuildFailedEarlier) as e:
            self.unusable[isa.name] = str(e)
        except BuildError as e:
            error = str(e)
            self.unusable[isa.name] = failed_reason(self.source, isa, error)
        if error is not None:  # raised outside the except clause: no chained harness traceback
            pytest.fail(error, pytrace=False)
        if isa.name in self.unusable:
            pytest.skip(self.unusable[isa.name])
        gap = emulation_gap(b)
        if gap:
            self.unusable[isa.name] = gap
            pytest.skip(gap)
        self.builds[isa.name] = b
        return b


_SESSION: Session | None = None


def session() -> Session:
    if _SESSION is None:
        raise RuntimeError("rvvdiff: no pytest session is configured (is the plugin loaded?)")
    return _SESSION


@dataclass(frozen=True, repr=False)
class Target:
    """Where a differential test runs its kernel: one VLEN, one ISA build, one stress mode."""

    vlen: int
    isa: IsaBuild
    stress: bool

    @property
    def id(self) -> str:
        return f"vlen{self.vlen}-{self.isa.name}" + ("-stress" if self.stress else "")

    def server(self) -> pool.KernelServer:
        return pool.server(session().build(self.isa), self.vlen, self.stress, session().emulator)

    @property
    def features(self) -> dict[str, bool]:
        """Extensions the build was compiled for, as the server reports them (``feature.zvfh`` ...)."""
        h = self.server().hello
        return {k.split(".", 1)[1]: v == "1" for k, v in h.items() if k.startswith("feature.")}

    def call(self, kernel: str, ip: Sequence[int] = (), fp: Sequence[float] = (),
             bufs: Sequence[P.Buf] = (), *, repeat: int = 1, timeout: float | None = None) -> P.Response:
        """One kernel call under the session's deadline (--kernel-timeout), or ``timeout`` seconds for
        a call known to be long (set-up work such as building a corpus, not a kernel under test)."""
        missing = session().build(self.isa).missing_kernel(kernel)
        if missing:  # its adapter does not compile against this tree: the server has no such kernel
            pytest.skip(missing)
        srv = self.server()
        w0, k0 = srv.wall_s, srv.kernel_s
        record = {"kernel": kernel, "ip": list(ip), "fp": list(fp), "bufs": list(bufs), "outputs": None,
                  "message": "", "argv": srv.argv}
        observe.keep("call", record)
        try:
            r = srv.call(kernel, ip, fp, bufs, repeat=repeat, timeout=max(timeout or 0, session().timeout))
            record["outputs"], record["message"], record["kernel_ns"] = r.outputs, r.message, r.kernel_ns
            return r
        except pool.Unsupported as e:
            record["message"] = str(e)
            _cannot_run_here()
            raise
        except pool.KernelFailure as e:
            record["message"] = str(e)
            raise
        finally:
            observe.record("calls", 1)
            observe.record("request_s", srv.wall_s - w0)
            observe.record("kernel_s", srv.kernel_s - k0)

    def trace(self, kernel: str, ip: Sequence[int] = (), fp: Sequence[float] = (),
              bufs: Sequence[P.Buf] = ()) -> Trace:
        """Run one call in a fresh, logging QEMU and return the functions it executed."""
        if session().on_spike:
            pytest.skip("a trace of the functions a call executes needs QEMU's -d logging: this check runs on QEMU")
        return trace_call(self.server(), kernel, ip, fp, bufs, timeout=session().timeout)

    def __repr__(self) -> str:
        return f"Target({self.id!r})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # Hypothesis's printer of failing examples
        p.text(repr(self))


def _cannot_run_here() -> None:
    """A request the emulator cannot run (threads on Spike): a Hypothesis example is rejected and
    another drawn.  Outside Hypothesis the :class:`pool.Unsupported` goes on: a fixed case of
    ``explore(after=...)`` is passed over, anything else skips its test with the reason
    (:func:`pytest_runtest_makereport`)."""
    from hypothesis import reject
    from hypothesis.control import currently_in_test_context

    observe.record("unsupported", 1)
    if currently_in_test_context():
        reject()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config._rvvdiff_t0 = time.time()  # type: ignore[attr-defined]
    if getattr(session.config, "workerinput", None) is None:
        report.clear(report_dir(session.config))


class BenchLog:
    """Per-example time split for `rvvdiff bench`: Hypothesis's own timing of generation and
    execution (observability callbacks) plus the harness's request and kernel times; per test,
    the largest call seen is timed again inside the server, repeated (the physical floor)."""

    REPEAT = 20  # calls per pure-kernel-time measurement (timed inside the server)

    def __init__(self, path: str) -> None:
        self.path = path
        self.nodeid = ""
        self._last = {"request_s": 0.0, "kernel_s": 0.0, "calls": 0.0}
        self._largest: dict[str, Any] | None = None

    def _write(self, row: dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")

    def start(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self._last = {k: 0.0 for k in self._last}
        self._largest = None

    def observe(self, obs: Any) -> None:
        if getattr(obs, "type", None) != "test_case":
            return
        now = {k: float(observe.peek(k)) for k in self._last}
        delta = {k: now[k] - self._last[k] for k in now}
        self._last = now
        t = dict(obs.timing)
        self._write({"kind": "example", "nodeid": self.nodeid, "status": obs.status,
                     "generate_s": sum(v for k, v in t.items() if k.startswith("generate:")),
                     "execute_s": t.get("execute:test", 0.0), **delta})
        call = observe.peek_kept("call")
        if isinstance(call, dict) and call.get("kernel_ns") is not None:
            size = sum(b.size for b in call["bufs"])
            if self._largest is None or size > self._largest["size"]:
                self._largest = {**call, "size": size}

    def pure(self, item: pytest.Item) -> None:
        """Time the test's largest call again inside the server, repeated: the physical floor."""
        c = self._largest
        if c is None:
            return
        t: Target = item.callspec.params["target"]  # type: ignore[attr-defined]
        r = t.server().call(c["kernel"], c["ip"], c["fp"], c["bufs"], repeat=self.REPEAT, timeout=session().timeout)
        # the request itself, so that it can be timed again on another build (rvvdiff fixes: before / after)
        calls = Path(self.path + ".calls")
        calls.mkdir(exist_ok=True)
        saved = calls / f"{hashlib.sha256(item.nodeid.encode()).hexdigest()[:16]}.pkl"
        saved.write_bytes(pickle.dumps({k: c[k] for k in ("kernel", "ip", "fp", "bufs")} | {"vlen": t.vlen, "isa": t.isa.name}))
        self._write({"kind": "pure", "nodeid": item.nodeid, "kernel": c["kernel"], "bytes": c["size"],
                     "single_s": c["kernel_ns"] * 1e-9, "repeated_s": r.kernel_ns * 1e-9 / self.REPEAT,
                     "request": str(saved)})


_BENCH: BenchLog | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _SESSION, _BENCH
    config.addinivalue_line("markers", "rvvdiff_kernel(name): the ggml kernel a differential test exercises")
    # Shared by the controller and its xdist workers (inherited through the environment).
    os.environ.setdefault("RVVDIFF_SESSION", uuid.uuid4().hex[:12])
    _register_hypothesis_profile(config)
    _SESSION = None
    _BENCH = None
    if config.getoption("bench_log"):
        from hypothesis.internal import observability

        # Hypothesis traces coverage of every example while observability is on; that
        # tracing (not the harness) would dominate the times measured.
        observability.OBSERVABILITY_COLLECT_COVERAGE = False
        _BENCH = BenchLog(config.getoption("bench_log"))
        observability.add_observability_callback(_BENCH.observe)
    config._rvvdiff_stats = []  # type: ignore[attr-defined]
    _resolve_emulator_options(config)


def _resolve_emulator_options(config: pytest.Config) -> None:
    """--vlen 'all' becomes the emulator's VLENs; what the emulator cannot do is a usage error."""
    on_spike = config.getoption("emulator") == "spike"
    vlens = config.getoption("vlen")
    if vlens is None:
        config.option.vlen = SPIKE_VLENS if on_spike else VLENS
    elif not on_spike and any(v > max(VLENS) for v in vlens):
        raise pytest.UsageError(
            f"--vlen {','.join(map(str, vlens))}: QEMU stops at VLEN {max(VLENS)} (its vlen property's maximum); "
            "VLEN 2048 and 4096 run on Spike: add --emulator spike (install: ci/setup.sh --spike)")
    if on_spike and True in config.getoption("rvv_stress"):
        raise pytest.UsageError(
            "--rvv-stress with --emulator spike: Spike has no tail/mask stress mode (it keeps tail and masked-off "
            "elements undisturbed); run the stress targets on QEMU")


def _register_hypothesis_profile(config: pytest.Config) -> None:
    from hypothesis import HealthCheck, settings

    n = max_examples(config)
    budget.register_profiles(
        n, THOROUGH_MAX_EXAMPLES, config.getoption("example_db"), deadline=None, print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile("rvvdiff")


def _session_for(config: pytest.Config) -> Session:
    global _SESSION
    if _SESSION is None:
        try:
            src = resolve(config.getoption("ggml_src"))
        except SourceError as e:
            raise pytest.UsageError(str(e)) from None
        _SESSION = Session(config, src, {})
    return _SESSION


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "target" not in metafunc.fixturenames:
        return
    cfg = metafunc.config
    targets = [Target(v, ISA_BUILDS[i], s)
               for i in cfg.getoption("isa") for v in cfg.getoption("vlen") for s in cfg.getoption("rvv_stress")]
    metafunc.parametrize("target", targets, ids=[t.id for t in targets])


def _emulator(config: pytest.Config) -> Qemu | Spike:
    try:
        return spike_mod.emulator(config.getoption("emulator"))
    except ToolchainError as e:
        raise pytest.UsageError(str(e)) from None


@pytest.hookimpl(tryfirst=True)  # before -k / -m narrow the items: coverage of changes is the whole suite's
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Apply --plan / --changes (harness/budget.py); resolve the tree and emulator once differential
    tests are collected; skip, with the reason, targets whose ISA build or stress mode this QEMU
    cannot emulate."""
    targets = [it for it in items
               if isinstance(getattr(getattr(it, "callspec", None), "params", {}).get("target"), Target)]
    if not targets:
        return
    sess = _session_for(config)
    budget.select(config, items, requirements, entry_points, sess.source)
    kept = set(items)
    targets = [it for it in targets if it in kept]
    if config.getoption("known_failures") == "apply":
        _mark_known_failures(config, sess.source, targets)
    else:
        config._rvvdiff_changed_known = config._rvvdiff_unused_known = []  # type: ignore[attr-defined]
    _mark_not_in_tree(sess.source, targets)
    q = _emulator(config)
    for it in targets:
        t: Target = it.callspec.params["target"]
        props = dict(t.isa.qemu, **(STRESS_PROPS if t.stress else {}))
        lacking = q.lacking(props)
        if lacking and q.name == "spike":
            it.add_marker(pytest.mark.skip(reason=f"Spike cannot provide {', '.join(lacking)} ({t.id})"))
        elif lacking:
            it.add_marker(pytest.mark.skip(reason=(
                f"QEMU {q.version} ({q.path}) does not emulate {', '.join(lacking)}, needed by "
                f"{t.id}: install qemu-user 10 from bookworm-backports (ci/setup.sh) or set RVVDIFF_QEMU")))


def requirements(item: pytest.Item) -> list[str]:
    """What a test's kernel needs from the tree: the ``requires`` of its parameters (kernel table
    entries declare the ggml enumerators, functions and structs they call)."""
    out: list[str] = []
    for p in getattr(getattr(item, "callspec", None), "params", {}).values():
        out += list(getattr(p, "requires", ()) or ())
    return list(dict.fromkeys(out))


def entry_points(item: pytest.Item) -> list[str]:
    """The code a test exists to check: its parameters' ``entry_points`` where a family declares
    them (a graph op, not the vec_dot another family owns), else their ``requires``."""
    out: list[str] = []
    for p in getattr(getattr(item, "callspec", None), "params", {}).values():
        out += list(getattr(p, "entry_points", None) or getattr(p, "requires", ()) or ())
    return list(dict.fromkeys(out))


def _mark_not_in_tree(source: GgmlSource, items: list[pytest.Item]) -> None:
    """Skip, as "not in this tree", the tests whose kernel needs a name the tree lacks."""
    inv = tree.of(source)
    for it in items:
        missing = inv.missing(requirements(it))
        if missing:
            it.add_marker(pytest.mark.skip(reason=f"not in this tree: {', '.join(missing)} ({source.label})"))


def _mark_known_failures(config: pytest.Config, source: GgmlSource, items: list[pytest.Item]) -> None:
    """Mark the tests of the known failures that apply to ``source`` (harness/known.py: by the
    fingerprint of the buggy function, or the tree named by ``ggml``) as strict xfails."""
    try:
        verdicts = known.judge(known.load(), source)  # reads each named source file once
    except (known.KnownFailuresError, ValueError, OSError) as e:
        raise pytest.UsageError(str(e)) from None
    emulator = config.getoption("emulator")
    # An entry of this emulator only comes first: its reason is the one a test there fails for.
    entries = sorted((v.entry for v in verdicts if v.applies and v.entry.emulator in ("", emulator)),
                     key=lambda k: k.emulator == "")
    # Entries whose function changed in this tree: their tests are judged afresh; say so.
    config._rvvdiff_changed_known = [  # type: ignore[attr-defined]
        v for v in verdicts if v.state == "changed" and any(v.entry.matches(it.nodeid, emulator) for it in items)]
    used: set[int] = set()
    for it in items:
        for i, k in enumerate(entries):
            if k.matches(it.nodeid, emulator):
                used.add(i)
                it.add_marker(pytest.mark.xfail(strict=True, reason=f"known failure: {k.reason} (reproducer: {k.reproducer})"))
                break
    # An entry is stale when its test file ran over the whole matrix (every VLEN, ISA build and
    # stress mode) and none of its tests matched; a narrower selection says nothing about it.
    full = (emulator == "qemu" and tuple(config.getoption("vlen")) == VLENS
            and tuple(config.getoption("isa")) == tuple(ISA_BUILDS) and tuple(config.getoption("rvv_stress")) == (False, True))
    files = {it.nodeid.split("::", 1)[0] for it in items}
    config._rvvdiff_unused_known = [  # type: ignore[attr-defined]
        k for i, k in enumerate(entries)
        if full and i not in used and any(fnmatch.fnmatchcase(f, k.test.split("::", 1)[0]) for f in files)]


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = []
    try:
        src = _session_for(config).source.describe()
    except pytest.UsageError as e:
        src = f"unusable: {e}"
    tools = describe()
    stress = {(False,): "off", (True,): "on", (False, True): "both"}[tuple(config.getoption("rvv_stress"))]
    lines.append(f"rvvdiff: ggml source: {src}")
    if config.getoption("emulator") == "spike":
        why = spike_mod.available()
        lines.append(f"rvvdiff: emulator: {why or spike_mod.spike().describe()} (bare metal, one hart; "
                     f"kernel timeout x{SPIKE_SLOWDOWN:g})")
    else:
        lines.append(f"rvvdiff: emulator: {tools['qemu']}")
    lines.append(f"rvvdiff: compiler: {tools['compiler']}")
    lines.append("rvvdiff: ISA builds: " + "; ".join(
        f"{n} ({ISA_BUILDS[n].summary})" for n in config.getoption("isa")))
    lines.append(f"rvvdiff: VLENs: {', '.join(map(str, config.getoption('vlen')))}; tail/mask stress: {stress}; "
                 f"examples per test: {max_examples(config)}")
    return lines


# -------------------------------------------------------------- reporting

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]):
    outcome = yield
    if call.when == "call" and "target" in getattr(item, "fixturenames", ()):
        rep = outcome.get_result()
        if rep.failed and call.excinfo is not None and call.excinfo.errisinstance(pool.Unsupported):
            rep.outcome = "skipped"  # not a kernel failure: the emulator cannot run the request
            rep.longrepr = (str(item.path), item.location[1] or 0,
                            f"Skipped: cannot run on this emulator: {call.excinfo.value}")
        rep.user_properties.extend(("rvvdiff." + k, v) for k, v in observe.take().items())
        kept = observe.take_kept()
        if _BENCH is not None and rep.passed:
            _BENCH.pure(item)
        if rep.failed:
            cmd = replay_command(item)
            rep.sections.append(("rvvdiff: replay (Hypothesis replays the saved failing example first)", cmd))
            try:
                d = report.write_failure(report_dir(item.config), nodeid=item.nodeid, longrepr=str(rep.longrepr),
                                         kept=kept, target=item.callspec.params["target"],  # type: ignore[attr-defined]
                                         source=session().source, replay=cmd, emulator=session().emulator.name)
                rep.sections.append(("rvvdiff: report", f"{d}\nrvvdiff repro {shlex.quote(str(d))} --c"))
            except OSError as e:  # a report that cannot be written must not hide the failure
                rep.sections.append(("rvvdiff: report", f"could not write the failure report: {e}"))


def report_dir(config: pytest.Config) -> Path:
    return Path(config.rootpath, config.getoption("report_dir"))


def replay_command(item: pytest.Item) -> str:
    """One shell line that reruns this test, and so its shrunk failing example, from the rootdir."""
    db, src = item.config.getoption("example_db"), item.config.getoption("ggml_src")
    argv = report.replay_argv(item.nodeid, example_db=db and str(Path(db).resolve()),
                              known_failures=item.config.getoption("known_failures"),
                              ggml_src=src and (src if SDIST_SPEC.match(src) else str(Path(src).resolve())),
                              extra=["--emulator", "spike"] if item.config.getoption("emulator") == "spike" else ())
    return f"cd {shlex.quote(str(item.config.rootpath))} && {shlex.join(argv)}"


def pytest_runtest_setup(item: pytest.Item) -> None:
    observe.take()  # drop anything a previous test left behind
    observe.take_kept()
    target = getattr(getattr(item, "callspec", None), "params", {}).get("target")
    if isinstance(target, Target):
        # The build's one outcome (its error, or a skip) belongs to setup, not to a Hypothesis example.
        session().build(target.isa)
    budget.use(item)
    if _BENCH is not None:
        t = getattr(getattr(item, "callspec", None), "params", {}).get("target")
        if isinstance(t, Target):
            t.server()  # start it outside the measured examples: start-up is reported separately
        _BENCH.start(item.nodeid)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    budget.done(item)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect each differential test's outcome for the summary (in the controlling process)."""
    if report.when != "call" and not (report.when == "setup" and not report.passed):
        return
    if report.passed and getattr(report, "wasxfail", None) is not None:
        outcome = "xpassed"
    elif report.skipped and getattr(report, "wasxfail", None) is not None:
        outcome = "xfailed"
    elif report.failed and report.when == "setup":
        outcome = "error"
    else:
        outcome = report.outcome
    reason = ""
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = report.longrepr[2]
    elif getattr(report, "wasxfail", None):
        reason = report.wasxfail
    elif report.failed and report.when == "setup":  # a build error: which build, and its first error
        text = report.longreprtext or ""
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("[gw")]  # (xdist's line)
        first = failure_summary(text) if "\nfirst errors:\n" in text else ""
        reason = " ".join(lines[:1] + ([f"first error: {first}"] if first else []))
    elif report.failed:
        reason = (report.longreprtext or "").strip().splitlines()[-1:][0] if report.longreprtext else ""
    entry = {"nodeid": report.nodeid, "outcome": outcome, "reason": reason, "duration": report.duration}
    entry.update({k[len("rvvdiff."):]: v for k, v in report.user_properties if k.startswith("rvvdiff.")})
    _RESULTS.append(entry)


_RESULTS: list[dict[str, Any]] = []


def _server_stats() -> list[dict[str, Any]]:
    return [{"server": s.describe(), "requests": s.requests, "wall_s": s.wall_s, "kernel_s": s.kernel_s,
             "starts": s.starts} for s in pool.servers()]


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["rvvdiff_stats"] = json.dumps(_server_stats())
        return
    session.config._rvvdiff_stats.extend(_server_stats())  # type: ignore[attr-defined]
    outcomes = session.config._rvvdiff_builds = _build_outcomes(session.config)  # type: ignore[attr-defined]
    if os.environ.get("RVVDIFF_SESSION"):
        forget_session(os.environ["RVVDIFF_SESSION"])  # the markers served this session only
    if any(kind == "failed" for kind, _ in outcomes) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if any(report.parse_id(r["nodeid"]) for r in _RESULTS):
        header = [line.removeprefix("rvvdiff: ") for line in pytest_report_header(session.config)]
        report.write_summary(report_dir(session.config), _RESULTS, header)


def _build_outcomes(config: pytest.Config) -> list[tuple[str, str]]:
    """(kind, line) for each ISA build of this session that failed, could not be expressed for the
    tree, or left adapters out: read from the files the session's processes (xdist workers
    included) left in the build directories (harness/build.py: failure marker, session note)."""
    sid = os.environ.get("RVVDIFF_SESSION")
    if sid is None or not any(report.parse_id(r["nodeid"]) for r in _RESULTS):
        return []
    try:
        src = _session_for(config).source
    except pytest.UsageError:
        return []
    out = []
    for name in config.getoption("isa"):
        d = build_dir(src, ISA_BUILDS[name])
        log = d / "rvvdiff-build.log"
        marker, note = failure_marker(d, sid), session_note(d, sid)
        if marker.exists():
            out.append(("failed", f"ISA build {name} of {tree_name(src)} failed: {failure_summary(marker.read_text())} "
                                  f"(full error in the first test that needed it; its other tests were skipped; "
                                  f"log: {log})"))
        elif note.exists():
            j = json.loads(note.read_text())
            if j.get("unavailable"):
                out.append(("unavailable", f"ISA build {name} not tested: {j['unavailable']}"))
            for adapter, err in j.get("failed_adapters", {}).items():
                kernels = ", ".join(adapter_kernels(SERVER_DIR / adapter)) or "none"
                out.append(("adapter", f"ISA build {name}: adapter {adapter} does not compile against {tree_name(src)} "
                                       f"({err.splitlines()[0] if err else 'no compiler message'}): the tests of its "
                                       f"kernels ({kernels}) are skipped; log: {log}"))
    return out


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown (and so an error) under -p no:xdist
def pytest_testnodedown(node: Any, error: Any) -> None:
    stats = getattr(node, "workeroutput", {}).get("rvvdiff_stats")
    if stats:
        node.config._rvvdiff_stats.extend(json.loads(stats))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    for kind, line in getattr(config, "_rvvdiff_builds", []):
        terminalreporter.write_line(f"rvvdiff: {line}", red=kind == "failed", yellow=kind != "failed")
    for k in getattr(config, "_rvvdiff_unused_known", []):
        terminalreporter.write_line(f"rvvdiff: warning: known failure {k.test!r} matched no collected test "
                                    "(fixed, renamed, or not selected?)", yellow=True)
    ran = {getattr(r, "nodeid", "") for rs in terminalreporter.stats.values() for r in rs}
    changed = getattr(config, "_rvvdiff_changed_known", None)
    if changed is None and any(report.parse_id(n) for n in ran):  # an xdist controller: it did not collect
        try:
            changed = [v for v in known.judge(known.load(), _session_for(config).source) if v.state == "changed"]
        except (pytest.UsageError, known.KnownFailuresError, OSError):
            changed = []  # the workers reported the error
    older = 0  # entries of bugs seen in other trees (seen_in) whose code this tree no longer has
    for v in changed or []:
        if not any(v.entry.matches(n, config.getoption("emulator")) for n in ran):
            continue  # its tests were deselected or not run
        if v.entry.seen_in:
            older += 1
            continue
        terminalreporter.write_line(f"rvvdiff: note: known failure {v.entry.test!r} not expected in this tree: "
                                    f"{v.why}; its tests are judged afresh (`rvvdiff known` shows the entries)")
    if older:
        terminalreporter.write_line(f"rvvdiff: note: {older} known failure(s) of other trees (seen_in) do not apply: "
                                    "their functions changed here, so those tests are judged afresh "
                                    "(`rvvdiff known` lists them)")
    stats = getattr(config, "_rvvdiff_stats", [])
    reports = [r for key in ("passed", "failed") for r in terminalreporter.stats.get(key, [])
               if getattr(r, "when", "") == "call" and any(k.startswith("rvvdiff.") for k, _ in r.user_properties)]
    if not reports:
        return
    tr = terminalreporter
    tr.section("rvvdiff")
    worst: dict[str, tuple[float, str]] = {}
    ulps: dict[str, tuple[float, float]] = {}  # worst ULP error and the bound of that element
    for r in reports:
        props = dict(r.user_properties)
        ratio = props.get("rvvdiff.error/bound")
        if ratio is None:
            continue
        name = r.nodeid.split("::")[-1].split("[")[0] + "[" + r.nodeid.split("[", 1)[-1].split("-vlen")[0] + "]"
        if name not in worst or ratio > worst[name][0]:
            worst[name] = (ratio, r.nodeid.rsplit("[", 1)[-1].rstrip("]"))
        if "rvvdiff.ulp" in props and (name not in ulps or props["rvvdiff.ulp"] > ulps[name][0]):
            ulps[name] = (props["rvvdiff.ulp"], props.get("rvvdiff.ulp_bound", float("nan")))
    if worst:
        tr.write_line("worst error as a fraction of its bound (1.0 = at the bound); worst ULP error and its bound:")
        for name, (ratio, where) in sorted(worst.items()):
            tr.write_line(f"  {name:<50} {ratio:10.3g}   at {where}"
                          + (f"   {ulps[name][0]:.4g} ULP (bound {ulps[name][1]:.4g})" if name in ulps else ""))
    calls = sum(dict(r.user_properties).get("rvvdiff.calls", 0) for r in reports)
    req = sum(s["wall_s"] for s in stats)
    ker = sum(s["kernel_s"] for s in stats)
    starts = sum(s["starts"] for s in stats)
    dur = time.time() - getattr(config, "_rvvdiff_t0", time.time())
    tr.write_line(f"{len(reports)} differential tests, {int(calls)} kernel calls"
                  + (f" ({calls / dur:.0f}/s over {dur:.1f} s wall)" if dur > 0 else "")
                  + f"; time in server requests {req:.1f} s (inside kernels {ker:.2f} s); {starts} emulator starts")
