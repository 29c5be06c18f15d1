"""``rvvdiff report CASE --upstream``: the issue text for ggml's maintainers and its public-API program.

End to end: a finding of the pinned tree (iq4_nl drops the last block of an odd count) and a planted bug
in repacked code (the mutant ``repack_q8_0_16x1_swapped_columns``, reached through the CPU_REPACK buffer
at VLEN 256 only): the program is built against the builds, run under QEMU, fails exactly where the
kernel is wrong and passes on the fixed tree; the issue names those VLENs and stays within 60 lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from helpers import gcc14_missing
from launch import pytest_child

from harness.commands import report
from harness.core.matrix import Point
from harness.ggml import mutants, source, tree
from harness.jobs import issue_runs
from harness.report.failure import Case, load_case
from harness.upstream import issue as issue_text
from harness.upstream import program, public, runs

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = {"ggml.h", "ggml-cpu.h", "ggml-backend.h", "math.h", "stdio.h", "stdlib.h", "string.h"}


def test_encode_round_trips() -> None:
    rng = np.random.default_rng(1)
    for data in (b"", b"\x00", bytes(300), rng.bytes(257), b"\x01\x02\x02\x02" * 50, rng.bytes(33) + bytes(40)):
        text = program.encode(data)
        assert program.decode(text) == data
        body = "".join(re.findall(r'"([^"]*)"', program._hex_lines("X", data)))
        assert program.decode(body) == data
    assert program.encode(bytes([0x0F] * 128)) == "0f*128"


def test_title_and_table_name_exactly_the_failing_targets() -> None:
    v = [runs.Verdict("pinned", i, vl, vl >= 256 and i != "v", "") for i in ("v", "zvfh") for vl in (128, 256, 512)]
    v += [runs.Verdict("fixed", i, vl, False, "") for i in ("v", "zvfh") for vl in (128, 256, 512)]
    title = issue_text.title_of("ggml_f", v, stress=False)
    assert "VLEN 256, 512, zvfh build, with clang" in title and "128" not in title
    table = issue_text.verdict_table(v)
    assert "| pinned | clang | v | ok | ok | ok |" in table and "| pinned | clang | zvfh | ok | wrong | wrong |" in table
    assert "| fixed | clang | v, zvfh | ok | ok | ok |" in table
    every = [runs.Verdict("pinned", i, vl, True, "", stress=True) for i in ("v", "zvfh", "zvfbfwma")
             for vl in (128, 256, 512)]
    assert "every VLEN (128-512), every RVV build, with clang" in issue_text.title_of("ggml_f", every, stress=True)
    # two VLENs run are named, not called "every VLEN"
    two = [x for x in every if x.vlen < 512]
    assert "at VLEN 128, 256, every RVV build, with clang" in issue_text.title_of("ggml_f", two, stress=True)


def _per_compiler(gcc: dict[tuple[str, int, bool], bool | None]) -> list[runs.Verdict]:
    """Fake verdicts: clang wrong at VLEN 512/1024 in every build, GCC 14 as ``gcc`` says ((isa, vlen, stress) ->
    failing; zvfbfwma not built), the fixed tree right under both."""
    out = []
    for isa in ("v", "zvfh", "zvfbfwma"):
        for vl in (128, 256, 512, 1024):
            out.append(runs.Verdict("pinned", isa, vl, vl >= 512, "VLEN x: 1 of 1 wrong"))
            out.append(runs.Verdict("fixed", isa, vl, False, ""))
            for stress in (False, True):
                if isa == "zvfbfwma" and any(k[2] == stress for k in gcc):
                    out.append(runs.Verdict("pinned", isa, vl, None, "not built: compiler gcc14 rejects -march=rv64gcv_"
                                            "zfh_zvfh_zvfbfwma, the flags the CMake of /x/tree gives ggml-cpu (riscv64-"
                                            "linux-gnu-gcc-14: error: extension 'zvfbfwma' starts with 'z' but is "
                                            "unsupported standard extension): it cannot make the zvfbfwma build",
                                            "qemu", "gcc14", stress))
                elif (isa, vl, stress) in gcc:
                    out.append(runs.Verdict("pinned", isa, vl, gcc[isa, vl, stress], "", "qemu", "gcc14", stress))
    return out


def test_per_compiler_title_names_each_compilers_failures_and_never_every_build_when_one_was_not_built() -> None:
    both = {(i, vl, False): vl >= 512 for i in ("v", "zvfh") for vl in (128, 256, 512, 1024)}
    v = _per_compiler(both)
    title = issue_text.title_of("ggml_f", v, stress=False)
    # clang: every build; GCC 14 could not build zvfbfwma, so its phrase names the builds it ran
    assert "VLEN 512, 1024, every RVV build with clang; VLEN 512, 1024, v/zvfh builds with GCC 14" in title
    same = [x for x in v if x.isa != "zvfbfwma"]
    assert "VLEN 512, 1024, v/zvfh builds, with clang and GCC 14" in issue_text.title_of("ggml_f", same, stress=False)
    table = issue_text.verdict_table(v)
    assert "| pinned | GCC 14 | v, zvfh | ok | ok | wrong | wrong |" in table
    assert "| pinned | GCC 14 | zvfbfwma | not built | not built | not built | not built |" in table
    assert "GCC 14 cannot build zvfbfwma: riscv64-linux-gnu-gcc-14: error: extension 'zvfbfwma' starts with 'z' but " \
        "is unsupported standard extension" in table


def test_a_compiler_that_cannot_make_the_wrong_build_is_named_so_in_the_title() -> None:
    """The bf16 case: wrong only in the zvfbfwma build, which GCC 14 cannot make; its title must not say "no VLEN
    with GCC 14" (as if GCC's build were right) but that GCC 14 cannot make that build."""
    from harness.upstream.runs import Verdict

    v = [Verdict("pinned", i, vl, None if cc == "gcc14" and i == "zvfbfwma" else i == "zvfbfwma" and cc == "clang",
                 "not built: gcc14 rejects -march" if cc == "gcc14" and i == "zvfbfwma" else "", compiler=cc, stress=True)
         for cc in ("clang", "gcc14") for i in ("zvfh", "zvfbfwma") for vl in (128, 256)]
    title = issue_text.title_of("ggml_vec_dot_bf16", v, stress=True)
    assert "zvfbfwma build with clang; GCC 14 cannot make the zvfbfwma build, when tail-agnostic" in title, title
    assert "no VLEN" not in title
    v[4:6] = [Verdict("pinned", "zvfh", vl, False, "ok", compiler="gcc14", stress=True) for vl in (128, 256)]
    v[6:] = [Verdict("pinned", "zvfbfwma", vl, False, "ok", compiler="gcc14", stress=True) for vl in (128, 256)]
    assert "; no VLEN with GCC 14" in issue_text.title_of("ggml_vec_dot_bf16", v, stress=True)  # built and right


