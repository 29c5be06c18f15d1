"""The cost of one kernel call, counted by Spike: deterministic, per VLEN, independent of the host.

QEMU wall time models no RVV hardware and varies from run to run; Spike retires every instruction
in one step and can say exactly which ones.  One call is measured by two runs of the kernel server
under Spike that differ in one thing only: the call is repeated once (run A) or twice (run B); where
the first call leaves state that changes the path of the next (glibc's heap after large frees), twice
(A) and three times (B).

* **instret**: the instructions the server's counter (``rdinstret``, readable because the Spike
  runtime runs in machine mode) counted around the last repetition in run B -- the warm call,
  after whatever the first call initialised (ggml's tables, malloc's arena).  ``cycles`` is
  ``rdcycle`` at the same points; Spike retires one instruction a cycle, so the two agree up to
  the counter reads themselves, and say nothing of a real core's pipeline.
* **vector instructions, vector work**: Spike's PC histogram (``-g``) of run B minus that of
  run A is exactly one more repetition of the call (the request streams are byte-identical
  otherwise).  Each executed PC is decoded from the server binary: vector instructions are the
  OP-V major opcode (arithmetic and ``vset*``) and the vector loads and stores.  The *vector work*
  of an instruction is the number of vector registers it processes: the LMUL of the ``vtype``
  in force (at least 1 for fractional LMUL), and for loads and stores the EMUL of their data
  (LMUL x EEW / SEW, times the fields of a segment access; a whole-register access moves its
  ``nf`` registers).  ``vset*`` instructions count as vector instructions with no work.

Where the vtype comes from: the ``vsetvli`` / ``vsetivli`` that precedes the instruction in the
function's code (address order).  Compilers place a ``vset*`` wherever the vtype changes on some
path, so this is the vtype in force everywhere but after a join of paths with different vtypes;
an instruction governed by a register-form ``vsetvl`` (vtype not in the code) is counted as LMUL 1
and reported in ``vtype_unknown``.

What the figures ignore: caches, memory latency and bandwidth, pipelines, issue width, the cost
of one instruction against another (a ``vrgather`` and a ``vadd`` are one instruction each), and
VL (an instruction at vl = 1 is as much work as one at VLMAX).  They are a machine-independent
count of what the code asks a core to do, exact and repeatable; docs/cost.md says how to read them.
"""

from __future__ import annotations

import bisect
import functools
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from harness.binary import elf, rvvnames
from harness.cost.prices import mca, scalar_classes
from harness.emulators.spike import _functions

#: The version of what :func:`tally` makes of a histogram: a kept measurement of another version is measured again
#: (2: the scalar instructions split by class).
TALLY_VERSION = 2


class CostError(AssertionError):
    """A call could not be measured (it trapped, hung or was rejected); the message says which and why."""

    def summary(self) -> str:
        """One line: the first of the message, with what the server said last (the trap and its function)."""
        lines = str(self).splitlines()
        said = [ln.split("server stderr:", 1)[1].strip() for ln in lines if "server stderr:" in ln]
        return (lines[0] if lines else "") + (f" -- {said[-1][:400]}" if said else "")


@dataclass(frozen=True)
class Cost:
    """What one warm kernel call cost on Spike (module docstring)."""

    instret: int
    cycles: int
    #: Instructions of one more repetition by the PC histogram (instret plus the repeat loop's few).
    executed: int
    vector: int
    vector_work: int
    #: Vector instructions by class: config (vset*), load, store, arith.
    vector_kinds: dict[str, int] = field(default_factory=dict)
    #: Instructions of the call per function (from the PC histogram difference), largest first; a GCC
    #: clone and its cold part count under the function they copy (elf.base_symbol).
    functions: dict[str, int] = field(default_factory=dict)
    #: Vector instructions whose vtype the code does not say (register-form vsetvl).
    vtype_unknown: int = 0
    #: The instruction mix of the call: executions per vector instruction name and vtype
    #: ("vwmacc.vv e8m1", "vle8.v e8mf2 v0.t", "vsetvli"), and of scalar instructions by class ("scalar" for
    #: integer arithmetic, "scalar load", "scalar branch", ...: harness/cost/prices/scalar_classes.py): what a core's
    #: per-instruction prices apply to (harness/cost/prices/cores.py).  Empty in a measurement kept by an rvvdiff that
    #: did not record it; a mix kept before the scalar classes has "scalar", "scalar mul", "scalar div" only.
    mix: dict[str, int] = field(default_factory=dict)
    #: The second estimate at the VLEN LLVM's X60 model is for: llvm-mca over the executed basic blocks
    #: (harness/cost/prices/mca.py; cycles, cycles by mix key, skipped). Empty elsewhere or without llvm-mca.
    mca: dict = field(default_factory=dict)
    #: The call's memory traffic through each core's cache model, by core key (harness/cost/measure/spike_traffic.py;
    #: measured when ``RVVDIFF_COST_TRAFFIC=1``, never kept in the cache of measurements).
    traffic: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"instret": self.instret, "cycles": self.cycles, "executed": self.executed, "vector": self.vector,
                "vector_work": self.vector_work, "vector_kinds": dict(self.vector_kinds),
                "functions": dict(self.functions), "vtype_unknown": self.vtype_unknown, "mix": dict(self.mix),
                **({"mca": dict(self.mca)} if self.mca else {}),
                **({"traffic": dict(self.traffic)} if self.traffic else {})}


