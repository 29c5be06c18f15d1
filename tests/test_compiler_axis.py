"""The compiler axis (``--cc``): parsing and its errors, ids with one and two compilers, the header,
a compiler that is not installed, the replay line, and the compiler in a failure report."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import run_diff_test
from launch import Code, Run, pytest_in

from harness.core.config import ISA_BUILDS
from harness.core.matrix import COMPILER_NAMES, ISAS, parse_compilers, split_compiler
from harness.report.failure import write_failure
from harness.report.ids import parse_id, replay_argv
from harness.toolchain.compilers import COMPILERS

EVERY = tuple(ISAS)  # an unrestricted compiler may make every ISA build, rv64gc included

def run(pytester: pytest.Pytester, *args: str, code: Code = 0) -> Run:
    return run_diff_test(pytester, *args, code=code)


def test_the_first_layer_names_the_registrys_compilers() -> None:
    assert tuple(COMPILERS) == COMPILER_NAMES


@pytest.mark.parametrize("value, chosen", [
    ("all", {"clang": EVERY, "gcc14": EVERY}),
    ("gcc14", {"gcc14": EVERY}),
    ("clang,gcc14:zvfh", {"clang": EVERY, "gcc14": ("zvfh",)}),
    ("gcc14:v+zvfh, clang:zvfh", {"gcc14": ("v", "zvfh"), "clang": ("zvfh",)}),
])
def test_cc_selects_compilers_and_their_isa_builds(value: str, chosen: dict[str, tuple[str, ...]]) -> None:
    assert parse_compilers(value) == chosen


@pytest.mark.parametrize("value, message", [
    ("gcc12", "--cc 'gcc12': unknown compiler 'gcc12'; known are clang, gcc14"),
    ("clang,", "unknown compiler ''"),
    ("gcc14:zvfx", "gcc14:zvfx names 'zvfx'; after ':' give ISA builds joined by '+', of v, zvfh, zvfbfwma"),
    ("gcc14:", "names no ISA build"),
    ("clang,clang:v", "clang is named twice"),
])
def test_bad_cc_is_an_error_naming_what_is_allowed(value: str, message: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_compilers(value)
    assert message in str(e.value)


def test_bad_cc_stops_pytest(pytester: pytest.Pytester) -> None:
    r = run(pytester, "--cc", "gcc12", "--collect-only", code=pytest.ExitCode.USAGE_ERROR)
    assert "unknown compiler 'gcc12'; known are clang, gcc14" in r.stderr


def test_ids_name_the_compiler_last_only_with_more_than_one(pytester: pytest.Pytester) -> None:
    one = run(pytester, "--vlen", "512", "--isa", "zvfh", "--rvv-stress", "both", "--cc", "gcc14",
              "--collect-only", "-q").stdout
    assert "test_dot[vlen512-zvfh]" in one and "test_dot[vlen512-zvfh-stress]" in one and "gcc14]" not in one
    two = run(pytester, "--vlen", "512", "--isa", "all", "--rvv-stress", "both", "--cc", "clang:zvfh,gcc14:v+zvfh",
              "--collect-only", "-q").stdout
    ids = sorted(line.split("[", 1)[1].rstrip("]") for line in two.splitlines() if "::test_dot[" in line)
    assert ids == ["vlen512-v-gcc14", "vlen512-v-stress-gcc14", "vlen512-zvfh-clang", "vlen512-zvfh-gcc14",
                   "vlen512-zvfh-stress-clang", "vlen512-zvfh-stress-gcc14"]


def test_the_header_names_each_compiler_and_the_builds_one_cannot_make(pytester: pytest.Pytester) -> None:
    out = run(pytester, "--vlen", "512", "--cc", "all", "--collect-only").stdout
    lines = [line for line in out.splitlines() if line.startswith("rvvdiff: compiler")]
    assert lines[0].startswith("rvvdiff: compiler: zig ")
    assert lines[1].startswith("rvvdiff: compiler: gcc14: riscv64-linux-gnu-gcc-14")
    assert lines[2].startswith("rvvdiff: compiler gcc14 cannot make ISA build zvfbfwma: gcc14 rejects "
                               "-march=rv64gcv_zfh_zvfh_zvfbfwma") and "zvfbfwma" in lines[2]
    assert len(lines) == 3


def test_a_compiler_not_installed_is_one_header_line_and_skips_its_targets_with_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.plugin import targets
    from harness.toolchain import compilers

    def missing() -> compilers.Compiler:
        raise compilers.ToolchainError("GCC 14 (compiler gcc14) is not installed: run ci/setup.sh --gcc14")

    monkeypatch.setitem(compilers.COMPILERS, "gcc14", compilers.NamedCompiler("gcc14", "ci/setup.sh --gcc14", missing))
    compilers._compiler.cache_clear()
    try:
        assert compilers.describe("gcc14") == {"compiler": "unavailable: GCC 14 (compiler gcc14) is not installed: "
                                                           "run ci/setup.sh --gcc14"}
        s = targets.Session(SimpleNamespace(getoption=lambda name: None))  # type: ignore[arg-type]
        s.__dict__["source"] = SimpleNamespace()
        with pytest.raises(pytest.skip.Exception, match="run ci/setup.sh --gcc14"):
            s.build(ISA_BUILDS["zvfh"], "gcc14")
        assert s.unusable == {("zvfh", "gcc14"): "GCC 14 (compiler gcc14) is not installed: run ci/setup.sh --gcc14"}
    finally:
        compilers._compiler.cache_clear()


def test_ids_parse_and_split_with_and_without_the_compiler() -> None:
    tid = parse_id("cases/t.py::test_x[f16-vlen512-zvfh-stress-gcc14]")
    assert tid and (tid.kernel, tid.vlen, tid.isa, tid.stress, tid.compiler) == ("f16", 512, "zvfh", True, "gcc14")
    assert tid.column == "zvfh stress gcc14"
    tid = parse_id("cases/t.py::test_x[f16-vlen512-zvfh]")
    assert tid and (tid.isa, tid.compiler, tid.column) == ("zvfh", "", "zvfh")
    assert split_compiler("t.py::f[x-vlen128-v-clang]") == ("t.py::f[x-vlen128-v]", "clang")
    assert split_compiler("t.py::f[x-vlen128-v]") == ("t.py::f[x-vlen128-v]", "")


def test_the_replay_line_carries_the_compiler() -> None:
    argv = replay_argv("cases/t.py::test_x[f16-vlen512-zvfh]", compiler="gcc14")
    assert argv[:2] == ["pytest", "cases/t.py::test_x[f16-vlen512-zvfh]"]
    assert argv[argv.index("--cc") + 1] == "gcc14"
    # An id naming its compiler keeps its name (Hypothesis's key of the saved example): both selected, its own first.
    argv = replay_argv("cases/t.py::test_x[f16-vlen512-zvfh-gcc14]")
    assert argv[1] == "cases/t.py::test_x[f16-vlen512-zvfh-gcc14]"
    assert argv[argv.index("--cc") + 1] == "gcc14,clang"
    assert parse_compilers("gcc14,clang").keys() == {"gcc14", "clang"}
    assert "--cc" not in replay_argv("cases/t.py::test_x[f16-vlen512-zvfh]", compiler="user")


def test_a_failure_report_records_the_compiler(tmp_path: Path) -> None:
    target = SimpleNamespace(vlen=512, isa=ISA_BUILDS["zvfh"], stress=False, compiler="gcc14")
    source = SimpleNamespace(describe=lambda: "a tree", label="a tree", commit="0" * 40, root=tmp_path,
                             version="0.0.0", pinned=True)
    d = write_failure(tmp_path, nodeid="cases/t.py::test_x[f16-vlen512-zvfh]", longrepr="boom", kept={},
                      target=target, source=source, replay="pytest ... --cc gcc14")
    case = json.loads((d / "case.json").read_text())
    assert case["target"]["compiler"] == "gcc14"
    assert "ISA build zvfh by gcc14" in (d / "README.md").read_text()


def test_a_failure_of_one_compilers_target_is_reported_with_its_compiler_and_replay_line(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cc="""
def test_clang_only(target):
    target.server()  # its own build's server starts
    assert target.compiler == "clang", "planted"
""")
    r = pytest_in(pytester, "--vlen", "128", "--isa", "zvfh", "--cc", "all", "--report-dir", "reports", code=1)
    r.assert_outcomes(passed=1, failed=1)
    out = r.stdout
    assert "--cc gcc14,clang" in out and "test_cc.py::test_clang_only[vlen128-zvfh-gcc14]" in out
    (case,) = (pytester.path / "reports" / "cases").glob("*/case.json")
    data = json.loads(case.read_text())
    assert data["test"].endswith("[vlen128-zvfh-gcc14]") and data["target"]["compiler"] == "gcc14"
    assert "--cc gcc14,clang" in data["replay"]
