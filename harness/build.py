"""Building ggml-base + ggml-cpu for riscv64 (through ggml's own CMake) and linking the kernel server.

One build directory per (source tree, ISA build), reused incrementally: a
kernel developer who edits one file of their tree pays for one recompile.  A
stamp holding the build key (a hash of the source content, the CMake options,
the compiler and the server source) says whether the directory is current.
Builds run under a file lock, so concurrent pytest-xdist workers build once.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from .config import COMMON_CMAKE, IsaBuild, cache_dir, locked
from .proc import CommandError, run
from .source import GgmlSource
from .toolchain import SERVER_DIR, Compiler, compiler

SERVER_SOURCES = ("server.cpp",)


class BuildError(RuntimeError):
    """Configuring or compiling failed; the message has the failing command and the compiler's output."""


@dataclass(frozen=True)
class Build:
    """A finished build: the libraries, the kernel server and how they were made."""

    isa: IsaBuild
    source: GgmlSource
    dir: Path
    server: Path
    key: str
    cflags: tuple[str, ...]  # the flags ggml-cpu was compiled with (reused for the server and reproducers)
    libs: tuple[Path, ...]


def _cmake_options(isa: IsaBuild) -> dict[str, str]:
    return {**COMMON_CMAKE, **isa.cmake}


def build_key(source: GgmlSource, isa: IsaBuild, cc: Compiler) -> str:
    h = hashlib.sha256()
    h.update(source.content_hash().encode())
    h.update(json.dumps(_cmake_options(isa), sort_keys=True).encode())
    h.update(cc.identity.encode())
    for name in SERVER_SOURCES:
        h.update((SERVER_DIR / name).read_bytes())
    return h.hexdigest()


def build_dir(source: GgmlSource, isa: IsaBuild) -> Path:
    tree = hashlib.sha256(str(source.root).encode()).hexdigest()[:12]
    return cache_dir() / "build" / f"{tree}-{isa.name}"


def _toolchain_file(d: Path, cc: Compiler) -> Path:
    f = d / "riscv64-toolchain.cmake"
    f.write_text(
        "set(CMAKE_SYSTEM_NAME Linux)\n"
        "set(CMAKE_SYSTEM_PROCESSOR riscv64)\n"
        f"set(CMAKE_C_COMPILER {cc.cc})\n"
        f"set(CMAKE_CXX_COMPILER {cc.cxx})\n"
        f"set(CMAKE_AR {cc.ar} CACHE FILEPATH \"\")\n"
        f"set(CMAKE_RANLIB {cc.ranlib} CACHE FILEPATH \"\")\n"
        "set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)\n"
    )
    return f


def _ggml_cpu_flags(d: Path) -> tuple[str, ...]:
    """Defines, include paths and -march/-mabi that CMake used for ggml-cpu's C++ files."""
    found = list(d.glob("**/ggml-cpu.dir/flags.make"))
    if not found:
        raise BuildError(f"{d}: CMake produced no ggml-cpu.dir/flags.make; is this a ggml tree with a CPU backend?")
    fields = dict(re.findall(r"^(CXX_\w+) = (.*)$", found[0].read_text(), re.M))
    flags = shlex.split(fields.get("CXX_DEFINES", "")) + shlex.split(fields.get("CXX_INCLUDES", ""))
    flags += [f for f in shlex.split(fields.get("CXX_FLAGS", "")) if f.startswith(("-march=", "-mabi=", "-std="))]
    return tuple(flags)


def _libs(d: Path) -> tuple[Path, ...]:
    libs = []
    for name in ("libggml-cpu.a", "libggml-base.a"):
        hits = sorted(d.glob(f"**/{name}"))
        if not hits:
            raise BuildError(f"{d}: {name} was not produced")
        libs.append(hits[0])
    return tuple(libs)


def _failure_marker(d: Path) -> Path:
    # A failure is remembered for the current pytest session only (RVVDIFF_SESSION
    # is set by the controlling process), so the other workers do not retry it.
    return d / f"failed-{os.environ.get('RVVDIFF_SESSION', 'none')}.txt"


def ensure_built(source: GgmlSource, isa: IsaBuild, *, jobs: int | None = None) -> Build:
    """Return the build of ``source`` for ``isa``, configuring and compiling what is out of date."""
    cc = compiler()
    key = build_key(source, isa, cc)
    d = build_dir(source, isa)
    d.mkdir(parents=True, exist_ok=True)
    stamp, server = d / "rvvdiff-stamp.json", d / "rvvdiff-server"
    with locked(d / ".lock"):
        if stamp.exists() and server.exists():
            meta = json.loads(stamp.read_text())
            if meta.get("key") == key:
                return Build(isa, source, d, server, key, tuple(meta["cflags"]), tuple(Path(p) for p in meta["libs"]))
        marker = _failure_marker(d)
        if "RVVDIFF_SESSION" in os.environ and marker.exists():
            raise BuildError(marker.read_text())
        try:
            cflags, libs = _build(source, isa, cc, d, server, jobs or os.cpu_count() or 2)
        except (BuildError, CommandError) as e:
            msg = f"building ISA build {isa.name!r} of {source.describe()} failed (full log: {d / 'rvvdiff-build.log'}):\n{e}"
            marker.write_text(msg)
            raise BuildError(msg) from None
        stamp.write_text(json.dumps({"key": key, "cflags": list(cflags), "libs": [str(p) for p in libs]}))
        return Build(isa, source, d, server, key, cflags, libs)


def _build(source: GgmlSource, isa: IsaBuild, cc: Compiler, d: Path, server: Path,
           jobs: int) -> tuple[tuple[str, ...], tuple[Path, ...]]:
    logf = d / "rvvdiff-build.log"
    logf.write_text("")
    tc = _toolchain_file(d, cc)
    opts = [f"-D{k}={v}" for k, v in _cmake_options(isa).items()]
    run(["cmake", "-S", source.root, "-B", d, f"-DCMAKE_TOOLCHAIN_FILE={tc}", *opts],
        timeout=1800, what=f"CMake configure ({isa.name})", log_file=logf)
    run(["cmake", "--build", d, "--target", "ggml-cpu", "ggml-base", "-j", str(jobs)],
        timeout=3600, what=f"compiling ggml ({isa.name})", log_file=logf)
    cflags, libs = _ggml_cpu_flags(d), _libs(d)
    tmp = server.with_name(server.name + ".tmp")
    run([cc.cxx, "-O2", *cflags, "-I", SERVER_DIR, *(SERVER_DIR / s for s in SERVER_SOURCES), *libs,
         "-static", "-lm", "-lpthread", "-o", tmp],
        timeout=1800, what=f"linking the kernel server ({isa.name})", log_file=logf)
    tmp.replace(server)
    return cflags, libs
