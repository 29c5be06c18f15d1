"""The worker-time table per family (harness/plugin/timing.py): what each column sums, from reports of every
phase and outcome."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from harness.plugin import timing


@dataclass
class Rep:
    nodeid: str
    when: str
    duration: float
    user_properties: list = field(default_factory=list)


def test_family_is_the_module_without_its_prefix() -> None:
    assert timing.family("cases/test_flash_attn.py::test_flash_attn[tiled-f32-vlen256-zvfh-clang]") == "flash_attn"
    assert timing.family("cases/model_checks.py::x") == "cases/model_checks.py"


def test_each_column_sums_its_phase_and_the_harness_is_the_rest_of_the_calls() -> None:
    reps = [
        Rep("cases/test_vec_dot.py::t[a]", "setup", 30.0),  # the build
        Rep("cases/test_vec_dot.py::t[a]", "call", 2.0, [("rvvdiff.request_s", 0.5), ("rvvdiff.kernel_s", 0.25)]),
        Rep("cases/test_vec_dot.py::t[a]", "teardown", 0.1),
        Rep("cases/test_vec_dot.py::t[b]", "call", 1.0, [("rvvdiff.request_s", 0.5), ("rvvdiff.kernel_s", 0.5)]),
        Rep("cases/test_model.py::test_model[x]", "call", 100.0, [("rvvdiff.emulated_s", 90.0)]),
        Rep("", "call", 5.0),  # a collection report: no test
    ]
    rows = timing.table(reps)
    vd, model = rows["vec_dot"], rows["model"]
    assert vd["tests"] == 2 and vd["worker_s"] == pytest.approx(33.1) and vd["setup_s"] == 30.0
    assert vd["request_s"] == 1.0 and vd["kernel_s"] == 0.75 and vd["harness_s"] == pytest.approx(2.0)
    assert model["emulated_s"] == 90.0 and model["harness_s"] == pytest.approx(10.0)
    assert timing.share(model) == pytest.approx(0.9)
    assert timing.share(vd) == pytest.approx(0.75 / 33.1)
    text = timing.lines(rows)
    assert text[2].split()[0] == "model" and text[-1].split()[0] == "(all)"  # by worker time, the run last
    assert timing.totals(rows)["worker_s"] == pytest.approx(133.1)


def test_the_table_is_written_with_the_wall_time(tmp_path) -> None:
    import json
    rows = timing.table([Rep("cases/test_x.py::t", "call", 1.0, [("rvvdiff.request_s", 0.5)])])
    timing.write(tmp_path / "r" / "time.json", rows, 12.34)
    data = json.loads((tmp_path / "r" / "time.json").read_text())
    assert data["wall_s"] == 12.3 and data["families"]["x"]["request_s"] == 0.5 and data["all"]["tests"] == 1


def test_a_traced_probe_counts_as_emulated_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """A path check's traced probe is a QEMU run of its own: its time is the test's emulated work, not harness."""
    import time
    from types import SimpleNamespace

    from harness.check import observe
    from harness.core.config import ISA_BUILDS
    from harness.plugin import targets

    server = SimpleNamespace(build=SimpleNamespace(runtime=None))  # a static server (no shared library)
    fake = SimpleNamespace(emulator=SimpleNamespace(traces=True), timeout=5.0, server=lambda t: server,
                           config=SimpleNamespace(getoption=lambda name: (False,)))
    monkeypatch.setattr(targets, "session", lambda: fake)
    monkeypatch.setattr(targets, "trace_call", lambda *a, **k: (time.sleep(0.05), "the trace")[1])
    obs = observe.Observation()
    observe.attach(obs)
    try:
        assert targets.Target(256, ISA_BUILDS["zvfh"], False).trace("attention") == "the trace"
        assert obs.peek("emulated_s") >= 0.05
    finally:
        observe.detach(obs)
