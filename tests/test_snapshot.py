"""The start-up snapshot's ELF (harness/cost/measure/snapshot.py) without Spike: the runtime's records
parsed, only changed pages kept, the server's segments loaded first, the HTIF symbols kept.  That a
resumed run counts what a fresh one counts is checked under Spike (tests/test_cost_planted.py)."""

from __future__ import annotations

import struct

import pytest

from harness.binary import elf
from harness.cost.measure import snapshot

BASE = 0x20000000


def _elf() -> bytes:
    """A minimal ELF64: one RW PT_LOAD of two pages (the first holds 0x11 bytes in the file, the
    second is bss) and a symbol table with tohost / fromhost."""
    data = b"\x11" * snapshot.PAGE
    strtab = b"\0tohost\0fromhost\0"
    symtab = bytes(24) + struct.pack("<IBBHQQ", 1, 0x11, 0, 1, BASE + 64, 8) + \
        struct.pack("<IBBHQQ", 8, 0x11, 0, 1, BASE + 128, 8)
    shstr = b"\0.symtab\0.strtab\0.shstrtab\0"
    head = bytearray(snapshot.PAGE)  # header and program header, then the segment's bytes at offset PAGE
    body = data
    at_sym = snapshot.PAGE + len(body)
    at_str = at_sym + len(symtab)
    at_shstr = at_str + len(strtab)
    shoff = at_shstr + len(shstr)
    shoff += -shoff % 8
    tail = symtab + strtab + shstr + bytes(shoff - at_shstr - len(shstr))
    sh = bytes(64) + struct.pack("<IIQQQQIIQQ", 1, 2, 0, 0, at_sym, len(symtab), 2, 1, 8, 24) + \
        struct.pack("<IIQQQQIIQQ", 9, 3, 0, 0, at_str, len(strtab), 0, 0, 1, 0) + \
        struct.pack("<IIQQQQIIQQ", 17, 3, 0, 0, at_shstr, len(shstr), 0, 0, 1, 0)
    head[:16] = b"\x7fELF\x02\x01\x01" + bytes(9)
    struct.pack_into("<HHIQQQIHHHHHH", head, 16, 2, 243, 1, BASE, 64, shoff, 0, 64, 56, 1, 64, 4, 3)
    page = snapshot.PAGE
    struct.pack_into("<IIQQQQQQ", head, 64, 1, 6, page, BASE, BASE, len(data), 2 * page, page)
    return bytes(head) + body + tail + sh


def _records(*recs: tuple[int, bytes]) -> bytes:
    out = snapshot.HEADER
    for addr, data in recs:
        out += struct.pack("<QQ", addr, len(data)) + data
    return out + bytes(16)


def test_only_the_pages_the_start_up_changed_become_segments() -> None:
    server = _elf()
    # Page 0 as loaded (0x11 bytes): unchanged; page 1 (bss) written: kept; a heap page: kept.
    recs = snapshot.parse(_records((BASE, b"\x11" * snapshot.PAGE), (BASE + snapshot.PAGE, b"\x22" * 8),
                            (BASE + 0x100000, b"\x33" * 16)))
    out = snapshot.build(server, recs, entry=BASE + 0x40)
    segs = [sg for sg in elf.segments(out) if sg.type == elf.PT_LOAD]
    assert [(sg.vaddr, sg.filesz, sg.memsz) for sg in segs] == [
        (BASE, snapshot.PAGE, 2 * snapshot.PAGE),  # the server's own segment, first
        (BASE + snapshot.PAGE, snapshot.PAGE, snapshot.PAGE),
        (BASE + 0x100000, snapshot.PAGE, snapshot.PAGE)]
    off = segs[1].offset
    assert out[off:off + 8] == b"\x22" * 8 and out[off + 8:off + snapshot.PAGE] == bytes(snapshot.PAGE - 8)
    assert all(sg.offset % snapshot.PAGE == sg.vaddr % snapshot.PAGE for sg in segs)
    assert struct.unpack_from("<Q", out, 0x18)[0] == BASE + 0x40
    assert {n: v for v, _k, n in elf.symbols(out)} == {"tohost": BASE + 64, "fromhost": BASE + 128}


def test_a_server_that_wrote_no_snapshot_is_one_clear_error() -> None:
    with pytest.raises(snapshot.SnapshotError, match="wrote no snapshot"):
        snapshot.parse(b"hello")
    with pytest.raises(snapshot.SnapshotError, match="cut short"):
        snapshot.parse(snapshot.HEADER + struct.pack("<QQ", BASE, 8))
