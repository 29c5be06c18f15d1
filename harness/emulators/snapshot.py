"""The Spike kernel server with its start-up already done: a snapshot ELF per server binary and Spike target.

Every Spike run of the kernel server begins with ggml's start-up (``ggml_cpu_init`` fills its fp16 and
GELU tables: 12 million instructions, 0.4 s of Spike at VLEN 128 and 3 s at 4096), and a cost
measurement is two runs (harness/emulators/cost.py).  So the start-up is run once per server binary
and Spike target: the runtime (``server/spike/rt.c``), fed :data:`MAGIC` as its first input, writes the
program's writable memory as it stands at the server's first read of stdin and exits; the records
become extra segments of a copy of the server ELF whose entry point, ``rvvdiff_spike_resume``,
restores the registers saved at that read and carries on with the run's own requests.  Only pages
that differ from what the ELF loads anyway are kept.

A run of the snapshot is the server's run without its start-up: the same memory and registers at
the first read, so the same instructions from there on.  tests/test_cost_planted.py checks that
a measurement gives the same counts, histogram and mix either way.  ``RVVDIFF_COST_SNAPSHOT=0``
turns it off.
"""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
from pathlib import Path

from harness.emulators.spike import _functions

MAGIC = b"rvvdiff-snapshot"
HEADER = b"RVVSNAP1"
PAGE = 4096
ENTRY = "rvvdiff_spike_resume"


class SnapshotError(RuntimeError):
    """The start-up snapshot could not be taken (the message says why); the caller runs without it."""


def _segments(elf: bytes) -> list[tuple[int, int, int, int, int]]:
    """(type, flags, offset, vaddr, filesz, memsz) of each program header, without the type filter."""
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    out = []
    for i in range(phnum):
        p_type, p_flags, p_off, p_vaddr, _pa, p_filesz, p_memsz, _al = struct.unpack_from(
            "<IIQQQQQQ", elf, phoff + i * phentsize)
        out.append((p_type, p_flags, p_off, p_vaddr, p_filesz, p_memsz))
    return out


def _loaded_page(elf: bytes, segs, addr: int) -> bytes:
    """The page at ``addr`` as loading the ELF leaves it (file bytes, zeros elsewhere)."""
    page = bytearray(PAGE)
    for p_type, _fl, off, va, filesz, _memsz in segs:
        if p_type != 1:
            continue
        lo, hi = max(addr, va), min(addr + PAGE, va + filesz)
        if lo < hi:
            page[lo - addr:hi - addr] = elf[off + lo - va:off + hi - va]
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


def build(elf: bytes, records: list[tuple[int, bytes]], entry: int) -> bytes:
    """A copy of ``elf`` entered at ``entry``, with a segment for every run of pages the records change."""
    segs = _segments(elf)
    touched: dict[int, bytearray] = {}
    for addr, data in records:
        end = addr + len(data)
        for p in range(addr - addr % PAGE, end, PAGE):
            buf = touched.setdefault(p, bytearray(_loaded_page(elf, segs, p)))
            lo, hi = max(addr, p), min(end, p + PAGE)
            buf[lo - p:hi - p] = data[lo - addr:hi - addr]
    pages = {p: bytes(b) for p, b in touched.items() if bytes(b) != _loaded_page(elf, segs, p)}
    runs: list[tuple[int, bytearray]] = []
    for p in sorted(pages):
        if runs and runs[-1][0] + len(runs[-1][1]) == p:
            runs[-1][1].extend(pages[p])
        else:
            runs.append((p, bytearray(pages[p])))
    out = bytearray(elf)
    new_ph = []
    for va, data in runs:
        out.extend(b"\0" * (-len(out) % PAGE))
        new_ph.append(struct.pack("<IIQQQQQQ", 1, 6, len(out), va, va, len(data), len(data), PAGE))
        out.extend(data)
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    out.extend(b"\0" * (-len(out) % 8))
    table = len(out)
    out.extend(elf[phoff:phoff + phentsize * phnum])  # the server's own segments load first
    for ph in new_ph:
        out.extend(ph)
    struct.pack_into("<Q", out, 0x18, entry)
    struct.pack_into("<Q", out, 0x20, table)
    struct.pack_into("<H", out, 0x38, phnum + len(new_ph))
    return bytes(out)


def resume_image(argv: list[str], exe: Path, *, timeout: float) -> Path:
    """The snapshot ELF of ``exe`` for the Spike command ``argv`` (whose last element is ``exe``), made once
    and kept beside ``exe``.  Raises :class:`SnapshotError`."""
    target = hashlib.sha256(" ".join(a for a in argv[:-1] if a != "-g").encode()).hexdigest()[:16]
    path = exe.with_name(f"{exe.name}.resume-{target}")
    if path.is_file() and path.stat().st_mtime_ns >= exe.stat().st_mtime_ns:
        return path
    starts, names = _functions(exe, exe.stat().st_mtime_ns)
    if ENTRY not in names:
        raise SnapshotError(f"{exe.name} has no {ENTRY} (a runtime without snapshots)")
    entry = starts[names.index(ENTRY)]
    try:
        cp = subprocess.run([a for a in argv if a != "-g"], input=MAGIC, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SnapshotError(f"the start-up snapshot took longer than {timeout:.0f} s") from None
    if cp.returncode != 0:
        raise SnapshotError(f"the start-up snapshot run exited with {cp.returncode}: "
                            f"{cp.stderr.decode(errors='replace').strip()[-300:]}")
    image = build(exe.read_bytes(), parse(cp.stdout), entry)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(image)
    tmp.chmod(0o755)
    tmp.replace(path)
    return path
