"""RVV line coverage under Spike (docs/coverage.md): Spike's PC histogram (``-g``, printed on stderr as it exits)
becomes a server start's executed PCs (harness/emulators/spike.py ``exec_log_end``), which the same collection,
DWARF mapping and report as QEMU's translation log read (harness/emulators/executed.py, harness/report/coverage.py).

The canned-histogram checks run everywhere; the checks that run Spike need the optional extra
(``ci/setup.sh --spike``) and are skipped, saying so, without it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import pinned_build

from harness.core.config import ISA_BUILDS
from harness.core.matrix import Point
from harness.emulators import executed, pool, spike
from harness.emulators.protocol import In, Out
from harness.report import coverage

WHY_NOT = spike.available()
needs_spike = pytest.mark.skipif(WHY_NOT is not None, reason=f"SKIPPED: the Spike checks did not run: {WHY_NOT}")

#: What a Spike server's stderr ends with under -g: the server's own message, then the histogram (boot ROM included).
CANNED = (b"rvvdiff-server: a message of the server\n"
          b"PC Histogram size:5\n1000 1\n1004 1\n20000010 3\n20000014 1\n2000a0f0 65536\n")


def _start(where: Path, program: Path, start: int = 1) -> Path:
    log = executed.log_for(where, program, Point(256, ISA_BUILDS["zvfh"], False, "clang"), start)
    assert log is not None
    return log


def test_a_canned_histogram_becomes_the_starts_pcs(tmp_path: Path) -> None:
    s = spike.Spike("spike", "test")
    assert s.logs_exec
    argv = s.exec_log_command(Path("/s/rvvdiff-server-spike"), 256, dict(ISA_BUILDS["zvfh"].qemu), tmp_path / "x.log")
    assert argv[:2] == ["spike", "-g"] and argv[2:] == s.command(Path("/s/rvvdiff-server-spike"), 256,
                                                                 dict(ISA_BUILDS["zvfh"].qemu))[1:]
    log = _start(tmp_path, Path("/s/rvvdiff-server-spike"))
    s.exec_log_end(log, CANNED)
    executed.compact(log)  # as the pool does after it: no QEMU log, nothing to do
    assert sorted(p.suffix for p in log.parent.iterdir()) == [".json", ".pcs"]
    got = executed.collect(tmp_path)
    assert list(got) == ["vlen256-zvfh"]
    e = got["vlen256-zvfh"]
    # the boot ROM's reset vector (0x1000, below the memory) is not the program's
    assert e.pcs == {0x20000010, 0x20000014, 0x2000A0F0} and (e.logs, e.lost) == (1, 0)
    assert e.program == Path("/s/rvvdiff-server-spike")
    # crash messages quote the server, not the histogram
    assert s.server_stderr(CANNED.decode()) == "rvvdiff-server: a message of the server"
    assert s.server_stderr("no histogram here") == "no histogram here"


def test_a_killed_spike_leaves_a_lost_start_that_the_report_names(tmp_path: Path) -> None:
    s = spike.Spike("spike", "test")
    program = tmp_path / "not-an-elf"
    program.write_bytes(b"x")
    kept = _start(tmp_path, program, 1)
    s.exec_log_end(kept, CANNED)
    killed = _start(tmp_path, program, 2)
    s.exec_log_end(killed, b"rvvdiff-server: a message\n")  # killed after a hang: no histogram printed
    executed.compact(killed)
    assert not killed.with_suffix(".pcs").exists()
    e = executed.collect(tmp_path)["vlen256-zvfh"]
    assert (e.logs, e.lost) == (1, 1)
    cov = coverage.measure({"vlen256-zvfh": e})
    assert any(p.startswith("vlen256-zvfh: 1 server start(s) left no record of what they executed") for p in cov.problems)


def test_two_servers_of_one_target_keep_their_own_logs(tmp_path: Path) -> None:
    """The IME1 tests run two Spike servers of one target in one process (with the library and without: the A60 and
    the X60), each counting its starts from 1: the second's first start must not overwrite the first's PCs."""
    s = spike.Spike("spike", "test")
    program = Path("/s/rvvdiff-server-spike")
    a60, x60 = _start(tmp_path, program, 1), _start(tmp_path, program, 1)
    assert a60 != x60
    s.exec_log_end(a60, b"PC Histogram size:1\n20000010 1\n")
    s.exec_log_end(x60, b"PC Histogram size:1\n20000020 1\n")
    e = executed.collect(tmp_path)["vlen256-zvfh"]
    assert e.pcs == {0x20000010, 0x20000020} and e.logs == 2


def _vec_dot_f16(s: pool.KernelServer, n: int) -> float:
    x = np.ones(n, np.float16).view(np.uint16)
    return float(s.call("vec_dot_f16", [n], [], [In(x), In(x), Out(4)]).output(0, np.float32)[0])


@needs_spike
def test_a_spike_server_with_coverage_writes_its_pcs_and_a_line_not_run_is_missed(tmp_path: Path) -> None:
    """A Spike server started with a log directory leaves its PCs when it stops; mapped through its own ELF's DWARF
    they are vec_dot_f16's lines.  With n = 0 the zvfh loop body does not run, and the report names its
    ``vfwmacc`` line as missed in a function the target entered; a second start with n = 37 runs it."""
    build = pinned_build("zvfh")
    cpu = build.source.cpu_dir / "vec.cpp"
    text = cpu.read_text().splitlines()
    start = next(i for i, ln in enumerate(text) if ln.startswith("void ggml_vec_dot_f16("))
    fma = next(i for i in range(start, len(text)) if "__riscv_vfwmacc_vv_f32m2_tu(vsum, ax, ay, vl)" in text[i]) + 1
    key = (str(cpu), fma)

    def run(n: int, where: Path) -> coverage.Coverage:
        s = pool.KernelServer(build, 256, False, spike.spike(), log_dir=where)
        try:
            assert _vec_dot_f16(s, n) == float(n)
        finally:
            s.stop()  # Spike exits, prints its histogram; the pool keeps it as the start's PCs
        d = where / f"vlen256-zvfh-{build.compiler}"
        assert sorted(p.suffix for p in d.iterdir()) == [".json", ".pcs"]
        assert json.loads(next(d.glob("*.json")).read_text())["program"] == str(s.program)
        assert s.program.name == "rvvdiff-server-spike"
        got = executed.collect(where)
        assert got["vlen256-zvfh"].program == s.program and got["vlen256-zvfh"].lost == 0
        cov = coverage.measure(got)
        assert cov.problems == []
        return cov

    empty = run(0, tmp_path / "n0")
    [t] = empty.targets
    assert key not in {(p, ln) for p, ln, _ in t.executed}
    assert key in {(p, ln) for p, ln, _ in t.executable}
    assert "vlen256-zvfh" in coverage.missed(empty)[(str(cpu), "ggml_vec_dot_f16")][fma]

    ran = run(37, tmp_path / "n37")
    [t] = ran.targets
    assert key in {(p, ln) for p, ln, _ in t.executed}
    assert fma not in coverage.missed(ran).get((str(cpu), "ggml_vec_dot_f16"), {})


@needs_spike
def test_a_crashed_spike_server_keeps_its_pcs_and_its_message(tmp_path: Path) -> None:
    """A kernel that crashes: the runtime's trap handler ends the program, Spike still prints its histogram, and the
    crash message quotes the runtime's trap (symbolized), not the histogram after it."""
    build = pinned_build("zvfh")
    s = pool.KernelServer(build, 256, False, spike.spike(), log_dir=tmp_path)
    try:
        with pytest.raises(pool.KernelCrash, match="SIGSEGV") as e:
            s.call("selftest_segv", [0], [], [Out(64)])
    finally:
        s.stop()
    assert spike.HISTOGRAM not in str(e.value) and "at pc 0x" in str(e.value)
    [pcs] = (tmp_path / f"vlen256-zvfh-{build.compiler}").glob("*.pcs")
    got = executed.collect(tmp_path)["vlen256-zvfh"]
    assert got.lost == 0 and got.logs == 1 and len(got.pcs) == pcs.stat().st_size // 8 > 1000
