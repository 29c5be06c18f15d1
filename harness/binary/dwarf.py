"""A kernel server's DWARF line table: which in-scope source line each address of the binary maps to.

RVV line coverage (harness/report/coverage.py, docs/coverage.md) maps the PCs the emulator logged
(harness/emulators/executed.py) to source lines through this table.  The build is not instrumented:
the line table is the one zig's clang writes into every object anyway (``with debug_info``), and the
kernel server is a static, non-PIE binary, so a logged PC is a link address.  The scope is the RVV
code under test and its generic twins, by DWARF file name under ``ggml-cpu/`` (:data:`SCOPE`); each
line is attributed to the function whose source holds it (rvvdiff's C reader, harness/ggml/csource.py),
else to the symbol holding its code.  The in-scope table of a binary is kept in the cache
(``coverage/lines-*.json``), so only the first run with a new server reads its DWARF (pyelftools).
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from harness.binary.elf import base_symbol
from harness.core.config import cache_dir
from harness.core.errors import RvvdiffError
from harness.core.proc import execute
from harness.ggml import csource

#: What is measured: (path under ggml-cpu/, a regex the function's name must match or None).  The RVV
#: kernels (arch/riscv/*, vec.h / vec.cpp, simd-mappings.h, llamafile's tinyBLAS_RVV, flash attention's
#: simd_gemm and ops), SpacemiT's backend (spacemit/*: its RVV and IME kernels) and the generic twins
#: (quants.c, repack.cpp).
SCOPE: tuple[tuple[str, str | None], ...] = (
    ("arch/riscv/", None),
    ("spacemit/", None),
    ("vec.h", None),
    ("vec.cpp", None),
    ("simd-mappings.h", None),
    ("simd-gemm.h", None),
    ("quants.c", None),
    ("repack.cpp", None),
    ("llamafile/sgemm.cpp", None),
    ("ops.cpp", "flash_attn"),
)


class CoverageError(RvvdiffError):
    """Line coverage cannot be measured for a binary (no line table, not an ELF file)."""


def in_scope(path: str) -> str | None:
    """The function-name regex of the scope entry ``path`` (a source path) falls in ('' for any
    function), or None when it is out of scope."""
    i = path.rfind("/ggml-cpu/")
    if i < 0:
        return None
    rel = path[i + len("/ggml-cpu/"):]
    for name, fn in SCOPE:
        if rel == name or (name.endswith("/") and rel.startswith(name)):
            return fn or ""
    return None


@dataclass(frozen=True)
class LineTable:
    """A binary's address ranges that map to in-scope source lines, and its executable sections."""

    program: Path
    #: Sorted, disjoint address ranges [start, end) and the (file, line, function) each maps to.
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    keys: tuple[tuple[str, int, str], ...]
    #: The executable sections' address ranges (a PC outside them is outside the mapped program).
    text: tuple[tuple[int, int], ...]
    #: Per range, the [start, end) of the symbol (function as linked) holding it; (0, 0) for none.
    owners: tuple[tuple[int, int], ...] = ()

    def executable(self, pcs: Iterable[int] = (), ran: set[str] = frozenset()) -> set[tuple[str, int, str]]:
        """The in-scope keys with code.  A range in a symbol that no PC of ``pcs`` entered, of a function
        in ``ran`` (a function that ran through another copy: an out-of-line copy of a function inlined
        where it ran), does not count: its line counts only if it has code in a copy that was entered,
        so the prologue and epilogue of an uncalled copy are not reported as untested lines."""
        if not ran:
            return set(self.keys)
        entered: dict[tuple[int, int], bool] = {}
        sorted_pcs = sorted(pcs)

        def was_entered(owner: tuple[int, int]) -> bool:
            if owner not in entered:
                i = bisect.bisect_left(sorted_pcs, owner[0])
                entered[owner] = i < len(sorted_pcs) and sorted_pcs[i] < owner[1]
            return entered[owner]

        return {k for k, owner in zip(self.keys, self.owners or [(0, 0)] * len(self.keys))
                if k[2] not in ran or owner == (0, 0) or was_entered(owner)}

    def outside(self, pc: int) -> bool:
        return not any(lo <= pc < hi for lo, hi in self.text)

    def lines(self, pcs: Iterable[int]) -> tuple[set[tuple[str, int, str]], int]:
        """The in-scope (file, line, function) keys the PCs executed, and how many PCs lie outside
        the program's executable sections."""
        hit: set[tuple[str, int, str]] = set()
        outside = 0
        for pc in pcs:
            i = bisect.bisect_right(self.starts, pc) - 1
            if i >= 0 and pc < self.ends[i]:
                hit.add(self.keys[i])
            elif self.outside(pc):
                outside += 1
        return hit, outside


