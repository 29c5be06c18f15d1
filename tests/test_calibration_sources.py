"""Each calibration row's estimates come from cost output committed to the repository
(harness/cost/calibration/sources.py, harness/data/calibration/): every figure of harness/data/calibration.toml
is recomputed from its row's source, ``record`` keeps what a row needs of a cost run and writes its
estimates, and a held-out row used to change an estimator is held out no longer, in every table and summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cost.calibration import kernel_rows, model_rows, sources

ROW = """# a header line

[[row]]
name = "PR 7"
change = "a kernel"
board = "B"
vlen = 256
model = "M"
kernel = "k_rvv"
before = "aaaa"
after = "bbbb"
measured = { pp32 = [2.0, 6.0] }
estimates = { table = 9.0, mca = 9.0, instructions = 9.0 }
"""


def _row(function: str, instret: int, x60: float, mca: float, vlen: int = 256) -> dict:
    return {"case": f"quant_dot-{function}", "function": function, "size": "k4096", "vlen": vlen, "isa": "zvfh",
            "units": 4096, "instret": instret, "functions": {"noise": 1}, "tree": "/somewhere",
            "estimates": {"spacemit_x60": {"cycles": x60}}, "mca": {"cycles": mca}}


def test_every_row_of_the_data_file_is_its_committed_cost_output() -> None:
    for r in kernel_rows.rows():
        if r.estimates:
            assert sources.source_path(r.name).is_file(), f"{r.name}: no committed cost output"
    assert sources.stale() == [], (
        "estimates the committed cost output does not give: run rvvdiff calibration record ROW")


def test_record_keeps_what_the_row_needs_and_writes_the_estimates(tmp_path: Path) -> None:
    data, root = tmp_path / "calibration.toml", tmp_path / "calibration"
    data.write_text(ROW)
    cost = {"head": [_row("k_rvv", 1000, 800.0, 1200.0), _row("other", 5, 5.0, 5.0), _row("k_rvv", 9, 9.0, 9.0, 512)],
            "base": [_row("k_rvv", 4000, 2400.0, 6000.0)]}
    (tmp_path / "cost.json").write_text(json.dumps(cost))
    new = sources.record("PR 7", [tmp_path / "cost.json"], data=data, root=root)
    assert new == {"estimates": {"table": 3.0, "mca": 5.0, "instructions": 4.0}}
    (r,) = kernel_rows.parse(data.read_text())
    assert r.estimates["clang"] == {"table": 3.0, "mca": 5.0, "instructions": 4.0}
    assert data.read_text().startswith("# a header line\n")
    kept = json.loads(sources.source_path("PR 7", root).read_text())["per_compiler"]["clang"]
    assert [(x["function"], x["vlen"]) for x in kept["head"] + kept["base"]] == [("k_rvv", 256), ("k_rvv", 256)]
    assert "functions" not in kept["head"][0] and "tree" not in kept["head"][0]
    assert sources.stale(data, root) == []
    # another compiler's run adds its figures beside clang's; a figure edited by hand is found
    (tmp_path / "gcc.json").write_text(json.dumps({"per_compiler": {"gcc14": cost}}))
    sources.record("PR 7", [tmp_path / "gcc.json"], data=data, root=root)
    assert "estimates_gcc14 = { table = 3.0, mca = 5.0, instructions = 4.0 }" in data.read_text()
    data.write_text(data.read_text().replace("estimates = { table = 3.0", "estimates = { table = 3.5"))
    (bad,) = sources.stale(data, root)
    assert bad.startswith("PR 7: estimates: in the file") and "'table': 3.5" in bad


def test_a_row_without_committed_output_is_named(tmp_path: Path) -> None:
    data = tmp_path / "calibration.toml"
    data.write_text(ROW)
    (line,) = sources.stale(data, tmp_path)
    assert line.startswith("PR 7: estimates:") and line.endswith("nothing")
    with pytest.raises(sources.CalibrationError, match="no cost output committed"):
        sources.record("PR 7", [], data=data, root=tmp_path)
    # a figure said to have none is skipped, until a run is recorded for it
    data.write_text(ROW + 'unsourced = ["estimates"]\n')
    assert sources.stale(data, tmp_path) == []
    (tmp_path / "cost.json").write_text(json.dumps({"head": [_row("k_rvv", 1000, 800.0, 1200.0)],
                                                    "base": [_row("k_rvv", 2000, 800.0, 1200.0)]}))
    sources.record("PR 7", [tmp_path / "cost.json"], data=data, root=tmp_path)
    assert "unsourced" not in data.read_text() and sources.stale(data, tmp_path) == []


def test_a_held_out_row_used_to_change_an_estimator_is_held_out_no_longer() -> None:
    spec = ('model_case = { spec = "tinyllama:q4_0:1+32", estimates = { b1 = { table = 2.0 }, '
            'b32 = { table = 2.0 } } }\n')
    used = ROW.split("\n", 1)[1] + 'held_out = true\nused_for = "the scalar prices"\n' + spec
    held = ROW.split("\n", 1)[1].replace("PR 7", "PR 8") + "held_out = true\n" + spec
    rows = kernel_rows.parse(used + held)
    assert [(r.name, r.held_out) for r in rows] == [("PR 7", False), ("PR 8", True)]
    assert rows[0].label == "PR 7 (held out until used for the scalar prices)" and rows[1].label == "held out: PR 8"
    s = kernel_rows.summary(rows)
    assert "within 3.0x on 1 change (1 held out until used for an estimator), 3.0x on 1 held out" in s
    assert "| PR 7 (held out until used for the scalar prices): a kernel" in kernel_rows.table(rows)
    mrows = model_rows.parse(used + held)
    assert "1 held out until used for an estimator" in model_rows.summary(mrows)
    assert "| PR 7 (held out until used for the scalar prices) |" in model_rows.table(mrows)


def test_a_source_with_both_trees_traffic_gives_the_row_its_roofline(tmp_path: Path) -> None:
    data, root = tmp_path / "calibration.toml", tmp_path / "calibration"
    data.write_text(ROW.replace('board = "B"\n', 'board = "B"\nthreads = 8\n'))

    def traffic(row: dict, dram: float) -> dict:
        return row | {"traffic": {"spacemit_x60": {"l2_bytes": 0, "dram_bytes": dram}}}

    # BEFORE: 2400 cycles, compute-bound; AFTER: 800 (1200) cycles of compute but 8 x 4096 DRAM bytes on the bus:
    # DRAM-bound, and slower than BEFORE by the table's prices
    cost = {"head": [traffic(_row("k_rvv", 1000, 800.0, 1200.0), 4096.0)],
            "base": [traffic(_row("k_rvv", 4000, 2400.0, 6000.0), 0.0)]}
    (tmp_path / "cost.json").write_text(json.dumps(cost))
    new = sources.record("PR 7", [tmp_path / "cost.json"], data=data, root=root)
    dram_s = 8 * 4096 / 10.664e9
    assert new["roofline"] == {"table": round(2400 / 1.6e9 / dram_s, 3), "mca": round(6000 / 1.6e9 / dram_s, 3),
                               "bound_table": "compute / DRAM", "bound_mca": "compute / DRAM"}
    assert sources.stale(data, root) == []
    data.write_text(data.read_text().replace('bound_mca = "compute / DRAM"', 'bound_mca = "DRAM / DRAM"'))
    (bad,) = sources.stale(data, root)
    assert bad.startswith("PR 7: roofline: in the file")
    # without the row's threads there is no roofline
    data.write_text(ROW)
    assert "roofline" not in sources.record("PR 7", [], data=data, root=root)
