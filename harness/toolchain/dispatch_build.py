"""A distribution's build of a tree: every riscv64 CPU variant as a shared library, ggml choosing one at run time.

Distributions and release archives build ggml for no one board: ``-DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON
-DGGML_NATIVE=OFF`` with shared libraries (:data:`harness.core.config.DISPATCH`).  The tree's CMake then makes one
``libggml-cpu-<variant>.so`` per variant it declares for riscv64 (``ggml_add_cpu_backend_variant(riscv64_v RVV)``
in ggml/src/CMakeLists.txt: :func:`tree_variants`), each compiled with its own ``-march`` (the compiler's default for
``riscv64_0``, ``-march=rv64gc_v`` for ``riscv64_v`` in the pinned tree), and ggml's loader scores each at run time
(``ggml_backend_score``, arch/riscv/cpu-feats.cpp) and loads the best.

This module is that build, one more :class:`~harness.toolchain.cmake_build.CmakeBuild` of the one CMake room: the
tree configured once per compiler, ``ggml-base`` and ``ggml`` built, then each variant's target on its own, so a
variant a compiler cannot build is recorded with the compiler's first errors (:attr:`Variant.error`) and the others
are still made.  Each variant's compile flags (``-march``, ``-D GGML_USE_*``) are read from CMake's own record, and
what they let the code assume is asked of the compiler itself (its predefined ``__riscv_*`` macros:
:attr:`Variant.extensions`), so no ``-march`` is parsed here.  Beside the libraries goes the probe
(harness/server/dispatch_probe.c), a C program that uses ggml's public API only (``ggml_backend_load_all``, the CPU
device and its features, a mul_mat per weight type) and calls each variant's score as the loader does.

Shared libraries need a C library at run time: the build is glibc, dynamic, by GCC 14 as it is and by zig's clang
for ``riscv64-linux-gnu`` (:func:`~harness.toolchain.compilers.shared_compiler`); both run under QEMU against the
GCC 14 root's riscv64 glibc (:func:`~harness.toolchain.compilers.glibc_root`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from harness.core.config import DISPATCH, locked
from harness.core.errors import RvvdiffError
from harness.core.proc import CommandError, run
from harness.ggml.source import GgmlSource
from harness.toolchain.cmake import cmake_files, plan_options, tree_name
from harness.toolchain.cmake_build import CmakeBuild, build, build_dir, configure, cpu_flags, read_stamp, write_stamp
from harness.toolchain.compilers import SERVER_DIR, Compiler, predefined, shared_compiler
from harness.toolchain.server import append_log, digest, first_errors

PROBE_SOURCE = SERVER_DIR / "dispatch_probe.c"
#: The probe's file name in the build's library directory.
PROBE = "rvvdiff-dispatch-probe"
#: The extensions whose ``__riscv_<ext>`` macro says a variant's code may use them (what an emulated CPU is
#: checked for: the vector extension and those ggml's riscv64 code has paths for).
EXTENSIONS = ("v", "zfh", "zfhmin", "zvfh", "zvfhmin", "zfbfmin", "zvfbfmin", "zvfbfwma", "zba", "zicbop", "zihintpause")



class DispatchError(RvvdiffError, RuntimeError):
    """The dispatch build failed (ggml-base, libggml.so or the probe; a variant that fails is recorded instead)."""


class DispatchUnavailable(DispatchError):
    """The tree's CMake cannot make the dispatch build (no ``GGML_CPU_ALL_VARIANTS``, no riscv64 variant)."""


_VARIANT = re.compile(r"ggml_add_cpu_backend_variant\(\s*(riscv64\w*)([^)]*)\)")


