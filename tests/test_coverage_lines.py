"""RVV line coverage (--rvv-coverage, docs/coverage.md): QEMU's log of the executed code mapped to source
lines through the kernel server's DWARF line table, the lcov files, their merge, and each problem as one
line.  (cases/test_coverage.py is another thing: the RVV functions no test knows.)"""

from __future__ import annotations

import array
from pathlib import Path

import numpy as np
from elftools.elf.elffile import ELFFile
from helpers import pinned_build
from launch import pytest_child

from harness.binary import dwarf
from harness.commands import cli
from harness.core.matrix import Point
from harness.emulators import executed, pool
from harness.emulators.executed import Executed
from harness.emulators.protocol import In, Out
from harness.emulators.qemu import qemu
from harness.emulators.trace import trace_call
from harness.report import coverage


def _line_of(path: Path, text: str, after: str) -> int:
    """The number of the first line holding ``text`` after the first line holding ``after``."""
    lines = path.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if after in ln)
    return next(i for i in range(start, len(lines)) if text in lines[i]) + 1


def test_a_call_maps_to_the_lines_of_its_kernel(tmp_path: Path) -> None:
    build = pinned_build("zvfh")
    s = pool.KernelServer(build, 256, False, qemu(), log_dir=tmp_path)
    try:
        x = np.ones(37, np.float16)
        r = s.call("vec_dot_f16", [37], [], [In(x.view(np.uint16)), In(x.view(np.uint16)), Out(4)])
        assert r.output(0, np.float32)[0] == 37.0
    finally:
        s.stop()  # QEMU closes its log, which becomes the PCs it lists
    assert [p.suffix for p in sorted((tmp_path / f"vlen256-zvfh-{build.compiler}").iterdir())] == [".json", ".pcs"]
    got = executed.collect(tmp_path)
    assert list(got) == ["vlen256-zvfh"] and got["vlen256-zvfh"].program == build.server
    cov = coverage.measure(got)
    assert cov.problems == []
    [t] = cov.targets
    vec_cpp = build.source.cpu_dir / "vec.cpp"
    fma = _line_of(vec_cpp, "__riscv_vfwmacc_vv_f32m2_tu(vsum, ax, ay, vl)", "void ggml_vec_dot_f16(")
    ran = {(p, ln) for p, ln, _ in t.executed}
    assert (str(vec_cpp), fma) in ran  # the zvfh strip-mined loop of ggml_vec_dot_f16 ran
    assert dwarf.source_function(str(vec_cpp), fma) == "ggml_vec_dot_f16"
    fns = coverage.functions(cov)
    assert fns["ggml_vec_dot_f16"]["vlen256-zvfh"][0] > 0
    assert fns["ggml_vec_dot_q4_0_q8_0"]["vlen256-zvfh"][0] == 0  # executable, not called
    assert all(dwarf.in_scope(p) is not None for p, _, _ in t.executable)


def test_a_path_check_trace_counts_too(tmp_path: Path) -> None:
    s = pool.KernelServer(pinned_build("zvfh"), 512, False, qemu(), log_dir=tmp_path)
    x = np.ones(9, np.float16).view(np.uint16)
    t = trace_call(s, "vec_dot_f16", [9], [], [In(x), In(x), Out(4)])
    assert t.ran("ggml_vec_dot_f16")
    [pcs] = (tmp_path / f"vlen512-zvfh-{s.build.compiler}").glob("*-trace*.pcs")
    got = executed.collect(tmp_path)["vlen512-zvfh"]
    assert got.logs == 1 and len(got.pcs) == pcs.stat().st_size // 8 > 0
    assert coverage.functions(coverage.measure({"vlen512-zvfh": got}))["ggml_vec_dot_f16"]["vlen512-zvfh"][0] > 0


def _target(name: str, executable: set, ran: set) -> coverage.TargetLines:
    return coverage.TargetLines(name, 256, "zvfh", False, executable, ran)


