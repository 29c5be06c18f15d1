"""The build without V (``--isa rv64gc``): GCC 14 builds it, and the kernel families run on it as on any
other target.  rv64gc compiles none of the tree's RVV code, so what asks which RVV code ran is skipped
with that reason, the path predictions follow the build (no tinyBLAS_RVV, no DV rule on the tiled
flash-attention path, the generic activation quantizer calling its reference), and known failures of
RVV code do not mark its tests (harness/ggml/known.py)."""

from __future__ import annotations

import re

import pytest

from tests.helpers import gcc14_missing
from tests.launch import pytest_child


@pytest.mark.long(4)
@pytest.mark.skipif(gcc14_missing() is not None, reason="GCC 14 not installed: run ci/setup.sh --gcc14")
def test_the_kernel_families_pass_on_the_build_without_vector() -> None:
    r = pytest_child("cases", "--deselect", "cases/test_model.py", "--vlen", "128,256", "--isa", "rv64gc", "--cc",
                     "gcc14", "--max-examples", "3", "-q", "-rs", "-p", "no:xdist")
    tail = r.stdout[-3000:]
    counts = dict((k, int(n)) for n, k in re.findall(r"(\d+) (passed|skipped|xfailed|failed)", r.stdout.splitlines()[-1]))
    assert counts.get("passed", 0) > 150 and not counts.get("failed"), tail
    # what needs RVV code says so
    assert "the rv64gc build has no vector extension" in r.stdout, tail
