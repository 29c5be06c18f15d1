"""Boards (harness/emulators/board.py): ``--emulator ssh:HOST[:DIR]`` end to end against the stand-in board
(tests/standin_board.py: an sshd on 127.0.0.1 whose programs run under qemu-riscv64 at VLEN 256), its
faults (a server that dies, a hang, a killed connection, an unreachable board), and ``--emulator native``
with the same qemu command as its launcher.  No RISC-V hardware was involved."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import standin_board as standin
from helpers import CRASHING, pinned_build, run_diff_test
from launch import pytest_child, pytest_in, rvvdiff

from harness.core.matrix import parse_emulator
from harness.cost.measure import board_counters
from harness.emulators import board, pool, registry
from harness.emulators.protocol import In, Out
from harness.emulators.qemu import qemu


@pytest.fixture(scope="session")
def stand_in_sshd(tmp_path_factory: pytest.TempPathFactory):
    if why := standin.missing():
        pytest.skip(why)
    b = standin.start(tmp_path_factory.mktemp("standin"), qemu().path)
    yield b
    b.stop()


@pytest.fixture
def stand_in(stand_in_sshd: standin.StandIn, monkeypatch: pytest.MonkeyPatch) -> standin.StandIn:
    """The stand-in board, reached through RVVDIFF_SSH for the length of one test."""
    monkeypatch.setenv("RVVDIFF_SSH", stand_in_sshd.ssh)
    return stand_in_sshd


def ssh_board(b: standin.StandIn) -> board.Ssh:
    return registry.get(b.spec())  # type: ignore[return-value]


def remote_servers(b: standin.StandIn) -> list[str]:
    """The command lines of processes running a program of the stand-in board's directory."""
    out = subprocess.run(["ps", "-ww", "-eo", "args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if str(b.remote_dir) in line and "qemu" in line]


# ------------------------------------------------------------------ specs and the probe

def test_emulator_specs() -> None:
    assert parse_emulator("ssh:board.lan") == "ssh:board.lan"
    k = registry.kind("ssh:me@board:/scratch/rvv")
    assert (k.host, k.remote_dir, k.name) == ("me@board", "/scratch/rvv", "ssh:me@board:/scratch/rvv")
    assert registry.kind("ssh:board").remote_dir == board.DEFAULT_DIR
    assert registry.is_board("native") and not registry.is_board("qemu")
    with pytest.raises(ValueError, match="give qemu, spike, native or ssh:HOST"):
        parse_emulator("ssh")
    with pytest.raises(ValueError, match="give qemu, spike, native or ssh:HOST"):
        parse_emulator("qemu2")
    with pytest.raises(ValueError, match="give qemu, spike, native or ssh:HOST"):
        registry.kind("qemu2")


def test_parse_probe_reads_hwprobe_and_cpuinfo() -> None:
    bits = board.HWPROBE_BITS["v"] | board.HWPROBE_BITS["zvfh"]
    p = board.parse_probe(f"vlenb=32\ncores=8\nhwprobe_ima_ext_0={bits}\ntail_agnostic=undisturbed\nmask_agnostic=ones\n")
    assert (p.vlen, p.cores, p.tail, p.mask, p.source) == (256, 8, "undisturbed", "ones", "riscv_hwprobe")
    assert {"v", "zvfh"} <= p.extensions and "zfh" not in p.extensions
    p = board.parse_probe("vlenb=16\ncpuinfo_isa=rv64imafdcv_zicsr_zfh_zvfbfwma\n")
    assert {"v", "zfh", "zvfbfwma"} <= p.extensions and p.source == "/proc/cpuinfo"
    with pytest.raises(ValueError, match="not the board probe's output"):
        board.parse_probe("bash: ./probe: cannot execute binary file\n")


def test_the_probe_reads_the_stand_in_board(stand_in: standin.StandIn) -> None:
    kind = registry.kind(stand_in.spec())
    b = ssh_board(stand_in)
    assert b.probe.vlen == standin.VLEN and b.probe.cores >= 1
    assert {"v", "zvfh"} <= b.probe.extensions and "zvfbfwma" not in b.probe.extensions
    assert (b.probe.tail, b.probe.mask) == ("undisturbed", "undisturbed")  # QEMU's default policy
    assert kind.resolve_vlens(None) == (standin.VLEN,)
    with pytest.raises(ValueError, match=f"has VLEN {standin.VLEN} .* runs at that VLEN only"):
        kind.resolve_vlens((512,))
    assert b.lacking({"v": True, "zvfbfwma": True, "zvfh": False}) == ["zvfbfwma"]
    assert b.lacking({"v": True, "rvv_ta_all_1s": True}) == ["rvv_ta_all_1s"]
    assert "VLEN 256" in kind.header() and "measured by a probe" in kind.header()


# ------------------------------------------------------------------ servers over ssh and their faults

def test_server_over_ssh_is_copied_once_and_answers(stand_in: standin.StandIn) -> None:
    b = ssh_board(stand_in)
    build = pinned_build("zvfh")
    s = pool.KernelServer(build, standin.VLEN, False, b)
    try:
        r = s.call("selftest_echo", [], [], [In(b"board"), Out(5)])
        assert r.outputs == [b"board"]
        assert s.hello["rvv_vlen_bytes"] == str(standin.VLEN // 8)
        copies = [p for p in stand_in.remote_dir.iterdir() if p.name.startswith(build.server.name)]
        assert len(copies) == 1 and os.access(copies[0], os.X_OK)
        before = copies[0].stat().st_mtime_ns
        s.stop()
        fresh = pool.KernelServer(build, standin.VLEN, False, registry.kind(stand_in.spec())(b.ssh))
        assert fresh.call("selftest_echo", [], [], [In(b"again"), Out(5)]).outputs == [b"again"]
        fresh.stop()
        assert copies[0].stat().st_mtime_ns == before  # found on the board, not copied again
    finally:
        s.stop()


def test_a_server_that_dies_on_the_board_is_a_crash_of_that_call(stand_in: standin.StandIn) -> None:
    s = pool.KernelServer(pinned_build("zvfh"), standin.VLEN, False, ssh_board(stand_in))
    try:
        with pytest.raises(pool.KernelCrash, match=r"selftest_segv: the kernel crashed with SIGSEGV .*on board standin"):
            s.call("selftest_segv")
        assert s.call("selftest_echo", [], [], [In(b"alive"), Out(5)]).outputs == [b"alive"]
    finally:
        s.stop()


def test_a_hang_on_the_board_is_killed_there_too(stand_in: standin.StandIn) -> None:
    s = pool.KernelServer(pinned_build("zvfh"), standin.VLEN, False, ssh_board(stand_in))
    try:
        s.start()
        assert len(remote_servers(stand_in)) >= 1
        with pytest.raises(pool.KernelHang, match="selftest_hang did not finish within 3 s"):
            s.call("selftest_hang", timeout=3)
        for _ in range(50):
            if not remote_servers(stand_in):
                break
            time.sleep(0.2)
        assert remote_servers(stand_in) == [], "the hung server still runs on the board"
        assert s.call("selftest_echo", [], [], [In(b"alive"), Out(5)]).outputs == [b"alive"]
    finally:
        s.stop()


def test_a_killed_connection_is_a_failure_of_that_call(stand_in: standin.StandIn) -> None:
    s = pool.KernelServer(pinned_build("zvfh"), standin.VLEN, False, ssh_board(stand_in))
    try:
        s.start()
        sessions = stand_in.sessions()
        assert sessions, "no sshd session serves the started server"
        for pid in sessions:
            os.kill(pid, 9)
        s.proc.wait(timeout=60)  # the local ssh has seen the drop: the call must still fail, not restart silently
        with pytest.raises(pool.KernelCrash, match="the ssh connection to board standin dropped"):
            s.call("selftest_echo", [], [], [In(b"lost"), Out(4)])
        assert s.call("selftest_echo", [], [], [In(b"alive"), Out(5)]).outputs == [b"alive"]
    finally:
        s.stop()


def test_an_unreachable_board_is_one_clear_line(stand_in: standin.StandIn, pytester: pytest.Pytester) -> None:
    cfg = Path(stand_in.dir / "ssh_config").read_text() + "Host nowhere\n  HostName 127.0.0.1\n  Port 9\n"
    (pytester.path / "ssh_config").write_text(cfg)
    os.environ["RVVDIFF_SSH"] = f"ssh -F {pytester.path / 'ssh_config'}"  # restored by the stand_in fixture
    r = run_diff_test(pytester, "--emulator", "ssh:nowhere:/tmp/rvvdiff-nowhere", code=pytest.ExitCode.USAGE_ERROR)
    assert "--emulator ssh:nowhere:/tmp/rvvdiff-nowhere: board nowhere is unreachable" in r.stderr



def test_faults_on_the_board_fail_their_case_and_the_run_goes_on(stand_in: standin.StandIn,
                                                                  pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_crash=CRASHING)
    r = pytest_in(pytester, "--emulator", stand_in.spec(), "--isa", "zvfh", "--kernel-timeout", "3", code=1)
    r.assert_outcomes(failed=2, passed=1)
    out = r.stdout
    assert "selftest_segv: the kernel crashed with SIGSEGV" in out
    assert "selftest_hang did not finish within 3 s and was killed" in out
    assert f"rvvdiff: emulator: ssh: board standin ({stand_in.remote_dir}" in out and "VLEN 256" in out


def test_repro_replays_a_recorded_failure_on_the_board(stand_in: standin.StandIn, pytester: pytest.Pytester) -> None:
    """A failure recorded under QEMU replays on the board (``rvvdiff repro --emulator ssh:...``) at the board's
    VLEN; a case at another VLEN gets one line saying what to do."""
    pytester.makepyfile(test_crash=CRASHING)
    rep = pytester.path / "rep"
    r = pytest_in(pytester, "--isa", "zvfh", "--vlen", f"{standin.VLEN},512", "--kernel-timeout", "3",
                  "-k", "segv", "--report-dir", str(rep), code=1)
    r.assert_outcomes(failed=2)
    here, other = (rep / "cases" / f"test_crash.test_a_segv_vlen{v}-zvfh" for v in (standin.VLEN, 512))
    out = rvvdiff("repro", here, "--emulator", stand_in.spec(), code=1, cwd=pytester.path, timeout=600)
    assert "selftest_segv: the kernel crashed with SIGSEGV" in out.stdout and "STILL FAILS" in out.stdout
    assert "ssh" in out.stdout and "qemu-riscv64 -cpu" not in out.stdout.split("built by")[1].splitlines()[1]
    out = rvvdiff("repro", other, "--emulator", stand_in.spec(), code=2, cwd=pytester.path, timeout=600)
    assert f"has VLEN {standin.VLEN} and the case is at VLEN 512: give --vlen {standin.VLEN}" in out.stdout
    bad = rvvdiff("repro", here, "--emulator", "qemu2", code=2, cwd=pytester.path, timeout=60)
    assert "give qemu, spike, native or ssh:HOST" in bad.stderr


def test_usage_errors_on_a_board(stand_in: standin.StandIn, pytester: pytest.Pytester) -> None:
    r = run_diff_test(pytester, "--emulator", stand_in.spec(), "--vlen", "512", code=pytest.ExitCode.USAGE_ERROR)
    assert "--vlen 512: board standin has VLEN 256" in r.stderr
    r = run_diff_test(pytester, "--emulator", stand_in.spec(), "--rvv-stress", code=pytest.ExitCode.USAGE_ERROR)
    assert "a board has one tail/mask policy" in r.stderr


def test_a_family_runs_on_the_stand_in_board(stand_in: standin.StandIn) -> None:
    """A real family, two xdist workers sharing the board (a server each)."""
    r = pytest_child("cases/test_quant_dot.py", "--emulator", stand_in.spec(), "-k", "q4_0 and not q4_0x", "-rs", "-q",
                     "-n", "2")
    assert "6 passed, 6 skipped" in r.stdout
    assert "board standin lacks zvfbfmin, zvfbfwma, zfbfmin" in r.stdout  # the zvfbfwma build
    assert "needs QEMU's -d logging" in r.stdout  # the traced variant check


# ------------------------------------------------------------------ native, the same qemu as its launcher

@pytest.fixture
def native_launcher(monkeypatch: pytest.MonkeyPatch):
    def use(cpu: str = standin.CPU) -> None:
        monkeypatch.setenv("RVVDIFF_NATIVE_LAUNCHER", standin.launcher(qemu().path, cpu))
        board._native.cache_clear()
    yield use
    board._native.cache_clear()


def test_native_without_a_riscv_host_or_launcher_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RVVDIFF_NATIVE_LAUNCHER", raising=False)
    board._native.cache_clear()
    if board._riscv_linux():
        pytest.skip("this host is riscv64 Linux")
    with pytest.raises(board.BoardError, match="runs the kernel server directly on a riscv64 Linux host"):
        registry.get("native")
    board._native.cache_clear()


def test_native_runs_through_the_launcher(native_launcher, pytester: pytest.Pytester) -> None:
    native_launcher()
    n = registry.get("native")
    assert n.probe.vlen == standin.VLEN
    r = run_diff_test(pytester, "--emulator", "native", "-rs")
    r.assert_outcomes(passed=2, skipped=1)
    out = r.stdout
    assert "test_dot[vlen256-v] PASSED" in out or "2 passed" in out
    assert "this host (through" in out and re.search(r"lacks zvfbfmin, zvfbfwma, zfbfmin .*needed by vlen256-zvfbfwma", out)


def test_native_policy_probe_sees_the_stress_mode(native_launcher) -> None:
    native_launcher(standin.CPU + ",rvv_ta_all_1s=true,rvv_ma_all_1s=true")
    p = registry.get("native").probe
    assert (p.tail, p.mask) == ("ones", "ones")


# ------------------------------------------------------------------ measured cost: the counter path

def test_counters_on_the_stand_in_board_say_how_to_get_them(stand_in: standin.StandIn) -> None:
    s = pool.KernelServer(pinned_build("zvfh"), standin.VLEN, False, ssh_board(stand_in))
    try:
        s.start()
        with pytest.raises(board_counters.CounterAccess, match="board standin offers no hardware counters to perf_event_open"):
            board_counters.BoardCounters(ssh_board(stand_in), s)
    finally:
        s.stop()
    line = board_counters.access_hint("board k1", "Permission denied", "3")
    assert "kernel.perf_event_paranoid = 3" in line and "sysctl -w kernel.perf_event_paranoid=2" in line


def test_measure_with_a_fake_counter_is_stable_and_per_call(stand_in: standin.StandIn) -> None:
    s = pool.KernelServer(pinned_build("zvfh"), standin.VLEN, False, ssh_board(stand_in))
    try:
        x = bytes(range(256)) * 16
        r, m = board_counters.measure(s, board_counters.FakeCounters(s, ghz=2.0, ipc=0.5), "selftest_echo", [], [],
                                [In(x), Out(len(x))])
        assert r.outputs == [x]
        assert m.rounds >= 3 and m.repeats[0] == 1 and m.repeats[1] >= 4
        assert m.cycles > 0 and m.instret == pytest.approx(m.cycles / 2, rel=0.01)
    finally:
        s.stop()


class _Steady(board_counters.Counters):
    """A counter that adds ``per_call`` per kernel repetition and ``overhead`` per request: what the slope removes."""

    def __init__(self, server: pool.KernelServer, per_call: int, overhead: int) -> None:
        self.server, self.per_call, self.overhead, self.calls = server, per_call, overhead, 0

    def read(self) -> tuple[int, int]:
        return self.count, self.count

    @property
    def count(self) -> int:
        return self.calls


def test_the_slope_removes_the_request_overhead(stand_in: standin.StandIn, monkeypatch) -> None:
    s = pool.KernelServer(pinned_build("zvfh"), standin.VLEN, False, ssh_board(stand_in))
    src = _Steady(s, per_call=1000, overhead=50_000)
    real_call = s.call

    def call(kernel, ip=(), fp=(), bufs=(), *, repeat=1, timeout=60.0):
        src.calls += src.overhead + src.per_call * repeat
        return real_call(kernel, ip, fp, bufs, repeat=repeat, timeout=timeout)

    monkeypatch.setattr(s, "call", call)
    try:
        _, m = board_counters.measure(s, src, "selftest_echo", [], [], [In(b"x"), Out(1)])
        assert (m.cycles, m.instret, m.rounds, m.spread) == (1000, 1000, 3, 0.0)
    finally:
        s.stop()


def test_disagreements_beyond_one_and_a_half() -> None:
    rows = [{"case": "a", "measured_cycles": 1600, "estimates": {"x60": {"cycles": 1000}, "x100": {"cycles": 1100}}},
            {"case": "b", "measured_cycles": 1000, "estimates": {"x60": {"cycles": 1499}}},
            {"case": "c", "measured_cycles": 1000, "estimates": {"x60": {"cycles": 1501}}},
            {"case": "d", "measured_cycles": 1000, "estimates": {}}]
    found = board_counters.disagreements(rows)
    assert [(d.case, d.core) for d in found] == [("a", "x60"), ("c", "x60")]
    assert found[0].describe() == "a: measured 1,600 cycles, estimated 1,000 on x60 (1.60x)"


def test_rvvdiff_cost_on_the_stand_in_board(stand_in: standin.StandIn, tmp_path: Path, monkeypatch) -> None:
    """The measured column end to end, with the fake counter (the stand-in has no hardware counters)."""
    monkeypatch.setenv("RVVDIFF_COUNTERS", "fake:1.0")
    cp = rvvdiff("cost", "--emulator", stand_in.spec(), "-k", "quant_dot-q4_0-k4096 and not generic", "--isa", "zvfh",
                 "--no-estimates", "--out", tmp_path, timeout=900)
    assert "1 cases measured on ssh: board standin" in cp.stdout and "at VLEN 256" in cp.stdout
    row = json.loads((tmp_path / "board.json").read_text())["rows"][0]
    assert row["case"] == "quant_dot-q4_0-k4096" and row["measured_cycles"] > 0 and row["spike_instret"] is None
    monkeypatch.delenv("RVVDIFF_COUNTERS")
    cp = rvvdiff("cost", "--emulator", stand_in.spec(), "-k", "quant_dot-q4_0-k4096 and not generic", "--isa", "zvfh",
                 "--no-estimates", "--out", tmp_path, code=3, timeout=900)  # measured nothing: not a pass
    assert "0 cases measured" in cp.stdout
    assert "not measured: " in cp.stdout and "offers no hardware counters to perf_event_open" in cp.stdout


def test_workers_are_capped_at_the_boards_cores(stand_in: standin.StandIn, monkeypatch) -> None:
    from types import SimpleNamespace

    from harness.plugin.workers import cap_workers
    monkeypatch.setenv("RVVDIFF_MAX_WORKERS", "0")  # no cap of the host's own
    cfg = SimpleNamespace(option=SimpleNamespace(numprocesses=16, maxprocesses=None, emulator=stand_in.spec()))
    cap_workers(cfg)  # type: ignore[arg-type]
    assert cfg.option.maxprocesses == ssh_board(stand_in).probe.cores
