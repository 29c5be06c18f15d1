"""The Spike kernel server with its start-up already done: a snapshot ELF per server binary and Spike target.

Every Spike run of the kernel server begins with ggml's start-up (``ggml_cpu_init`` fills its fp16 and
GELU tables: 12 million instructions, 0.8 s of Spike with ``-g`` at VLEN 128 and 3.1 s at 4096), and a
cost measurement is two runs (harness/cost/measure/spike_count.py).  So the start-up is run once per server
binary and Spike target: the runtime (``server/spike/rt.c``), fed :data:`MAGIC` as its first input,
writes the program's writable memory as it stands at the server's first read of stdin and exits; the
pages it changed become extra segments of an ELF that loads what the server loads (and keeps only the
HTIF symbols Spike's front-end needs), entered at ``rvvdiff_spike_resume``, which restores the
registers saved at that read and carries on with the run's own requests.

A run of the snapshot is the server's run without its start-up: the same memory and registers at
the first read, so the same instructions from there on.  tests/test_cost_planted.py checks that
a measurement gives the same counts, histogram and mix either way.  ``RVVDIFF_COST_SNAPSHOT=0``
turns it off.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path

from harness.binary import elf as E
from harness.core.proc import execute

MAGIC = b"rvvdiff-snapshot"
HEADER = b"RVVSNAP1"
PAGE = 4096
ENTRY = "rvvdiff_spike_resume"


class SnapshotError(RuntimeError):
    """The start-up snapshot could not be taken (the message says why); the caller runs without it."""


def _loaded_page(elf: bytes, segs, addr: int) -> bytes:
    """The page at ``addr`` as loading the ELF leaves it (file bytes, zeros elsewhere)."""
    page = bytearray(PAGE)
    for sg in segs:
        if sg.type != E.PT_LOAD:
            continue
        lo, hi = max(addr, sg.vaddr), min(addr + PAGE, sg.vaddr + sg.filesz)
        if lo < hi:
            page[lo - addr:hi - addr] = elf[sg.offset + lo - sg.vaddr:sg.offset + hi - sg.vaddr]
    return bytes(page)


def parse(out: bytes) -> list[tuple[int, bytes]]:
    """The runtime's records: (address, bytes) until the (0, 0) end mark."""
    if not out.startswith(HEADER):
        raise SnapshotError(f"the server wrote no snapshot (its output begins {out[:40]!r})")
    pos, recs = len(HEADER), []
    while True:
        if pos + 16 > len(out):
            raise SnapshotError("the snapshot is cut short")
        addr, n = struct.unpack_from("<QQ", out, pos)
        pos += 16
        if addr == 0 and n == 0:
            return recs
        recs.append((addr, out[pos:pos + n]))
        pos += n


#: What Spike's front-end needs of the symbol table: the HTIF mailboxes.
HTIF_SYMBOLS = ("tohost", "fromhost")


