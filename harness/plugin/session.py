"""The plugin's session: all of a pytest run's rvvdiff state, and the hooks that use it, in one object.

harness/plugin/hooks.py (the entry point) makes one :class:`RvvdiffSession` per pytest run in
pytest_configure, registers it with the plugin manager (:data:`NAME`) and puts it in
``config.stash`` (:data:`KEY`; :func:`of`), as pytest-xdist does with its ``DSession``.  Its
``pytest_*`` methods are hooks.  Under pytest-xdist each process (controller, worker) has its own.

What it holds: the tree, builds, emulator, kernel servers, live-server limit and the running test's observation
(:class:`harness.plugin.targets.Session`, its base, which the differential tests reach), the user's model
file (``--gguf``), the `rvvdiff bench` log, each test's outcome for the summary, the kernel servers'
statistics, the verdicts on known failures, the build outcomes and the coverage lines of the terminal summary.
"""

from __future__ import annotations

import functools
import json
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from harness.check.compare import OutputsDiffer
from harness.core import settings as env_settings
from harness.core.config import IS_CHECKOUT, static_twin
from harness.core.matrix import AXIS, ISAS
from harness.emulators import pool, registry
from harness.emulators.qemu import cpu_props
from harness.ggml import known
from harness.ggml.source import SDIST_SPEC
from harness.plugin import budget, costlog, linecov, timing, workers
from harness.plugin.benchlog import BenchLog
from harness.plugin.marks import entry_points, mark_known_failures, mark_not_in_tree, requirements
from harness.plugin.options import id_compiler, max_examples, report_dir, run_matrix
from harness.plugin.targets import Session, Target, emulator_for, server_stats
from harness.report.failure import clear as clear_reports
from harness.report.failure import write_failure
from harness.report.ids import parse_id, replay_argv, suite_module_id
from harness.report.summary import write_summary
from harness.toolchain.builds import build_dir, compiler_gap, failure_marker, failure_summary, forget_session, session_note
from harness.toolchain.cmake import tree_name
from harness.toolchain.compilers import SERVER_DIR, describe, twin_gap
from harness.toolchain.server import adapter_kernels

#: The name the session is registered under with the plugin manager.
NAME = "rvvdiff-session"


