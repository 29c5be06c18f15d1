"""The test matrix (harness/core/matrix.py): one table of the axes, each option parsed once and written back
the same way, every command declaring them through it, and what is written from or held against the table
(docs/options.md, the CI workflow's job matrices, ci/main-job.sh, the registries of compilers and emulators)."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest
from helpers import ROOT

from harness.core import matrix, matrix_doc, proc
from harness.core.config import static_twin
from harness.core.matrix import (
    CANNOT_MAKE,
    COMPILER_NAMES,
    DEFAULT_ISAS,
    EMULATOR_VALUES,
    ISAS,
    WHOLE,
    Matrix,
    add_options,
    can_make,
    from_args,
    vlens_on,
)
from harness.toolchain.compilers import twin_gap


def test_docs_and_workflow_are_written_from_the_table() -> None:
    for rel, render in matrix_doc.RENDERED.items():
        text = (ROOT / rel).read_text()
        assert render(text) == text, f"{rel} is stale: run rvvdiff docs --write options"


def test_the_workflow_excludes_exactly_the_builds_a_compiler_cannot_make() -> None:
    yaml = pytest.importorskip("yaml")
    jobs = yaml.safe_load((ROOT / matrix_doc.WORKFLOW).read_text())["jobs"]
    gate = jobs["rvvdiff"]["strategy"]["matrix"]
    shards = {(v, i, c) for v in gate["vlen"] for i in gate["isa"] for c in gate["cc"]}
    shards -= {(v, x["isa"], x["cc"]) for x in gate.get("exclude", []) for v in gate["vlen"]}
    assert {i for _, i, _ in shards} == set(DEFAULT_ISAS) and {c for *_, c in shards} == set(COMPILER_NAMES)
    assert all(can_make(c, i) for _, i, c in shards)
    assert len(shards) == len(gate["vlen"]) * (len(DEFAULT_ISAS) * len(COMPILER_NAMES) - len(CANNOT_MAKE))
    assert set(jobs["model"]["strategy"]["matrix"]["cc"]) == set(COMPILER_NAMES)


def _main_job_array(name: str) -> list[str]:
    """One of ci/main-job.sh's selections (a bash array ``NAME=(...)``), as its words."""
    text = (ROOT / "ci/main-job.sh").read_text()
    m = re.search(rf"^{name}=\((.*)\)$", text, re.M)
    assert m, f"ci/main-job.sh has no {name}=(...)"
    return shlex.split(m.group(1))


def test_the_main_job_selects_only_builds_its_compilers_can_make() -> None:
    """ci/main-job.sh keeps its own selection (GCC 14 for ggml's default build only); it must be one the
    matrix's parser takes, every vector build must run, and no build a compiler cannot make."""
    chosen, rest = from_args(_main_job_array("SUITE"))
    assert rest[:2] == [".venv/bin/pytest", "cases"]
    assert chosen.isas == DEFAULT_ISAS and chosen.stress == (False, True) and chosen.vlens is None
    assert set(chosen.compiler_names) == set(COMPILER_NAMES)
    builds = chosen.builds()
    assert {i for _, i in builds} == set(DEFAULT_ISAS)
    assert all(can_make(c, i) for c, i in builds), [b for b in builds if not can_make(*b)]


