"""The model-shaped estimates beside the boards (harness/cost/calibration/model_rows.py): which batch a
measured test is held against, the error factor, held-out rows apart, and the docs table generated from
the data file."""

from __future__ import annotations

import pytest

from harness.cost.calibration import kernel_rows, model_rows

ROW = """
[[row]]
name = "x #1"
change = "c"
board = "b"
vlen = 256
model = "m"
kernel = "k"
before = "a"
after = "b"
measured = { pp32 = [1.0, 3.0], pp512 = [1.0, 2.0], tg10 = [1.0, 2.0] }
model_case = { spec = "tinyllama:q4_0:1+32", estimates = { b1 = { table = 4.0, mca = 1.0 }, b32 = { table = 3.0 } } }
"""


def test_a_test_is_held_against_its_batch() -> None:
    (r,) = model_rows.parse(ROW)
    assert [r.batch_for(t) for t in ("pp32", "pp512", "tg10")] == [32, 32, 1]
    assert r.factor("table", "pp32") == pytest.approx(1.0)
    assert r.factor("table", "pp512") == pytest.approx(1.5)
    assert r.factor("table", "tg10") == pytest.approx(2.0)
    assert r.factor("mca", "pp32") is None and r.factor("mca", "tg10") == pytest.approx(0.5)
    assert model_rows.worst([r], "table") == (pytest.approx(2.0), 1)
    assert "32 (for 512)" in model_rows.table([r])
    summary = model_rows.summary([r])
    assert "rvv-bench prices within 2.0x on 1 changes, direction right on 1 of 1;" in summary
    assert "held out" not in summary


def test_held_out_rows_are_summarised_apart() -> None:
    (r,) = model_rows.parse(ROW + "held_out = true\n")
    assert "within 2.0x on 1 held out" in model_rows.summary([r]) and "changes" not in model_rows.summary([r])
    # with held-out rows alone (a compiler only they were measured with) the direction still says what it counts
    assert "within 2.0x on 1 held out, direction right on 1 of 1 held out" in model_rows.summary([r])
    assert model_rows.table([r]).splitlines()[2].startswith("| held out: x #1")



def test_a_case_that_does_not_run_what_the_board_ran_is_shown_not_summarised() -> None:
    text = ROW.replace('model_case = { spec', 'model_case = [{ spec').replace("} } }\n", "} } },\n"
        '  { spec = "tinyllama:q4_0:1+32:cpu", summarised = false, note = "not the board\'s path", '
        'estimates = { b1 = { table = 9.0 } } }]\n')
    rs = model_rows.parse(text)
    assert [r.summarised for r in rs] == [True, False]
    assert "rvv-bench prices within 2.0x on 1 changes, direction right on 1 of 1;" in model_rows.summary(rs)
    assert "(not summarised): not the board's path" in model_rows.table(rs)


def test_a_board_slowdown_the_estimate_calls_a_speed_up_is_a_wrong_direction_held_out_apart() -> None:
    slower = ROW.replace("pp32 = [1.0, 3.0]", "pp32 = [3.0, 2.0]")
    rs = model_rows.parse(slower + ROW.replace("x #1", "x #2") + "held_out = true\n")
    assert model_rows.direction_right(rs[:1], "table") == (0, 1)
    s = model_rows.summary(rs)
    assert "direction right on 0 of 1, on 1 of 1 held out" in s


def test_a_malformed_case_is_named() -> None:
    with pytest.raises(kernel_rows.CalibrationError, match="x #1: model_case needs spec"):
        model_rows.parse(ROW.replace('spec = "tinyllama:q4_0:1+32"', 'spec = "tinyllama:q4_0"'))


def test_the_project_table_is_generated_from_the_data_file() -> None:
    rs = model_rows.rows()
    assert rs, "no row of harness/data/calibration.toml has a model-shaped estimate"
    assert model_rows.doc_table() == model_rows.table(), (
        "docs/calibration.md's model-shaped table is not the data file's: run "
        "rvvdiff calibration write")
    assert model_rows.doc_table(markers=model_rows.HELD) == model_rows.held_out_table(), (
        "docs/calibration.md's held-out model-shaped table is not the data file's: run rvvdiff calibration write")
    assert "SGEMM 4x3" in model_rows.held_out_table()