_TABLES: dict[tuple[str, int, int], LineTable] = {}


def line_table(program: Path) -> LineTable:
    """The in-scope line table of ``program`` (read once per file content); :class:`CoverageError`
    when it has none."""
    st = program.stat()
    key = (str(program), st.st_size, st.st_mtime_ns)
    if key in _TABLES:
        return _TABLES[key]
    stored = _stored(program, st)
    if stored.exists():
        try:
            j = json.loads(stored.read_text())
            t = _TABLES[key] = LineTable(program, tuple(j["starts"]), tuple(j["ends"]),
                                         tuple(tuple(k) for k in j["keys"]), tuple(tuple(r) for r in j["text"]),
                                         tuple(tuple(o) for o in j["owners"]))
            return t
        except (OSError, ValueError, KeyError):
            pass  # read afresh below
    try:
        with open(program, "rb") as f:
            elf = ELFFile(f)
            text = tuple((s["sh_addr"], s["sh_addr"] + s["sh_size"]) for s in elf.iter_sections()
                         if s["sh_flags"] & 0x4 and s["sh_size"])  # SHF_EXECINSTR
            if not elf.has_dwarf_info() or elf.get_section_by_name(".debug_line") is None:
                raise CoverageError(f"{program} has no DWARF line table (built without -g): "
                                    "its lines cannot be measured")
            symbols = _functions(elf)
            ranges = _ranges(elf.get_dwarf_info())
    except ELFError as e:
        raise CoverageError(f"{program} is not an ELF file pyelftools can read ({e})") from None
    names = [a for a, _, _ in symbols]
    out: list[tuple[int, int, tuple[str, int, str]]] = []
    for lo, hi, path, line in ranges:
        fn_re = in_scope(path)
        if fn_re is None:
            continue
        i = bisect.bisect_right(names, lo) - 1
        owner = (symbols[i][0], symbols[i][1]) if i >= 0 and lo < symbols[i][1] else (0, 0)
        fn = source_function(path, line) or (symbols[i][2] if owner != (0, 0) else "?")
        if fn_re and not re.search(fn_re, fn):
            continue
        out.append((lo, hi, (path, line, fn), owner))
    out.sort()
    t = LineTable(program, tuple(o[0] for o in out), tuple(o[1] for o in out), tuple(o[2] for o in out), text,
                  tuple(o[3] for o in out))
    _TABLES[key] = t
    try:
        stored.parent.mkdir(parents=True, exist_ok=True)
        tmp = stored.with_name(f"{stored.name}.tmp{os.getpid()}")
        tmp.write_text(json.dumps({"starts": t.starts, "ends": t.ends, "keys": t.keys, "text": t.text,
                                   "owners": t.owners}))
        tmp.replace(stored)
    except OSError:
        pass  # the next run reads the binary again
    return t


#: Part of the stored tables' key: change it when what a table holds changes.
_TABLE_FORMAT = "3"


def _stored(program: Path, st: os.stat_result) -> Path:
    """Where the in-scope line table of a binary is kept between runs (the cache, keyed by the binary's
    path, size and mtime, the scope and the format): a warm run maps its PCs without reading DWARF."""
    h = hashlib.sha256(json.dumps([str(program), st.st_size, st.st_mtime_ns, SCOPE, _TABLE_FORMAT]).encode())
    return cache_dir() / "coverage" / f"lines-{h.hexdigest()[:16]}.json"


