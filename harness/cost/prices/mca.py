"""A second estimate of a call's cycles: LLVM's scheduling model of the SpacemiT X60 run by ``llvm-mca``
over the basic blocks the call executed, each weighted by how often it ran.

The first estimate (harness/cost/prices/cores.py) prices each instruction alone at its measured reciprocal
throughput and adds the prices up.  This one takes the blocks themselves: Spike's PC histogram of one
call (harness/cost/measure/spike_count.py) is cut into basic blocks -- runs of consecutive executed addresses of
one function with one execution count, ended after every branch or jump -- each block's instructions
are disassembled from the server binary (``llvm-objdump``) and given to ``llvm-mca -mcpu=spacemit-x60``
as a region of its own, which simulates the block repeated (:data:`ITERATIONS` times) on LLVM's model of
the core: issue width, the pipelines each instruction occupies and for how long at the LMUL in force,
and the latency of every dependency, across iterations too (a reduction accumulating into one register
waits for itself).  The estimate is the sum over blocks of cycles per iteration x executions.

What it assumes: a block runs as in a loop of itself (a block that runs once is priced at its steady
state, as if its start-up overlapped), branches are predicted, every load hits (the model's load
latency), the vtype at a block's start is the one the code says (harness/cost/measure/spike_count.py's decoding,
passed to llvm-mca as its ``LLVM-MCA-RISCV-SEW`` / ``-LMUL`` instruments).  The model is LLVM's
(llvm/lib/Target/RISCV/RISCVSchedSpacemitX60.td, from SpacemiT's published and measured latencies), not
rvv-bench's measurements, so the two estimates disagree where the model and the measurements do, and where
overlap or dependency chains matter: docs/calibration.md sets both against boards.

An instruction llvm-mca cannot parse or has no scheduling information for is left out of its block and
counted in ``skipped`` (never guessed).  Without llvm-mca (Debian's llvm-22: ``ci/setup.sh --llvm-mca``)
there is no second estimate, said once by :func:`unavailable`.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.core.proc import execute

#: The core LLVM models, and the VLEN its model and the boards measured have.
CPU = "spacemit-x60"
VLEN = 256
#: Repetitions of each block llvm-mca simulates (its steady state per iteration is read).
ITERATIONS = 100
#: Extensions the disassembler and llvm-mca's parser accept (the ISA builds' and the scalar ones clang uses).
MATTR = "+v,+zfh,+zvfh,+zvfbfmin,+zvfbfwma,+zba,+zbb,+zbs,+zicond"
INSTALL = "ci/setup.sh --llvm-mca (Debian's llvm-22: llvm-mca with the SpacemiT X60 model)"
_NAMES = ("llvm-mca-22", "llvm-mca-21", "llvm-mca")

_BRANCHES = frozenset("beq bne blt bge bltu bgeu beqz bnez blez bgez bltz bgtz bgt ble bgtu bleu j jal jr jalr "
                      "call tail ret c.j c.jal c.jr c.jalr c.beqz c.bnez mret ecall ebreak".split())
_LMUL = {"m1": "M1", "m2": "M2", "m4": "M4", "m8": "M8", "mf2": "MF2", "mf4": "MF4", "mf8": "MF8"}
_VT = re.compile(r"e(8|16|32|64)(m\w+)$")


@dataclass(frozen=True)
class Tools:
    mca: str
    objdump: str
    version: str


@functools.lru_cache(maxsize=1)
def tools() -> Tools | None:
    """llvm-mca and llvm-objdump of an LLVM whose llvm-mca knows the X60, or None."""
    for name in _NAMES:
        mca = shutil.which(name)
        if not mca:
            continue
        objdump = shutil.which(name.replace("llvm-mca", "llvm-objdump"))
        try:
            cp = execute([mca, "-mtriple=riscv64", "-mcpu=help"], timeout=30)
            ver = execute([mca, "--version"], timeout=30)
        except OSError:
            continue
        if cp.timed_out or ver.timed_out:
            continue
        if CPU in cp.stdout + cp.stderr and objdump:
            m = re.search(r"LLVM version (\S+)", ver.stdout)
            return Tools(mca, objdump, m.group(1) if m else "?")
    return None


def unavailable() -> str:
    """Why there is no second estimate ("" when there is one)."""
    return "" if tools() else f"no llvm-mca that models the {CPU} (llvm-mca-22, -21 or llvm-mca on PATH): {INSTALL}"


def describe() -> str:
    t = tools()
    return f"llvm-mca {t.version} -mcpu={CPU} ({t.mca})" if t else unavailable()


# ------------------------------------------------------------------ disassembly


@functools.lru_cache(maxsize=4)
def _disassembly(exe: Path, mtime_ns: int) -> dict[int, tuple[str, str]]:
    t = tools()
    assert t is not None
    cp = execute([t.objdump, "-d", "--no-show-raw-insn", f"--mattr={MATTR}", exe], timeout=300).finished("llvm-objdump")
    out: dict[int, tuple[str, str]] = {}
    for line in cp.stdout.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if m and not line.endswith(">:"):
            out[int(m.group(1), 16)] = (m.group(2), m.group(3).strip())
    return out


def disassembly(exe: Path) -> dict[int, tuple[str, str]]:
    """{pc: (mnemonic, operands)} of the binary's code (llvm-objdump, the ISA builds' extensions)."""
    return _disassembly(exe, exe.stat().st_mtime_ns)


def asm_line(mnemonic: str, operands: str) -> str:
    """The instruction as llvm-mca's assembler reads it: symbol notes dropped, a branch's target made ``.``
    (control flow is not what the model prices)."""
    ops = re.sub(r"\s*<[^>]*>\s*$", "", operands)
    if mnemonic in _BRANCHES:
        parts = [p.strip() for p in ops.split(",")] if ops else []
        if parts and re.fullmatch(r"-?0x[0-9a-f]+|-?\d+", parts[-1]):
            parts[-1] = "."
        ops = ", ".join(parts)
    return f"{mnemonic}\t{ops}" if ops else mnemonic


# ------------------------------------------------------------------ blocks


@dataclass(frozen=True)
class Block:
    pcs: tuple[int, ...]
    count: int


def blocks(hist: Mapping[int, int], insns: Mapping[int, tuple[str, str]],
           function_of: Callable[[int], object]) -> list[Block]:
    """The basic blocks of an executed-PC histogram (module docstring).  A PC the disassembly does not
    hold ends its block and is left out (counted by :func:`estimate`)."""
    out: list[Block] = []
    cur: list[int] = []
    count = 0
    prev_end = -1
    fn: object = None
    for pc in sorted(hist):
        n = hist[pc]
        if n <= 0:
            continue
        insn = insns.get(pc)
        f = function_of(pc)
        if cur and (pc != prev_end or n != count or f != fn):
            out.append(Block(tuple(cur), count))
            cur = []
        if insn is None:
            prev_end = -1
            continue
        cur.append(pc)
        count, fn = n, f
        prev_end = pc + _size(pc, insns)
        if insn[0] in _BRANCHES:
            out.append(Block(tuple(cur), count))
            cur, prev_end = [], -1
    if cur:
        out.append(Block(tuple(cur), count))
    return out


def _size(pc: int, insns: Mapping[int, tuple[str, str]]) -> int:
    """The instruction's length: 2 when the next address holds an instruction, else 4."""
    return 2 if pc + 2 in insns else 4


