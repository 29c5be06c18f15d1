"""The public reproducer built against a tree's ISA builds and run at every VLEN, here, per compiler.

The VLENs, builds and compilers an issue's title names are not copied from anywhere: :func:`verify`
builds the program against each ISA build of the tree with one named compiler (rvvdiff's builds,
harness/toolchain/compilers.py's ``COMPILERS``) and runs it at every QEMU VLEN (with the recorded
tail/mask stress mode, or another), or under Spike; with a fixed tree (a fix of
``harness/data/fixes/`` or ``--fixed TREE``) the same program runs against it too.
:func:`verify_stock` builds it once more with the stock toolchain's commands the issue prints.
"""

from __future__ import annotations

import hashlib
import re
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness.core.config import cache_dir
from harness.core.errors import RvvdiffError
from harness.core.matrix import CANNOT_MAKE, Point, can_make
from harness.core.proc import run
from harness.emulators import qemu
from harness.emulators.base import Emulator
from harness.ggml.source import GgmlSource
from harness.toolchain.builds import Build, ensure_built
from harness.toolchain.compilers import compiler
from harness.upstream import stock


@dataclass
class Verdict:
    """The program's verdict on one tree, ISA build and VLEN (a cell of the issue's table)."""

    tree: str  # "pinned" / "fixed"
    isa: str
    vlen: int
    failing: bool | None  # None: not built / not run (``text`` says why)
    text: str
    emulator: str = "qemu"
    #: The named compiler that built the libraries and the program (``clang``, ``gcc14``).
    compiler: str = "clang"
    #: Whether tail/mask-agnostic elements were written as ones (``rvv_ta_all_1s``, ``rvv_ma_all_1s``).
    stress: bool = False
    #: Who built the program: ``rvvdiff`` (its own builds, :func:`verify`) or ``stock`` (the commands the issue
    #: prints, harness/upstream/stock_table.py; under Spike, run with riscv-pk).
    by: str = "rvvdiff"

    @classmethod
    def of(cls, tree: str, at: Point, failing: bool | None, text: str, by: str = "rvvdiff") -> Verdict:
        """The verdict on ``tree`` at the point ``at``."""
        return cls(tree, at.isa.name, at.vlen, failing, text, at.emulator, at.compiler, at.stress, by)

    @property
    def point(self) -> Point:
        """Where the program ran."""
        return Point(self.vlen, self.isa, self.stress, self.compiler, self.emulator)


#: What a program says on stderr that is no verdict: a backend setting itself up (SpacemiT's: its core type, its
#: memory pool), the debugger ggml's abort starts for a backtrace.
_NOISE = re.compile(r"CPU_RISCV64_SPACEMIT: |\[Inferior \d+ \(process \d+\) detached\]")
#: A source path in an assertion's message, up to the tree's ggml/src/ (the tree's place on this machine left out).
_SOURCE = re.compile(r"\S*/(ggml/src/)")


def _status(code: int) -> str:
    """An exit status as the issue says it: a signal's name beside the status of a program it killed."""
    try:
        return f"{code} ({signal.Signals(-code).name})" if code < 0 else str(code)
    except ValueError:
        return str(code)


def public_includes(build: Build) -> list[str]:
    """The build's include directories of ggml's public headers (not ggml-cpu's internal ones)."""
    return [f for f in build.cflags if f.startswith("-I") and f.rstrip("/").endswith("/include")]


def build_program(src: Path, build: Build, out: Path, emulator: Emulator | None = None) -> Path:
    """Compile ``src`` with the build's compiler against its static libraries (C, then a C++ link:
    ggml-cpu has C++ objects); for Spike, linked with its runtime."""
    cc = compiler(build.compiler)
    march = [f for f in build.cflags if f.startswith(("-march", "-mabi"))]
    obj = out.with_suffix(".o")
    run([cc.cc, "-O1", *march, *public_includes(build), "-c", str(src), "-o", str(obj)], timeout=300,
        what=f"compiling {src.name} for the {build.isa.name} build")
    extra = emulator.link_args(build) if emulator is not None else []
    run([cc.cxx, str(obj), *map(str, build.libs), "-static", "-lm", "-lpthread", *extra, "-o", str(out)],
        timeout=300, what=f"linking {out.name}")
    return out