def test_a_compiler_right_without_stress_says_how_to_see_the_bug() -> None:
    """The iq2_xxs case of issue 37: GCC 14's build right under QEMU's default policy, wrong with stress."""
    gcc = {(i, vl, False): False for i in ("v", "zvfh") for vl in (128, 256, 512, 1024)}
    gcc |= {(i, vl, True): vl >= 512 for i in ("v", "zvfh") for vl in (128, 256, 512, 1024)}
    v = _per_compiler(gcc)
    title = issue_text.title_of("ggml_f", v, stress=False)
    assert title.endswith("VLEN 512, 1024, every RVV build with clang; with GCC 14 only when tail-agnostic elements "
                          "are written with ones: VLEN 512, 1024, v/zvfh builds"), title
    assert "| pinned | GCC 14 | v, zvfh | ok | ok | ok | ok |" in issue_text.verdict_table(v)
    assert "| pinned | GCC 14, with stress | v, zvfh | ok | ok | wrong | wrong |" in issue_text.verdict_table(v)
    hint = issue_text.stress_hint(v, False, "gcc14")
    assert "rvv_ta_all_1s=true,rvv_ma_all_1s=true" in hint and "VLEN 512, 1024" in hint and "specification" in hint
    assert issue_text.stress_hint(v, False, "clang") == ""
    assert issue_text.example(v, Point(512, "zvfh", False, "gcc14")) == Point(512, "v", True, "gcc14")
    assert issue_text.example(v, Point(512, "zvfh", False, "clang")) == Point(512, "v", False, "clang")