# ------------------------------------------------------------------ the estimate


@dataclass(frozen=True)
class McaEstimate:
    cycles: float
    #: Cycles by :attr:`harness.cost.measure.spike_count.Cost.mix` key: each block's cycles shared among its
    #: instructions by their reciprocal throughputs on the model.
    by_key: dict[str, float]
    #: Executions of instructions llvm-mca left out (unparsed, no scheduling information, not disassembled).
    skipped: int
    blocks: int

    def as_dict(self) -> dict:
        return {"model": CPU, "llvm": tools().version if tools() else "?", "cycles": round(self.cycles, 1),
                "by_key": {k: round(v, 1) for k, v in sorted(self.by_key.items(), key=lambda kv: -kv[1])},
                "skipped": self.skipped, "blocks": self.blocks}


def region_text(bl: list[Block], insns: Mapping[int, tuple[str, str]], vtype_of: Callable[[int], str]) -> str:
    """llvm-mca's input: one region per block, the vtype in force at its start as instruments."""
    lines: list[str] = []
    for i, b in enumerate(bl):
        lines.append(f"# LLVM-MCA-BEGIN b{i}")
        vt = next((v for pc in b.pcs if (v := vtype_of(pc))), "")
        m = _VT.match(vt)
        if m and m.group(2) in _LMUL:
            lines += [f"# LLVM-MCA-RISCV-SEW E{m.group(1)}", f"# LLVM-MCA-RISCV-LMUL {_LMUL[m.group(2)]}"]
        lines += [asm_line(*insns[pc]) for pc in b.pcs]
        lines.append("# LLVM-MCA-END")
    return "\n".join(lines) + "\n"


