"""The suite catches a deliberately broken kernel and shrinks the failure to a minimal case.

The mutant ``vec_dot_f16_drops_tail`` makes ``ggml_vec_dot_f16``'s RVV loop stop
before the last partial vector.  Built as its own tree, it must fail the f16
dot tests (and only them) at every VLEN, shrunk to n = 1, with a replay
command; the unmodified tree passes the same selection.
"""

from __future__ import annotations

import re

import pytest
from helpers import run_suite

from harness import mutants, source


@pytest.fixture(scope="module")
def mutant_tree() -> str:
    return str(mutants.apply(mutants.get("vec_dot_f16_drops_tail"), source.pinned()).root)


def test_mutant_is_caught_and_shrunk(mutant_tree: str) -> None:
    r = run_suite("cases/test_vec_dot.py", "--isa", "zvfh", "--vlen", "128,1024", "--ggml-src", mutant_tree)
    out = r.stdout
    assert r.returncode == 1, out[-3000:]
    failed = sorted(set(re.findall(r"^FAILED (\S+)", out, re.M)))
    assert failed == [
        "cases/test_vec_dot.py::test_vec_dot[f16-vlen1024-zvfh]",
        "cases/test_vec_dot.py::test_vec_dot[f16-vlen128-zvfh]",
        "cases/test_vec_dot.py::test_vec_dot_exact[f16-vlen1024-zvfh]",
        "cases/test_vec_dot.py::test_vec_dot_exact[f16-vlen128-zvfh]",
    ], out[-3000:]
    # Shrunk: the smallest failing length is 1 (a lone element is a partial vector at every VLEN).
    assert len(re.findall(r"Draw 1 \(n\): 1$", out, re.M)) == 4, out[-3000:]
    assert "vec_dot_f16(x, y)=0.0 (0x00000000), but should be" in out
    assert f"--ggml-src {mutant_tree}" in out  # the replay command names the tree


def test_unmodified_tree_passes_the_same_selection() -> None:
    r = run_suite("cases/test_vec_dot.py", "--isa", "zvfh", "--vlen", "128,1024", "-k", "f16 and not bf16")
    assert r.returncode == 0, r.stdout[-3000:]
    assert "4 passed" in r.stdout