def source_function(path: str, line: int) -> str | None:
    """The function whose definition holds ``path:line``, as rvvdiff's C reader finds it (the innermost
    top-level definition of any preprocessor branch), or None (a method inside a class body, a file
    that cannot be read): then the line counts under the symbol holding its code."""
    starts, defs = _spans(path)
    i = bisect.bisect_right(starts, line) - 1
    if i >= 0 and defs[i][0] <= line <= defs[i][1]:
        return defs[i][2]
    return None


@functools.cache
def _spans(path: str) -> tuple[list[int], list[tuple[int, int, str]]]:
    try:
        defs = sorted((f.line, f.end, f.name) for f in csource.read(Path(path)).definitions())
    except OSError:
        defs = []
    return [d[0] for d in defs], defs


def _functions(elf) -> list[tuple[int, int, str]]:
    """(start, end, name) of the binary's functions, sorted, names demangled when c++filt is there and
    read as the function a GCC clone copies (``f.isra.0`` is ``f``: elf.base_symbol)."""
    symtab = elf.get_section_by_name(".symtab")
    if symtab is None:
        return []
    syms = sorted({(s["st_value"], s["st_value"] + s["st_size"], s.name) for s in symtab.iter_symbols()
                   if s["st_info"]["type"] == "STT_FUNC" and s["st_size"] > 0})
    names = demangle([n for _, _, n in syms])
    return [(lo, hi, base_symbol(names[i])) for i, (lo, hi, _) in enumerate(syms)]


def demangle(names: list[str]) -> list[str]:
    """C++ names demangled by binutils' c++filt when it is on PATH (the mangled names otherwise)."""
    tool = shutil.which("c++filt")
    if not tool or not any(n.startswith("_Z") for n in names):
        return names
    cp = execute([tool], input="\n".join(names) + "\n", timeout=120)
    out = cp.stdout.splitlines()
    return out if cp.returncode == 0 and len(out) == len(names) else names


def _ranges(dwarf) -> list[tuple[int, int, str, int]]:
    """(start, end, source path, line) of every row of the line programs of ggml-cpu's and the
    kernel server's compilation units (vec.h is inlined into both)."""
    out = []
    for cu in dwarf.iter_CUs():
        top = cu.get_top_DIE()
        name = top.attributes.get("DW_AT_name")
        cu_name = name.value.decode(errors="replace") if name else ""
        if "/ggml-cpu/" not in cu_name and "/server/" not in cu_name:
            continue  # libc, libc++, ggml-base: nothing in scope is compiled there
        comp = top.attributes.get("DW_AT_comp_dir")
        comp_dir = comp.value.decode(errors="replace") if comp else ""
        lp = dwarf.line_program_for_CU(cu)
        if lp is None:
            continue
        files = _file_names(lp, comp_dir)
        prev = None
        for entry in lp.get_entries():
            s = entry.state
            if s is None:
                continue
            if prev is not None and s.address > prev.address and prev.line > 0:
                path = files.get(prev.file)
                if path is not None:
                    out.append((prev.address, s.address, path, prev.line))
            prev = None if s.end_sequence else s
    return out


def _file_names(lp, comp_dir: str) -> dict[int, str]:
    """The line program's file index -> normalised path (DWARF 4 counts from 1, DWARF 5 from 0)."""
    hdr = lp.header
    v5 = hdr.version >= 5
    dirs = [d.decode(errors="replace") if isinstance(d, bytes) else d.DW_LNCT_path.decode(errors="replace")
            for d in hdr.include_directory]
    out = {}
    for i, fe in enumerate(hdr.file_entry):
        name = fe.name.decode(errors="replace") if isinstance(fe.name, bytes) else str(fe.name)
        di = fe.dir_index
        if v5:
            base = dirs[di] if di < len(dirs) else comp_dir
        else:
            base = dirs[di - 1] if 0 < di <= len(dirs) else comp_dir
        path = os.path.normpath(os.path.join(comp_dir, base, name))
        out[i if v5 else i + 1] = path
    return out