def test_build_lines_give_each_compilers_commands_as_a_maintainer_types_them() -> None:
    pinned = source.pinned()
    gcc = "\n".join(issue_text.build_lines(pinned, Point(512, "zvfh", True, "gcc14")))
    assert "-DCMAKE_C_COMPILER=riscv64-linux-gnu-gcc-14" in gcc and "-DCMAKE_CXX_COMPILER=riscv64-linux-gnu-g++-14" in gcc
    assert "riscv64-linux-gnu-g++-14 -x c -O2" in gcc and "rvv_ta_all_1s=true" in gcc and "./repro-gcc" in gcc
    assert "gcc14-root" not in gcc and str(pinned.root) not in gcc
    clang = "\n".join(issue_text.build_lines(pinned, Point(512, "zvfh", False, "clang")))
    assert "clang-22" in clang and "rvv_ta_all_1s" not in clang


def test_a_trap_finding_is_judged_by_the_trap_with_spike_rows_of_its_own() -> None:
    """A finding that is a trap (the call crashed under Spike): cells say trap / runs, and Spike's runs at VLENs
    QEMU also ran get rows of their own instead of being hidden behind QEMU's."""
    v = [runs.Verdict("pinned", "zvfh", vl, False, "ran to the end (exit 1)") for vl in (256, 512)]
    v += [runs.Verdict("pinned", "zvfh", vl, vl >= 512, "", "spike") for vl in (256, 512, 2048)]
    v += [runs.Verdict("fixed", "zvfh", vl, False, "", "spike") for vl in (256, 512, 2048)]
    table = issue_text.verdict_table(v, trap=True)
    assert "| pinned | clang | zvfh | runs | runs | not run |" in table
    assert "| pinned (spike) | clang | zvfh | runs | trap | trap |" in table
    assert "| fixed (spike) | clang | zvfh | runs | runs | runs |" in table
    assert "traps at VLEN 512, 2048 under Spike, zvfh build" in issue_text.title_of("ggml_f", v, stress=False, trap=True)


def test_calls_without_a_public_form_say_why(tmp_path: Path) -> None:
    types = tree.of(source.pinned()).types
    case = Case(tmp_path, {"call": {"kernel": "quant_vec_dot", "ip": [20, 32, 1], "buffers": []}}, {})
    with pytest.raises(public.NoPublicForm, match="generic twin of IQ4_NL"):
        public.public_form(case, types)
    case.data["call"] = {"kernel": "repack_gemx", "ip": [2, 8, 8, 0, 0, 32, 1, 8], "buffers": []}
    with pytest.raises(public.NoPublicForm, match="repack.h"):
        public.public_form(case, types)
    case.data["call"] = {"kernel": "quant_vec_dot", "ip": [max(types.values()) + 1, 32, 0], "buffers": []}
    with pytest.raises(public.NoPublicForm, match="not in the tree's enum ggml_type"):
        public.public_form(case, types)


def test_every_type_of_the_tree_gets_a_public_form(tmp_path: Path) -> None:
    """The type names and enum values come from the tree under test (its ggml.h), so a type rvvdiff never
    listed (q2_0, nvfp4 on the pinned tree) gets a program naming ggml's own enumerator."""
    tr = tree.of(source.pinned())
    assert {"q2_0", "nvfp4"} <= set(tr.types)
    for name, t in tr.types.items():
        case = Case(tmp_path, {"call": {"kernel": "quant_vec_dot", "ip": [t, 32, 0], "buffers": [{}, {}]},
                               "comparison": {"mode": "bitwise"}},
                    {"buf0": np.zeros(8, np.uint8), "buf1": np.zeros(8, np.uint8), "expected": np.zeros(1)})
        pub = public.public_form(case, tr.types)
        assert pub.a_type == name and public.enumerator(name) in tr.symbols
        assert f"tensor(ctx, {public.enumerator(name)}, 32, 1, A_HEX)" in program.program(pub, "t")