def test_the_main_job_s_dispatch_slice() -> None:
    """The budgeted part of a distribution's build (docs/dispatch.md): the kernel families but the model and flash
    attention, on GCC 14's riscv64_v variant, one VLEN without stress, its reports apart; --thorough: every VLEN,
    both stress modes.  The user's arguments come before the slice's targets, so the slice's win."""
    slice_ = _main_job_array("DISPATCH_SLICE")
    assert slice_[:3] == [".venv/bin/pytest", "cases", "-n"]
    assert [slice_[i + 1] for i, w in enumerate(slice_) if w == "--deselect"] == [
        "cases/test_model.py", "cases/test_flash_attn.py"]
    for name, vlens, stress in (("DISPATCH_TARGETS", (256,), (False,)),
                                ("DISPATCH_TARGETS_THOROUGH", None, (False, True))):
        words = _main_job_array(name)
        chosen, rest = from_args(["--isa", "zvfh", "--vlen", "128", *words])
        assert rest == ["--report-dir", "reports/dispatch"]
        assert chosen.isas == ("riscv64_v",) and chosen.vlens == vlens and chosen.stress == stress
        assert chosen.builds() == [("gcc14", "riscv64_v")] and static_twin("riscv64_v") == "v"
        assert twin_gap("gcc14") == ""  # the slice's calls are held to their static twin
    text = (ROOT / "ci/main-job.sh").read_text()
    assert 'step dispatch-slice "${DISPATCH_SLICE[@]}" "$@" "${DISPATCH_TARGETS[@]}"' in text
    assert 'step dispatch-slice "${DISPATCH_SLICE[@]}" "$@" "${DISPATCH_TARGETS_THOROUGH[@]}"' in text
    assert _main_job_array("DISPATCH_TABLE") == [".venv/bin/rvvdiff", "dispatch", "--cc", "gcc14"]
    assert "exec " not in text


def test_the_main_job_runs_the_model_on_the_distribution_build_with_thorough_only() -> None:
    """The model family on GCC 14's distribution build (docs/dispatch.md): every VLEN, both stress modes, its reports
    apart, and only in --thorough's branch (the main job's default steps are at their budget)."""
    words = _main_job_array("DISPATCH_MODEL")
    assert words[:2] == [".venv/bin/pytest", "cases/test_model.py"]
    chosen, rest = from_args(["--isa", "zvfh", *words[1:], *_main_job_array("DISPATCH_MODEL_TARGETS")])
    assert rest == ["cases/test_model.py", "-n", "auto", "--report-dir", "reports/dispatch-model"]
    assert chosen.isas == ("riscv64_v",) and chosen.vlens is None and chosen.stress == (False, True)
    assert chosen.builds() == [("gcc14", "riscv64_v")]
    text = (ROOT / "ci/main-job.sh").read_text()
    line = 'step dispatch-model "${DISPATCH_MODEL[@]}" "$@" "${DISPATCH_MODEL_TARGETS[@]}"'
    assert text.count(line) == 1
    branch = re.search(r'^if \[\[ \$thorough == yes \]\]; then\n(.*?)^else\n(.*?)^fi$', text, re.M | re.S)
    assert branch and line in branch.group(1) and "dispatch-model" not in branch.group(2)


def test_the_main_job_runs_the_ime1_gemms_under_spike() -> None:
    """SpacemiT's IME1 GEMMs (docs/spacemit.md): under Spike with rvvdiff's library, the spacemit build at the K1's
    VLEN, reports apart; set up by the job itself (--spike); of the user's arguments only the tree reaches it (a
    -k meant for the suite would leave it no test)."""
    words = _main_job_array("IME1")
    assert words[:2] == [".venv/bin/pytest", "cases/test_spacemit_gemm.py"]
    chosen, rest = from_args(words[1:])
    assert rest == ["cases/test_spacemit_gemm.py", "-n", "auto", "--report-dir", "reports/ime1"]
    assert chosen.emulator == "spike" and chosen.isas == ("spacemit",) and chosen.vlens == (256,)
    text = (ROOT / "ci/main-job.sh").read_text()
    assert text.count('step ime1 "${IME1[@]}" ${tree[@]+"${tree[@]}"}') == 1
    assert re.search(r"^ci/setup\.sh .*--spike", text, re.M)