class RvvdiffSession(Session):
    """One pytest run's rvvdiff state and the hooks that use it (registered as a plugin)."""

    def __init__(self, config: pytest.Config) -> None:
        super().__init__(config, live_limit=workers.worker_live_limit(config))
        #: When the session started (time.time()), set at pytest_sessionstart.
        self.t0: float | None = None
        #: The per-example time log of `rvvdiff bench` (--bench-log), or None.
        self.bench: BenchLog | None = None
        #: Each differential test's outcome, for the summary (in the controlling process).
        self.results: list[dict[str, Any]] = []
        #: The kernel servers' request counts and times, of this process and its xdist workers.
        self.stats: list[dict[str, Any]] = []
        #: (kind, line) per ISA build that failed, could not be expressed, or left adapters out.
        self.build_outcomes: list[tuple[str, str]] = []
        #: Known failures whose function changed in this tree (None: not judged in this process).
        self.changed_known: list[known.KnownState] | None = None
        #: Known failures that matched no test of a full run of their file.
        self.unused_known: list[known.Known] = []
        #: The terminal summary's lines on --rvv-coverage.
        self.coverage_lines: list[str] = []
        #: Cost cases deselected at collection because no build of the run can measure them: reason -> how many
        #: (harness/plugin/costlog.py; an xdist controller has its workers').
        self.deselected: dict[str, int] = {}

    @property
    def report_dir(self) -> Path:
        return report_dir(self.config)

    @functools.cached_property
    def gguf(self) -> Path | None:
        """``--gguf``: the user's model file, resolved, which the model family (cases/test_model.py) runs instead
        of its table; None without the option."""
        path = self.config.getoption("gguf")
        return Path(path).resolve() if path else None

    @property
    def is_worker(self) -> bool:
        return getattr(self.config, "workerinput", None) is not None

    # ------------------------------------------------------------ run

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.t0 = time.time()
        if not self.is_worker:
            clear_reports(self.report_dir)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.end()

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = []
        try:
            src = self.source.describe()
        except pytest.UsageError as e:
            src = f"unusable: {e}"
        m = run_matrix(config)
        lines.append(f"rvvdiff: ggml source: {src}")
        lines.append(f"rvvdiff: emulator: {registry.kind(m.emulator).header()}")
        for name, isas in m.compilers.items():
            lines.append(f"rvvdiff: compiler: {describe(name)['compiler']}")
            for isa in (i for i in m.isas if i in isas):
                if why := compiler_gap(ISAS[isa], name):
                    lines.append(f"rvvdiff: compiler {name} cannot make ISA build {isa}: {why}; its tests are skipped")
        lines.append("rvvdiff: ISA builds: " + "; ".join(f"{n} ({ISAS[n].summary})" for n in m.isas))
        lines += [f"rvvdiff: {line}" for line in twin_lines(m)]
        lines.append(f"rvvdiff: VLENs: {', '.join(map(str, m.vlens))}; tail/mask stress: "
                     f"{AXIS['stress'].write(m.stress)}; examples per test: {max_examples(config)}")
        if line := workers.describe(config):
            lines.append(f"rvvdiff: {line}")
        if shown := env_settings.shown():
            lines.append(f"rvvdiff: settings: {'; '.join(shown)}")
        return lines

    # ------------------------------------------------------------ collection

    @pytest.hookimpl(trylast=True)
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "target" not in metafunc.fixturenames:
            return
        cfg = metafunc.config
        m = run_matrix(cfg)
        targets = [Target(v, ISAS[i], s, c, m.emulator, named=len(m.compilers) > 1)
                   for i in m.isas for v in m.vlens for s in m.stress for c, isas in m.compilers.items() if i in isas]
        # A test runs at the targets of its backends' builds: ggml-cpu's (the default), SpacemiT's (its family's
        # module says ``pytestmark = pytest.mark.rvvdiff_backend("spacemit")``) or both (the model family's).
        backend = metafunc.definition.get_closest_marker("rvvdiff_backend")
        targets = [t for t in targets if t.isa.backend in (backend.args if backend else ("cpu",))]
        # A test that runs at some targets only (the model family's budget) names them with a predicate.
        only = metafunc.definition.get_closest_marker("rvvdiff_targets")
        if only is not None:
            targets = [t for t in targets if only.args[0](t, cfg)]
        metafunc.parametrize("target", targets, ids=[t.id for t in targets])

    @pytest.hookimpl(tryfirst=True)  # before -k / -m narrow the items: coverage of changes is the whole suite's
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Apply --plan / --changes (harness/plugin/budget.py); resolve the tree and emulator once differential
        tests are collected; skip, with the reason, targets whose ISA build or stress mode the emulator
        cannot emulate."""
        targets = [it for it in items if isinstance(_target(it), Target)]
        if not targets:
            return
        budget.select(config, items, requirements, entry_points, self.source)
        kept = set(items)
        targets = [it for it in targets if it in kept]
        if config.getoption("known_failures") == "apply":
            self.changed_known, self.unused_known = mark_known_failures(config, self.source, targets)
        else:
            self.changed_known, self.unused_known = [], []
        mark_not_in_tree(self.source, targets)
        q = emulator_for(config)
        for it in targets:
            t: Target = it.callspec.params["target"]
            lacking = q.lacking(cpu_props(t.isa, t.stress))
            if lacking:
                it.add_marker(pytest.mark.skip(reason=q.lacking_reason(lacking, t.id)))

    def deselect_unbuildable(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Deselect the cost cases no build of the run can measure (harness/plugin/costlog.py), among those -k and
        -m kept (harness/plugin/hooks.py calls it last)."""
        self.deselected = costlog.deselect_unbuildable(config, items, run_matrix(config), self.source)

    # ------------------------------------------------------------ one test

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.observation.take()  # drop anything a previous test left behind
        self.observation.take_kept()
        target = _target(item)
        if isinstance(target, Target):
            # The build's one outcome (its error, or a skip) belongs to setup, not to a Hypothesis example; so does
            # the static twin's, whose server every call is held to (harness/plugin/targets.py's Target.call).
            self.build(target.isa, target.compiler)
            self.twin(target)
        budget.use(item)
        if self.bench is not None:
            if isinstance(target, Target):
                target.server()  # start it outside the measured examples: start-up is reported separately
            self.bench.start(item.nodeid)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[Any]):
        outcome = yield
        if call.when == "call" and "target" in getattr(item, "fixturenames", ()):
            rep = outcome.get_result()
            if getattr(rep, "wasxfail", None) is not None and call.excinfo is not None and differs(call.excinfo.value):
                # A known failure is about the oracle's verdict: two builds of the same code that disagree are not it.
                rep.outcome = "failed"
                del rep.wasxfail
            if rep.failed and call.excinfo is not None and call.excinfo.errisinstance(pool.Unsupported):
                rep.outcome = "skipped"  # not a kernel failure: the emulator cannot run the request
                rep.longrepr = (str(item.path), item.location[1] or 0,
                                f"Skipped: cannot run on this emulator: {call.excinfo.value}")
            rep.user_properties.extend(("rvvdiff." + k, v) for k, v in self.observation.take().items())
            kept = self.observation.take_kept()
            if self.bench is not None and rep.passed:
                self.bench.pure(item)
            if rep.failed:
                cmd = replay_command(item)
                rep.sections.append(("rvvdiff: replay (Hypothesis replays the saved failing example first)", cmd))
                try:
                    d = write_failure(self.report_dir, nodeid=item.nodeid, longrepr=str(rep.longrepr),
                                      kept=kept, target=item.callspec.params["target"],  # type: ignore[attr-defined]
                                      source=self.source, replay=cmd, emulator=self.emulator.name)
                    rep.sections.append(("rvvdiff: report", f"{d}\nrvvdiff repro {shlex.quote(str(d))} --c"))
                except OSError as e:  # a report that cannot be written must not hide the failure
                    rep.sections.append(("rvvdiff: report", f"could not write the failure report: {e}"))

    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        budget.done(item)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect each differential test's outcome for the summary (in the controlling process); a
        test whose xdist worker died under it is reported by xdist with ``when == "???"``: a failure."""
        if report.when not in ("call", "???") and not (report.when == "setup" and not report.passed):
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
        self.results.append(entry)

    # ------------------------------------------------------------ end

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput["rvvdiff_stats"] = json.dumps(server_stats(self.pool))
            workeroutput["rvvdiff_deselected"] = json.dumps(self.deselected)
            linecov.finish(self.config, self.report_dir, self.pool, emulator_logs=True)
            return
        self.stats.extend(server_stats(self.pool))
        self.build_outcomes = self._build_outcomes()
        if sid := env_settings.get("SESSION"):
            forget_session(sid)  # the markers served this session only
        if any(kind == "failed" for kind, _ in self.build_outcomes) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if any(parse_id(r["nodeid"]) for r in self.results):
            header = [line.removeprefix("rvvdiff: ") for line in self.pytest_report_header(self.config)]
            write_summary(self.report_dir, self.results, header)
        self.coverage_lines = linecov.finish(self.config, self.report_dir, self.pool,
                                             emulator_logs=registry.kind(self.config.getoption("emulator")).logs_exec)

    def _build_outcomes(self) -> list[tuple[str, str]]:
        """(kind, line) for each ISA build of this session that failed, could not be expressed for the
        tree, or left adapters out: read from the files the session's processes (xdist workers
        included) left in the build directories (harness/toolchain/builds.py: failure marker, session note)."""
        sid = env_settings.get("SESSION")
        if sid is None or not any(parse_id(r["nodeid"]) for r in self.results):
            return []
        try:
            src = self.source
        except pytest.UsageError:
            return []
        out = []
        m = run_matrix(self.config)
        for cc, name in m.builds():
            d = build_dir(src, ISAS[name], cc)
            name = name if len(m.compilers) == 1 else f"{name} by {cc}"
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
                    out.append(("adapter", f"ISA build {name}: adapter {adapter} does not compile against "
                                           f"{tree_name(src)} ({err.splitlines()[0] if err else 'no compiler message'}): "
                                           f"the tests of its kernels ({kernels}) are skipped; log: {log}"))
        return out

    @pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown (and so an error) under -p no:xdist
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        stats = getattr(node, "workeroutput", {}).get("rvvdiff_stats")
        if stats:
            self.stats.extend(json.loads(stats))
        if deselected := getattr(node, "workeroutput", {}).get("rvvdiff_deselected"):
            self.deselected = json.loads(deselected)  # every worker collects the same items


    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        tr = terminalreporter
        for kind, line in self.build_outcomes:
            tr.write_line(f"rvvdiff: {line}", red=kind == "failed", yellow=kind != "failed")
        for line in self.coverage_lines:
            tr.write_line(f"rvvdiff: {line}")
        for line in costlog.deselected_lines(self.deselected):
            tr.write_line(f"rvvdiff: {line}")
        for k in self.unused_known:
            tr.write_line(f"rvvdiff: warning: known failure {k.test!r} matched no collected test "
                          "(fixed, renamed, or not selected?)", yellow=True)
        ran = {getattr(r, "nodeid", "") for rs in tr.stats.values() for r in rs}
        self._known_notes(tr, ran)
        reports = [r for key in ("passed", "failed") for r in tr.stats.get(key, [])
                   if getattr(r, "when", "") == "call" and any(k.startswith("rvvdiff.") for k, _ in r.user_properties)]
        if reports:
            self._figures(tr, reports)
        self._time(tr)

    def _known_notes(self, tr: Any, ran: set[str]) -> None:
        """The terminal summary's notes on known failures whose function changed in this tree."""
        changed = self.changed_known
        if changed is None and any(parse_id(n) for n in ran):  # an xdist controller: it did not collect
            try:
                changed = [v for v in known.judge(known.load(), self.source) if v.state == "changed"]
            except (pytest.UsageError, known.KnownFailuresError, OSError):
                changed = []  # the workers reported the error
        emulator, compiler = self.config.getoption("emulator"), id_compiler(self.config)
        older = 0  # entries of bugs seen in other trees (seen_in) whose code this tree no longer has
        for v in changed or []:
            if not any(v.entry.matches(n, emulator, compiler) for n in ran):
                continue  # its tests were deselected or not run
            if v.entry.seen_in:
                older += 1
                continue
            tr.write_line(f"rvvdiff: note: known failure {v.entry.test!r} not expected in this tree: "
                          f"{v.why}; its tests are judged afresh (`rvvdiff known` shows the entries)")
        if older:
            tr.write_line(f"rvvdiff: note: {older} known failure(s) of other trees (seen_in) do not apply: "
                          "their functions changed here, so those tests are judged afresh "
                          "(`rvvdiff known` lists them)")

    def _wall(self) -> float:
        """Seconds since the run began (0 before it did)."""
        return time.time() - self.t0 if self.t0 is not None else 0.0

    def _time(self, tr: Any) -> None:
        """Worker time per family (harness/plugin/timing.py), in the summary and the report directory's time.json."""
        everything = [r for rs in tr.stats.values() for r in rs]
        rows = timing.table(everything)
        if not any(r["request_s"] or r["emulated_s"] for r in rows.values()):
            return  # no differential test ran: nothing to say
        for line in timing.lines(rows):
            tr.write_line(line)
        timing.write(self.report_dir / "time.json", rows, self._wall())

    def _figures(self, tr: Any, reports: list[Any]) -> None:
        """The terminal summary's rvvdiff section: worst error per kernel, kernel calls, time in servers."""
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
        # Every call report, expected failures too: a call held to its static twin is counted wherever its test ended.
        identical = sum(dict(r.user_properties).get("rvvdiff.identical", 0) for rs in tr.stats.values() for r in rs
                        if getattr(r, "when", "") == "call" and hasattr(r, "user_properties"))
        if identical:
            tr.write_line(f"{int(identical)} calls identical on a dispatch variant and its static twin (output bytes)")
        req = sum(s["wall_s"] for s in self.stats)
        ker = sum(s["kernel_s"] for s in self.stats)
        starts = sum(s["starts"] for s in self.stats)
        dur = self._wall()
        tr.write_line(f"{len(reports)} differential tests, {int(calls)} kernel calls"
                      + (f" ({calls / dur:.0f}/s over {dur:.1f} s wall)" if dur > 0 else "")
                      + f"; time in server requests {req:.1f} s (inside kernels {ker:.2f} s); {starts} emulator starts")