def _failing_case(test: str, out: Path, *extra: str) -> Path:
    pytest_child(test, "-p", "no:xdist", "-q", "--report-dir", str(out), "--runxfail", *extra, code=1)
    (case,) = (out / "cases").iterdir()
    return case


def _report(case: Path, *args: str) -> tuple[int, str, str]:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = report.main([str(case), "--upstream", "--no-stock", *(() if "--cc" in args else ("--cc", "clang")), *args])
    issue = (case / "upstream" / "issue.md").read_text() if (case / "upstream" / "issue.md").exists() else ""
    return code, buf.getvalue(), issue


def _public_only(program: str) -> None:
    includes = set(re.findall(r'#include [<"]([^>"]+)[>"]', program))
    assert includes <= PUBLIC, includes - PUBLIC


def test_finding_issue_fails_on_the_tree_and_passes_with_the_fix(tmp_path: Path) -> None:
    case = _failing_case("cases/test_quant_dot.py::test_vec_dot_finding[iq4_nl_odd_block_dropped-vlen128-zvfh]",
                         tmp_path / "r", "--vlen", "128", "--isa", "zvfh")
    code, said, issue = _report(case, "--isa", "zvfh", "--vlen", "128,256")
    assert code == 0, said
    lines = issue.splitlines()
    assert len(lines) <= issue_text.MAX_LINES
    assert lines[0].startswith("### ggml_vec_dot_iq4_nl_q8_0 (RISC-V RVV): wrong result at VLEN 128, 256, zvfh build")
    assert "| pinned | clang | zvfh | wrong | wrong |" in lines and "| fixed | clang | zvfh | ok | ok |" in lines
    prog = (case / "upstream" / "repro.c").read_text().splitlines()
    if "```c" not in issue:  # attached only when inline it would pass the limit
        assert "is attached" in issue and len(lines) - 1 + len(prog) + 2 > issue_text.MAX_LINES
    _public_only("\n".join(prog))
    assert "C[0] = 0, expected 32" in said or "C[0] = 0, expected 32" in issue




@pytest.mark.skipif(gcc14_missing() is not None, reason="GCC 14 not installed: run ci/setup.sh --gcc14")
@pytest.mark.long(3)
def test_finding_issue_with_both_compilers(tmp_path: Path) -> None:
    """The iq4_nl finding's program built by zig's clang and by GCC 14 (zvfh, the pinned and the fixed tree):
    wrong under both on the tree, right with the fix, and the title and table say so per compiler."""
    case = _failing_case("cases/test_quant_dot.py::test_vec_dot_finding[iq4_nl_odd_block_dropped-vlen128-zvfh]",
                         tmp_path / "r", "--vlen", "128", "--isa", "zvfh")
    code, said, issue = _report(case, "--isa", "zvfh", "--vlen", "128,256", "--cc", "clang,gcc14")
    assert code == 0, said
    lines = issue.splitlines()
    assert len(lines) <= issue_text.MAX_LINES
    assert lines[0].endswith("wrong result at every VLEN (128-256), zvfh build, with clang and GCC 14"), lines[0]
    assert "| pinned | GCC 14 | zvfh | wrong | wrong |" in lines and "| fixed | GCC 14 | zvfh | ok | ok |" in lines
    assert "| pinned | clang | zvfh | wrong | wrong |" in lines
    assert "riscv64-linux-gnu-gcc-14" in issue and "clang-22" in issue


def test_planted_repack_bug_is_shown_through_the_cpu_repack_buffer(tmp_path: Path) -> None:
    mutant = mutants.apply(mutants.get("repack_q8_0_16x1_swapped_columns"), source.pinned())
    case = _failing_case("cases/test_repack_gemm.py::test_mul_mat[q8_0_16x1-vlen256-zvfh]", tmp_path / "r",
                         "--vlen", "256", "--isa", "zvfh", "--ggml-src", str(mutant.root))
    assert load_case(case).call["kernel"] == "repack_mul_mat"
    code, said, issue = _report(case, "--isa", "zvfh", "--vlen", "128,256", "--fixed", str(source.pinned().root))
    assert code == 0, said
    program = (case / "upstream" / "repro.c").read_text()
    _public_only(program)
    assert "CPU_REPACK" in program and "ggml_backend_dev_get_extra_bufts" in program
    # ggml repacks q8_0 16x1 only at VLEN 256 (zvfh): the program is wrong there and only there.
    assert "| tree | clang | zvfh | ok | wrong |" in issue.splitlines()
    assert "| fixed | clang | zvfh | ok | ok |" in issue.splitlines()
    assert "wrong result at VLEN 256, zvfh build" in issue.splitlines()[0]