def test_the_main_job_runs_every_step_and_keeps_the_first_failure() -> None:
    """Its ``step`` function, run alone: each step's name and status printed, a failing step does not stop the
    next, and the job's status is the first failing step's."""
    text = (ROOT / "ci/main-job.sh").read_text()
    func = re.search(r"^step\(\) \{\n.*?^\}$", text, re.M | re.S)
    assert func, "ci/main-job.sh has no step() function"
    script = f"set -euo pipefail\nstatus=0\n{func.group(0)}\nstep a true\nstep b sh -c 'exit 3'\nstep c false\n" \
             "echo after\nexit $status\n"
    r = proc.execute(["bash", "-c", script], timeout=30)
    assert r.returncode == 3
    assert r.stdout.splitlines() == [
        "main-job: step a: true", "main-job: step a: exit status 0",
        "main-job: step b: sh -c exit 3", "main-job: step b: exit status 3",
        "main-job: step c: false", "main-job: step c: exit status 1", "after"]


def test_the_registries_name_the_tables_compilers_and_emulators() -> None:
    from harness.emulators import board, registry
    from harness.toolchain.compilers import COMPILERS
    from harness.upstream import stock
    assert tuple(COMPILERS) == COMPILER_NAMES and tuple(stock.NAMES) == COMPILER_NAMES
    assert set(COMPILER_NAMES) < set(stock.TOOLCHAINS)
    assert registry.DEFAULT == matrix.DEFAULT_EMULATOR
    for e in EMULATOR_VALUES:
        kind = registry.kind(e.name.replace("HOST[:DIR]", "board"))
        assert kind.has_stress == e.stress, e.name
        if e.vlens is not None:
            assert kind.vlens == e.vlens and vlens_on(e.name, None) == e.vlens
        else:
            assert issubclass(kind, board.Board)


@pytest.mark.parametrize("argv", [
    ["--vlen", "256,128", "--isa", "zvfh,rv64gc", "--cc", "gcc14:zvfh,clang", "--rvv-stress", "both",
     "--emulator", "spike", "--ggml-src", "/t"],
    ["--isa", "all", "--cc", "all", "--rvv-stress"],
    ["--vlen", "all", "--rvv-stress", "off"],
    [],
])
def test_a_matrix_is_written_as_it_was_parsed(argv: list[str]) -> None:
    chosen, rest = from_args(argv)
    assert rest == []
    assert from_args(chosen.pytest_args())[0] == chosen
    assert not Matrix().pytest_args() and WHOLE.pytest_args() == ["--isa", "v,zvfh,zvfbfwma,spacemit", "--rvv-stress", "both"]


def test_the_grammar() -> None:
    assert matrix.parse_vlens("all") is None and matrix.parse_vlens("512, 128,512") == (512, 128)
    assert matrix.parse_isas("all") == DEFAULT_ISAS and "rv64gc" in ISAS and "rv64gc" not in DEFAULT_ISAS
    assert matrix.parse_isas("rv64gc") == ("rv64gc",)
    assert matrix.parse_compilers("clang,gcc14:zvfh") == {"clang": tuple(ISAS), "gcc14": ("zvfh",)}
    assert matrix.parse_stress("both") == (False, True)
    for parse, value, says in ((matrix.parse_vlens, "333", "2048 and 4096 on Spike only"),
                               (matrix.parse_isas, "zvfx", "'all' is v, zvfh, zvfbfwma"),
                               (matrix.parse_stress, "sometimes", "use off, on or both"),
                               (matrix.parse_emulator, "gem5", "give qemu, spike, native or ssh:HOST")):
        with pytest.raises(ValueError, match=re.escape(says)):
            parse(value)
    with pytest.raises(ValueError, match="qemu runs VLEN 128"):
        vlens_on("qemu", (2048,))
    assert vlens_on("spike", None)[-1] == 4096


def test_the_last_option_wins_and_others_pass_through() -> None:
    chosen, rest = from_args(["cases/t.py", "-k", "x", "--isa", "v", "--isa=zvfh", "-n", "2"])
    assert chosen.isas == ("zvfh",) and rest == ["cases/t.py", "-k", "x", "-n", "2"]
    with pytest.raises(ValueError, match="unknown compiler"):
        from_args(["--cc", "icc"])


