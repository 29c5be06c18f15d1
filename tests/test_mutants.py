"""A fast subset of the planted bugs, one per kernel family (and one that only the loop-crossing
sizes reach), must stay caught.

This is what keeps a change to the harness from blinding it: each mutant is
built (one ISA build) and its `select:` tests run at one or two VLENs through the
same machinery as `rvvdiff mutants run`.  `tests/test_planted_bug.py` covers
the float dot family with the full report / replay path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.matrix import parse_compilers
from harness.ggml import mutants
from harness.jobs.mutant_runs import _by_compiler, _merged, detect, table

#: mutant -> extra pytest arguments narrowing its selection for CI.
FAST = {
    "vecop_scale_f16_tail_overrun": ["--isa", "zvfh", "--vlen", "128,512"],   # vec ops: out-of-bounds store
    "quant_q4_0_drops_odd_block": ["--isa", "zvfh", "--vlen", "256"],         # quantized dot: dropped block
    "repack_q8_0_16x1_swapped_columns": ["--isa", "zvfh", "--vlen", "256"],   # repack: layout off by one
    "mm_tinyblas_2x1_wrong_row": ["--isa", "zvfh", "--vlen", "256"],          # mul_mat: tinyBLAS edge block
    "mm_tinyblas_k_panel_overwrite": ["--isa", "v", "--vlen", "128"],         # mul_mat: past four k-steps only
    "fa_tiled_gemm_drops_row_tail": ["--isa", "zvfh", "--vlen", "128"],       # flash attention: GEMM row tail
    "repack_mul_mat_id_shared_row": ["--isa", "zvfh", "--vlen", "256"],       # mixture of experts: mul_mat_id
}


@pytest.mark.parametrize("name", list(FAST))
def test_planted_bug_is_caught(name: str, tmp_path: Path) -> None:
    row = detect(mutants.get(name), max_examples=None, out=tmp_path, timeout=1800, extra=FAST[name])
    assert row["caught"] is True, row
    assert row["shrunk_case"], row  # a failure report with the minimal call exists


def test_every_mutant_names_its_selection() -> None:
    for name, m in mutants.catalogue().items():
        meta = m.meta
        for key in ("class", "family", "caught-by", "select", "expected-minimal"):
            assert key in meta, f"{name}: header lacks {key}:"
        assert m.files, f"{name}: the patch touches no file"
    assert len(mutants.catalogue()) >= 12


def test_only_replaces_its_rows_and_keeps_the_others(tmp_path: Path) -> None:
    """`rvvdiff mutants run --only NAME` updates NAME's row of the saved table, not the whole table."""
    saved = tmp_path / "mutants.json"
    saved.write_text(json.dumps({"meta": {"machine": "m", "wall": "500 s"},
                                 "rows": [{"mutant": "a", "caught": True}, {"mutant": "b", "caught": True}]}))
    rows, meta = _merged(saved, [{"mutant": "b", "caught": False}], {"machine": "n", "wall": "4 s"}, ["a", "b", "c"])
    assert rows == [{"mutant": "a", "caught": True}, {"mutant": "b", "caught": False}]
    assert meta["machine"] == "m" and "b re-run with --only (n, 4 s)" in meta["re-run"]


def test_detection_is_counted_per_compiler() -> None:
    """With two compilers the ids name them and each gets its own count; a one-compiler run's ids name
    none and count for that compiler; the table marks a compiler under which nothing failed."""
    t = "cases/test_vec_dot.py::test_vec_dot[q4_0-vlen256-zvfh"
    results = [{"nodeid": f"{t}-clang]", "outcome": "failed"}, {"nodeid": f"{t}-gcc14]", "outcome": "passed"},
               {"nodeid": f"{t}-stress-gcc14]", "outcome": "passed"}, {"nodeid": "tests/x.py::test_y", "outcome": "failed"}]
    per = _by_compiler(results, parse_compilers("clang,gcc14"))
    assert per == {"clang": [1, 1], "gcc14": [0, 2]}
    assert _by_compiler([{"nodeid": f"{t}]", "outcome": "error"}], parse_compilers("gcc14")) == {"gcc14": [1, 1]}
    text = table([{"mutant": "m", "class": "c", "caught": False, "by_compiler": per}], {"machine": "m"})
    assert "clang 1/1, gcc14 **0/2**" in text