def test_an_uncalled_out_of_line_copy_leaves_no_untested_lines() -> None:
    # f inlined into its dispatcher d (0x100-0x200, entered) and also kept out of line (0x300-0x400, never
    # entered): f's prologue line 1 has code only in the uncalled copy; line 3 is a branch of f not taken.
    q = "/s/ggml-cpu/arch/riscv/quants.c"
    t = dwarf.LineTable(Path("x"), (0x100, 0x110, 0x120, 0x300, 0x310), (0x110, 0x120, 0x130, 0x310, 0x320),
                           ((q, 2, "f"), (q, 3, "f"), (q, 9, "d"), (q, 1, "f"), (q, 2, "f")), ((0x100, 0x400),),
                           ((0x100, 0x200), (0x100, 0x200), (0x100, 0x200), (0x300, 0x400), (0x300, 0x400)))
    hit, outside = t.lines([0x100, 0x120])
    assert hit == {(q, 2, "f"), (q, 9, "d")} and outside == 0
    assert t.executable([0x100, 0x120], {"f", "d"}) == {(q, 2, "f"), (q, 3, "f"), (q, 9, "d")}
    assert t.executable() == {(q, 1, "f"), (q, 2, "f"), (q, 3, "f"), (q, 9, "d")}  # f not run: every line counts


def test_lcov_tracefile_records() -> None:
    t = _target("vlen256-zvfh", {("/s/ggml-cpu/vec.cpp", 3, "f"), ("/s/ggml-cpu/vec.cpp", 5, "f"),
                                 ("/s/ggml-cpu/vec.h", 9, "g")}, {("/s/ggml-cpu/vec.cpp", 5, "f")})
    assert coverage.lcov(t.target, t.tracefile()) == (
        "TN:vlen256_zvfh\n"
        "SF:/s/ggml-cpu/vec.cpp\nDA:3,0\nDA:5,1\nLF:2\nLH:1\nend_of_record\n"
        "SF:/s/ggml-cpu/vec.h\nDA:9,0\nLF:1\nLH:0\nend_of_record\n")
    assert coverage.read_lcov(coverage.lcov(t.target, t.tracefile())) == t.tracefile()


def test_merge_counts_the_targets_that_ran_a_line() -> None:
    a = {"/s/ggml-cpu/vec.cpp": {3: 1, 5: 0}}
    b = {"/s/ggml-cpu/vec.cpp": {3: 1, 5: 1, 7: 0}, "/s/ggml-cpu/vec.h": {1: 0}}
    assert coverage.merge([a, b]) == {"/s/ggml-cpu/vec.cpp": {3: 2, 5: 1, 7: 0}, "/s/ggml-cpu/vec.h": {1: 0}}


def test_runs_merge_into_one_matrix(tmp_path: Path) -> None:
    vec = "/s/ggml-cpu/vec.cpp"
    a = coverage.TargetLines("vlen256-zvfh", 256, "zvfh", False, {(vec, 3, "f"), (vec, 5, "g")}, {(vec, 3, "f")})
    b = coverage.TargetLines("vlen1024-zvfh", 1024, "zvfh", False, {(vec, 3, "f"), (vec, 5, "g")}, {(vec, 5, "g")})
    for name, t in (("r256", a), ("r1024", b)):
        coverage.write(coverage.Coverage([t]), tmp_path / name)
    assert cli.main(["coverage", "merge", str(tmp_path / "all"), str(tmp_path / "r256"), str(tmp_path / "r1024")]) == 0
    assert [t.target for t in coverage.load(tmp_path / "all")] == ["vlen256-zvfh", "vlen1024-zvfh"]
    md = (tmp_path / "all" / "coverage.md").read_text()
    assert "| `f` | 1/1 | 0/1 |" in md and "| `g` | 0/1 | 1/1 |" in md
    assert coverage.read_lcov((tmp_path / "all" / "merged.info").read_text()) == {vec: {3: 1, 5: 1}}


def _logged(where: Path, compiler: str, pcs: list[int], program: str = "/b/server") -> None:
    """One server start's log of ``compiler``'s build at VLEN 256, zvfh, as a finished (compacted) log leaves it."""
    log = executed.log_for(where, Path(program), Point(256, "zvfh", False, compiler), 1)
    with open(log.with_suffix(".pcs"), "wb") as f:
        array.array("Q", pcs).tofile(f)


