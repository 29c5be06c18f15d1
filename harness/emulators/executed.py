"""Which guest instructions the kernel servers executed: QEMU's translation log or Spike's PC histogram, per target.

With ``--rvv-coverage`` the plugin gives its session's pool of servers a log directory ``DIR``
(harness/emulators/pool.py's ``log_dir``); every kernel server of the pool then starts with its emulator's
:meth:`harness.emulators.base.Emulator.exec_log_command`.  Under QEMU that is ``qemu-riscv64 -d in_asm -D <log>``:
QEMU translates a block of guest code the first time it is about to run it and logs each of its
instructions (``0x<pc>:  <encoding>  <mnemonic>``); a block ends at a branch, so every logged
instruction ran at least once.  The log grows with the code translated, not with the calls, so the
pooled server is not slowed per call (the overhead is measured in docs/coverage.md).  What it does
not give is how often an instruction ran: a line is executed or not.  Under Spike it is ``spike -g``: Spike
prints the address of every instruction it executed when it exits, on its stderr, and the pool hands that to
:meth:`~harness.emulators.base.Emulator.exec_log_end`, which writes the PCs (:func:`save`).

One log per server start, ``DIR/<target>-<compiler>/<pid>-<n>-<start>.log`` (``n`` counts the process's logs;
the one-shot servers of the path checks, harness/emulators/trace.py, add theirs), beside a ``.json`` naming the
program (the server binary whose DWARF maps the PCs to lines: harness/binary/dwarf.py) and the
compiler of its build: two compilers' servers of one target are two targets, never merged.  A server
that stops compacts its log into its PCs (:func:`compact`); xdist workers write their own files, the
controlling process reads them all (:func:`collect`).  A start that left neither a log nor PCs (a Spike server
killed after a hang prints no histogram) is counted as lost (:attr:`Executed.lost`), and the report names it.
"""

from __future__ import annotations

import array
import dataclasses
import itertools
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.matrix import Point


def named(targets: list[tuple[int, str, bool, str]]) -> list[str]:
    """Each (VLEN, ISA build, stress, compiler) named as test ids name its target (:meth:`Point.name`): with the
    compiler only when the targets are of several compilers."""
    several = len({c for *_, c in targets}) > 1
    return [Point(v, i, s, c).name(several and bool(c)) for v, i, s, c in targets]


#: Logs this process has named (:func:`log_for`).
_LOGS = itertools.count(1)


def log_for(where: Path | None, program: Path, at: Point, start: int | str) -> Path | None:
    """A fresh log path in ``where`` for one server start of ``program`` at ``at`` (None when coverage is off: no
    ``where``); its ``.json`` is written now."""
    if where is None:
        return None
    d = where / at.name(compiler=True)
    d.mkdir(parents=True, exist_ok=True)
    # The process's count of logs keeps two servers of one target apart (the IME1 tests' Spike with and without its
    # library, a server rebuilt during the run): each counts its starts from 1.
    log = d / f"{os.getpid()}-{next(_LOGS)}-{start}.log"
    log.with_suffix(".json").write_text(json.dumps({"program": str(program), "vlen": at.vlen, "isa": at.isa.name,
                                                    "stress": at.stress, "compiler": at.compiler}))
    return log


def read_pcs(log: Path) -> set[int]:
    """The addresses of the instructions a QEMU ``-d in_asm`` log shows translated (so executed)."""
    pcs: set[int] = set()
    with open(log, "rb") as f:
        for line in f:
            if line.startswith(b"0x"):
                colon = line.find(b":")
                if colon > 2:
                    try:
                        pcs.add(int(line[2:colon], 16))
                    except ValueError:
                        pass
    return pcs


def save(log: Path, pcs: Iterable[int]) -> None:
    """The PCs of the server start that ``log`` names, as ``.pcs`` beside it (sorted 64-bit addresses)."""
    a = array.array("Q", sorted(set(pcs)))
    tmp = log.with_suffix(".pcs.tmp")
    with open(tmp, "wb") as f:
        a.tofile(f)
    tmp.replace(log.with_suffix(".pcs"))


def compact(log: Path) -> None:
    """Replace a finished log by its PCs (:func:`save`), about a tenth of its size, so a long run keeps one live
    log per server on disk, not every log it wrote.  No log (Spike's PCs are saved without one): nothing to do."""
    if not log.exists():
        return
    try:
        save(log, read_pcs(log))
        log.unlink()
    except OSError:
        pass  # the log stays; collect() reads it


def _pcs_of(meta: Path) -> set[int] | None:
    """The PCs of one server start: its compacted ``.pcs`` or its ``.log`` (None when neither is there)."""
    packed = meta.with_suffix(".pcs")
    if packed.exists():
        a = array.array("Q")
        a.frombytes(packed.read_bytes())
        return set(a)
    log = meta.with_suffix(".log")
    return read_pcs(log) if log.exists() else None


@dataclass
class Executed:
    """What one target's servers executed: the program, its instruction addresses, the logs read."""

    target: str
    vlen: int
    isa: str
    stress: bool
    program: Path
    #: The compiler of the servers' build.
    compiler: str = ""
    pcs: set[int] = field(default_factory=set)
    logs: int = 0
    #: Other programs the same target ran (a server rebuilt during the run): not mapped, named.
    others: set[Path] = field(default_factory=set)
    #: Server starts that left no record of what they executed (a Spike server killed after a hang): not counted.
    lost: int = 0


def collect(d: Path) -> dict[str, Executed]:
    """Every target's executed PCs under ``d`` (the logs of this process and of its xdist workers), by target
    as :func:`named` names it (each compiler's servers of one target apart)."""
    out: dict[str, Executed] = {}
    for meta in sorted(d.glob("*/*.json")):
        pcs = _pcs_of(meta)
        j = json.loads(meta.read_text())
        target = meta.parent.name
        e = out.get(target)
        if e is None:
            e = out[target] = Executed(target, j["vlen"], j["isa"], j["stress"], Path(j["program"]), j.get("compiler", ""))
        if pcs is None:
            e.lost += 1
            continue
        if Path(j["program"]) != e.program:
            e.others.add(Path(j["program"]))
            continue
        e.pcs |= pcs
        e.logs += 1
    names = named([(e.vlen, e.isa, e.stress, e.compiler) for e in out.values()])
    return {n: dataclasses.replace(e, target=n) for n, e in zip(names, out.values())}
