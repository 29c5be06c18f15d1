"""pytest-xdist as the differential suite uses it (harness/plugin/workers.py): workers capped at the
usable cores, each target's tests on few workers, one live server per worker, nothing lost when a
kernel crashes or hangs or a worker dies."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
from launch import pytest_in

from harness.plugin import workers
from harness.plugin.workers import TargetScheduling, cap_workers, shards


def test_shards_keep_every_worker_fed_and_stay_two_when_targets_suffice() -> None:
    assert shards(2, 24) == 2  # the main job on 2 cores: at most 2 servers per target
    assert shards(16, 24) == 3  # 16 workers: 72 scopes, 4 or more per worker
    assert shards(4, 1) == 16  # one target: every worker still gets 4 scopes
    assert shards(2, 0) == 8


def test_a_target_test_is_scoped_by_target_and_shard_and_others_alone() -> None:
    sched = TargetScheduling.__new__(TargetScheduling)
    sched.shards = 2
    a = sched._split_scope("cases/test_vec_dot.py::test_vec_dot[f16-vlen512-zvfh-stress]")
    assert re.fullmatch(r"vlen512-zvfh-stress#[01]", a)
    same_target = {sched._split_scope(f"cases/test_vec_dot.py::test_vec_dot[k{i}-vlen512-zvfh-stress]")
                   for i in range(40)}
    assert same_target == {"vlen512-zvfh-stress#0", "vlen512-zvfh-stress#1"}
    assert sched._split_scope("cases/test_coverage.py::test_coverage") == "cases/test_coverage.py::test_coverage"
    # Two compilers: each compiler's build is a target of its own (its own server), never one scope.
    by_cc = {cc: {sched._split_scope(f"cases/test_vec_dot.py::test_vec_dot[k{i}-vlen512-zvfh-{cc}]") for i in range(40)}
             for cc in ("clang", "gcc14")}
    assert by_cc["clang"] == {"vlen512-zvfh-clang#0", "vlen512-zvfh-clang#1"}
    assert not by_cc["clang"] & by_cc["gcc14"]


@pytest.mark.parametrize("env, given, expected", [
    (None, None, "cores"), ("3", None, 3), ("0", None, None), (None, 5, 5), ("3", 5, 5)])
def test_cap_defaults_to_the_cores_and_a_user_choice_wins(monkeypatch: pytest.MonkeyPatch, env: str | None,
                                                           given: int | None, expected: object) -> None:
    if env is None:
        monkeypatch.delenv("RVVDIFF_MAX_WORKERS", raising=False)
    else:
        monkeypatch.setenv("RVVDIFF_MAX_WORKERS", env)
    cfg = SimpleNamespace(option=SimpleNamespace(numprocesses=16, maxprocesses=given))
    cap_workers(cfg)  # type: ignore[arg-type]
    assert cfg.option.maxprocesses == (workers.usable_cores() if expected == "cores" else expected)


def test_a_bad_cap_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RVVDIFF_MAX_WORKERS", "many")
    with pytest.raises(pytest.UsageError, match="RVVDIFF_MAX_WORKERS='many': give a whole number"):
        cap_workers(SimpleNamespace(option=SimpleNamespace(numprocesses=4, maxprocesses=None)))  # type: ignore[arg-type]


FAULTS = """
import os
from harness.emulators.protocol import In, Out

def test_a_segv(target):
    target.call("selftest_segv")

def test_b_hang(target):
    target.call("selftest_hang")

def test_c_worker_dies(target):
    if target.vlen == 256:
        os._exit(3)

def test_d_after(target):
    r = target.call("selftest_echo", [], [], [In(b"alive"), Out(5)])
    assert r.outputs == [b"alive"]
