"""The kernel server and its pool: protocol round trip, VLEN proof, crashes, hangs, guards, restarts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import POOL, pinned_build, server

from harness.core import config
from harness.core.matrix import Point
from harness.emulators import pool
from harness.emulators.protocol import In, InOut, Out
from harness.emulators.qemu import qemu


@pytest.mark.parametrize("vlen", config.VLENS)
def test_server_proves_its_vlen(vlen: int) -> None:
    s = server(vlen)
    assert int(s.hello["rvv_vlen_bytes"]) * 8 == vlen
    assert s.hello["feature.zvfh"] == "1"
    assert "vec_dot_f16" in s.hello["kernels"].split(",")


def test_echo_round_trip() -> None:
    data = np.random.default_rng(1).integers(0, 256, 100_003, dtype=np.uint8).tobytes()
    r = server().call("selftest_echo", [7, -3], [0.5], [In(data), Out(len(data))])
    assert r.outputs == [data]
    assert "ip=7,-3," in r.message and "fp=0.500000," in r.message


def test_inout_buffers_come_back_in_order() -> None:
    a = np.arange(16, dtype=np.uint8)
    r = server().call("selftest_echo", [], [], [In(a), InOut(np.zeros(16, np.uint8))])
    assert r.output(0, np.uint8).tolist() == a.tolist()


def test_output_buffers_are_prefilled() -> None:
    # An output the kernel never writes keeps the fill byte, so a missed write is visible.
    s = server()
    r = s.call("selftest_echo", [], [], [In(b""), Out(0)])
    assert r.outputs == [b""]


@pytest.mark.parametrize("kernel, expected", [
    ("selftest_segv", "SIGSEGV"),
    ("selftest_sigill", "the kernel used an extension the emulated CPU lacks"),
])
def test_crash_is_reported_and_server_restarts(kernel: str, expected: str) -> None:
    s = server()
    starts = s.starts
    with pytest.raises(pool.KernelCrash, match=expected) as e:
        s.call(kernel)
    assert "VLEN 128, ISA build zvfh" in str(e.value)
    r = s.call("selftest_echo", [], [], [In(b"ok"), Out(2)])  # the next case runs
    assert r.outputs == [b"ok"]
    assert s.starts == starts + 1


def test_a_server_killed_between_calls_fails_the_next_call_and_restarts() -> None:
    s = pool.KernelServer(pinned_build("zvfh"), 128, False, qemu())
    try:
        s.start()
        s.proc.kill()
        with pytest.raises(pool.KernelCrash, match=r"selftest_echo \(the server was found dead before this call\): "
                                                   r"the kernel server died of SIGKILL"):
            s.call("selftest_echo", [], [], [In(b"lost"), Out(4)])
        assert s.call("selftest_echo", [], [], [In(b"ok"), Out(2)]).outputs == [b"ok"]
    finally:
        s.stop()


def test_hang_is_killed_at_the_deadline() -> None:
    s = server()
    with pytest.raises(pool.KernelHang, match=r"did not finish within 2 s"):
        s.call("selftest_hang", timeout=2)
    assert s.call("selftest_echo", [], [], [In(b"x"), Out(1)]).outputs == [b"x"]


@pytest.mark.parametrize("side, offset", [(1, "offset 16"), (-1, "offset -1")])
def test_out_of_bounds_write_is_a_guard_violation(side: int, offset: str) -> None:
    with pytest.raises(pool.GuardViolation, match=f"selftest_oob wrote outside buffer 0 .16 bytes.*{offset}"):
        server().call("selftest_oob", [side], [], [Out(16)])


def test_unknown_kernel_and_bad_sizes_are_harness_errors() -> None:
    s = server()
    with pytest.raises(pool.ServerError, match="unknown kernel: no_such_kernel"):
        s.call("no_such_kernel")
    with pytest.raises(pool.ServerError, match="vec_dot_f16: buffer 0 has 6 bytes, expected 8"):
        s.call("vec_dot_f16", [4], [], [In(b"\0" * 6), In(b"\0" * 8), Out(4)])


def test_missing_extension_in_the_emulator_is_named() -> None:
    """A zvfh build run on an emulated CPU without zvfh dies with SIGILL at start-up."""
    b = pinned_build("zvfh")
    lacking = dataclasses.replace(b.isa, qemu={**b.isa.qemu, "zvfh": False, "zvfhmin": False, "zfh": False,
                                               "zfhmin": False})
    s = pool.KernelServer(dataclasses.replace(b, isa=lacking), 256, False, qemu())
    with pytest.raises(pool.ServerError, match="extension the emulated CPU lacks"):
        s.start()


def test_stress_mode_reaches_the_cpu_string() -> None:
    s = server(256, "zvfh", stress=True)
    for prop in config.STRESS_PROPS:
        assert f"{prop}=true" in s.cpu
    x = np.arange(100, dtype=np.float32)
    r = s.call("vec_dot_f32", [100], [], [In(x), In(x), Out(4)])
    assert r.output(0, np.float32)[0] == float(np.sum(x.astype(np.float64) ** 2))


def test_a_live_limit_stops_the_least_recently_used_servers() -> None:
    """What an xdist worker under target scheduling asks (one live server): starting another
    target's server stops the others when it starts; without a limit they stay up."""
    a = server(128)
    server(256).stop()  # the limit applies when a server starts
    b = POOL.server(pinned_build(), Point(256, "zvfh"), qemu(), live_limit=1)
    assert b.alive() and not a.alive()
    a = server(128)  # no limit: b stays up
    assert a.alive() and b.alive()
