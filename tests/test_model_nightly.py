"""The nightly model job (ci/github/rvvdiff.yml): its whole matrix is too large for one night (docs/model.md,
Budget), so each shard (VLEN x compiler x stress mode) runs one seventh of its tests by pytest-split, the
weekday's; the seven parts together are the shard's whole matrix, each test in exactly one of them."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.helpers import ROOT
from tests.launch import pytest_child

PARTS = 7


def _model_run() -> list[str]:
    yaml = pytest.importorskip("yaml")  # PyYAML comes with gguf
    job = yaml.safe_load((ROOT / "ci/github/rvvdiff.yml").read_text())["jobs"]["model"]
    assert set(job["strategy"]["matrix"]["stress"]) == {"off", "on"}
    run = next(s["run"] for s in job["steps"] if s.get("name", "").startswith("The model family"))
    return shlex.split(run.split(".venv/bin/pytest", 1)[1].replace("\\\n", " "))


def test_the_job_runs_one_part_of_the_week_per_shard() -> None:
    args = _model_run()
    assert args[0] == "cases/test_model.py" and "--thorough" in args
    at = {a: args[i + 1] for i, a in enumerate(args[:-1]) if a.startswith("--")}
    assert at["--splits"] == str(PARTS) and at["--group"] == "$part"
    assert at["--rvv-stress"] == "${{" and "matrix.stress" in args  # one stress mode per shard
    assert at["--isa"] == "all"


def _collected(*extra: str) -> list[str]:
    r = pytest_child("cases/test_model.py", "--thorough", "--collect-only", "-q", "--vlen", "256", "--isa", "all",
                     "--rvv-stress", "off", "--cc", "clang", *extra, timeout=600)
    return [ln for ln in r.stdout.splitlines() if re.match(r"cases/test_model\.py::", ln)]


def test_the_seven_parts_are_the_whole_matrix_once() -> None:
    whole = _collected()
    assert len(whole) > 100  # every type, path and ISA build of one shard
    parts = [_collected("--splits", str(PARTS), "--group", str(g), "--splitting-algorithm", "least_duration")
             for g in range(1, PARTS + 1)]
    seen = [t for p in parts for t in p]
    assert sorted(seen) == sorted(whole)  # each test in exactly one part
    assert max(map(len, parts)) - min(map(len, parts)) <= 1  # even parts
    # a part holds many types, not a run of one type's paths: each night sees a spread of the table
    # (the host and no-V tests carry no type in their ids: test_model_host[vlen256-zvfh])
    types = {m.group(1) for t in parts[0] if (m := re.search(r"test_model\[(\w+-\w+)-", t))}
    assert len(types) >= len(parts[0]) // 3