"""


def test_faults_under_target_scheduling_lose_nothing(pytester: pytest.Pytester) -> None:
    """Four VLENs on two workers: a crash and a hang fail their case, a worker that dies fails the test
    it ran and is replaced; every test is reported exactly once, every other one passes."""
    pytester.makepyfile(test_faults=FAULTS)
    r = pytest_in(pytester, "--vlen", "128,256,512,1024", "--isa", "zvfh", "--kernel-timeout", "3", "-n", "2",
                  "--report-dir", "reports", code=1)
    out = r.stdout
    results = json.loads((pytester.path / "reports" / "results.json").read_text())
    ids = [e["nodeid"] for e in results]
    twice = [(e["nodeid"], e["outcome"], e["reason"][:80]) for e in results if ids.count(e["nodeid"]) > 1]
    expected = {f"test_faults.py::{t}[vlen{v}-zvfh]" for t in ("test_a_segv", "test_b_hang", "test_c_worker_dies",
                                                                "test_d_after") for v in (128, 256, 512, 1024)}
    assert len(ids) == len(set(ids)) and set(ids) == expected, twice or sorted(expected - set(ids))
    outcome = {e["nodeid"].split("::")[1]: e["outcome"] for e in results}
    assert outcome["test_c_worker_dies[vlen256-zvfh]"] == "failed"
    assert all(v == "failed" for k, v in outcome.items() if k.startswith(("test_a_segv", "test_b_hang"))), outcome
    assert all(v == "passed" for k, v in outcome.items()
               if k.startswith("test_d_after") or (k.startswith("test_c") and "vlen256" not in k)), outcome
    assert "selftest_hang did not finish within 3 s and was killed" in out


ECHO = """
from harness.emulators.protocol import In, Out
import pytest

@pytest.mark.parametrize("i", range(6))
def test_echo(target, i):
    r = target.call("selftest_echo", [], [], [In(b"x" * (i + 1)), Out(i + 1)])
    assert r.outputs == [b"x" * (i + 1)]
"""


def test_servers_are_per_target_not_per_worker(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight targets, four workers (the cap lifted): at most two servers started per target, where
    xdist's load mode starts one per worker and target it meets."""
    monkeypatch.setenv("RVVDIFF_MAX_WORKERS", "0")
    pytester.makepyfile(test_echo=ECHO)
    r = pytest_in(pytester, "--vlen", "all", "--isa", "zvfh", "--rvv-stress", "both", "-n", "4")
    r.assert_outcomes(passed=48)
    starts = int(re.search(r"(\d+) emulator starts", r.stdout).group(1))
    assert starts <= 2 * 8, r.stdout


def test_two_compilers_start_servers_per_target_and_compiler(pytester: pytest.Pytester) -> None:
    """Two compilers, four targets each, two workers: a worker keeps one live server and runs one target's
    tests in a row, so starts stay about two per (target, compiler) -- not one per test, as when a scope mixed
    the compilers' tests of one VLEN, ISA build and stress mode."""
    pytester.makepyfile(test_echo=ECHO)
    r = pytest_in(pytester, "--vlen", "256,512", "--isa", "zvfh", "--rvv-stress", "both", "-n", "2",
                  "--cc", "clang,gcc14", code=None)
    if "gcc14" in r.stdout and "not installed" in r.stdout:
        pytest.skip("GCC 14 is not installed (ci/setup.sh --gcc14)")
    r.assert_outcomes(passed=48)
    starts = int(re.search(r"(\d+) emulator starts", r.stdout).group(1))
    assert starts <= 2 * 8, r.stdout


def test_more_workers_than_cores_are_capped_and_the_header_says_so(pytester: pytest.Pytester,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RVVDIFF_MAX_WORKERS", raising=False)
    pytester.makepyfile(test_echo=ECHO)
    cores = workers.usable_cores()
    asked = cores + 2
    r = pytest_in(pytester, "--vlen", "128,256", "--isa", "zvfh", "-n", str(asked))
    r.assert_outcomes(passed=12)
    out = r.stdout
    assert f"rvvdiff: workers: {cores} (-n {asked} capped at {cores}: the usable cores" in out, out
    assert f"created: {cores}/{cores} workers" in out, out