def run_mca(text: str, *, timeout: float = 600) -> list[dict]:
    """llvm-mca's JSON regions for ``text`` (unsupported lines skipped)."""
    t = tools()
    assert t is not None
    cp = execute([t.mca, "-mtriple=riscv64", f"-mcpu={CPU}", f"-mattr={MATTR}", f"-iterations={ITERATIONS}",
                  "-json", "--skip-unsupported-instructions=any"], input=text, timeout=timeout).finished("llvm-mca")
    if cp.returncode != 0:
        raise RuntimeError(f"llvm-mca exited with {cp.returncode}: {cp.stderr.strip()[-800:]}")
    return json.loads(cp.stdout)["CodeRegions"]


def estimate(exe: Path, hist: Mapping[int, int], function_of: Callable[[int], object],
             key_of: Callable[[int], str], vtype_of: Callable[[int], str]) -> McaEstimate:
    """The X60 model's cycles of a call that executed ``hist`` (pc -> executions) in ``exe``; ``key_of``
    gives a PC's mix key, ``vtype_of`` the vtype name in force at a vector instruction ("" for none)."""
    insns = disassembly(exe)
    bl = blocks(hist, insns, function_of)
    in_blocks = {pc for b in bl for pc in b.pcs}
    skipped = sum(n for pc, n in hist.items() if n > 0 and pc not in in_blocks)
    regions = run_mca(region_text(bl, insns, vtype_of)) if bl else []
    total = 0.0
    by_key: dict[str, float] = {}
    for b, r in zip(bl, regions):
        sv = r["SummaryView"]
        per_iter = sv["TotalCycles"] / max(1, sv["Iterations"])
        got = r.get("InstructionInfoView", {}).get("InstructionList", [])
        texts = [s.split("\t")[0].split()[0] for s in r.get("Instructions", [])]
        pcs = _align(b.pcs, insns, texts)
        skipped += (len(b.pcs) - len(pcs)) * b.count
        weights = [max(float(i.get("RThroughput", 0.0)), 0.0) for i in got][:len(pcs)]
        whole = sum(weights) or float(len(pcs) or 1)
        total += per_iter * b.count
        for pc, w in zip(pcs, weights if sum(weights) else [1.0] * len(pcs)):
            k = key_of(pc)
            by_key[k] = by_key.get(k, 0.0) + per_iter * b.count * w / whole
    return McaEstimate(total, by_key, skipped, len(bl))


def _align(pcs: tuple[int, ...], insns: Mapping[int, tuple[str, str]], kept: list[str]) -> list[int]:
    """The PCs of a block whose instructions llvm-mca kept (``kept``: their mnemonics, in order)."""
    out: list[int] = []
    j = 0
    for pc in pcs:
        if j < len(kept) and insns[pc][0] == kept[j]:
            out.append(pc)
            j += 1
    if j < len(kept):  # printed under another spelling (an alias): keep the order, trust the count
        return list(pcs[:len(kept)])
    return out
