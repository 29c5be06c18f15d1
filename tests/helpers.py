"""Shared by the harness's own tests: the pinned build and servers, and the test files run under the plugin
(started by tests/launch.py, as every child of the tests is)."""

from __future__ import annotations

from pathlib import Path

import pytest
from launch import Code, Run, pytest_in

from harness.core import config
from harness.core.matrix import Point
from harness.emulators import pool
from harness.emulators.qemu import qemu
from harness.ggml import source
from harness.toolchain.builds import Build, ensure_built
from harness.toolchain.compilers import ToolchainError, compiler

ROOT = Path(__file__).resolve().parent.parent


def pinned_build(isa: str = "zvfh") -> Build:
    return ensure_built(source.pinned(), config.ISA_BUILDS[isa])


#: The kernel servers of the harness's own tests (stopped when the interpreter exits).
POOL = pool.Pool()


def server(vlen: int = 128, isa: str = "zvfh", stress: bool = False) -> pool.KernelServer:
    return POOL.server(pinned_build(isa), Point(vlen, isa, stress), qemu())


def gcc14_missing() -> str | None:
    """Why GCC 14 cannot build here (its set-up command included), or None when it is installed."""
    try:
        compiler("gcc14")
    except ToolchainError as e:
        return str(e)
    return None


#: A one-kernel differential test for running the plugin in a pytester subprocess.
DIFF_TEST = """
import numpy as np
from harness.emulators.protocol import In, Out

def test_dot(target):
    x = np.arange(10, dtype=np.float32)
    r = target.call("vec_dot_f32", [10], [], [In(x), In(x), Out(4)])
    assert r.output(0, np.float32)[0] == 285.0
"""


def run_diff_test(pytester: pytest.Pytester, *args: str, code: Code = 0) -> Run:
    """Run :data:`DIFF_TEST` under the plugin with ``args`` (a pytest child in pytester's directory)."""
    pytester.makepyfile(test_diff=DIFF_TEST)
    return pytest_in(pytester, *args, code=code)


#: A test file whose tests crash the server, hang it, then call it again: the run must report the
#: first two per case and go on (tests/test_plugin.py under QEMU, tests/test_board.py on the stand-in board).
CRASHING = """
from harness.emulators.protocol import In, Out

def test_a_segv(target):
    target.call("selftest_segv")

def test_b_hang(target):
    target.call("selftest_hang")

def test_c_after(target):
    r = target.call("selftest_echo", [], [], [In(b"alive"), Out(5)])
    assert r.outputs == [b"alive"]
"""
