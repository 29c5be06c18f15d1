"""The estimates held against the boards (harness/cost/calibration/kernel_rows.py, harness/data/calibration.toml,
docs/calibration.md): the data file reads, the error factors are the ratios they say, the docs' table
is generated from the data, and the report states the calibration next to every estimated change."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cost.calibration import kernel_rows
from harness.cost.prices import cores
from harness.cost.tables import suite_tables

ROW = """
[[row]]
name = "PR 1"
change = "a kernel"
board = "B"
vlen = 256
model = "M"
kernel = "k"
before = "aaaa"
after = "bbbb"
measured = { pp32 = [2.0, 6.0], tg10 = [1.0, 2.0] }
estimates = { table = 4.5, mca = 2.0 }
"""


def test_the_project_data_file_reads_and_the_docs_table_is_generated_from_it() -> None:
    rows = kernel_rows.rows()
    assert len(rows) >= 4 and {r.vlen for r in rows} == {128, 256}
    assert any(r.held_out for r in rows) and not all(r.held_out for r in rows)
    assert kernel_rows.doc_table() == kernel_rows.table(), (
        "docs/calibration.md's table is not the data file's: run rvvdiff calibration write")


def test_an_error_factor_is_the_estimated_over_the_measured_speed_up() -> None:
    (r,) = kernel_rows.parse(ROW)
    assert r.speedup("pp32") == pytest.approx(3.0) and r.speedup("tg10") == pytest.approx(2.0)
    assert r.factor("table", "pp32") == pytest.approx(1.5) and r.factor("table", "tg10") == pytest.approx(2.25)
    assert r.factor("mca", "pp32") == pytest.approx(2 / 3)
    assert kernel_rows.worst([r], "table") == (pytest.approx(2.25), 1)
    assert kernel_rows.worst([r], "mca") == (pytest.approx(1.5), 1)  # 2/3 counts as 1.5x, either way


def test_the_summary_keeps_held_out_rows_apart_and_links_the_docs() -> None:
    held = ROW.replace('estimates = { table = 4.5, mca = 2.0 }', 'estimates = { table = 30.0 }\nheld_out = true')
    rows = kernel_rows.parse(ROW + held)
    s = kernel_rows.summary(rows)
    # the held-out row is counted apart in the direction too, not pooled with the rows it was not used for
    assert ("clang builds, X60 by rvv-bench prices within 2.2x on 1 change, 15.0x on 1 held out, direction right on 1 of 1, "
            "on 1 of 1 held out;") in s
    assert "clang builds, X60 by llvm-mca within 1.5x on 1 change, direction right on 1 of 1" in s
    assert "instructions" not in s.split("(", 2)[2]  # the instruction ratio is a reference, not summarised
    assert s.endswith("(docs/calibration.md)")
    assert "no board measurement" in kernel_rows.summary([])
    # held-out rows alone: the direction count still names itself
    assert "within 15.0x on 1 held out, direction right on 1 of 1 held out" in kernel_rows.summary(kernel_rows.parse(held))


def test_another_compilers_estimates_are_kept_and_summarised_apart() -> None:
    (r,) = kernel_rows.parse(ROW + "estimates_gcc14 = { table = 9.0 }\n")
    assert r.factor("table", "pp32", "gcc14") == pytest.approx(3.0) and r.factor("table", "pp32") == pytest.approx(1.5)
    assert kernel_rows.compilers([r]) == ["clang", "gcc14"]
    s = kernel_rows.summary([r])
    assert s.index("clang builds, X60 by rvv-bench") < s.index("gcc14 builds, X60 by rvv-bench prices within 4.5x on 1 change")
    lines = [ln for ln in kernel_rows.table([r]).splitlines()[2:]]
    assert len(lines) == 4 and [ln.split(" | ")[6] for ln in lines] == ["clang", "gcc14", "clang", "gcc14"]


def test_an_estimate_that_calls_a_slowdown_a_gain_is_the_wrong_direction() -> None:
    slower = ROW.replace("tg10 = [1.0, 2.0]", "tg10 = [2.0, 1.0]")
    (r,) = kernel_rows.parse(slower)
    assert kernel_rows.direction_right([r], "table") == (0, 1)
    assert "direction right on 0 of 1" in kernel_rows.summary([r])


@pytest.mark.parametrize("text, message", [
    (ROW.replace("measured = { pp32 = [2.0, 6.0], tg10 = [1.0, 2.0] }", "measured = { pp32 = [0, 6.0] }"),
     "both positive"),
    (ROW.replace("table = 4.5", "guess = 4.5"), "unknown estimator"),
    (ROW.replace('kernel = "k"\n', ""), "missing field 'kernel'"),
    ("[[row]\n", "not TOML"),
])
def test_a_malformed_row_is_named(text: str, message: str, tmp_path, monkeypatch) -> None:
    with pytest.raises(kernel_rows.CalibrationError, match=message):
        kernel_rows.parse(text)
    # In a cost report the summary line says so instead of ending the report.
    bad = tmp_path / "calibration.toml"
    bad.write_text(text)
    monkeypatch.setattr(kernel_rows, "DATA", bad)
    kernel_rows.rows.cache_clear()
    try:
        line = kernel_rows.summary()
    finally:
        kernel_rows.rows.cache_clear()
    assert line.startswith("calibration: unknown (") and message.split("'")[0] in line


def _cost_row(case: str, fn: str, instret: int, x60: float, mca: float) -> dict:
    return {"case": case, "function": fn, "vlen": 256, "isa": "zvfh", "units": 4096, "instret": instret,
            "estimates": {"spacemit_x60": {"cycles": x60}}, "mca": {"cycles": mca}}


def _row_on_every_core(fn: str, vlen: int, instret: int, cycles: float) -> dict:
    """A cost row at ``vlen`` priced on every core of that VLEN (twice the cycles on the second and later)."""
    keys = [c.key for c in cores.for_vlen(vlen)]
    return {"case": "c", "function": fn, "vlen": vlen, "isa": "zvfh", "units": 4096, "instret": instret,
            "estimates": {k: {"cycles": cycles * (1 if i == 0 else 2)} for i, k in enumerate(keys)},
            **({"mca": {"cycles": cycles}} if vlen == 256 else {})}


def test_estimate_prices_every_core_on_one_and_on_several_compilers() -> None:
    """``estimate`` for the X60, X100 and Ascalon at 256 and the A100 at 1024, LLVM's model for the X60 only; a
    multi-compiler cost.json gives one set per compiler."""
    run = {"head": [_row_on_every_core("k", 256, 100, 200.0), _row_on_every_core("k", 1024, 50, 100.0)],
           "base": [_row_on_every_core("k", 256, 300, 600.0), _row_on_every_core("k", 1024, 100, 300.0)]}
    got = kernel_rows.every_core(run, "k")
    assert list(got) == ["run"]
    by_core = got["run"]
    assert {name.split(" (VLEN")[0].split(" (")[0] for name in by_core} >= {"SpacemiT X60", "SpacemiT X100",
                                                                            "Tenstorrent Ascalon X", "SpacemiT A100"}
    x60 = next(r for name, r in by_core.items() if name.startswith("SpacemiT X60"))
    assert x60 == {"instructions": 3.0, "table": 3.0, "mca": 3.0}
    a100 = next(r for name, r in by_core.items() if name.startswith("SpacemiT A100"))
    assert a100 == {"instructions": 2.0, "table": 3.0} and "(VLEN 1024)" in next(n for n in by_core if "A100" in n)
    two = kernel_rows.every_core({"compilers": ["clang", "gcc14"], "per_compiler": {"clang": run, "gcc14": run}}, "k")
    assert list(two) == ["clang", "gcc14"] and two["gcc14"] == by_core
    with pytest.raises(kernel_rows.CalibrationError, match="no priced core's VLEN"):
        kernel_rows.every_core({"head": [_row_on_every_core("k", 512, 1, 1.0)], "base": []}, "k")


def test_a_cost_run_gives_a_rows_two_estimates() -> None:
    cost = {"head": [_cost_row("c", "k", 100, 200.0, 300.0), _cost_row("d", "old", 400, 1000.0, 600.0)],
            "base": [_cost_row("c", "k", 300, 800.0, 450.0)]}
    assert kernel_rows.cost_ratios(cost, "k") == {"instructions": 3.0, "table": 4.0, "mca": 1.5}
    assert kernel_rows.cost_ratios(cost, "k", before_function="old") == {"instructions": 4.0, "table": 5.0, "mca": 2.0}
    with pytest.raises(kernel_rows.CalibrationError, match="not in the cost run"):
        kernel_rows.cost_ratios(cost, "absent")


def test_an_estimated_change_in_the_report_carries_the_calibration_line() -> None:
    mix_b, mix_h = {"vadd.vv e8m1": 100, "scalar": 100}, {"vadd.vv e8m1": 50, "scalar": 50}
    row = lambda mix: {"case": "k", "function": "k", "size": "k4096", "impl": "rvv", "twin": None,  # noqa: E731
                       "units": 4096, "unit": "element", "vlen": 256, "isa": "zvfh", "instret": sum(mix.values()),
                       "executed": sum(mix.values()), "vector": 1, "mix": mix}
    t = suite_tables.CostTable({("k", 256, "zvfh"): row(mix_h)}, {("k", 256, "zvfh"): row(mix_b)})
    md = t.markdown()
    assert f"Estimated changes ('est.'): {kernel_rows.summary()}." in md
    assert t.as_json()["calibration"] == kernel_rows.summary()
    # No estimated change (a VLEN no core is priced at): no calibration line.
    t512 = suite_tables.CostTable({("k", 512, "zvfh"): {**row(mix_h), "vlen": 512}},
                                 {("k", 512, "zvfh"): {**row(mix_b), "vlen": 512}})
    assert "Estimated changes" not in t512.markdown()


#: The modules that make estimates (prices per core, LLVM's model, their pairing and per-token sums).
ESTIMATOR_MODULES = ("harness.cost.prices.cores", "harness.cost.prices.mca", "harness.cost.prices.estimate_pair",
                     "harness.cost.prices.per_token", "harness.cost.measure.spike_count",
                     "harness.cost.prices.memory_system", "harness.cost.measure.spike_traffic",
                     "harness.cost.prices.roofline")


def _source(module: str) -> Path | None:
    """The file of a harness module (None for a name that is a function or class, not a module)."""
    base = Path(__file__).resolve().parent.parent / module.replace(".", "/")
    return next((f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()), None)


def _imports(module: str) -> dict[str, Path]:
    """The harness modules ``module`` imports, directly or through others (read from the source), by file."""
    import ast

    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        f = _source(name)
        if name in seen or f is None:
            continue
        seen[name] = f
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("harness"):
                todo += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                todo += [a.name for a in node.names if a.name.startswith("harness")]
    return seen


@pytest.mark.parametrize("module", ESTIMATOR_MODULES)
def test_no_estimator_reads_the_calibration_rows(module: str) -> None:
    """The board rows judge the estimators; an estimator that read them would be fitted to them."""
    reached = _imports(module)
    assert len(reached) > 1 or module.rsplit(".", 1)[1] in ("cores", "spike_traffic"), reached  # the walk follows imports
    assert not [m for m in reached if "calibration" in m], f"{module} reaches {sorted(m for m in reached if 'calibration' in m)}"
    for m, f in reached.items():
        assert "calibration.toml" not in f.read_text(), f"{m} names calibration.toml"


def test_the_series_track_record_keeps_the_held_out_row_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sentence the series pages carry: the given rows' worst error and direction, then the held-out
    row's own, never one figure over both (a held-out error of 15x must not read as the given rows')."""
    from harness.cost.tables import fix_speed

    held = ROW.replace('estimates = { table = 4.5, mca = 2.0 }', 'estimates = { table = 30.0 }\nheld_out = true')
    monkeypatch.setattr(kernel_rows, "rows", lambda: tuple(kernel_rows.parse(ROW + held)))
    s = fix_speed.track_record()
    assert ("by rvv-bench prices within 2.2x of the measured speed-up on 1 change, the direction right on 1 of 1 and, "
            "on 1 change held out of every choice of the estimates, within 15.0x, the direction right on 1 of 1") in s
    assert "by LLVM's X60 model within 1.5x of the measured speed-up on 1 change, the direction right on 1 of 1 (" in s
    # a held-out row used to change an estimator joins the given rows, and the sentence says how many did
    used = held.replace("held_out = true", 'held_out = true\nused_for = "the scalar prices"')
    monkeypatch.setattr(kernel_rows, "rows", lambda: tuple(kernel_rows.parse(ROW + used)))
    s = fix_speed.track_record()
    assert ("by rvv-bench prices within 15.0x of the measured speed-up on 2 changes (1 of them held out until used to "
            "change an estimator), the direction right on 2 of 2") in s
    assert "held out of every choice" not in s