def build(elf: bytes, records: list[tuple[int, bytes]], entry: int) -> bytes:
    """An ELF entered at ``entry`` that loads what ``elf`` loads plus a segment for every run of pages the
    records change; its only symbols are the HTIF mailboxes (no debug information: a fraction of the size)."""
    segs = E.segments(elf)
    loaded: dict[int, bytes] = {}  # each touched page as the ELF loads it, computed once
    touched: dict[int, bytearray] = {}
    for addr, data in records:
        end = addr + len(data)
        for p in range(addr - addr % PAGE, end, PAGE):
            if p not in touched:
                loaded[p] = _loaded_page(elf, segs, p)
                touched[p] = bytearray(loaded[p])
            buf = touched[p]
            lo, hi = max(addr, p), min(end, p + PAGE)
            buf[lo - p:hi - p] = data[lo - addr:hi - addr]
    pages = {p: bytes(b) for p, b in touched.items() if bytes(b) != loaded[p]}
    runs: list[tuple[int, bytearray]] = []
    for p in sorted(pages):
        if runs and runs[-1][0] + len(runs[-1][1]) == p:
            runs[-1][1].extend(pages[p])
        else:
            runs.append((p, bytearray(pages[p])))
    syms = {name: value for value, _kind, name in E.symbols(elf) if name in HTIF_SYMBOLS}
    if set(syms) != set(HTIF_SYMBOLS):
        raise SnapshotError(f"the server has no {' / '.join(sorted(set(HTIF_SYMBOLS) - set(syms)))} symbol")
    # The server's own segments first (loaded in order: the snapshot's pages overwrite theirs).
    loads = [(sg.flags, sg.vaddr, elf[sg.offset:sg.offset + sg.filesz], sg.memsz) for sg in segs if sg.type == E.PT_LOAD]
    loads += [(6, va, bytes(data), len(data)) for va, data in runs]
    out = bytearray(64 + 56 * len(loads))
    phs = []
    for fl, va, data, memsz in loads:
        out.extend(b"\0" * ((va - len(out)) % PAGE))  # file offset congruent to the address
        phs.append(struct.pack("<IIQQQQQQ", 1, fl, len(out), va, va, len(data), memsz, PAGE))
        out.extend(data)
    out[64:64 + 56 * len(phs)] = b"".join(phs)
    strtab = b"\0" + b"\0".join(n.encode() for n in HTIF_SYMBOLS) + b"\0"
    symtab, pos = bytearray(24), 1
    for n in HTIF_SYMBOLS:
        symtab += struct.pack("<IBBHQQ", pos, 0x11, 0, 0xFFF1, syms[n], 8)  # GLOBAL OBJECT, absolute
        pos += len(n) + 1
    shstr = b"\0.symtab\0.strtab\0.shstrtab\0"
    out.extend(b"\0" * (-len(out) % 8))
    at_sym = len(out)
    out += symtab
    at_str = len(out)
    out += strtab
    at_shstr = len(out)
    out += shstr
    out.extend(b"\0" * (-len(out) % 8))
    shoff = len(out)
    out += bytes(64)
    out += struct.pack("<IIQQQQIIQQ", 1, 2, 0, 0, at_sym, len(symtab), 2, 1, 8, 24)
    out += struct.pack("<IIQQQQIIQQ", 9, 3, 0, 0, at_str, len(strtab), 0, 0, 1, 0)
    out += struct.pack("<IIQQQQIIQQ", 17, 3, 0, 0, at_shstr, len(shstr), 0, 0, 1, 0)
    out[:64] = elf[:64]
    struct.pack_into("<QQQ", out, 0x18, entry, 64, shoff)
    struct.pack_into("<HHHHH", out, 0x36, 56, len(phs), 64, 4, 3)
    return bytes(out)


def resume_image(argv: list[str], exe: Path, *, timeout: float) -> Path:
    """The snapshot ELF of ``exe`` for the Spike command ``argv`` (whose last element is ``exe``), made once
    and kept beside ``exe``.  Raises :class:`SnapshotError`."""
    target = hashlib.sha256(" ".join(a for a in argv[:-1] if a != "-g").encode()).hexdigest()[:16]
    path = exe.with_name(f"{exe.name}.resume2-{target}")
    if path.is_file() and path.stat().st_mtime_ns >= exe.stat().st_mtime_ns:
        return path
    server = exe.read_bytes()
    entry = next((value for value, kind, name in E.symbols(server) if name == ENTRY and kind == E.STT_FUNC), None)
    if entry is None:
        raise SnapshotError(f"{exe.name} has no {ENTRY} (a runtime without snapshots)")
    cp = execute([a for a in argv if a != "-g"], input=MAGIC, text=False, timeout=timeout)
    if cp.timed_out:
        raise SnapshotError(f"the start-up snapshot took longer than {timeout:.0f} s")
    if cp.returncode != 0:
        raise SnapshotError(f"the start-up snapshot run exited with {cp.returncode}: "
                            f"{cp.stderr.decode(errors='replace').strip()[-300:]}")
    image = build(server, parse(cp.stdout), entry)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(image)
    tmp.chmod(0o755)
    tmp.replace(path)
    return path
