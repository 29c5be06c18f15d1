"""The suite catches a deliberately broken kernel, shrinks the failure to a minimal case, reports it,
and the report replays (in Python and as a standalone C program under QEMU).

The mutant ``vec_dot_f16_drops_tail`` makes ``ggml_vec_dot_f16``'s RVV loop stop
before the last partial vector.  Built as its own tree, it must fail the f16
dot tests (and only them) at every VLEN, shrunk to n = 1; the unmodified tree
passes the same selection.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from launch import Run, pytest_child, rvvdiff

from harness.ggml import mutants, source
from harness.toolchain.compilers import SERVER_DIR

FAILING = [
    "cases/test_vec_dot.py::test_vec_dot[f16-vlen1024-zvfh]",
    "cases/test_vec_dot.py::test_vec_dot[f16-vlen128-zvfh]",
    "cases/test_vec_dot.py::test_vec_dot_exact[f16-vlen1024-zvfh]",
    "cases/test_vec_dot.py::test_vec_dot_exact[f16-vlen128-zvfh]",
]


@pytest.fixture(scope="module")
def mutant_tree() -> str:
    return str(mutants.apply(mutants.get("vec_dot_f16_drops_tail"), source.pinned()).root)


@pytest.fixture(scope="module")
def failing_run(mutant_tree: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Path]:
    out = tmp_path_factory.mktemp("reports")
    r = pytest_child("cases/test_vec_dot.py", "--isa", "zvfh", "--vlen", "128,1024", "--ggml-src", mutant_tree,
                     "--report-dir", str(out), "--junitxml", str(out / "junit.xml"), code=None)
    return r, out


def test_mutant_is_caught_and_shrunk(failing_run, mutant_tree: str) -> None:
    r, _ = failing_run
    out = r.stdout
    assert r.returncode == 1, out[-3000:]
    assert sorted(set(re.findall(r"^FAILED (\S+)", out, re.M))) == FAILING, out[-3000:]
    # Shrunk: the smallest failing length is 1 (a lone element is a partial vector at every VLEN).
    # Counted in the failure sections only: with CI set in the environment pytest repeats the whole
    # message in the short summary.
    failures = out.split("short test summary info")[0]
    assert len(re.findall(r"case=DotCase\(n=1, ", failures)) == 4, out[-3000:]
    assert "vec_dot_f16(x, y)=0.0 (0x00000000), but should be" in out
    assert f"--ggml-src {mutant_tree}" in out  # the replay command names the tree


def test_unmodified_tree_passes_the_same_selection() -> None:
    r = pytest_child("cases/test_vec_dot.py", "--isa", "zvfh", "--vlen", "128,1024", "-k", "f16 and not bf16")
    assert "4 passed" in r.stdout


def test_reports_summary_and_junit(failing_run) -> None:
    _, out = failing_run
    cases = sorted(p.name for p in (out / "cases").iterdir())
    assert len(cases) == 4
    case = json.loads((out / "cases" / "test_vec_dot.test_vec_dot_exact_f16-vlen128-zvfh" / "case.json").read_text())
    assert case["call"]["kernel"] == "vec_dot_f16" and case["call"]["ip"] == [1]
    assert case["target"] == {**case["target"], "vlen": 128, "isa": "zvfh", "stress": False}
    assert case["comparison"]["mode"] == "bitwise" and case["comparison"]["worst"]["got"] == 0.0
    assert "qemu-riscv64" in case["call"]["qemu_argv"][0]
    summary = (out / "summary.md").read_text()
    assert re.search(r"\| `test_vec_dot_exact\[f16\]` \|( [a-zA-Z?]+ \|){2}", summary)
    assert "FAIL" in summary and "pass" in summary
    assert "<svg" in (out / "summary.html").read_text()
    assert 'failures="4"' in (out / "junit.xml").read_text()


def test_repro_replays_and_its_c_reproducer_fails_the_same_way(failing_run) -> None:
    _, out = failing_run
    d = out / "cases" / "test_vec_dot.test_vec_dot_exact_f16-vlen1024-zvfh"
    r = rvvdiff("repro", d, "--c", code=1, timeout=900)
    assert "1 of 1 elements fail (bitwise)" in r.stdout and "STILL FAILS" in r.stdout
    build = r.stdout.split("\nbuild:\n  ", 1)[1].splitlines()[0]
    run = r.stdout.split("\nrun:\n  ", 1)[1].splitlines()[0]
    assert "-g 1234" in r.stdout
    subprocess.run(shlex.split(build), check=True, capture_output=True, timeout=900)
    c = subprocess.run(shlex.split(run), capture_output=True, text=True, timeout=300)
    assert c.returncode == 1 and "VLEN 1024: calling vec_dot_f16" in c.stdout
    assert "[0] got 0, expected" in c.stdout
    # The ggml-only program (for an upstream report) fails the same way with nothing of rvvdiff in it.
    ggml_only = r.stdout.split("\nggml-only reproducer", 1)[1]
    prog = Path(ggml_only.split(": ", 1)[1].splitlines()[0])
    assert "rvvdiff" not in prog.read_text().split("#include", 1)[1] and "server.h" not in prog.read_text()
    build = ggml_only.split("\nbuild:\n  ", 1)[1].splitlines()[0]
    run = ggml_only.split("\nrun:\n  ", 1)[1].splitlines()[0]
    assert str(SERVER_DIR) not in build and "server-obj" not in build
    subprocess.run(shlex.split(build), check=True, capture_output=True, timeout=900)
    c = subprocess.run(shlex.split(run), capture_output=True, text=True, timeout=300)
    assert c.returncode == 1 and re.search(r"VLEN 1024: vec_dot of f16, n = \d+: got 0, expected", c.stdout), c.stdout
    # The same report replayed against the unmodified tree passes.
    fixed = rvvdiff("repro", d, "--ggml-src", source.pinned().root, timeout=900)
    assert "PASSES now" in fixed.stdout, fixed.stdout + fixed.stderr
