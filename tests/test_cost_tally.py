"""No silent empty cost run (harness/cost/tables/run_tally.py, harness/jobs/cost_suite_runs.py): what ``rvvdiff cost``
measured of what it selected, on fabricated outcomes; no emulator.

* a run that measured none of its cases, or fewer than selected, exits 3 and names each reason with its
  count (failures first, then skips); every case measured exits 0; a blocking slower case exits 1;
* ``--model`` with a type the model-shaped case does not take is a usage error (exit 2) naming the types;
* a ``-k`` that selects nothing, or a ``--model`` type a tree lacks, is one line before any run.

The gate's cost step is tests/test_gate_cost.py; the end-to-end run under Spike is
tests/test_cost_planted.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.commands import cost
from harness.core.matrix import Matrix
from harness.core.runner import NO_TESTS_COLLECTED, SuiteRun
from harness.cost.prices import per_token
from harness.cost.tables import run_tally, suite_tables
from harness.cost.tables.run_tally import Tally
from harness.jobs import cost_suite_runs

KEYERROR = "failed: oracles/quants.py:442: KeyError"


def _row(case: str, vlen: int = 256, instret: int = 1000) -> dict:
    return {"case": case, "vlen": vlen, "isa": "zvfh", "instret": instret, "units": 100, "unit": "element",
            "function": "f", "impl": "rvv", "twin": None, "size": "k100", "vector": 1,
            "nodeid": f"costs/test_cost.py::test_cost[{case}-vlen{vlen}-zvfh]"}


def _failed(tree: str, n: int, why: str = KEYERROR) -> dict[str, str]:
    return {f"{tree}: repack-model-tinyllama-x-k2048-m32-n1-r{i}-vlen256-zvfh": why for i in range(n)}


def test_a_run_that_measured_nothing_is_incomplete_and_names_the_reason() -> None:
    """The run of the report: 24 cases a tree, every one failing the same way."""
    t = Tally({"head": 0, "base": 0}, {**_failed("head", 24), **_failed("base", 24)})
    assert not t.complete and t.selected() == 48 and t.selected("head") == 24
    assert t.summary() == "0 of 48 selected cases measured (HEAD 0 of 24, BASE 0 of 24)"
    assert t.reasons() == ["failed, 48 cases (24 on HEAD, 24 on BASE; head: repack-model-tinyllama-x-k2048-m32-n1-r0-"
                           "vlen256-zvfh, ...): oracles/quants.py:442: KeyError"]
    assert t.counts() == "48 failed" and t.empty() == ["head", "base"]
    assert run_tally.exit_status(t, blocking=False) == 3


def test_fewer_than_selected_is_incomplete_with_failures_then_skips() -> None:
    missing = {"head: a-vlen512-zvfh": "skipped: not in this tree: f (HEAD)", **_failed("head", 1, "failed: trap"),
               "head: b-vlen512-zvfh": "skipped: not in this tree: f (HEAD)"}
    t = Tally({"head": 5}, missing)
    assert t.summary() == "5 of 8 selected cases measured"  # one run: no per-run counts
    assert t.reasons() == ["failed, 1 case (head: repack-model-tinyllama-x-k2048-m32-n1-r0-vlen256-zvfh): trap",
                           "skipped, 2 cases (head: a-vlen512-zvfh, ...): not in this tree: f (HEAD)"]
    assert run_tally.exit_status(t, blocking=False) == 3 and not t.empty()
    assert run_tally.exit_status(t, blocking=True) == 1  # a blocking slower case is 1 whatever was missed
    # every case measured
    done = Tally({"head": 5, "base": 5}, {})
    assert done.complete and run_tally.exit_status(done, blocking=False) == 0
    assert done.summary() == "10 of 10 selected cases measured (HEAD 5 of 5, BASE 5 of 5)"
    # nothing selected is nothing measured, not a pass
    assert run_tally.exit_status(Tally({"head": 0}, {}), blocking=False) == 3


def test_a_passed_case_that_left_no_row_is_not_measured() -> None:
    results = {f"costs/test_cost.py::test_cost[{c}-vlen256-zvfh]": {"outcome": "passed"} for c in ("a", "b")}
    rows = suite_tables.merge([_row("a")])
    assert suite_tables.unmeasured(results, "head: ", rows) == {
        "head: b-vlen256-zvfh": "no row: passed but left no row in the cost log"}
    assert suite_tables.unmeasured(results, "head: ") == {}  # without the rows: as before


def _fake_runs(monkeypatch: pytest.MonkeyPatch, head: tuple, base: tuple) -> None:
    def run(tree, out, name, args, extra=(), compiler=None, isas=None):
        rows, missing = head if name.startswith("head") else base
        return suite_tables.merge(rows), dict(missing), 1.0
    monkeypatch.setattr(cost_suite_runs, "run_costs", run)
    monkeypatch.setattr(cost_suite_runs, "check_selection", lambda *a: 24)


def test_the_command_exits_3_when_it_measured_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    _fake_runs(monkeypatch, ([], _failed("head", 24)), ([], _failed("base", 24)))
    assert cost.main(["--base", "/b", "--vlen", "256", "--isa", "zvfh", "--out", str(tmp_path)]) == 3
    out, err = capsys.readouterr()
    assert "rvvdiff cost: 0 of 48 selected cases measured (HEAD 0 of 24, BASE 0 of 24);" in out
    assert "  not measured: failed, 48 cases (24 on HEAD, 24 on BASE; head: repack-model-" in out
    assert out.count("not measured:") == 1 and "oracles/quants.py:442: KeyError" in out
    assert err.strip().splitlines()[-1] == ("rvvdiff cost: incomplete: 0 of 48 selected cases measured (HEAD 0 of 24, "
                                            "BASE 0 of 24): 48 failed; each reason is a 'not measured' line above")
    # --block-slower has nothing to block on: still 3, not a pass
    assert cost.main(["--base", "/b", "--out", str(tmp_path), "--block-slower", "5"]) == 3


def test_the_command_exits_3_when_it_measured_fewer_than_selected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    both = [_row("a"), _row("b")]
    _fake_runs(monkeypatch, (both, {}), ([_row("a")], {"base: b-vlen256-zvfh": "skipped: not in this tree: f (BASE)"}))
    assert cost.main(["--base", "/b", "--out", str(tmp_path)]) == 3
    out, err = capsys.readouterr()
    assert "rvvdiff cost: 3 of 4 selected cases measured (HEAD 2 of 2, BASE 1 of 2);" in out
    assert "  not measured: skipped, 1 case (1 on BASE; base: b-vlen256-zvfh): not in this tree: f (BASE)" in out
    assert "1 skipped" in err
    assert json.loads((tmp_path / "cost.json").read_text())["unmeasured"] == {"base: b-vlen256-zvfh":
                                                                             "skipped: not in this tree: f (BASE)"}
    # every case measured: 0; a slower case beyond --block-slower: 1
    _fake_runs(monkeypatch, (both, {}), ([_row("a"), _row("b", instret=900)], {}))
    assert cost.main(["--base", "/b", "--out", str(tmp_path)]) == 0
    assert "4 of 4 selected cases measured" in capsys.readouterr().out
    assert cost.main(["--base", "/b", "--out", str(tmp_path), "--block-slower", "5"]) == 1


def test_a_model_type_the_case_does_not_take_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cost.main(["--model", "tinyllama:q8_K:1+32+128", "-k", "model", "--vlen", "256", "--isa", "zvfh"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert ("model case 'tinyllama:q8_K:1+32+128': the model-shaped case takes a float or quantized weight type, not "
            "'q8_K': one of f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q1_0,") in err
    assert "(e.g. tinyllama:q4_0:1+32+128)" in err
    assert "q8_K" not in per_token.TYPES and "q8_1" not in per_token.TYPES and {"iq4_xs", "f16", "bf16"} <= set(per_token.TYPES)


def _options(tmp_path: Path, **kw: object) -> cost_suite_runs.Options:
    return cost_suite_runs.Options(Matrix(vlens=(256,), isas=("zvfh",)), out=tmp_path, **kw)


def test_a_selection_without_a_case_is_one_line_before_any_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[list[str]] = []

    def collect(argv, **kw):
        seen.append(list(argv))
        return SuiteRun(list(argv), NO_TESTS_COLLECTED, 0.1, stdout="no tests ran in 0.1s\n")
    monkeypatch.setattr(cost_suite_runs, "run_suite", collect)
    with pytest.raises(cost_suite_runs.CostSelectionError) as e:
        cost_suite_runs.check_selection(_options(tmp_path, k="model"), [], [], tmp_path)
    assert str(e.value) == ("-k 'model' selects no case of the cost suite (costs/) at --vlen 256 --isa zvfh --emulator "
                            "spike (the model-shaped cases exist only with --model SPEC); `pytest costs --collect-only "
                            "-q --vlen 256 --isa zvfh --emulator spike` lists the case ids")
    assert "--collect-only" in seen[0] and "--cost-log" not in seen[0]  # a collection, no measurement
    with pytest.raises(cost_suite_runs.CostSelectionError, match="no case of the cost suite .costs/. reaches the change"):
        cost_suite_runs.check_selection(_options(tmp_path, changed_only=True, base="/b"), [], ["--changed-only"], tmp_path)
    # a collection that fails is not "nothing selected"
    monkeypatch.setattr(cost_suite_runs, "run_suite", lambda argv, **kw: SuiteRun(list(argv), 4, 0.1, stderr="ERROR: bad\n"))
    with pytest.raises(cost_suite_runs.CostRunError, match="collecting the cost suite failed .exit 4.:\n  ERROR: bad"):
        cost_suite_runs.check_selection(_options(tmp_path, k="x"), [], [], tmp_path)
    # the cases it selects are counted
    ids = "".join(f"costs/test_cost.py::test_cost[c{i}-vlen256-zvfh]\n" for i in range(3))
    monkeypatch.setattr(cost_suite_runs, "run_suite", lambda argv, **kw: SuiteRun(list(argv), 0, 0.1, stdout=ids))
    assert cost_suite_runs.check_selection(_options(tmp_path, k="c"), [], [], tmp_path) == 3


def test_a_model_type_a_tree_lacks_is_one_line_before_any_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    class Src:
        def describe(self) -> str:
            return "old tree"

    class Inventory:
        types = {"q4_0": 2}
    monkeypatch.setattr(cost_suite_runs, "resolve", lambda t: Src())
    monkeypatch.setattr(cost_suite_runs.tree, "of", lambda src: Inventory())
    monkeypatch.setattr(cost_suite_runs, "run_suite", lambda *a, **k: pytest.fail("a run before the check"))
    specs = per_token.parse_spec("tinyllama:q1_0:1")
    with pytest.raises(cost_suite_runs.CostSelectionError) as e:
        cost_suite_runs.check_selection(_options(tmp_path, model="tinyllama:q1_0:1"), specs, [], tmp_path)
    assert str(e.value) == ("--model tinyllama:q1_0:1: ggml type 'q1_0' is not in HEAD's tree (old tree), so its "
                            "model-shaped case cannot be measured there; give a type both trees have")


def test_a_k_that_selects_nothing_is_found_by_a_collection(tmp_path: Path) -> None:
    """The real collection of the cost suite (no build, no emulator)."""
    with pytest.raises(cost_suite_runs.CostSelectionError, match="-k 'no_such_case' selects no case"):
        cost_suite_runs.check_selection(_options(tmp_path, k="no_such_case"), [], [], tmp_path)
    assert cost_suite_runs.check_selection(_options(tmp_path, k="quant_dot and q4_0 and k4096"), [], [], tmp_path) == 2