# ------------------------------------------------------------------ decoding


_EEW = {0: 8, 5: 16, 6: 32, 7: 64}  # width field of a vector load / store


@dataclass(frozen=True)
class VInsn:
    """A vector instruction at one address: its class and the registers it processes."""

    kind: str  # "config", "load", "store", "arith"
    work: int
    known: bool  # False: governed by a vtype the code does not say
    #: Its key in :attr:`Cost.mix`: name, the vtype in force (``e8m1``; ``e?`` unknown), ``v0.t`` if masked.
    mix: str = ""


def _lmul_regs(vlmul: int) -> float:
    """Registers per group for a vlmul field (fractional LMULs are fractions here)."""
    return 2.0 ** vlmul if vlmul < 4 else 2.0 ** (vlmul - 8)


def _sew(vtype: int) -> int:
    return 8 << ((vtype >> 3) & 7)


_LMUL_NAMES = {0: "m1", 1: "m2", 2: "m4", 3: "m8", 5: "mf8", 6: "mf4", 7: "mf2"}


def vtype_name(vtype: int | None) -> str:
    """``e8m1``-style name of a vtype (``e?`` when unknown or reserved)."""
    if vtype is None or (vtype & 7) not in _LMUL_NAMES or (vtype >> 3) & 7 > 3:
        return "e?"
    return f"e{_sew(vtype)}{_LMUL_NAMES[vtype & 7]}"


def mix_key(w: int, vtype: int | None) -> str:
    """The :attr:`Cost.mix` key of the vector instruction ``w`` under ``vtype``."""
    got = rvvnames.name(w)
    if got is None:
        return ""
    n, masked = got
    if n.startswith("vset"):
        return n
    return f"{n} {vtype_name(vtype)}" + (" v0.t" if masked else "")


def scalar_key(got: tuple[int, int] | None) -> str:
    """The :attr:`Cost.mix` key of a scalar instruction (``(word, length)`` as :meth:`Image.word` gives it): its
    class (harness/cost/prices/scalar_classes.py: arithmetic, load, store, branch, jump, multiply, divide, floating
    point, other)."""
    if got is None:
        return scalar_classes.ALU
    return scalar_classes.of_word(got[0]) if got[1] == 4 else scalar_classes.of_half(got[0])


def _config_vtype(w: int) -> int | None:
    """The vtype a vset* instruction sets when it is in the code (vsetvli, vsetivli), else None (vsetvl)."""
    if (w >> 31) == 0:
        return (w >> 20) & 0x7FF  # vsetvli
    if (w >> 30) == 3:
        return (w >> 20) & 0x3FF  # vsetivli
    return None  # vsetvl: the vtype is in a register


def classify(w: int, vtype: int | None) -> VInsn | None:
    """The vector instruction of the 32-bit word ``w`` under ``vtype`` (None: unknown), or None for a
    scalar one."""
    op = w & 0x7F
    funct3 = (w >> 12) & 7
    key = mix_key(w, vtype)
    if op == 0x57:
        if funct3 == 7:
            return VInsn("config", 0, True, key)
        regs = _lmul_regs(vtype & 7) if vtype is not None else 1.0
        return VInsn("arith", max(1, int(regs)), vtype is not None, key)
    if op in (0x07, 0x27) and funct3 in _EEW:
        nf = ((w >> 29) & 7) + 1
        mop = (w >> 26) & 3
        lumop = (w >> 20) & 0x1F
        kind = "load" if op == 0x07 else "store"
        if mop == 0 and lumop == 0b01000:  # whole-register load / store: nf registers
            return VInsn(kind, nf, True, key)
        if mop == 0 and lumop == 0b01011:  # mask load / store: one register
            return VInsn(kind, 1, True, key)
        if vtype is None:
            return VInsn(kind, nf, False, key)
        lmul = _lmul_regs(vtype & 7)
        emul = lmul if mop in (1, 3) else lmul * _EEW[funct3] / _sew(vtype)  # indexed: data at SEW
        return VInsn(kind, nf * max(1, int(emul)), True, key)
    return None