# ------------------------------------------------------------------ the findings' upstream texts (docs/upstream/)

def _table(issue: str) -> dict[tuple[str, str, str], dict[int, str]]:
    """(tree, compiler, build) -> VLEN -> verdict, from an issue's verdict table (an older table without the
    compiler column: clang's)."""
    lines = [ln for ln in issue.splitlines() if ln.startswith("| ")]
    if not lines:
        return {}
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    first = next(i for i, c in enumerate(head) if c.startswith("VLEN "))
    vlens = [int(c.split()[-1]) for c in head[first:]]
    out = {}
    for ln in lines[1:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        cc = cells[1] if first == 3 else "clang"
        for isa in cells[first - 1].split(", "):
            out[(cells[0], cc, isa)] = dict(zip(vlens, cells[first:]))
    return out


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "harness/data/fixes").glob("*.patch")))
def test_each_findings_upstream_text_says_exactly_where_it_fails(name: str) -> None:
    """docs/upstream/<fix>/issue.md (``rvvdiff report --fix NAME --upstream``): at most 60 lines; where it has a
    public program, the VLENs and builds its table shows wrong on the pinned tree with clang are exactly the
    fix's ``wrong-vlens`` (those QEMU runs) and ``cost`` builds (those it ran), the fixed tree is right everywhere under
    every compiler, and a compiler wrong nowhere in the recorded mode has its stress rows and says how to
    see the bug."""
    from harness.core.config import VLENS
    from harness.ggml import fix_catalogue

    issue_file = ROOT / "docs/upstream" / name / "issue.md"
    assert issue_file.is_file(), f"run: rvvdiff report --fix {name} --upstream --out docs/upstream/{name}"
    issue = issue_file.read_text()
    assert len(issue.splitlines()) <= issue_text.MAX_LINES
    table = _table(issue)
    if "**Why no public reproducer.**" in issue:  # its stock reproducer's table: wrong before the fix, right after
        assert any(v == "wrong" for (t, _, _), row in table.items() if t == "pinned" for v in row.values())
        assert all(v != "wrong" for (t, _, _), row in table.items() if t == "fixed" for v in row.values())
        return
    _public_only((issue_file.parent / "repro.c").read_text())
    fx = fix_catalogue.catalogue()[name]
    want = fx.meta["wrong-vlens"].strip()
    # A trap finding's table says trap / runs (its Spike rows are "pinned (spike)", "fixed (spike)").
    bad, good = ("trap", "runs") if "trap" in {c for row in table.values() for c in row.values()} else ("wrong", "ok")
    ran = {vl for row in table.values() for vl, verdict in row.items() if verdict in (good, bad)}
    want_vlens = (set(VLENS) | ran) if want == "all" else {int(v) for v in want.split(",")} & ran
    clang = ("clang", "clang-22")  # rvvdiff's (zig's) clang rows, or those its clang-22 commands built (--stock-table)
    pinned = {k: v for k, v in table.items() if k[0].startswith("pinned") and k[1] in clang}
    wrong_vlens = {vl for row in pinned.values() for vl, verdict in row.items() if verdict == bad}
    wrong_builds = {isa for (_, _, isa), row in pinned.items() if bad in row.values()}
    assert wrong_vlens == want_vlens, (wrong_vlens, want)
    run_builds = {isa for (_, cc, isa), row in table.items() if cc in clang and set(row.values()) & {good, bad}}
    assert wrong_builds == set(fx.cost_isas) & run_builds, (wrong_builds, fx.cost_isas, run_builds)
    fixed = [verdict for (tree, _, _), row in table.items() if tree.startswith("fixed") for verdict in row.values()]
    assert good in fixed and bad not in fixed, table
    for cc in {c for _, c, _ in table if not c.endswith("with stress")}:
        rows = [row for (tree, c, _), row in table.items() if tree.startswith("pinned") and c == cc]
        unbuilt = [row for (tree, c, isa), row in table.items() if tree.startswith("pinned") and c == cc
                   and isa in wrong_builds]
        if unbuilt and all(set(row.values()) == {"not built"} for row in unbuilt):  # e.g. GCC 14 and zvfbfwma
            assert f"{cc} cannot make the {', '.join(sorted(wrong_builds))} build" in issue.splitlines()[0], cc
            continue
        if not any(bad in row.values() for row in rows):  # right in the recorded mode: the stress rows say where
            assert (f"With {cc} the program is right under QEMU's default" in issue
                    and any(bad in row.values() for (tree, c, _), row in table.items() if c == f"{cc}, with stress")), cc