def run_program(exe: Path, at: Point, emulator: Emulator | None = None, *, timeout: float = 300,
                trap: bool = False) -> tuple[bool | None, str]:
    """Run the program at ``at`` under QEMU (default) or ``emulator``: (wrong?, its output); None: no verdict.
    ``trap``: the finding is a trap, not a number: the verdict is whether the program stopped abnormally
    (a signal under QEMU, a trap under Spike) instead of exiting with 0 or 1."""
    emu = emulator or qemu.qemu()
    props = qemu.cpu_props(at.isa, at.stress)
    lacking = emu.lacking(props)
    if lacking:
        return None, emu.lacking_reason(lacking, f"VLEN {at.vlen}, {at.isa.name}")
    r = emu.run_program(exe, at.vlen, props, timeout=timeout, what=f"{exe.name} under {emu.label}",
                        env=at.isa.env or None)  # (the SpacemiT build's core type and memory pool)
    if r.returncode is None:
        return None, f"did not finish in {timeout:g} s"
    text = r.output.strip()
    if trap:
        lines = [_SOURCE.sub(r"\1", ln) for ln in text.splitlines()
                 if ln.strip() and not ln.startswith("***") and not _NOISE.match(ln)]
        said = [ln for ln in lines if "GGML_ASSERT" in ln or "GGML_ABORT" in ln][-1:] or lines[-2:]  # (not a backtrace)
        if r.returncode in (0, 1):
            return False, f"ran to the end (exit {r.returncode})"
        return True, f"exit {_status(r.returncode)}" + (f": {' / '.join(said)}" if said else "")
    if r.returncode not in (0, 1):
        return None, f"exit {r.returncode}: {text.splitlines()[-1] if text else 'no output'}"
    return r.returncode == 1, r.stdout.strip() or text  # (its verdict; not what a backend says on stderr at start-up)


def verify(src: Path, trees: dict[str, GgmlSource], targets: Sequence[Point], work: Path, *,
           emulator: Emulator | None = None, trap: bool = False,
           make: Callable[[str, GgmlSource, Point], Path] | None = None, by: str = "rvvdiff") -> list[Verdict]:
    """The program built against each tree x (ISA build, compiler) of ``targets`` and run at each target (one run
    each, under QEMU or ``emulator``, the targets' emulator; ``trap``: judged by whether it traps,
    :func:`run_program`).  ``make``: how the program is built for (tree label, tree, the first target of an ISA
    build and compiler) instead of rvvdiff's build, its verdicts marked ``by`` (harness/upstream/stock_table.py:
    the printed commands)."""
    out = []
    tag = f"-{emulator.name}" if emulator is not None else ""

    def rvvdiff_build(label: str, tree: GgmlSource, at: Point) -> Path:
        return build_program(src, ensure_built(tree, at.isa, at.compiler),
                             work / f"repro-{label}-{at.isa.name}-{at.compiler}{tag}", emulator)

    builds: dict[tuple[str, str], list[Point]] = {}
    for t in targets:
        builds.setdefault((t.isa.name, t.compiler), []).append(t)
    for label, tree in trees.items():
        for same in builds.values():
            if not can_make(same[0].compiler, same[0].isa.name):  # (GCC 14 and the spacemit build: no IME assembler)
                why = CANNOT_MAKE[(same[0].compiler, same[0].isa.name)]
                out += [Verdict.of(label, t, None, f"not built: {why}", by) for t in same]
                continue
            try:
                exe = (make or rvvdiff_build)(label, tree, same[0])
            except RvvdiffError as e:  # one line per build that cannot make the program
                msg = str(e).strip().splitlines()
                out += [Verdict.of(label, t, None, f"not built: {msg[0] if msg else type(e).__name__}", by)
                        for t in same]
                continue
            for t in same:
                failing, text = run_program(exe, t, emulator, trap=trap)
                out.append(Verdict.of(label, t, failing, text, by))
    return out


def verify_stock(tree: GgmlSource, label: str, at: Point, src: Path, work: Path) -> Verdict:
    """The program built with the stock toolchain's commands (Debian's clang-22, or GCC 14 when ``at``'s compiler
    is ``gcc14``; ggml's CMake) and run once at ``at`` under QEMU."""
    cc, isa = at.compiler, at.isa

    def verdict(failing: bool | None, text: str) -> Verdict:
        return Verdict.of(label, replace(at, emulator="qemu"), failing, text)

    if not can_make(cc, isa.name):
        return verdict(None, f"not built: {CANNOT_MAKE[(cc, isa.name)]}")
    why = stock.missing(cc)
    if why:
        return verdict(None, why)
    key = hashlib.sha256(str(tree.root).encode()).hexdigest()[:12]
    suffix = "" if cc == "clang" else f"-{cc}"  # (the clang directories keep their names)
    try:
        exe = stock.build_program(tree.root, isa, cc, cache_dir() / "stock" / f"{key}-{isa.name}{suffix}", src,
                                  work / f"repro-{label}-{isa.name}-stock-{cc}")
    except RvvdiffError as e:
        return verdict(None, f"not built with {stock.LABELS[cc]}: {str(e).splitlines()[0]}")
    timeout = 300
    r = stock.run_exe(exe, at, half_avl=at.stress, timeout=timeout)
    if r.returncode is None:
        return verdict(None, f"did not finish in {timeout} s")
    if r.returncode not in (0, 1):
        return verdict(None, f"exit {r.returncode}: {r.output.strip()[-200:]}")
    return verdict(r.returncode == 1, r.stdout.strip())
