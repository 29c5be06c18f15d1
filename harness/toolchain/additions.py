"""What rvvdiff adds to a tree's own CMake build for an ISA build and a compiler, and what a compiler cannot make.

A build is the tree's CMake with the options its ISA build names (harness/core/config.py).  Where that alone
does not build with one of rvvdiff's compilers, rvvdiff adds flags, and says so: each :class:`Addition` has one
line saying what and why, printed in the build's description (``rvvdiff build``, the report header) and in
every failure report, and whether the need is the tree's fault (then it is a finding with a build-only
reproducer, docs/spacemit.md).  Today only SpacemiT's backend needs any:

* clang (zig's, LLVM 22) rejects ``spacemit/rvv_kernels.h``'s ``auto`` parameters under the tree's C++17 (GCC
  takes them as an extension): ``-Xclang -std=gnu++20`` reaches the compiler after CMake's ``-std=gnu++17``.
* ggml writes IME1's instructions as SpacemiT's toolchain spells them (``vmadot v16, v14, v0``); LLVM 22 has them
  as its ``xsmtvdot`` extension (``smt.vmadot``).  Assembler macros (include/spacemit_ime1.h) map the names and
  ``-target-feature +xsmtvdot`` enables the extension, so the tree's own ``FindSMTIME.cmake`` probe finds IME1
  and compiles ``ime1_kernels.cpp``.  IME2's forms (``vmadot ..., i8``, ``vmadot.hp``, ``vpack.vv``) are in no
  public assembler: that probe fails and the A100's IME2 kernels are not compiled (docs/spacemit.md).

GCC 14 cannot build the backend at all (harness/core/matrix.py's ``CANNOT_MAKE``): Debian's binutils 2.40 know no
IME, the probe finds none, and ``spacemit/ime.cpp`` requires IME1 or IME2 (``#error``).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.core.config import IsaBuild, cache_dir
from harness.toolchain.compilers import write_atomically

#: The header of assembler macros that maps ggml's IME1 mnemonics onto LLVM's (force-included).
IME1_NAMES = Path(__file__).resolve().parent / "include" / "spacemit_ime1.h"


@functools.cache
def _cached(src: Path) -> str:
    """A copy of ``src`` in the cache named by its content: the flags that name it (and so the build key) are the
    same from every checkout, and change when the file does."""
    text = src.read_text()
    out = cache_dir() / "toolchain" / f"{src.stem}-{hashlib.sha256(text.encode()).hexdigest()[:12]}{src.suffix}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(out, text)
    return str(out)


@dataclass(frozen=True)
class Addition:
    """Flags rvvdiff adds to a build, and why."""

    #: One line: what is added and why (shown wherever the build is described).
    what: str
    #: Added to both CMAKE_C_FLAGS and CMAKE_CXX_FLAGS (and to the kernel server's compile flags).
    flags: tuple[str, ...] = ()
    #: Files the flags name through ``{name}`` placeholders (given their cached copy's path, :func:`_cached`).
    files: tuple[tuple[str, Path], ...] = ()
    #: Added to CMAKE_CXX_FLAGS only (and to the kernel server's compile flags).
    cxx_flags: tuple[str, ...] = ()
    #: The tree's code needs it for a compiler it should build with (a finding), not a gap of the compiler.
    tree_fault: bool = False


_ADDITIONS: dict[tuple[str, str], tuple[Addition, ...]] = {
    ("spacemit", "clang"): (
        Addition("-Xclang -std=gnu++20: spacemit/rvv_kernels.h declares functions with 'auto' parameters, C++20, "
                 "which clang rejects under the tree's C++17 (GCC accepts them as an extension)",
                 cxx_flags=("-Xclang", "-std=gnu++20"), tree_fault=True),
        Addition("IME1 by LLVM's names: -target-feature +xsmtvdot and assembler macros mapping ggml's vmadot / vmadotu / "
                 "vmadotsu / vmadotus (and vmadot1-3) onto LLVM 22's smt.vmadot* (harness/toolchain/include/"
                 "spacemit_ime1.h), so the tree's FindSMTIME probe finds IME1",
                 flags=("-Xclang", "-target-feature", "-Xclang", "+xsmtvdot", "-include", "{ime1_names}"),
                 files=(("ime1_names", IME1_NAMES),)),
    ),
}

#: What a compiler's build of an ISA build lacks even as rvvdiff makes it (not a reason to skip it).
LIMITS: dict[tuple[str, str], str] = {
    ("spacemit", "clang"): "no IME2 (the A100's kernels): LLVM 22 has no vmadot.hp / vpack.vv / the i4-i8 operand "
                           "forms, so the tree's FindSMTIME probe leaves ime2_kernels.cpp out",
}


def additions(isa: IsaBuild, compiler_name: str) -> tuple[Addition, ...]:
    """What rvvdiff adds to ``isa``'s build by the named compiler (empty for the builds that need nothing)."""
    return _ADDITIONS.get((isa.name, compiler_name), ())


def _flags(a: Addition, cxx: bool, named: Callable[[Path], str]) -> list[str]:
    paths = {name: named(path) for name, path in a.files}
    return [f.format(**paths) for f in (*a.flags, *(a.cxx_flags if cxx else ()))]


def flags(isa: IsaBuild, compiler_name: str, *, cxx: bool = False,
          named: Callable[[Path], str] = _cached) -> tuple[str, ...]:
    """The flags the additions give every C file (``cxx``: every C++ file) of ``isa``'s build by the compiler; the
    files they name by their cached copies (``named``: as it names them, e.g. the path a printed command gives)."""
    return tuple(f for a in additions(isa, compiler_name) for f in _flags(a, cxx, named))


def files(isa: IsaBuild, compiler_name: str) -> tuple[Path, ...]:
    """The files the additions' flags name (the IME1 mnemonics' header): a printed build command needs them."""
    return tuple(path for a in additions(isa, compiler_name) for _, path in a.files)


def cmake_flags(isa: IsaBuild, compiler_name: str, named: Callable[[Path], str] = _cached) -> dict[str, str]:
    """The CMake variables that carry the additions (none when there are none): part of the build's key."""
    return {k: " ".join(v) for k, v in (("CMAKE_C_FLAGS", flags(isa, compiler_name, named=named)),
                                          ("CMAKE_CXX_FLAGS", flags(isa, compiler_name, cxx=True, named=named))) if v}


def server_flags(isa: IsaBuild, compiler_name: str) -> tuple[str, ...]:
    """The additions the kernel server's C++ objects are compiled with too (they include the tree's headers)."""
    return flags(isa, compiler_name, cxx=True)


def describe(isa: IsaBuild, compiler_name: str) -> list[str]:
    """One line per addition and limit, for a build's description and reports."""
    out = [f"rvvdiff adds: {a.what}" for a in additions(isa, compiler_name)]
    limit = LIMITS.get((isa.name, compiler_name))
    return out + ([f"this build has {limit}"] if limit else [])