def test_a_finding_without_public_form_gets_a_text_that_says_why(tmp_path: Path) -> None:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()) as said:
        code = report.main(["--fix", "vec_dot_f16_unroll_tail_agnostic", "--upstream", "--no-stock",
                            "--out", str(tmp_path / "up")])
    assert code == 0, said.getvalue()  # its stock reproducer: wrong on the tree, right with the fix
    issue = (tmp_path / "up" / "issue.md").read_text()
    assert "**Why no public reproducer.**" in issue and "ggml_vec_dot_f16_unroll" in issue.splitlines()[0]
    assert "repro.cpp" in issue and "pytest" not in issue
    assert not (tmp_path / "up" / "repro.c").exists()


def test_cc_selection_names_unknown_compilers_and_drops_a_missing_gcc_with_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.core.matrix import parse_compilers
    from harness.toolchain.compilers import ToolchainError

    def fake(name: str) -> None:
        if name == "gcc14":
            raise ToolchainError("GCC 14 (compiler gcc14) is not installed: ...; run ci/setup.sh --gcc14")

    monkeypatch.setattr(issue_runs, "compiler", fake)
    with pytest.raises(SystemExit):  # --cc is the matrix's option: an unknown name is a usage error
        report.main(["--upstream", "--fix", "x", "--cc", "clang,icc"])
    assert "unknown compiler 'icc'; known are clang, gcc14" in capsys.readouterr().err
    assert issue_runs.compilers(None) == ["clang"]
    said = capsys.readouterr().out.splitlines()
    assert len(said) == 1 and "gcc14 not installed" in said[0] and "ci/setup.sh --gcc14" in said[0]
    with pytest.raises(ToolchainError, match="ci/setup.sh --gcc14"):
        issue_runs.compilers(parse_compilers("gcc14"))
    assert issue_runs.compilers(parse_compilers("clang")) == ["clang"]


@pytest.mark.parametrize("weight", sorted(public.EXACT_SHAPES))
def test_exact_repack_program_is_exact_by_the_oracle(weight: str) -> None:
    """The blocks :func:`public.exact_repack` writes decode (oracles/quants.py) to the weights its expected numbers
    use, the activations quantize to q8 exactly (one -127 per block, integers), and every sum is exact in fp32."""
    from oracles import quants as Q

    pub = public.exact_repack(weight)
    w = Q.dequantize(weight, pub.a).reshape(pub.m, pub.k)
    x = np.frombuffer(pub.b, np.float32).reshape(pub.n, pub.k).astype(np.float64)
    assert np.array_equal((x @ w.T).reshape(-1), pub.expected)
    qb = Q.FORMATS[weight].block
    assert (np.abs(x).reshape(pub.n, -1, qb).max(axis=2) == 127).all() and np.array_equal(x, np.round(x))
    assert np.abs(pub.expected).max() < 2 ** 24 and not pub.bound.any() and pub.repack
    assert pub.m % 16 == 0 and pub.n % 4 == 1  # every RISC-V interleave; a GEMM group and a GEMV row
    src = program.program(pub, "ggml_f")
    assert "CPU_REPACK" in src and "ggml_backend_dev_get_extra_bufts" in src