def test_two_compilers_builds_of_one_target_stay_two_targets(tmp_path: Path) -> None:
    """A run of several compilers: each compiler's servers of one target are a target of their own, named as
    the test ids name it; a run of one compiler keeps the names without it.  Merging runs keeps them apart."""
    _logged(tmp_path / "two", "clang", [0x10, 0x14], "/b/clang-server")
    _logged(tmp_path / "two", "gcc14", [0x20], "/b/gcc14-server")
    got = executed.collect(tmp_path / "two")
    assert sorted(got) == ["vlen256-zvfh-clang", "vlen256-zvfh-gcc14"]
    assert got["vlen256-zvfh-gcc14"].pcs == {0x20} and not got["vlen256-zvfh-gcc14"].others
    _logged(tmp_path / "one", "gcc14", [0x20])
    assert list(executed.collect(tmp_path / "one")) == ["vlen256-zvfh"]
    src = "/s/ggml-cpu/vec.cpp"
    lines = {(src, 3, "f"), (src, 5, "f")}
    clang = coverage.TargetLines("vlen256-zvfh", 256, "zvfh", False, lines, {(src, 3, "f")}, "clang")
    gcc = coverage.TargetLines("vlen256-zvfh", 256, "zvfh", False, lines, {(src, 5, "f")}, "gcc14")
    cov = coverage.combine([[clang], [gcc]])
    assert [(t.target, t.build, len(t.executed)) for t in cov.targets] == [
        ("vlen256-zvfh-clang", "zvfh clang", 1), ("vlen256-zvfh-gcc14", "zvfh gcc14", 1)]
    assert [t.target for t in coverage.combine([[clang], [clang]]).targets] == ["vlen256-zvfh"]


def test_scope_is_the_rvv_code_and_its_generic_twins() -> None:
    assert dwarf.in_scope("/t/ggml/src/ggml-cpu/arch/riscv/quants.c") == ""
    assert dwarf.in_scope("/t/ggml/src/ggml-cpu/quants.c") == ""
    assert dwarf.in_scope("/t/ggml/src/ggml-cpu/ops.cpp") == "flash_attn"
    assert dwarf.in_scope("/t/ggml/src/ggml-cpu/arch/x86/quants.c") is None
    assert dwarf.in_scope("/t/ggml/src/ggml-cpu/spacemit/rvv_kernels.cpp") == ""  # SpacemiT's backend
    assert dwarf.in_scope("/t/ggml/src/ggml.c") is None


def test_a_pc_outside_the_program_is_one_line() -> None:
    build = pinned_build("zvfh")
    e = Executed("vlen256-zvfh", 256, "zvfh", False, build.server, pcs={0x10, 0x20})
    cov = coverage.measure({"vlen256-zvfh": e})
    assert cov.problems == [f"vlen256-zvfh: 2 executed PC(s) outside {build.server.name}'s code sections "
                            "(not mapped to any line; ignored)"]
    assert len(cov.targets) == 1 and cov.targets[0].executed == set()


def _without_debug_sections(program: Path, out: Path) -> Path:
    """A copy of ``program`` whose ``.debug_*`` sections are renamed away (zig's objcopy cannot strip
    RISC-V): to an ELF reader it is a binary built without -g."""
    data = bytearray(program.read_bytes())
    with open(program, "rb") as f:
        elf = ELFFile(f)
        names = elf.get_section(elf["e_shstrndx"])
        lo, hi = names["sh_offset"], names["sh_offset"] + names["sh_size"]
    data[lo:hi] = bytes(data[lo:hi]).replace(b".debug_", b".nodbg_")
    out.write_bytes(bytes(data))
    return out


def test_the_line_table_is_kept_between_runs() -> None:
    program = pinned_build("zvfh").server
    first = dwarf.line_table(program)
    dwarf._TABLES.clear()  # a new run: read from the cache, not from DWARF
    assert dwarf.line_table(program) == first


def test_a_binary_without_debug_info_is_one_line(tmp_path: Path) -> None:
    stripped = _without_debug_sections(pinned_build("zvfh").server, tmp_path / "rvvdiff-server")
    other = tmp_path / "not-elf"
    other.write_text("hello")
    cov = coverage.measure({"vlen256-zvfh": Executed("vlen256-zvfh", 256, "zvfh", False, stripped, pcs={0x10}),
                            "vlen512-zvfh": Executed("vlen512-zvfh", 512, "zvfh", False, other, pcs={0x10})})
    assert cov.targets == []
    assert cov.problems == [
        f"vlen256-zvfh: no line coverage: {stripped} has no DWARF line table (built without -g): "
        "its lines cannot be measured",
        f"vlen512-zvfh: no line coverage: {other} is not an ELF file pyelftools can read "
        "(Magic number does not match)"]


