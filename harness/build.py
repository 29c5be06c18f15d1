"""Building ggml-base + ggml-cpu for riscv64 (through ggml's own CMake) and linking the kernel server.

One build directory per (source tree, ISA build), reused incrementally: a
kernel developer who edits one file of their tree pays for one recompile.  A
stamp holding the build key (a hash of the source content, the CMake options
and the compiler) says whether the libraries are current; the server's
objects and binary are cached by content on top of them.  Builds run under a
file lock, so concurrent pytest-xdist workers build once.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from .config import COMMON_CMAKE, IsaBuild, cache_dir, locked
from .proc import CommandError, run
from .source import GgmlSource
from .toolchain import SERVER_DIR, Compiler, compiler



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


def server_sources() -> list[Path]:
    """The kernel server: its core and one adapter file per kernel family."""
    return sorted(SERVER_DIR.glob("*.cpp"))


def build_key(source: GgmlSource, isa: IsaBuild, cc: Compiler) -> str:
    """Identifies the ggml libraries: source content, CMake options, compiler."""
    h = hashlib.sha256()
    h.update(source.content_hash().encode())
    h.update(json.dumps(_cmake_options(isa), sort_keys=True).encode())
    h.update(cc.identity.encode())
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
    stamp = d / "rvvdiff-stamp.json"
    with locked(d / ".lock"):
        meta = json.loads(stamp.read_text()) if stamp.exists() else {}
        marker = _failure_marker(d)
        if "RVVDIFF_SESSION" in os.environ and marker.exists():
            raise BuildError(marker.read_text())  # failed earlier in this session: do not retry per test
        try:
            if meta.get("key") != key:
                _build_libraries(source, isa, d, cc, jobs or os.cpu_count() or 2)
                meta = {"key": key, "cflags": list(_ggml_cpu_flags(d)), "libs": [str(p) for p in _libs(d)]}
                stamp.write_text(json.dumps(meta))
            cflags, libs = tuple(meta["cflags"]), tuple(Path(p) for p in meta["libs"])
            server = _link_server(d, cc, cflags, libs, key)
        except (BuildError, CommandError) as e:
            msg = f"building ISA build {isa.name!r} of {source.describe()} failed (full log: {d / 'rvvdiff-build.log'}):\n{e}"
            marker.write_text(msg)
            raise BuildError(msg) from None
        return Build(isa, source, d, server, key, cflags, libs)


def _build_libraries(source: GgmlSource, isa: IsaBuild, d: Path, cc: Compiler, jobs: int) -> None:
    logf = d / "rvvdiff-build.log"
    with open(logf, "a") as f:
        f.write(f"=== build of {source.describe()} for {isa.name}, pid {os.getpid()}, {time.ctime()}\n")
    tc = _toolchain_file(d, cc)
    opts = [f"-D{k}={v}" for k, v in _cmake_options(isa).items()]
    run(["cmake", "-S", source.root, "-B", d, f"-DCMAKE_TOOLCHAIN_FILE={tc}", *opts],
        timeout=1800, what=f"CMake configure ({isa.name})", log_file=logf)
    run(["cmake", "--build", d, "--target", "ggml-cpu", "ggml-base", "-j", str(jobs)],
        timeout=3600, what=f"compiling ggml ({isa.name})", log_file=logf)


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:16]


def _server_objects(d: Path, cc: Compiler, cflags: tuple[str, ...], lib_key: str) -> dict[str, Path]:
    """Compile each server source once per content; return {source stem: object}."""
    headers = b"".join(p.read_bytes() for p in sorted(SERVER_DIR.glob("*.h")))
    objs = {}
    for src in server_sources():
        tag = _digest(src.read_bytes(), headers, " ".join(cflags), cc.identity, lib_key)
        obj = d / "server-obj" / f"{src.stem}-{tag}.o"
        if not obj.exists():
            obj.parent.mkdir(exist_ok=True)
            tmp = obj.with_suffix(f".tmp{os.getpid()}.o")
            run([cc.cxx, "-O2", *cflags, "-I", SERVER_DIR, "-c", src, "-o", tmp], timeout=1800,
                what=f"compiling the kernel server's {src.name}", log_file=d / "rvvdiff-build.log")
            tmp.replace(obj)
        objs[src.stem] = obj
    return objs


def _link_server(d: Path, cc: Compiler, cflags: tuple[str, ...], libs: tuple[Path, ...], lib_key: str) -> Path:
    """Link the server from its cached objects.

    Servers are kept per content hash, so differently edited adapter files
    (e.g. two families being developed at once) do not rebuild each other.
    """
    objs = list(_server_objects(d, cc, cflags, lib_key).values())
    server = d / "servers" / _digest(*(str(o) for o in objs), lib_key) / "rvvdiff-server"
    if not server.exists():
        server.parent.mkdir(parents=True, exist_ok=True)
        tmp = server.with_name(f"rvvdiff-server.tmp{os.getpid()}")
        run([cc.cxx, *objs, *libs, "-static", "-lm", "-lpthread", "-o", tmp], timeout=1800,
            what="linking the kernel server", log_file=d / "rvvdiff-build.log")
        tmp.replace(server)
    return server


def link_objects(build: Build) -> list[Path]:
    """The adapter objects and registry of a build, without the request loop (``main``):
    what a standalone reproducer links with to call an adapter directly."""
    with locked(build.dir / ".lock"):
        objs = _server_objects(build.dir, compiler(), build.cflags, build.key)
    return [o for stem, o in objs.items() if stem != "server"]