def test_builds_follow_the_isa_builds_then_the_compilers_and_their_limits() -> None:
    chosen = Matrix(isas=("v", "zvfh"), compilers=matrix.parse_compilers("clang,gcc14:zvfh"))
    assert chosen.builds() == [("clang", "v"), ("clang", "zvfh"), ("gcc14", "zvfh")]
    assert Matrix().builds() == [(None, i) for i in DEFAULT_ISAS]  # the setting's compiler, the vector builds
    assert Matrix(isas=("rv64gc",)).builds() == [(None, "rv64gc")]


def test_one_value_forms_and_the_unset_default() -> None:
    p = argparse.ArgumentParser(exit_on_error=False)
    add_options(p, "vlens", "isas", "compilers", "stress", one=True, aliases={"stress": ("--stress",)})
    a = p.parse_args(["--vlen", "512", "--isa", "rv64gc", "--cc", "gcc14", "--stress"])
    assert (a.vlen, a.isa, a.cc, a.rvv_stress) == (512, "rv64gc", "gcc14", True)
    assert p.parse_args(["--rvv-stress", "off"]).rvv_stress is False and p.parse_args([]).vlen is None
    for bad in (["--vlen", "128,256"], ["--cc", "gcc14:zvfh"], ["--rvv-stress", "both"]):
        with pytest.raises(argparse.ArgumentError):
            p.parse_args(bad)
    q = argparse.ArgumentParser()
    add_options(q, "vlens", "tree", repeat=True)
    assert q.parse_args(["--vlen", "128", "--vlen", "512,1024"]).vlen == [128, 512, 1024]
    assert q.parse_args(["--ggml-src", "a", "--ggml-src", "b"]).ggml_src == ["a", "b"]


_AXIS_OPTION = re.compile(r"""add_?(?:argument|option)\(\s*["'](--vlen|--isa|--cc|--rvv-stress|--stress|--emulator|"""
                          r"""--ggml-src)["']""")


def test_no_command_declares_an_axis_itself() -> None:
    """Every --vlen / --isa / --cc / --rvv-stress / --emulator / --ggml-src is declared by matrix.add_options."""
    found = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "harness").rglob("*.py"))
             for i, line in enumerate(p.read_text().splitlines(), 1) if _AXIS_OPTION.search(line)]
    assert not found, found


def test_every_command_and_the_plugin_spell_an_axis_alike(capsys: pytest.CaptureFixture[str]) -> None:
    """The plugin declares every axis with the table's help; a command taking an axis's list form explains it
    in the same words."""
    from harness.commands import bench, cli
    from harness.plugin import options

    declared: dict[str, str] = {}

    class Group:
        def addoption(self, *names: str, **kw: object) -> None:
            declared[names[0]] = str(kw.get("help", ""))

    options.add_options(type("Parser", (), {"getgroup": lambda self, *a: Group()})())
    for a in matrix.AXES:
        assert declared[a.option].startswith(a.what), a.option

    def words(text: str) -> str:
        return " ".join(text.split())
    for main, argv in ((cli.main, ["build", "--help"]), (bench.main, ["--help"])):
        with pytest.raises(SystemExit):
            main(argv)
        assert words(matrix.AXIS["isas"].what) in words(capsys.readouterr().out)


@pytest.mark.parametrize("cc", COMPILER_NAMES)
def test_the_builds_a_compiler_cannot_make_are_the_tables(cc: str) -> None:
    """The table's CANNOT_MAKE against the installed compiler: of ggml-cpu's builds, it rejects exactly those
    builds' -march (the spacemit build's entry is a failure past the -march: GCC 14 has no IME assembler)."""
    from harness.core.config import ISA_BUILDS
    from harness.toolchain import compilers
    from harness.toolchain.builds import compiler_gap
    try:
        compilers.compiler(cc)
    except compilers.ToolchainError as e:
        pytest.skip(f"{cc} is not installed: {e}")
    rejected = {i for i in ISA_BUILDS if compiler_gap(ISA_BUILDS[i], cc)}
    assert rejected == {i for c, i in CANNOT_MAKE if c == cc and i in ISA_BUILDS}
