"""Two versions of the calibration data side by side (harness/cost/calibration/data_diff.py): only what changed is
listed, with its errors against the board, and held-out rows come after the others."""

from __future__ import annotations

from harness.cost.calibration import data_diff


def _row(name: str, table: float, held: bool = False, b1: float = 2.0) -> dict:
    return {"name": name, "measured": {"pp32": [1.0, 2.0], "tg8": [1.0, 4.0]}, "held_out": held,
            "estimates": {"table": table, "mca": 3.0},
            "model_case": {"spec": "tinyllama:q4_0:1+32", "estimates": {"b1": {"table": b1}}},
            "priced": {"tt_asc_x": {"x": table + 1}}}


def test_only_changed_estimates_are_listed_with_their_errors_and_held_out_rows_last() -> None:
    old = [_row("held", 4.0, True), _row("given", 2.0), _row("same", 5.0)]
    new = [_row("held", 8.0, True), _row("given", 3.0, b1=2.5), _row("same", 5.0)]
    text = "\n".join(data_diff.lines(old, new))
    assert "| given | clang | table | 2.0 | 3.0 | 0.50-1.00 | 0.75-1.50 |" in text  # 3.0 / 2x and 3.0 / 4x
    assert text.index("| given | clang | table") < text.index("| held out: held | clang | table | 4.0 | 8.0 |")
    assert "| given | `tinyllama:q4_0:1+32` | clang | 1 | table | 2.0 | 2.5 |" in text
    assert "| held out: held | tt_asc_x | 5.0 | 9.0 |" in text
    assert "same" not in text and "| mca |" not in text
