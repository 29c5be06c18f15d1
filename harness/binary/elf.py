"""What rvvdiff reads of an ELF64 little-endian file: its program headers and its symbols (.symtab),
and the one rule for reading a symbol's name as the source function it was compiled from
(:func:`base_symbol`)."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

PT_LOAD = 1
STT_FUNC = 2


@dataclass(frozen=True)
class Segment:
    type: int
    flags: int  # PF_X 1, PF_W 2, PF_R 4
    offset: int
    vaddr: int
    filesz: int
    memsz: int


def segments(data: bytes) -> list[Segment]:
    """The program headers, in file order."""
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    out = []
    for i in range(phnum):
        p_type, p_flags, p_off, p_vaddr, _pa, p_filesz, p_memsz, _al = struct.unpack_from(
            "<IIQQQQQQ", data, phoff + i * phentsize)
        out.append(Segment(p_type, p_flags, p_off, p_vaddr, p_filesz, p_memsz))
    return out


def symbols(data: bytes) -> list[tuple[int, int, str]]:
    """(value, type, name) of every named symbol of the symbol tables (type: STT_FUNC, STT_OBJECT...)."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out: list[tuple[int, int, str]] = []
    for _name, kind, _fl, _addr, off, size, link, _info, _al, entsize in sections:
        if kind != 2 or not entsize:  # SHT_SYMTAB
            continue
        stroff = sections[link][4]
        for i in range(size // entsize):
            st_name, st_info, _other, _shndx, value, _sz = struct.unpack_from("<IBBHQQ", data, off + i * entsize)
            if st_name:
                end = data.index(b"\0", stroff + st_name)
                out.append((value, st_info & 0xF, data[stroff + st_name:end].decode(errors="replace")))
    return out


#: The suffixes GCC gives the copies of a function it makes (interprocedural scalar replacement
#: ``.isra.N``, constant propagation ``.constprop.N``, partial inlining ``.part.N``, hot/cold splitting
#: ``.cold`` / ``.cold.N``, LTO's ``.lto_priv.N``, ``.localalias``), chained as GCC chains them
#: (``f.part.0.isra.0``), in the symbol table (``f.isra.0``) or as c++filt prints them
#: (``f(int) [clone .isra.0]``).  clang names no such copies.
_CLONE = re.compile(r"(?:\.(?:isra|constprop|part|cold|lto_priv|localalias)(?:\.\d+)?)+$"
                    r"|(?: \[clone \.[\w.]+\])+$")


def base_symbol(name: str) -> str:
    """The function ``name`` is a copy of: ``name`` without GCC's clone suffixes.

    A static function GCC specialised is linked (and named by QEMU's trace, the symbol table and
    DWARF) as ``<fn>.isra.0`` and the like, where clang keeps ``<fn>``; everything that matches a
    server's symbols by name reads them through this, so a GCC build gets the verdict a clang
    build gets where the kernels agree."""
    return _CLONE.sub("", name)
