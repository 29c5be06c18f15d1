"""The model family's table in summary.md (harness/report/model_table.py): one row per model test, its
figures from the run, its verdict and, for a test that did not pass, why."""

from __future__ import annotations

import json

from harness.model.perplexity import Kld
from harness.report import model_table
from harness.report.summary import write_summary


def _result(nodeid: str, outcome: str, k: Kld | None = None, reason: str = "") -> dict:
    entry = {"nodeid": nodeid, "outcome": outcome, "reason": reason, "duration": 1.0}
    if k is not None:
        entry.update({name.removeprefix("rvvdiff."): v for name, v in k.figures()})
    return entry


def test_the_table_holds_each_run_its_figures_and_its_verdict(tmp_path) -> None:
    ok = Kld(mean_kld=0.0255, same_top=92.857, ppl_ratio=1.038, ppl=20.0, positions=14, seconds=64.0, tokens=32)
    bad = Kld(mean_kld=13.1, same_top=0.0, ppl_ratio=89200.0, ppl=1e6, positions=100, kld_999=25.5, seconds=100.0,
              tokens=208)
    results = [
        _result("cases/test_model.py::test_model[smollm2-q4_1-repack-t1-vlen256-zvfh-clang]", "passed", ok),
        _result("cases/test_model.py::test_model[smollm2-iq2_xxs-repack-t1-vlen512-zvfh-clang]", "xfailed", bad,
                "iq2_xxs_vl512_subblock_offsets"),
        _result("cases/test_model.py::test_model[smollm2-q4_1-norepack-t1-vlen512-zvfh-clang]", "skipped", None,
                "ggml repacks nothing of this file at VLEN 512"),
        _result("cases/test_model.py::test_model_host[vlen128-zvfh-clang]", "passed", ok),
        _result("cases/test_vec_dot.py::test_vec_dot[q4_0-vlen128-zvfh-clang]", "passed"),
    ]
    rows = model_table.rows(results)
    assert [r[0] for r in rows] == ["host build (second opinion)", "smollm2-iq2_xxs-repack-t1",
                                    "smollm2-q4_1-norepack-t1", "smollm2-q4_1-repack-t1"]
    host, iq2, skipped, q41 = rows
    assert q41[1] == "vlen256-zvfh-clang" and q41[2] == ["92.9", "0.0255", "", "1.038", "0.50"]
    assert q41[3] == "within the bound"
    assert iq2[2][2] == "25.5" and iq2[3] == "known failure: iq2_xxs_vl512_subblock_offsets"
    assert skipped[2] == [""] * len(model_table.FIGURES) and skipped[3].startswith("not run: ggml repacks nothing")
    write_summary(tmp_path, results, ["tree: pinned"])
    md = (tmp_path / "summary.md").read_text()
    assert "## The model family" in md and "| `smollm2-q4_1-repack-t1` | vlen256-zvfh-clang | 92.9 |" in md
    assert json.loads((tmp_path / "results.json").read_text())[0]["model_kld"] == 0.0255


def test_a_run_without_model_tests_has_no_model_section(tmp_path) -> None:
    write_summary(tmp_path, [_result("cases/test_vec_dot.py::test_vec_dot[q4_0-vlen128-zvfh-clang]", "passed")], [])
    assert "model family" not in (tmp_path / "summary.md").read_text()
