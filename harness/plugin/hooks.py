"""The pytest plugin's hooks (its entry point): configure, collect, run, report and summarise.

A differential test asks for the ``target`` argument; the plugin
parametrizes it over the selected VLENs, ISA builds and stress modes, so test
ids read ``test_vec_dot[f16-vlen512-zvfh]`` and ``-k`` selects by kernel,
VLEN or build.  Builds and servers are made lazily, in whichever process
(pytest-xdist worker) first needs them, under a file lock.  The options are
harness/plugin/options.py's, the targets and session harness/plugin/targets.py's, the
marks harness/plugin/marks.py's, the state (config.stash) harness/plugin/state.py's.
"""

from __future__ import annotations

import json
import shlex
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.internal import observability

from harness.build.builds import build_dir, failure_marker, failure_summary, forget_session, session_note
from harness.build.cmake import tree_name
from harness.build.server import adapter_kernels
from harness.build.toolchain import SERVER_DIR, describe
from harness.check import observe
from harness.core import settings as env_settings
from harness.core.config import ISA_BUILDS, STRESS_PROPS
from harness.emulators import pool, registry
from harness.ggml import known
from harness.ggml.source import SDIST_SPEC
from harness.plugin import budget, linecov, state, workers
from harness.plugin.benchlog import BenchLog
from harness.plugin.marks import entry_points, mark_known_failures, mark_not_in_tree, requirements
from harness.plugin.options import THOROUGH_MAX_EXAMPLES, add_options, max_examples
from harness.plugin.targets import Target, emulator_for, server_stats, session, session_for
from harness.report.failure import clear as clear_reports
from harness.report.failure import write_failure
from harness.report.ids import parse_id, replay_argv
from harness.report.summary import write_summary


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[state.T0] = time.time()
    if getattr(session.config, "workerinput", None) is None:
        clear_reports(report_dir(session.config))


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(wrapper=True)  # a wrapper runs before xdist's own hook reads -n and --maxprocesses
def pytest_cmdline_main(config: pytest.Config) -> Any:
    workers.cap_workers(config)
    return (yield)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # xdist hooks: unknown under -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return workers.TargetScheduling(config, log) if workers.target_scheduling(config) else None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    if workers.target_scheduling(node.config):
        node.workerinput["rvvdiff_live_servers"] = 1


def pytest_configure(config: pytest.Config) -> None:
    state.begin(config)
    pool.LIVE_LIMIT = workers.worker_live_limit(config)
    config.addinivalue_line("markers", "rvvdiff_kernel(name): the ggml kernel a differential test exercises")
    # Shared by the controller and its xdist workers (inherited through the environment).
    env_settings.set_default("SESSION", uuid.uuid4().hex[:12])
    _register_hypothesis_profile(config)
    config.stash[state.BENCH] = None
    if config.getoption("bench_log"):
        # Hypothesis traces coverage of every example while observability is on; that
        # tracing (not the harness) would dominate the times measured.
        observability.OBSERVABILITY_COLLECT_COVERAGE = False
        bench = config.stash[state.BENCH] = BenchLog(config.getoption("bench_log"))
        observability.add_observability_callback(bench.observe)
    _resolve_emulator_options(config)
    linecov.configure(config, report_dir(config))


def pytest_unconfigure(config: pytest.Config) -> None:
    state.end(config)


def _resolve_emulator_options(config: pytest.Config) -> None:
    """--vlen 'all' becomes the emulator's VLENs; what the emulator cannot do is a usage error."""
    emulator = registry.kind(config.getoption("emulator"))
    vlens = config.getoption("vlen")
    if vlens is None:
        config.option.vlen = emulator.vlens
    elif any(v not in emulator.vlens for v in vlens):
        raise pytest.UsageError(f"--vlen {','.join(map(str, vlens))}: {emulator.vlen_limit}")
    if not emulator.has_stress and True in config.getoption("rvv_stress"):
        raise pytest.UsageError(f"--rvv-stress with --emulator {emulator.name}: {emulator.no_stress}")


