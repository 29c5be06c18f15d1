"""Replaying a recorded failing call on a build and judging its outputs."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from harness.core.matrix import Point
from harness.emulators.base import Emulator
from harness.emulators.pool import KernelFailure, KernelServer, ServerError
from harness.report.failure import Case
from harness.toolchain.builds import Build


def decode_like(outputs: list[bytes], got: np.ndarray) -> tuple[int, np.dtype] | None:
    """Which output buffer, read as which dtype, holds the recorded ``got`` values."""
    flat = got.reshape(-1)
    for i, o in enumerate(outputs):
        for dt in dict.fromkeys([got.dtype, np.dtype(np.float32), np.dtype(np.float16),
                                 np.dtype(ml_dtypes.bfloat16), np.dtype(np.float64)]):
            if len(o) != flat.size * dt.itemsize:
                continue
            a = np.frombuffer(o, dt)
            with np.errstate(invalid="ignore"):
                a64, f64 = a.astype(np.float64), flat.astype(np.float64)
            if np.all((a64 == f64) | (np.isnan(a64) & np.isnan(f64))):
                return i, dt
    return None


def judge(case: Case, outputs: list[bytes]) -> tuple[bool, str]:
    """Re-judge a recorded comparison on new outputs: (still failing?, explanation)."""
    comp = case.data.get("comparison")
    recorded = case.recorded_outputs()
    if comp is None or "got" not in case.arrays:
        same = outputs == recorded
        return same, ("the outputs equal the recorded failing outputs" if same else
                      "the outputs differ from the recorded failing outputs (no comparison was recorded)")
    where = decode_like(recorded, case.arrays["got"])
    if where is None or comp["mode"] == "ulps":
        same = outputs == recorded
        return same, ("the outputs equal the recorded failing outputs (the comparison is derived from them; "
                      "judge it with the pytest replay command)" if same else
                      "the outputs changed; judge them with the pytest replay command")
    i, dt = where
    got = np.frombuffer(outputs[i], dt).astype(np.float64)
    exp = case.arrays["expected"].reshape(-1).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        if comp["mode"] == "bitwise":
            gb = np.frombuffer(outputs[i], dt)
            eb = case.arrays["expected"].reshape(-1).astype(dt)
            ok = (gb.view(f"u{dt.itemsize}") == eb.view(f"u{dt.itemsize}")) | (np.isnan(got) & np.isnan(exp))
        else:
            bound = case.arrays["bound"].astype(np.float64).reshape(-1)
            ok = (np.abs(got - exp) <= bound) | (np.isnan(got) & np.isnan(exp)) | (got == exp)
    bad = np.flatnonzero(~ok)
    lines = [f"{comp['name']}: {bad.size} of {got.size} elements fail ({comp['mode']}"
             + (f", bound up to {float(case.arrays['bound'].max()):.6g}" if comp["mode"] == "bound" else "") + ")"]
    for j in bad[:5]:
        lines.append(f"  [{j}] got {float(got[j])!r}, expected {float(exp[j])!r}")
    return bad.size > 0, "\n".join(lines)


@dataclass
class Replay:
    """One replay of a recorded call: on which emulator, whether it fails, why, the raw outputs."""

    emulator: str
    argv: list[str]
    failing: bool | None  # None: not run (the emulator cannot run this target)
    text: str
    outputs: list[bytes] | None = None


def replay_on(case: Case, build: Build, at: Point, emulator: Emulator) -> Replay:
    """Run the recorded call once on ``emulator`` at ``at``'s VLEN and stress mode (``build`` made for its ISA
    build by its compiler) and judge it as the recorded comparison would."""
    server = KernelServer(build, at.vlen, at.stress, emulator)
    if at.vlen not in emulator.vlens:
        return Replay(emulator.name, [], None, f"{emulator.describe()} cannot run VLEN {at.vlen} "
                      f"(it runs {', '.join(map(str, emulator.vlens))})")
    try:
        argv = server.argv
        r = server.call(case.call["kernel"], case.call["ip"], case.call["fp"], case.buffers(), timeout=600)
        failing, text = judge(case, r.outputs)
        return Replay(emulator.name, argv, failing, text, r.outputs)
    except KernelFailure as e:
        return Replay(emulator.name, server.argv, True, str(e))
    except ServerError as e:
        return Replay(emulator.name, [], None, str(e))
    finally:
        server.stop()


def side_by_side(case: Case, a: Replay, b: Replay, n: int = 8) -> list[str]:
    """The judged output of two replays, element by element where they differ (or the first ``n``)."""
    if a.outputs is None or b.outputs is None:
        return []
    if a.outputs == b.outputs:
        return [f"outputs: {a.emulator} and {b.emulator} are bit-identical "
                f"({sum(map(len, a.outputs))} bytes in {len(a.outputs)} buffer(s))"]
    where = decode_like(case.recorded_outputs(), case.arrays["got"]) if "got" in case.arrays else None
    i, dt = where if where else (next(k for k, (x, y) in enumerate(zip(a.outputs, b.outputs)) if x != y),
                                 np.dtype(np.uint8))
    x, y = np.frombuffer(a.outputs[i], dt), np.frombuffer(b.outputs[i], dt)
    exp = case.arrays["expected"].reshape(-1) if where else None
    differ = np.flatnonzero(x.view(f"u{dt.itemsize}") != y.view(f"u{dt.itemsize}"))
    lines = [f"outputs differ: {differ.size} of {x.size} elements of output {i} ({dt})",
             f"  {'element':>8}  {'expected':>14}  {a.emulator:>14}  {b.emulator:>14}"]
    for j in differ[:n]:
        e = f"{float(exp[j]):.8g}" if exp is not None and j < exp.size else "-"
        lines.append(f"  {j:>8}  {e:>14}  {float(x[j]):>14.8g}  {float(y[j]):>14.8g}")
    return lines


def spike_verdict(qemu_run: Replay, spike_run: Replay, stress: bool, qemu_plain: Replay | None = None) -> str:
    """The one-line verdict of a finding's replay on Spike next to QEMU's (``qemu_plain``: QEMU
    without stress, for a stress finding)."""
    if spike_run.failing is None:
        return f"not replayed on Spike: {spike_run.text}"
    if qemu_run.failing is None:
        return ("fails on Spike; QEMU cannot run this target" if spike_run.failing
                else "passes on Spike; QEMU cannot run this target")
    if spike_run.failing and qemu_run.failing:
        if spike_run.outputs is not None and spike_run.outputs == qemu_run.outputs:
            return "reproduced on Spike, bit-identical"
        if spike_run.outputs is None and qemu_run.outputs is None:
            return "reproduced on Spike: both emulators stop the kernel (see the messages)"
        if spike_run.outputs is None:
            return "fails on Spike differently: Spike stops the kernel where QEMU returns wrong values (see its message)"
        if qemu_run.outputs is None:
            return "fails on Spike differently: Spike returns wrong values where QEMU stops the kernel"
        return "reproduced on Spike, different values"
    if qemu_run.failing and stress:
        same = (qemu_plain is not None and spike_run.outputs is not None and qemu_plain.outputs == spike_run.outputs)
        return ("not reproduced on Spike: the failure needs QEMU's tail/mask stress mode (agnostic elements "
                "written with ones), which Spike does not have; Spike keeps them undisturbed"
                + (", and its outputs are bit-identical to QEMU's without stress" if same else ""))
    if qemu_run.failing:
        return "not reproduced on Spike (suspect the emulator: shrink the case and read the specification)"
    if spike_run.failing:
        return "fails on Spike only (an emulator difference: shrink the case and read the specification)"
    return "passes on both emulators"
