"""A failure report replayed outside pytest (``rvvdiff repro``), optionally as standalone C reproducers.

:func:`target` reads the report and resolves where it replays: the recorded VLEN, ISA build, compiler,
emulator and tree unless others are asked for, and the build.  :func:`replay` runs the recorded call: on
QEMU or a board alone (a board at its own VLEN, under its own tail/mask policy), or on Spike beside QEMU
(as recorded, without stress for a stress report, then Spike), the outputs side by side and one verdict
(:func:`harness.report.replay.spike_verdict`).  :func:`reproducers` writes the standalone C++ program of
the call (and, for a vec_dot that ggml's API reaches, the ggml-only C program) and the commands that
build and run them.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.core.errors import RvvdiffError
from harness.core.matrix import Point
from harness.emulators import registry
from harness.emulators.base import Emulator
from harness.ggml.source import GgmlSource, resolve
from harness.report.failure import Case, load_case
from harness.report.replay import replay_on, side_by_side, spike_verdict
from harness.report.reproducer import c_reproducer, upstream_reproducer
from harness.toolchain.builds import Build, ensure_built, link_objects
from harness.toolchain.compilers import SERVER_DIR, ToolchainError, compiler


class ReproError(RvvdiffError, RuntimeError):
    """The report cannot be replayed at the target asked for (no compiler or emulator, a board's VLEN)."""


@dataclass
class Target:
    """A recorded call and where it replays."""

    case: Case
    #: The point it replays at: the recorded one, with what was asked for in its place.
    at: Point
    source: GgmlSource
    emulator: Emulator
    #: What the emulator is judged beside: QEMU for Spike; QEMU and a board replay alone (the emulator itself).
    reference: Emulator
    build: Build
    board: bool

    def heading(self) -> str:
        c = self.case
        return (f"replaying {c.data['test']}\n  kernel {c.call['kernel']} ip={c.call['ip']} fp={c.call['fp']}\n"
                f"  on {self.source.describe()}, built by {self.build.compiler}")


@dataclass
class Outcome:
    """A replay's printed lines, whether the call fails on the emulator asked for (None: not replayed) and
    that emulator's server command line."""

    lines: list[str]
    failing: bool | None
    argv: list[str]


def target(report: Path, tree: str | None, asked: Mapping[str, Any]) -> Target:
    """The report's call at the point asked for (``asked``: :func:`harness.core.matrix.one_values`, a field not
    given: the recorded one) on ``tree`` (None: the recorded tree)."""
    case = load_case(report)
    at = case.point.given(asked)
    src_path = tree or case.data["ggml"]["root"]
    src = resolve(None if (not tree and case.data["ggml"]["label"].startswith("pinned")) else src_path)
    try:
        em = registry.get(at.emulator)
        # Spike is judged beside QEMU; QEMU and a board replay alone.
        reference = (registry.get(registry.DEFAULT) if at.emulator != registry.DEFAULT
                     and not registry.is_board(at.emulator) else em)
        build = ensure_built(src, at.isa, at.compiler)
    except ToolchainError as e:
        raise ReproError(str(e)) from e
    board = registry.is_board(at.emulator)
    if board and at.vlen != em.probe.vlen:
        raise ReproError(f"{em.where()} has VLEN {em.probe.vlen} and the case is at VLEN {at.vlen}: give --vlen "
                         f"{em.probe.vlen} to replay it at the board's VLEN, or replay under QEMU (--emulator qemu)")
    return Target(case, at, src, em, reference, build, board)


def replay(t: Target) -> Outcome:
    """The recorded call run once on the emulator asked for (and beside QEMU for Spike), judged."""
    case, build, at = t.case, t.build, t.at
    plain = replace(at, stress=False)
    if t.emulator is t.reference:
        # A board has one tail/mask policy, its own (its probe says which): a stress case replays under it.
        r = replay_on(case, build, plain if t.board else at, t.emulator)
        if r.failing is None:
            hint = t.emulator.replay_hint if at.vlen not in t.emulator.vlens else ""
            return Outcome([f"rvvdiff repro: not replayed: {r.text}" + hint], None, r.argv)
        return Outcome([f"  {shlex.join(r.argv)}\n{r.text}"], r.failing, r.argv)
    # The default emulator (QEMU) as recorded (a VLEN beyond its own is "not run", with the reason),
    # QEMU without stress for a stress report (what Spike, without such a mode, should match), then Spike.
    ref, em = t.reference, t.emulator
    runs = [replay_on(case, build, at, ref), replay_on(case, build, plain, em)]
    if at.stress:
        runs.insert(1, replay_on(case, build, plain, ref))
    labels = ([f"{ref.label}, tail/mask stress (as recorded)", f"{ref.label}, no stress",
               f"{em.label} (no stress mode)"] if at.stress else [ref.label, em.label])
    lines = []
    for label, r in zip(labels, runs):
        state = {True: "FAILS", False: "passes", None: "not run"}[r.failing]
        lines.append(f"\n== {label}: {state}" + (f"\n  {shlex.join(r.argv)}" if r.argv else ""))
        lines.append("  " + r.text.replace("\n", "\n  "))
    lines.append("")
    lines += side_by_side(case, runs[0], runs[-1]) + (side_by_side(case, runs[1], runs[2]) if at.stress else [])
    lines.append(f"\nverdict: {spike_verdict(runs[0], runs[-1], at.stress, runs[1] if at.stress else None)}")
    return Outcome(lines, runs[-1].failing, runs[-1].argv)


def reproducers(t: Target, server_argv: list[str]) -> list[str]:
    """Write the standalone reproducers into the case directory; the lines that name them and the commands
    that build them and run them as ``server_argv`` (the replay's server command line) runs the server."""
    case, build, emulator = t.case, t.build, t.emulator
    prog = c_reproducer(case, case.dir / "repro.cpp")
    exe = case.dir / f"repro{emulator.suffix}"
    cc = compiler(build.compiler)
    objs = link_objects(build)
    extra = emulator.link_args(build)
    build_cmd = [cc.cxx, "-O1", "-g", *build.cflags, "-I", str(SERVER_DIR), str(prog), *map(str, objs),
                 *map(str, build.libs), "-static", "-lm", "-lpthread", *extra, "-o", str(exe)]
    run_cmd = server_argv[:-1] + [str(exe)] if server_argv else [str(exe)]
    lines = [f"\nstandalone reproducer: {prog}\nbuild:\n  {shlex.join(build_cmd)}\nrun:\n  {shlex.join(run_cmd)}"]
    debug = emulator.debug_hint(run_cmd, exe)
    if debug:
        lines.append(debug)
    up = upstream_reproducer(case, case.dir / "repro_ggml.c")
    if up is not None:
        public = [f for f in build.cflags if f.startswith("-I") and f.rstrip("/").endswith("/include")]
        up_exe = case.dir / f"repro_ggml{emulator.suffix}"
        up_cmd = [cc.cxx, "-O1", *[f for f in build.cflags if f.startswith(("-march", "-mabi"))], *public, str(up),
                  *map(str, build.libs), "-static", "-lm", "-lpthread", *extra, "-o", str(up_exe)]
        lines.append(f"\nggml-only reproducer: {up}\n  (for an upstream report: only ggml's headers and libraries)\n"
                     f"build:\n  {shlex.join(up_cmd)}\nrun:\n  {shlex.join(run_cmd[:-1] + [str(up_exe)])}")
    return lines


def closing(t: Target, failing: bool) -> str:
    """The last line: whether the call still fails (and on which emulator, when it is not QEMU)."""
    named = f" {t.emulator.named_as}" if t.emulator.named_as else ""
    return f"STILL FAILS{named}" if failing else "PASSES now"