def test_a_file_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    blocked = tmp_path / "coverage"
    blocked.write_text("a file where the directory should be")
    cov = coverage.Coverage([_target("vlen256-zvfh", {("/s/ggml-cpu/vec.cpp", 3, "f")}, set())])
    assert coverage.write(cov, blocked) == []
    assert cov.problems[0].startswith(f"cannot write {blocked}/vlen256-zvfh.info: ")
    assert cov.problems[-1].startswith(f"cannot write the HTML view in {blocked}: ")


def test_rvv_coverage_run_end_to_end(tmp_path: Path) -> None:
    args = ["cases/test_vec_dot.py", "-k", "test_vec_dot and f16", "--vlen", "256", "--isa", "zvfh",
            "--max-examples", "3", "-p", "no:xdist", "--report-dir", str(tmp_path)]
    cp = pytest_child(*args, "--rvv-coverage")
    assert "rvvdiff: RVV line coverage vlen256-zvfh: " in cp.stdout
    out = tmp_path / "coverage"
    assert {p.name for p in out.iterdir()} == {"vlen256-zvfh.info", "merged.info", "targets.json", "coverage.md",
                                              "index.html", "files"}
    info = coverage.read_lcov((out / "merged.info").read_text())
    assert any(n for da in info.values() for n in da.values())
    assert "| `ggml_vec_dot_f16` | " in (tmp_path / "summary.md").read_text()
    assert "RVV line coverage" not in pytest_child(*args).stdout  # off by default


def test_missed_counts_only_functions_a_target_entered() -> None:
    from harness.report.coverage import Coverage, TargetLines, missed, missed_md

    q = "/t/ggml/src/ggml-cpu/arch/riscv/quants.c"
    exe = {(q, 10, "f"), (q, 11, "f"), (q, 12, "f"), (q, 20, "f_vl1024"), (q, 21, "f_vl1024")}
    t128 = TargetLines("vlen128-zvfh", 128, "zvfh", False, exe, {(q, 10, "f"), (q, 12, "f")})
    t1024 = TargetLines("vlen1024-zvfh", 1024, "zvfh", False, exe, {(q, 10, "f"), (q, 20, "f_vl1024")})
    m = missed(Coverage([t128, t1024]))
    # f: line 11 missed at both targets, 12 only at 1024; f_vl1024 is not dispatched at 128
    assert m == {(q, "f"): {11: {"vlen128-zvfh", "vlen1024-zvfh"}, 12: {"vlen1024-zvfh"}},
                 (q, "f_vl1024"): {21: {"vlen1024-zvfh"}}}
    md = "\n".join(missed_md(Coverage([t128, t1024])))
    assert "| `f` | arch/riscv/quants.c | 2 | 11 at 2 target(s)" in md


_SWITCH_SOURCE = """\
void f(int n) {
    int a = n; /* case 1024: in a comment is no label */
    switch (__riscv_vlenb() * 8) {
        case 128:
            f_vl128(n, "{");
            break;
        case 256:
            prep(n);
        default:
            f_vl512(n);
            break;
    }
    a += 1;
}
"""


