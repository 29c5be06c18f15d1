"""The host build of a tree's reference quantizers: its ggml-base compiled by the host's C compiler and
linked with ``rvvdiff-host-quantize`` (harness/server/host_quantize.c).

The weight corpus of the quantized dot tests (cases/quant_dot.py) is made by ``ggml_quantize_chunk``.
Under QEMU the IQ1 / IQ2 quantizers spend minutes building their grid tables (about 330 s of a cold main
job on 2 cores); on the host they take a second.  The quantizers are scalar reference code of ggml-base,
so the host's rows are valid rows of every type, as the emulated build's are.  Where the host build is
impossible (no host compiler, a tree whose ggml-base does not build on the host), :func:`quantizer`
says why and the caller makes the corpus under the emulator as before.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import struct
from pathlib import Path

import numpy as np

from harness.core.config import cache_dir, locked
from harness.core.proc import CommandError, execute, run
from harness.ggml.source import GgmlSource
from harness.toolchain.cmake_build import CmakeBuild, build, configure
from harness.toolchain.compilers import SERVER_DIR

DRIVER = SERVER_DIR / "host_quantize.c"
NAME = "rvvdiff-host-quantize"
#: The CMake options of the host build, configured from the tree's root as the cross builds are (a llama.cpp
#: root or a ggml repository): ggml-base alone, static, no CPU backend (the quantizers are in base).
OPTIONS = {"CMAKE_BUILD_TYPE": "Release", "BUILD_SHARED_LIBS": "OFF", "GGML_CPU": "OFF", "GGML_NATIVE": "OFF",
           "GGML_OPENMP": "OFF", "GGML_BUILD_TESTS": "OFF", "GGML_BUILD_EXAMPLES": "OFF", "LLAMA_BUILD_TESTS": "OFF",
           "LLAMA_BUILD_EXAMPLES": "OFF", "LLAMA_BUILD_TOOLS": "OFF", "LLAMA_BUILD_SERVER": "OFF", "LLAMA_CURL": "OFF"}


class HostBuildUnavailable(Exception):
    """The host cannot build the tree's quantizers; the message says why and what to do."""


def _host_tools() -> tuple[str, str]:
    cc, cxx = shutil.which(os.environ.get("CC") or "cc"), shutil.which(os.environ.get("CXX") or "c++")
    if cc is None or cxx is None or shutil.which("cmake") is None:
        raise HostBuildUnavailable("the host has no C/C++ compiler or no cmake (cc, c++, cmake on PATH): install "
                                   "build-essential and cmake (ci/setup.sh does)")
    return cc, cxx


def _key(source: GgmlSource, cc: str, cxx: str) -> str:
    """The tree's ggml-base sources and CMake files, the driver, and the host compilers' identities (not
    ggml-cpu's sources, which the host build does not compile: mutants of the RVV kernels reuse it); once per
    process and tree."""
    return _key_of(source.ggml, cc, cxx)


@functools.cache
def _key_of(g: Path, cc: str, cxx: str) -> str:
    h = hashlib.sha256()
    files = [g / "CMakeLists.txt", *sorted((g / "src").glob("*.[ch]")), *sorted((g / "src").glob("*.cpp")),
             *sorted((g / "src").glob("*.txt")), *sorted((g / "include").glob("*.h")), *sorted((g / "cmake").glob("*")),
             DRIVER]
    for p in files:
        if p.is_file():
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    for tool in (cc, cxx):
        h.update(execute([tool, "--version"], timeout=60).finished(f"{tool} --version").stdout.encode())
    return h.hexdigest()[:16]


def quantizer(source: GgmlSource) -> Path:
    """The host program that quantizes rows with ``source``'s ggml-base, built once per tree and host
    compiler (cached, locked for concurrent workers).  Raises :class:`HostBuildUnavailable`."""
    cc, cxx = _host_tools()
    d = cache_dir() / "host" / _key(source, cc, cxx)
    exe, failed = d / NAME, d / "failed.txt"
    with locked(d.with_suffix(".lock")):
        if exe.exists():
            return exe
        if failed.exists():
            raise HostBuildUnavailable(failed.read_text())
        d.mkdir(parents=True, exist_ok=True)
        log = d / "build.log"
        b = CmakeBuild(source.root, d / "b", OPTIONS, env={"CC": cc, "CXX": cxx})
        try:
            configure(b, what="host ggml-base", log=log, timeout=600)
            build(b, ("ggml-base",), what="compiling ggml-base for the host", log=log, timeout=1800)
            libs = sorted((d / "b").rglob("libggml-base.a"))
            if not libs:
                raise HostBuildUnavailable(f"the host build of {source.describe()} made no libggml-base.a (log {log})")
            run([cc, "-O2", "-I", source.ggml / "include", "-c", DRIVER, "-o", d / "driver.o"], timeout=600,
                what="compiling rvvdiff-host-quantize", log_file=log)
            run([cxx, d / "driver.o", libs[0], "-lm", "-lpthread", "-o", d / "tmp-exe"], timeout=600,
                what="linking rvvdiff-host-quantize", log_file=log)
        except CommandError as e:
            why = (f"the host build of {source.describe()}'s ggml-base failed ({str(e).splitlines()[0]} log {log}): "
                   f"{(e.stderr or e.stdout).strip()[-300:]}")
            failed.write_text(why)
            raise HostBuildUnavailable(why) from None
        (d / "tmp-exe").replace(exe)
        (d / "build.json").write_text(json.dumps({"tree": source.describe(), "cc": cc, "cxx": cxx}))
        return exe


def quantize(exe: Path, type_id: int, batches: list[np.ndarray], imatrices: list[np.ndarray],
             row_bytes: list[int]) -> list[np.ndarray]:
    """Each of ``batches`` (float32, 2-D) quantized to ``type_id`` by one run of the host program (the type's
    grid tables built once): per batch, one row of bytes per row."""
    request, sizes = b"", []
    for rows, imatrix, rb in zip(batches, imatrices, row_bytes, strict=True):
        rows = np.ascontiguousarray(rows, np.float32)
        request += struct.pack("<iqq", type_id, *rows.shape) + rows.tobytes() \
            + np.ascontiguousarray(imatrix, np.float32).tobytes()
        sizes.append((rows.shape[0], rb))
    cp = execute([exe], input=request, text=False, timeout=1200)
    want = sum(n * rb for n, rb in sizes)
    if cp.returncode != 0 or len(cp.stdout) != want:
        raise HostBuildUnavailable(f"{exe} failed on type {type_id} (exit {cp.returncode}, {len(cp.stdout)} of "
                                   f"{want} bytes): {cp.stderr.decode(errors='replace').strip()[-300:]}")
    out, at = [], 0
    for n, rb in sizes:
        out.append(np.frombuffer(cp.stdout, np.uint8, n * rb, at).reshape(n, rb))
        at += n * rb
    return out
