"""Which functions a kernel call actually executed, by asking QEMU.

QEMU translates guest code block by block the first time it is about to run
it, and ``-d in_asm`` logs each translation headed ``IN: <symbol>``; the
kernel server is a static binary with its symbol table, so static functions
(e.g. ggml's ``*_vl256`` variants) are named too.  A trace names functions, not their copies: GCC's
clones (``ggml_vec_dot_q4_K_q8_K_vl128.isra.0``) are read as the function they copy
(:func:`harness.binary.elf.base_symbol`), so checks of what ran hold for both compilers.  With ``-d strace`` the
server's ``write`` of each response appears in the same log, which splits it
into start-up, hello and the call.  A one-shot server (not the pooled one,
whose code is already translated) runs hello, the call and quit, and the
functions first translated while serving the call are what the call ran.

This is an honest record of execution (not a guess from conditions), at the
price of one QEMU start per probe: use it for a few probes per kernel and
VLEN, not for every example.
"""

from __future__ import annotations

import itertools
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.binary import elf
from harness.core.proc import execute
from harness.emulators import executed
from harness.emulators import protocol as P
from harness.emulators.pool import KernelServer

_TRACES = itertools.count(1)
_IN = re.compile(r"^IN: (\S+)")
_WRITE = re.compile(r"^\d+ write\((\d+),")


@dataclass(frozen=True)
class Trace:
    #: Functions first translated while the call was served (the kernel and what it called), by the
    #: name of the function a GCC clone copies.
    call: frozenset[str]
    #: Functions translated during start-up and hello (already known before the call).
    before: frozenset[str]

    def ran(self, name: str) -> bool:
        """True if ``name`` executed during the call (or, when shared with start-up, at all)."""
        return name in self.call or name in self.before

    def matching(self, pattern: str) -> list[str]:
        rx = re.compile(pattern)
        return sorted(n for n in self.call if rx.search(n))


def read_log(lines: Iterable[str]) -> list[set[str]]:
    """The functions first translated in each stretch of a QEMU ``-d in_asm,strace`` log, split at
    each response the server wrote (a ``write`` not to stderr), by the function a GCC clone copies."""
    sections: list[set[str]] = [set()]
    for line in lines:
        m = _IN.match(line)
        if m:
            sections[-1].add(elf.base_symbol(m.group(1)))
        else:
            w = _WRITE.match(line)
            if w and w.group(1) != "2":  # a response frame (stderr writes do not count)
                sections.append(set())
    return sections


def trace_call(server: KernelServer, kernel: str, ip=(), fp=(), bufs=(), *, timeout: float = 300.0) -> Trace:
    """Run one call in a fresh QEMU with translation logging and return what executed."""
    request = P.encode_hello() + P.encode_call(kernel, ip, fp, bufs) + P.encode_quit()
    with tempfile.TemporaryDirectory(prefix="rvvdiff-trace-") as d:
        log = Path(d) / "qemu.log"
        if not server.emulator.traces:
            raise RuntimeError("tracing the functions a call executes uses QEMU's -d logging; "
                               f"run the trace without --emulator {server.emulator.name}")
        argv = server.emulator.trace_command(server.program, server.vlen, server.props, log)
        cp = execute(argv, input=request, text=False, timeout=timeout, core_dumps=False,
                     env=server.build.isa.env or None).finished(f"traced run of {kernel}")
        if cp.returncode != 0:
            raise RuntimeError(f"traced run of {kernel} failed (exit {cp.returncode}) [{server.describe()}]: "
                               f"{cp.stderr.decode(errors='replace')[-500:]}")
        keep = executed.log_for(server.log_dir, server.program, server.point, f"trace{next(_TRACES)}")
        if keep is not None:  # --rvv-coverage: what the traced call executed counts too
            shutil.copyfile(log, keep)
            executed.compact(keep)
        with open(log, errors="replace") as f:
            sections = read_log(f)
    # sections: [start-up + hello, call, after the call's response]
    if len(sections) < 3:
        raise RuntimeError(f"traced run of {kernel}: expected two responses in the QEMU log, found {len(sections) - 1}")
    return Trace(frozenset(sections[1]), frozenset(sections[0]))