def test_arms_drop_the_other_vlens_arms(tmp_path: Path) -> None:
    from harness.ggml.cwalk import Arm, vlen_switches
    from harness.report.coverage import Coverage, TargetLines, arms, arms_md, missed

    q = tmp_path / "ggml" / "src" / "ggml-cpu" / "arch" / "riscv" / "quants.c"
    q.parent.mkdir(parents=True)
    q.write_text(_SWITCH_SOURCE)
    p = str(q)
    [sw] = vlen_switches(p)
    # case 256 has no break: it falls through into default, so VLEN 256 dispatches to lines 7-11
    assert (sw.line, sw.end) == (3, 12)
    assert sw.arms == (Arm(128, 4, 6, False), Arm(256, 7, 8, True), Arm(None, 9, 11, False))
    assert sw.dispatched(128) == {4, 5, 6} and sw.dispatched(256) == set(range(7, 12))
    assert sw.dispatched(512) == {9, 10, 11} and sw.others(512) == set(range(4, 9))
    exe = {(p, ln, "f") for ln in (2, 3, 5, 6, 8, 10, 11, 13)} | {(p, 20, "g")}
    t128 = TargetLines("vlen128-zvfh", 128, "zvfh", False, exe, {(p, ln, "f") for ln in (2, 3, 5, 6)})
    t256 = TargetLines("vlen256-zvfh", 256, "zvfh", False, exe, {(p, ln, "f") for ln in (2, 3, 8, 11, 13)})
    cov = Coverage([t128, t256])
    # per function, 128 misses the arms of 256 / default, and 256 the arm of 128 ...
    assert missed(cov)[(p, "f")] == {5: {"vlen256-zvfh"}, 6: {"vlen256-zvfh"}, 8: {"vlen128-zvfh"},
                                     10: {"vlen128-zvfh", "vlen256-zvfh"}, 11: {"vlen128-zvfh"},
                                     13: {"vlen128-zvfh"}}
    # ... per arm, only the lines each VLEN dispatches to: 13 (after the switch) at 128, and the default
    # arm's line 10 at 256, reached by the fall-through; g, never entered, counts nowhere
    assert missed(arms(cov)) == {(p, "f"): {13: {"vlen128-zvfh"}, 10: {"vlen256-zvfh"}}}
    assert {t.target: len(t.executable) for t in arms(cov).targets} == {"vlen128-zvfh": 5, "vlen256-zvfh": 6}
    md = "\n".join(arms_md(cov))
    assert "1 `switch (__riscv_vlenb() * 8)` in the scope: arch/riscv/quants.c 3." in md
    assert "| zvfh | 4/5 (80.0 %) | 5/6 (83.3 %) |" in md
    assert "executed there: 0 " in md
    assert "| arch/riscv/quants.c | `f` | 10 | VLEN 256: zvfh |" in md
    assert "| arch/riscv/quants.c | `f` | 13 | VLEN 128: zvfh |" in md


_ARMS_SOURCE = """\
void g(int n) {
    switch (__riscv_vlenb() * 8) {
        case 128:
            for (int i = 0; i < n; i++) { if (i) break; }
        case 256: {
            switch (n) { case 1: x(); break; default: y(); }
            do { n--; } while (n > 0);
        }
        case (512):
            if (n) { return; } else { GGML_ABORT("no"); }
#if defined(X)
        case 1024:
            while (n) n--;
            break;
#endif
        default:
            GGML_ABORT("vlen %d", n);
    }
}
"""


def test_an_arm_falls_through_unless_its_last_statement_leaves(tmp_path: Path) -> None:
    from harness.ggml.cwalk import Arm, vlen_switches

    src = tmp_path / "quants.c"
    src.write_text(_ARMS_SOURCE)
    [sw] = vlen_switches(str(src))
    # a loop's break leaves the loop (128 falls through), a nested switch's labels are not arms, a do-while
    # ends 256 (falls through), an if / else whose branches both leave ends 512, a directive is no code
    assert (sw.line, sw.end) == (2, 18)
    assert sw.arms == (Arm(128, 3, 4, True), Arm(256, 5, 8, True), Arm(512, 9, 10, False), Arm(1024, 12, 14, False),
                       Arm(None, 16, 17, False))
    assert sw.dispatched(128) == set(range(3, 11)) and sw.dispatched(2048) == {16, 17}


def test_arms_command_reads_a_run(tmp_path: Path) -> None:
    q = tmp_path / "ggml-cpu" / "arch" / "riscv" / "quants.c"
    q.parent.mkdir(parents=True)
    q.write_text(_SWITCH_SOURCE)
    p = str(q)
    exe = {(p, ln, "f") for ln in (5, 10)}
    plain = coverage.TargetLines("vlen128-v", 128, "v", False, exe, {(p, 5, "f")})
    stress = coverage.TargetLines("vlen128-v-stress", 128, "v", True, exe, {(p, 5, "f"), (p, 10, "f")})
    coverage.write(coverage.Coverage([plain, stress]), tmp_path / "run")
    out = tmp_path / "arms.md"
    assert cli.main(["coverage", "arms", str(tmp_path / "run"), "--out", str(out)]) == 0
    md = out.read_text()
    # line 10 is the default arm: not dispatched at 128, so it ran where it should not (the stress target)
    assert "| v | 1/1 (100.0 %) / 1/1 (100.0 %) |" in md and "without / with `--rvv-stress`" in md
    assert "executed there: 1 " in md
    assert "0 lines, 0 groups" in md