def tree_variants(source: GgmlSource) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The riscv64 CPU variants the tree's CMake declares, in its order, each with the features it turns on
    (``(("riscv64_0", ()), ("riscv64_v", ("RVV",)))`` in the pinned tree); empty for a tree without them."""
    f = source.ggml / "src" / "CMakeLists.txt"
    text = f.read_text(errors="replace") if f.is_file() else ""
    return tuple((m.group(1), tuple(m.group(2).split())) for m in _VARIANT.finditer(text))


@dataclass(frozen=True)
class Variant:
    """One CPU variant of a dispatch build."""

    name: str
    #: The features the tree's CMake turns on for it (``RVV``).
    features: tuple[str, ...]
    #: Its ``-march`` / ``-mabi`` and ``-D GGML_USE_*`` flags, as CMake compiles it.
    flags: tuple[str, ...]
    #: The extensions of :data:`EXTENSIONS` its code may use (the compiler's ``__riscv_<ext>`` under its flags).
    extensions: tuple[str, ...]
    #: ``libggml-cpu-<name>.so``; None when it did not build.
    library: Path | None
    #: The compiler's first errors when it did not build.
    error: str = ""

    @property
    def march(self) -> str | None:
        return next((f.split("=", 1)[1] for f in self.flags if f.startswith("-march=")), None)

    def as_json(self) -> dict:
        return {"name": self.name, "features": list(self.features), "flags": list(self.flags),
                "extensions": list(self.extensions), "library": str(self.library) if self.library else None,
                "error": self.error}


@dataclass(frozen=True)
class Dispatch:
    """A finished dispatch build: the variants, the probe beside them, how they were made."""

    source: GgmlSource
    #: The compiler's name (``gcc14``, ``clang``).
    compiler: str
    identity: str
    dir: Path
    key: str
    variants: tuple[Variant, ...]
    #: The probe program, in the libraries' directory.
    probe: Path
    #: The options passed to the tree's CMake.
    options: dict[str, str]

    @property
    def log(self) -> Path:
        return self.dir / "rvvdiff-build.log"

    def variant(self, library_name: str) -> Variant | None:
        """The variant whose library is ``library_name`` (a path or a file name), or None."""
        name = Path(library_name).name
        return next((v for v in self.variants if v.library is not None and v.library.name == name), None)

    def describe(self) -> str:
        return f"the dispatch build of {tree_name(self.source)} by {self.compiler} ({self.identity})"


def _key(source: GgmlSource, cc: Compiler, options: dict[str, str]) -> str:
    h = hashlib.sha256()
    for part in (source.content_hash(), json.dumps(options, sort_keys=True), cc.identity, PROBE_SOURCE.read_text()):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def _variant_flags(d: Path, name: str) -> tuple[str, ...]:
    return tuple(f for f in cpu_flags(d, f"ggml-cpu-{name}") or ()
                 if f.startswith(("-march=", "-mabi=", "-DGGML_USE_", "-DGGML_CPU_")))


def _extensions(cc: Compiler, flags: tuple[str, ...]) -> tuple[str, ...]:
    macros = predefined(cc, tuple(f for f in flags if f.startswith(("-march=", "-mabi="))))
    return tuple(e for e in EXTENSIONS if f"__riscv_{e}" in macros)


def _library(d: Path, name: str) -> Path | None:
    hits = sorted(d.glob(f"**/lib{name}.so"))
    return hits[0] if hits else None


def ensure_dispatch(source: GgmlSource, compiler_name: str, *, jobs: int = 2) -> Dispatch:
    """The dispatch build of ``source`` by the named compiler, built when out of date (under the directory's lock).

    :class:`DispatchUnavailable` when the tree's CMake cannot make it (no ``GGML_CPU_ALL_VARIANTS``, no riscv64
    variant); :class:`DispatchError` when ggml-base, libggml.so or the probe fail (a variant that fails is recorded,
    not raised)."""
    declared = tree_variants(source)
    plan = plan_options(source, DISPATCH)
    if plan.unavailable or not declared:
        raise DispatchUnavailable(plan.unavailable or f"{tree_name(source)} declares no riscv64 CPU variant "
                             "(ggml_add_cpu_backend_variant(riscv64...) in ggml/src/CMakeLists.txt): no dispatch build")
    cc = shared_compiler(compiler_name)
    d = build_dir(source, DISPATCH, compiler_name)
    key = _key(source, cc, plan.passed)
    stamp = d / "rvvdiff-stamp.json"
    with locked(d / ".lock"):
        meta = read_stamp(stamp)
        if meta.get("key") != key or not Path(meta.get("probe", "/")).is_file():
            meta = _build(source, cc, d, plan.passed, key, declared=declared, jobs=jobs)
            write_stamp(stamp, meta)
    variants = tuple(Variant(v["name"], tuple(v["features"]), tuple(v["flags"]), tuple(v["extensions"]),
                             Path(v["library"]) if v["library"] else None, v["error"]) for v in meta["variants"])
    return Dispatch(source, compiler_name, cc.identity, d, key, variants, Path(meta["probe"]), dict(plan.passed))


def _build(source: GgmlSource, cc: Compiler, d: Path, options: dict[str, str], key: str, *,
           declared: tuple[tuple[str, tuple[str, ...]], ...], jobs: int) -> dict:
    """Configure, build ggml-base and ggml, each variant on its own, and the probe; the stamp's content."""
    d.mkdir(parents=True, exist_ok=True)
    log = d / "rvvdiff-build.log"
    append_log(d, f"=== dispatch build of {source.describe()} by {cc.name}, pid {os.getpid()}, {time.ctime()}")
    b = CmakeBuild(source.root, d, options, compiler=cc, ccache=True,
                   inputs=digest(*(p.read_bytes() for p in cmake_files(source) if p.is_file())))
    try:
        configure(b, what=f"dispatch build ({cc.name})", log=log)
        build(b, ("ggml-base",), jobs=jobs, timeout=3600, what=f"compiling ggml-base ({cc.name})", log=log)
    except CommandError as e:
        raise DispatchError(f"the dispatch build of {tree_name(source)} by {cc.name} failed (log: {log}):\n"
                         f"{first_errors(e.stderr + e.stdout)}") from None
    variants = []
    for name, features in declared:
        flags = _variant_flags(d, name)
        error = ""
        try:
            build(b, (f"ggml-cpu-{name}",), jobs=jobs, timeout=3600, what=f"compiling variant {name} ({cc.name})", log=log)
        except CommandError as e:
            error = first_errors(e.stderr + e.stdout)
            append_log(d, f"variant {name} did not build: {error}")
            for stale in d.glob(f"**/libggml-cpu-{name}.so"):   # a library of an earlier build: ggml would load it
                stale.unlink()
        lib = None if error else _library(d, f"ggml-cpu-{name}")
        variants.append(Variant(name, features, flags, _extensions(cc, flags), lib, error).as_json())
    # ggml depends on every variant (add_dependencies in the tree's ggml_add_backend_library): its ``/fast`` rule
    # links it alone, so a variant that did not build does not stop it.
    try:
        build(b, ("ggml/fast",), jobs=jobs, timeout=1800, what=f"linking ggml ({cc.name})", log=log)
    except CommandError as e:
        raise DispatchError(f"linking libggml.so of {tree_name(source)} by {cc.name} failed (log: {log}):\n"
                         f"{first_errors(e.stderr + e.stdout)}") from None
    bindir = _library(d, "ggml")
    if bindir is None:
        raise DispatchError(f"the dispatch build of {tree_name(source)} made no libggml.so (log: {log})")
    probe = bindir.parent / PROBE
    tmp = probe.with_name(probe.name + f".tmp{os.getpid()}")
    run([cc.cc, "-O1", "-std=gnu11", str(PROBE_SOURCE), "-I", str(source.ggml / "include"), "-o", str(tmp),
         "-L", str(bindir.parent), "-lggml", "-lggml-base", "-ldl", "-lm", "-Wl,-rpath,$ORIGIN"],
        timeout=600, what=f"building the dispatch probe ({cc.name})", log_file=log)
    tmp.replace(probe)
    return {"key": key, "variants": variants, "probe": str(probe)}