def twin_lines(m: Any) -> list[str]:
    """What the run's matrix ``m`` (:func:`run_matrix`'s: its compilers named) holds to a static twin
    (harness/core/config.py's ``static_twin``): a line per (compiler, ISA build) that has one, saying whether its
    calls are compared byte for byte or why not."""
    out = []
    for cc, name in m.builds():
        twin = static_twin(name)
        if twin is None or cc is None:
            continue
        why = twin_gap(cc)
        out.append(f"ISA build {name} by {cc}: " + (f"not held to its static twin {twin}: {why}" if why else
                   f"every kernel call also made on its static twin {twin} by {cc}, the output bytes compared"))
    return out


def differs(exc: BaseException) -> bool:
    """Whether ``exc`` is, or groups (Hypothesis's several distinct failures), an :class:`OutputsDiffer`."""
    if isinstance(exc, OutputsDiffer):
        return True
    return isinstance(exc, BaseExceptionGroup) and any(differs(e) for e in exc.exceptions)


#: Where each pytest run keeps its session.
KEY = pytest.StashKey[RvvdiffSession]()


def of(config: pytest.Config) -> RvvdiffSession:
    """The session of ``config``'s run (made in pytest_configure)."""
    return config.stash[KEY]


def _target(item: pytest.Item) -> object:
    """The ``target`` parameter of a collected test (a :class:`Target` for a differential test), or None."""
    return getattr(getattr(item, "callspec", None), "params", {}).get("target")


def replay_command(item: pytest.Item) -> str:
    """One shell line that reruns this test, and so its shrunk failing example, from the rootdir (an
    installed wheel's: from the directory pytest was started in, the test named by its module)."""
    db, src = item.config.getoption("example_db"), item.config.getoption("ggml_src")
    pyargs = not IS_CHECKOUT and suite_module_id(item.path) is not None
    emulator = item.config.getoption("emulator")
    argv = replay_argv(item.nodeid, example_db=db and str(Path(db).resolve()),
                       known_failures=item.config.getoption("known_failures"),
                       compiler=getattr(_target(item), "compiler", ""),
                       ggml_src=src and (src if SDIST_SPEC.match(src) else str(Path(src).resolve())),
                       emulator=emulator, pyargs=pyargs)
    where = item.config.invocation_params.dir if pyargs else item.config.rootpath
    return f"cd {shlex.quote(str(where))} && {shlex.join(argv)}"