def _register_hypothesis_profile(config: pytest.Config) -> None:
    n = max_examples(config)
    budget.register_profiles(
        n, THOROUGH_MAX_EXAMPLES, config.getoption("example_db"), deadline=None, print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile("rvvdiff")


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "target" not in metafunc.fixturenames:
        return
    cfg = metafunc.config
    targets = [Target(v, ISA_BUILDS[i], s)
               for i in cfg.getoption("isa") for v in cfg.getoption("vlen") for s in cfg.getoption("rvv_stress")]
    metafunc.parametrize("target", targets, ids=[t.id for t in targets])


@pytest.hookimpl(tryfirst=True)  # before -k / -m narrow the items: coverage of changes is the whole suite's
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Apply --plan / --changes (harness/plugin/budget.py); resolve the tree and emulator once differential
    tests are collected; skip, with the reason, targets whose ISA build or stress mode the emulator
    cannot emulate."""
    targets = [it for it in items
               if isinstance(getattr(getattr(it, "callspec", None), "params", {}).get("target"), Target)]
    if not targets:
        return
    sess = session_for(config)
    budget.select(config, items, requirements, entry_points, sess.source)
    kept = set(items)
    targets = [it for it in targets if it in kept]
    if config.getoption("known_failures") == "apply":
        config.stash[state.CHANGED_KNOWN], config.stash[state.UNUSED_KNOWN] = mark_known_failures(
            config, sess.source, targets)
    else:
        config.stash[state.CHANGED_KNOWN], config.stash[state.UNUSED_KNOWN] = [], []
    mark_not_in_tree(sess.source, targets)
    q = emulator_for(config)
    for it in targets:
        t: Target = it.callspec.params["target"]
        props = dict(t.isa.qemu, **(STRESS_PROPS if t.stress else {}))
        lacking = q.lacking(props)
        if lacking:
            it.add_marker(pytest.mark.skip(reason=q.lacking_reason(lacking, t.id)))


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = []
    try:
        src = session_for(config).source.describe()
    except pytest.UsageError as e:
        src = f"unusable: {e}"
    tools = describe()
    stress = {(False,): "off", (True,): "on", (False, True): "both"}[tuple(config.getoption("rvv_stress"))]
    lines.append(f"rvvdiff: ggml source: {src}")
    lines.append(f"rvvdiff: emulator: {registry.kind(config.getoption('emulator')).header()}")
    lines.append(f"rvvdiff: compiler: {tools['compiler']}")
    lines.append("rvvdiff: ISA builds: " + "; ".join(
        f"{n} ({ISA_BUILDS[n].summary})" for n in config.getoption("isa")))
    lines.append(f"rvvdiff: VLENs: {', '.join(map(str, config.getoption('vlen')))}; tail/mask stress: {stress}; "
                 f"examples per test: {max_examples(config)}")
    if line := workers.describe(config):
        lines.append(f"rvvdiff: {line}")
    if shown := env_settings.shown():
        lines.append(f"rvvdiff: settings: {'; '.join(shown)}")
    return lines


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
        bench = item.config.stash[state.BENCH]
        if bench is not None and rep.passed:
            bench.pure(item)
        if rep.failed:
            cmd = replay_command(item)
            rep.sections.append(("rvvdiff: replay (Hypothesis replays the saved failing example first)", cmd))
            try:
                d = write_failure(report_dir(item.config), nodeid=item.nodeid, longrepr=str(rep.longrepr),
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
    emulator = item.config.getoption("emulator")
    argv = replay_argv(item.nodeid, example_db=db and str(Path(db).resolve()),
                              known_failures=item.config.getoption("known_failures"),
                              ggml_src=src and (src if SDIST_SPEC.match(src) else str(Path(src).resolve())),
                              extra=["--emulator", emulator] if emulator != registry.DEFAULT else ())
    return f"cd {shlex.quote(str(item.config.rootpath))} && {shlex.join(argv)}"


def pytest_runtest_setup(item: pytest.Item) -> None:
    observe.take()  # drop anything a previous test left behind
    observe.take_kept()
    target = getattr(getattr(item, "callspec", None), "params", {}).get("target")
    if isinstance(target, Target):
        # The build's one outcome (its error, or a skip) belongs to setup, not to a Hypothesis example.
        session().build(target.isa)
    budget.use(item)
    bench = item.config.stash[state.BENCH]
    if bench is not None:
        if isinstance(target, Target):
            target.server()  # start it outside the measured examples: start-up is reported separately
        bench.start(item.nodeid)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    budget.done(item)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
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
    config = state.current()
    if config is not None:
        config.stash[state.RESULTS].append(entry)


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["rvvdiff_stats"] = json.dumps(server_stats())
        linecov.finish(session, report_dir(session.config), emulator_logs=True)
        return
    session.config.stash[state.STATS].extend(server_stats())
    outcomes = session.config.stash[state.BUILDS] = _build_outcomes(session.config)
    if sid := env_settings.get("SESSION"):
        forget_session(sid)  # the markers served this session only
    if any(kind == "failed" for kind, _ in outcomes) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    results = session.config.stash[state.RESULTS]
    if any(parse_id(r["nodeid"]) for r in results):
        header = [line.removeprefix("rvvdiff: ") for line in pytest_report_header(session.config)]
        write_summary(report_dir(session.config), results, header)
    linecov.finish(session, report_dir(session.config),
                   emulator_logs=registry.kind(session.config.getoption("emulator")).logs_exec)


def _build_outcomes(config: pytest.Config) -> list[tuple[str, str]]:
    """(kind, line) for each ISA build of this session that failed, could not be expressed for the
    tree, or left adapters out: read from the files the session's processes (xdist workers
    included) left in the build directories (harness/build/builds.py: failure marker, session note)."""
    sid = env_settings.get("SESSION")
    if sid is None or not any(parse_id(r["nodeid"]) for r in config.stash[state.RESULTS]):
        return []
    try:
        src = session_for(config).source
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
        node.config.stash[state.STATS].extend(json.loads(stats))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    for kind, line in config.stash.get(state.BUILDS, []):
        terminalreporter.write_line(f"rvvdiff: {line}", red=kind == "failed", yellow=kind != "failed")
    for line in linecov.terminal_lines(config):
        terminalreporter.write_line(f"rvvdiff: {line}")
    for k in config.stash.get(state.UNUSED_KNOWN, []):
        terminalreporter.write_line(f"rvvdiff: warning: known failure {k.test!r} matched no collected test "
                                    "(fixed, renamed, or not selected?)", yellow=True)
    ran = {getattr(r, "nodeid", "") for rs in terminalreporter.stats.values() for r in rs}
    changed = config.stash.get(state.CHANGED_KNOWN, None)
    if changed is None and any(parse_id(n) for n in ran):  # an xdist controller: it did not collect
        try:
            changed = [v for v in known.judge(known.load(), session_for(config).source) if v.state == "changed"]
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
    stats = config.stash.get(state.STATS, [])
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
    dur = time.time() - config.stash.get(state.T0, time.time())
    tr.write_line(f"{len(reports)} differential tests, {int(calls)} kernel calls"
                  + (f" ({calls / dur:.0f}/s over {dur:.1f} s wall)" if dur > 0 else "")
                  + f"; time in server requests {req:.1f} s (inside kernels {ker:.2f} s); {starts} emulator starts")
