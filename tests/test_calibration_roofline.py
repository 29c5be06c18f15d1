"""The rows before and after the roofline (harness/cost/calibration/roofline_rows.py): every board test's error
compute-only and as a roofline, per kernel and per model-shaped batch, held-out rows apart, the direction counted
per test over the tests with a roofline, and docs/calibration.md's table generated from the data file."""

from __future__ import annotations

import pytest

from harness.cost.calibration import roofline_rows

ROW = """
[[row]]
name = "x #1"
change = "c"
board = "b"
threads = 8
vlen = 256
model = "m"
kernel = "k"
before = "a"
after = "b"
measured = { pp32 = [2.0, 1.0], tg10 = [1.0, 2.0] }
estimates = { table = 3.0, mca = 2.0 }
roofline = { table = 0.8, mca = 1.5, bound_table = "compute / DRAM", bound_mca = "compute / compute" }
model_case = { spec = "tinyllama:f16:1+32", estimates = { b1 = { table = 1.0, mca = 1.0 }, b32 = { table = 2.5, \
mca = 4.0 } }, roofline = { b32 = { table = 0.5, mca = 0.9, bound_table = "compute / L2", bound_mca = "compute / L2" } } }
"""


def test_each_test_is_set_against_its_kernel_and_its_batch_before_and_after() -> None:
    ts = roofline_rows.tests(ROW)
    kernel = [t for t in ts if t.batch is None]
    model = {t.test: t for t in ts if t.batch is not None}
    assert [t.test for t in kernel] == ["pp32", "tg10"] and (model["pp32"].batch, model["tg10"].batch) == (32, 1)
    pp = kernel[0]  # the board slowed down 2x: compute-only calls it 3x faster, the roofline 0.8x: right
    assert (pp.error("table", False), pp.error("table", True)) == (pytest.approx(6.0), pytest.approx(1.6))
    assert (pp.right("table", False), pp.right("table", True)) == (False, True)
    assert model["tg10"].error("table", True) is None  # batch 1 has no roofline in this row
    text = roofline_rows.table(ts)
    assert "| x #1 | kernel `k` | pp32 | 0.50 | 8 | 3.00 | 0.80 (compute / DRAM) | 6.00 -> 1.60 |" in text
    assert "| pp32 (batch 32) | 0.50 | 8 | 2.50 | 0.50 (compute / L2) | 5.00 -> 1.00 |" in text
    assert "| tg10 (batch 1) | 2.00 | 8 | 1.00 | - | 0.50 -> - |" in text


def test_the_summary_counts_tests_with_a_roofline_before_and_after_held_out_apart() -> None:
    given = roofline_rows.summary(roofline_rows.tests(ROW))[0]
    # table: errors 6.0 / 1.5 / 5.0 compute-only on the three tests with a roofline, 1.6 / 2.5 / 1.0 after
    assert given.startswith("- **Given rows** (4 tests, 1 without a roofline): table: worst error 6.0x "
                            "compute-only -> 2.5x roofline, direction right on 1 of 3 tests -> 2 of 3;")
    held = roofline_rows.summary(roofline_rows.tests(ROW + "held_out = true\n"))
    assert held[0].startswith("- **Given rows** (0 tests, 0 without") and "no roofline yet" in held[0]
    assert held[1].startswith("- **Held-out rows** (4 tests, 1 without a roofline): table: worst error 6.0x")
    assert roofline_rows.table(roofline_rows.tests(ROW + "held_out = true\n")).splitlines()[2].startswith(
        "| held out: x #1 |")


def test_the_docs_tables_are_the_data_files_and_the_sources() -> None:
    assert roofline_rows.doc_block() == roofline_rows.block(), (
        "docs/calibration.md's roofline table is not the data file's: run rvvdiff calibration write")
    assert roofline_rows.doc_block(markers=roofline_rows.TRAFFIC_MARKERS) == "\n".join(roofline_rows.traffic_lines())