@dataclass(frozen=True)
class Image:
    """The loadable segments and function symbols of a server binary."""

    segments: tuple[tuple[int, bytes], ...]  # (vaddr, bytes)
    starts: tuple[int, ...]
    names: tuple[str, ...]

    def word(self, pc: int) -> tuple[int, int] | None:
        """(the instruction at ``pc``, its length in bytes), or None outside the image."""
        for base, data in self.segments:
            off = pc - base
            if 0 <= off < len(data) - 1:
                half = data[off] | data[off + 1] << 8
                if half & 3 != 3:
                    return half, 2
                if off + 4 <= len(data):
                    return struct.unpack_from("<I", data, off)[0], 4
        return None

    maps: dict[int, dict[int, VInsn]] = field(default_factory=dict, compare=False)

    def function_of(self, pc: int) -> tuple[int, str] | None:
        i = bisect.bisect_right(self.starts, pc) - 1
        return (self.starts[i], self.names[i]) if i >= 0 else None

    def vector_map(self, start: int) -> dict[int, VInsn]:
        """The vector instructions of the function at ``start``, decoded in address order with the
        vtype of the nearest preceding vset* (module docstring)."""
        if start in self.maps:
            return self.maps[start]
        i = self.starts.index(start)
        end = self.starts[i + 1] if i + 1 < len(self.starts) else start + (1 << 20)
        out: dict[int, VInsn] = {}
        pc, vtype = start, None
        while pc < end:
            got = self.word(pc)
            if got is None:
                break
            w, size = got
            if size == 4:
                v = classify(w, vtype)
                if v is not None:
                    out[pc] = v
                    if v.kind == "config":
                        vtype = _config_vtype(w)
            pc += size
        self.maps[start] = out
        return out


@functools.lru_cache(maxsize=8)
def _image(exe: Path, mtime_ns: int) -> Image:
    data = exe.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise CostError(f"{exe}: not a 64-bit ELF file")
    segs = [(s.vaddr, data[s.offset:s.offset + s.filesz]) for s in elf.segments(data)
            if s.type == elf.PT_LOAD and s.flags & 1]  # executable
    starts, names = _functions(exe, mtime_ns)
    return Image(tuple(segs), tuple(starts), tuple(names))


def image(exe: Path) -> Image:
    return _image(exe, exe.stat().st_mtime_ns)


# ------------------------------------------------------------------ measuring


def is_csr_access(w: int) -> bool:
    """A Zicsr instruction (SYSTEM opcode, funct3 not 0 or 4)."""
    return w & 0x7F == 0x73 and ((w >> 12) & 7) not in (0, 4)


def retired(img: Image, diff: Counter[int]) -> Counter[int]:
    """The executed-PC counts of a call as retired instructions: Spike executes a CSR access twice (the first attempt
    stops to serialise, the second retires), and its histogram counts both, so a CSR instruction's count is halved,
    as ``rdinstret`` counts it."""
    return Counter({pc: (n // 2 if (got := img.word(pc)) and got[1] == 4 and is_csr_access(got[0]) else n)
                    for pc, n in diff.items()})


def tally(img: Image, diff: Counter[int], instret: int, cycles: int) -> Cost:
    """A :class:`Cost` from the executed-PC counts of one call (counted as :func:`retired` says)."""
    kinds: Counter[str] = Counter()
    per_fn: Counter[str] = Counter()
    mix: Counter[str] = Counter()
    work = unknown = 0
    diff = retired(img, diff)
    for pc, n in diff.items():
        fn = img.function_of(pc)
        per_fn[elf.base_symbol(fn[1]) if fn else "?"] += n
        v = img.vector_map(fn[0]).get(pc) if fn is not None else None
        if v is None:
            mix[scalar_key(img.word(pc))] += n
            continue
        mix[v.mix] += n
        kinds[v.kind] += n
        work += v.work * n
        unknown += 0 if v.known else n
    return Cost(instret, cycles, sum(diff.values()), sum(kinds.values()), work, dict(kinds.most_common()),
                dict(per_fn.most_common(12)), unknown, dict(sorted(mix.items())))


def second_estimate(exe: Path, img: Image, diff: Counter[int]) -> dict:
    """llvm-mca's X60 estimate of the call that executed ``diff`` (harness/cost/prices/mca.py), keyed as the mix."""
    def vinsn(pc: int) -> VInsn | None:
        fn = img.function_of(pc)
        return img.vector_map(fn[0]).get(pc) if fn is not None else None

    def key_of(pc: int) -> str:
        v = vinsn(pc)
        if v is not None:
            return v.mix
        return scalar_key(img.word(pc))

    def vtype_of(pc: int) -> str:
        v = vinsn(pc)
        return v.mix.split()[1] if v is not None and v.kind != "config" and len(v.mix.split()) > 1 else ""

    try:
        return mca.estimate(exe, retired(img, diff), img.function_of, key_of, vtype_of).as_dict()
    except (RuntimeError, OSError, ValueError, KeyError) as e:  # said in the report (CommandError: a RuntimeError)
        return {"model": mca.CPU, "error": f"{type(e).__name__}: {str(e)[:300]}"}
