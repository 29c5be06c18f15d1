"""Building ggml-base + ggml-cpu for riscv64 (through ggml's own CMake) and linking the kernel server.

One build directory per (source tree, ISA build), reused incrementally: a
kernel developer who edits one file of their tree pays for one recompile.  A
stamp holding the build key (a hash of the source content, the CMake options
and the compiler) says whether the libraries are current; the server's
objects and binary are cached by content on top of them.  Builds run under a
file lock, so concurrent pytest-xdist workers build once.

The build follows the tree's era.  Of the options the harness wants
(harness/core/config.py), only those the tree's CMake declares are passed; an ISA
build that needs an option the tree lacks, or whose -march (as the tree's
CMake wrote it into ggml-cpu's flags) names other extensions than the build
promises, "cannot be expressed for this tree": :class:`IsaUnavailable`, which
the plugin turns into skips with the reason.  The kernel server is compiled one
source at a time: an adapter (``k_*.cpp``) that does not compile against the
tree is left out of the link and costs only the kernels it registers
(:attr:`Build.failed_adapters`); the core (``core.cpp``, ``server.cpp``)
failing is a build error.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from harness.build.toolchain import SERVER_DIR, Compiler, compiler
from harness.core.config import CMAKE_OWN, COMMON_CMAKE, IsaBuild, cache_dir, locked
from harness.core.errors import RvvdiffError
from harness.core.proc import CommandError, run
from harness.ggml.source import GgmlSource


class BuildError(RvvdiffError, RuntimeError):
    """Configuring or compiling failed; the message has the failing command and the compiler's output."""


class IsaUnavailable(BuildError):
    """The tree's CMake cannot make this ISA build: an option it does not declare, or a -march
    that does not match what the build promises.  Not a failure: its tests are skipped with the reason."""


class BuildFailedEarlier(BuildError):
    """This ISA build already failed in the current pytest session (``RVVDIFF_SESSION``); the
    first test that needed it carries the full error.  The message is one line pointing at it."""


@dataclass(frozen=True)
class Build:
    """A finished build: the libraries, the kernel server and how they were made."""

    isa: IsaBuild
    source: GgmlSource
    dir: Path
    server: Path
    key: str
    #: The flags ggml-cpu was compiled with, plus ``-I`` the generated bindings when there are
    #: any (reused for the server's objects and the standalone reproducers).
    cflags: tuple[str, ...]
    libs: tuple[Path, ...]
    #: Adapters (``k_*.cpp`` file name) that did not compile against this tree, with the compiler's
    #: first error lines; the server was linked without them.
    failed_adapters: dict[str, str] = field(default_factory=dict)
    #: Options the harness wanted that the tree's CMake does not declare (and so were not passed).
    cmake_undeclared: tuple[str, ...] = ()

    @property
    def log(self) -> Path:
        return self.dir / "rvvdiff-build.log"

    @property
    def march(self) -> str | None:
        return _march(self.cflags)

    def missing_kernel(self, kernel: str) -> str | None:
        """Why ``kernel`` is not in this build's server (its adapter did not compile), or None."""
        for adapter, error in self.failed_adapters.items():
            if kernel in adapter_kernels(SERVER_DIR / adapter):
                first = error.splitlines()[0] if error else "no compiler message"
                return (f"not in this build: adapter {adapter} does not compile against {tree_name(self.source)} "
                        f"({first}); full log: {self.log}")
        return None


def tree_name(source: GgmlSource) -> str:
    """A short name of a tree for messages: ``ggml 0.9.4 at /path``."""
    return f"ggml {source.version} at {source.root}"


def _cmake_options(isa: IsaBuild) -> dict[str, str]:
    """The options the harness wants for ``isa`` (what is passed is :func:`plan_options`)."""
    return {**COMMON_CMAKE, **isa.cmake}


def server_sources() -> list[Path]:
    """The kernel server: its core and one adapter file per kernel family."""
    return sorted(SERVER_DIR.glob("*.cpp"))


def is_adapter(src: Path) -> bool:
    """An adapter file (``k_*.cpp``): one that fails to compile costs only its own kernels."""
    return src.name.startswith("k_")


_KERNEL = re.compile(r'^\s*RVVDIFF_KERNEL\(\s*"([^"]+)"', re.M)


@functools.cache
def _kernels_of(path: Path, mtime_ns: int) -> tuple[str, ...]:
    return tuple(_KERNEL.findall(path.read_text(errors="replace")))


def adapter_kernels(path: Path) -> tuple[str, ...]:
    """The kernel names an adapter registers (its ``RVVDIFF_KERNEL("name", ...)`` lines)."""
    return _kernels_of(path, path.stat().st_mtime_ns) if path.exists() else ()


# ------------------------------------------------------------ the tree's CMake

# A CMake comment (line or bracket) outside a quoted argument; quoted arguments are kept.
_CMAKE_COMMENT = re.compile(r'("(?:\\.|[^"\\])*")|#\[(=*)\[.*?\]\2\]|#[^\n]*', re.S)
_OPTION = re.compile(r'\b(?:option|cmake_dependent_option)\s*\(\s*([A-Za-z_]\w*)\s+"(?:\\.|[^"\\])*"'
                     r'(?:\s+([^\s)]+))?', re.I)


def declared_options(cmake_text: str) -> dict[str, str]:
    """``{name: default}`` of the ``option()`` (and ``cmake_dependent_option()``) commands in CMake text."""
    text = _CMAKE_COMMENT.sub(lambda m: m.group(1) or "", cmake_text)
    return {m.group(1): m.group(2) or "OFF" for m in _OPTION.finditer(text)}


def _cmake_files(source: GgmlSource) -> list[Path]:
    """Where a tree declares its build options (all of them part of the source's content hash)."""
    files = [source.root / "CMakeLists.txt", source.ggml / "CMakeLists.txt",
             source.ggml / "src" / "CMakeLists.txt", source.cpu_dir / "CMakeLists.txt"]
    return [f for f in dict.fromkeys(files) if f.is_file()]


def tree_options(source: GgmlSource) -> dict[str, str]:
    """The options a tree's CMake declares, with their defaults."""
    out: dict[str, str] = {}
    for f in _cmake_files(source):
        out.update(declared_options(f.read_text(errors="replace")))
    return out


@dataclass(frozen=True)
class CmakePlan:
    """What is passed to a tree's CMake for one ISA build, and whether the build can be expressed at all."""

    passed: dict[str, str]
    #: Wanted but not declared by the tree: not passed (recorded in the build log and meta).
    undeclared: dict[str, str]
    #: Why the ISA build cannot be expressed for this tree (an option it needs ON is not declared), or None.
    unavailable: str | None = None


def plan_options(source: GgmlSource, isa: IsaBuild, declared: dict[str, str] | None = None) -> CmakePlan:
    """The -D options for ``isa`` on ``source``: the wanted ones the tree declares, plus CMake's own.

    An option of the ISA build itself (``isa.cmake``) wanted ON that the tree does not declare
    makes the build inexpressible; one wanted OFF is simply absent (the -march check after
    configuring confirms the tree does not turn that extension on by itself).
    """
    declared = tree_options(source) if declared is None else declared
    wanted = _cmake_options(isa)
    passed = {k: v for k, v in wanted.items() if k in CMAKE_OWN or k.startswith("CMAKE_") or k in declared}
    undeclared = {k: v for k, v in wanted.items() if k not in passed}
    needed = [k for k, v in isa.cmake.items() if v.upper() == "ON" and k in undeclared]
    reason = None
    if needed:
        reason = (f"{tree_name(source)} declares no {' / '.join(needed)} option"
                  f"{'s' if len(needed) > 1 else ''}: its CMake cannot build {isa.name} ({isa.summary})")
    return CmakePlan(passed, undeclared, reason)


# ------------------------------------------------------------ -march

# What "g" stands for, and the base letters: never part of an ISA build's promise, always emulated.
_G = ("i", "m", "a", "f", "d", "zicsr", "zifencei")
_BASE = frozenset({*_G, "g", "c"})


def march_extensions(march: str) -> frozenset[str]:
    """The extensions a -march string names, in either era's spelling:
    ``rv64gc_zfh_v_zvfh_zicbop`` (2025) or ``rv64gcv_zfh_zvfh_zvfbfwma_zicbop_zihintpause`` (later)."""
    m = re.fullmatch(r"rv(?:32|64)([a-z0-9]*)((?:_[a-z0-9]+)*)", march.strip().lower().removeprefix("-march="))
    if not m:
        raise ValueError(f"not a RISC-V -march string: {march!r}")
    singles = re.sub(r"\d+(?:p\d+)?", "", m.group(1))  # drop version numbers (i2p1 ...)
    exts = set(singles)
    for tok in m.group(2).split("_")[1:]:
        tok = re.sub(r"(?<=[a-z])\d+p\d+$", "", tok)  # zfh1p0 -> zfh
        if len(tok) > 1 and not tok.startswith(("z", "s", "x")):
            exts.update(tok)  # a run of single letters after an underscore ("_v", "_vc")
        else:
            exts.add(tok)
    if "g" in exts:
        exts.update(_G)
    return frozenset(exts)


def _march(cflags: tuple[str, ...] | list[str]) -> str | None:
    found = [f.removeprefix("-march=") for f in cflags if f.startswith("-march=")]
    return found[-1] if found else None


def _promise(isa: IsaBuild) -> str:
    banned = [e for e, on in isa.qemu.items() if not on and not e.endswith("min")]
    return f"{' + '.join(isa.march)}" + (f" without {', '.join(banned)}" if banned else "")


def march_mismatch(isa: IsaBuild, march: str | None) -> str | None:
    """Why a -march does not give what ``isa`` promises (its ``march`` extensions, none of its
    ``qemu`` properties that are off), or None when it does.  Extra extensions are fine here
    (see :func:`march_extras`)."""
    if march is None:
        return (f"ggml-cpu is compiled without -march, so without the {isa.name} build's "
                f"{' + '.join(isa.march)}")
    try:
        exts = march_extensions(march)
    except ValueError as e:
        return str(e)
    missing = [e for e in isa.march if e not in exts]
    banned = [e for e, on in isa.qemu.items() if not on and e in exts]
    if not (missing or banned):
        return None
    what = "; ".join(p for p in (f"lacks {', '.join(missing)}" if missing else "",
                                 f"has {', '.join(banned)}" if banned else "") if p)
    return f"its CMake compiles ggml-cpu with -march={march}, which {what}; the {isa.name} build is {_promise(isa)}"


def march_extras(isa: IsaBuild, march: str | None) -> tuple[str, ...]:
    """Extensions the tree's -march adds beyond the base ISA and ``isa``'s own (zicbop, zihintpause, zba ...)."""
    if march is None:
        return ()
    try:
        exts = march_extensions(march)
    except ValueError:
        return ()
    return tuple(sorted(exts - _BASE - set(isa.extensions)))


# ------------------------------------------------------------ building

def build_key(source: GgmlSource, isa: IsaBuild, cc: Compiler) -> str:
    """Identifies the ggml libraries: source content, CMake options, compiler.

    The options hashed are the *wanted* ones: what is passed (:func:`plan_options`) follows from
    them and the tree's CMake files, which the source's content hash covers.
    """
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


def session_id() -> str | None:
    """The pytest session this process belongs to (set by the controlling process), or None outside pytest."""
    return os.environ.get("RVVDIFF_SESSION")


def failure_marker(d: Path, session: str | None = None) -> Path:
    """A build failure is remembered for the current pytest session only (``RVVDIFF_SESSION``,
    shared by the controller and its xdist workers), so no other test or worker retries it."""
    return d / f"failed-{session or session_id() or 'none'}.txt"


def session_note(d: Path, session: str | None = None) -> Path:
    """What this session's build of ``d`` came to (JSON: failed adapters, undeclared options, ...),
    for the controlling process's summary."""
    return d / f"session-{session or session_id() or 'none'}.json"


def forget_session(session: str) -> None:
    """Remove a finished session's failure markers and notes from every build directory."""
    for f in [*(cache_dir() / "build").glob(f"*/failed-{session}.txt"),
              *(cache_dir() / "build").glob(f"*/session-{session}.json")]:
        f.unlink(missing_ok=True)


def _write_note(d: Path, note: dict) -> None:
    if session_id() is None:
        return
    p = session_note(d)
    tmp = p.with_name(p.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(note))
    tmp.replace(p)


def _log(d: Path, text: str) -> None:
    with open(d / "rvvdiff-build.log", "a") as f:
        f.write(text if text.endswith("\n") else text + "\n")


def failure_summary(error: str) -> str:
    """One line of a build failure's message (:func:`ensure_built`'s): its first compiler error, or
    else the line that says what failed."""
    m = re.search(r"^first errors:\n  (.*)$", error, re.M)
    if m:
        return m.group(1)
    lines = [ln.strip() for ln in error.splitlines() if ln.strip()]
    return lines[1] if len(lines) > 1 else (lines or ["no message"])[0]


def failed_reason(source: GgmlSource, isa: IsaBuild, error: str) -> str:
    """The one line that every test of a failed ISA build but the first is skipped with."""
    return (f"ISA build {isa.name} of {tree_name(source)} failed ({failure_summary(error)}): its error is reported "
            f"once, in the first test that needed it (and 'rvvdiff: ISA build {isa.name} ... failed' in the summary); "
            f"log: {build_dir(source, isa) / 'rvvdiff-build.log'}")


def ensure_built(source: GgmlSource, isa: IsaBuild, *, jobs: int | None = None) -> Build:
    """Return the build of ``source`` for ``isa``, configuring and compiling what is out of date.

    Raises :class:`IsaUnavailable` when the tree's CMake cannot express ``isa``,
    :class:`BuildFailedEarlier` (one line) when it failed earlier in this pytest session, and
    :class:`BuildError` (the command, the compiler's message, the log, what to do) when it fails now.
    """
    cc = compiler()
    d = build_dir(source, isa)
    plan = plan_options(source, isa)
    d.mkdir(parents=True, exist_ok=True)
    if plan.unavailable:
        _write_note(d, {"isa": isa.name, "unavailable": plan.unavailable})
        raise IsaUnavailable(plan.unavailable)
    key = build_key(source, isa, cc)
    stamp = d / "rvvdiff-stamp.json"
    log = d / "rvvdiff-build.log"
    with locked(d / ".lock"):
        meta = json.loads(stamp.read_text()) if stamp.exists() else {}
        marker = failure_marker(d)
        if session_id() is not None and marker.exists():
            raise BuildFailedEarlier(failed_reason(source, isa, marker.read_text()))
        try:
            # A stamp without libraries records a configure whose -march did not fit; the check is
            # redone from its flags (cheap), so a corrected harness need not wait for a new key.
            if meta.get("key") != key or ("libs" not in meta and not _unexpressible(source, isa, meta["cflags"])):
                meta = _build_libraries(source, isa, d, cc, jobs or os.cpu_count() or 2, plan, key)
                stamp.write_text(json.dumps(meta))
            why = _unexpressible(source, isa, meta["cflags"])
            if why:
                raise IsaUnavailable(why)
            cflags, libs = tuple(meta["cflags"]), tuple(Path(p) for p in meta["libs"])
            cflags += ("-I", str(_bindings(source, d)))
            server, failed = _link_server(d, cc, cflags, libs, key)
        except IsaUnavailable as e:
            _write_note(d, {"isa": isa.name, "unavailable": str(e)})
            raise
        except (BuildError, CommandError) as e:
            # The compiler's first errors lead: the tail below may have lost them among the follow-on ones.
            first = first_errors(e.stderr + e.stdout, 3).splitlines() if isinstance(e, CommandError) else []
            lead = "".join(f"  {line}\n" for line in first)
            src_arg = "" if source.pinned else f" --ggml-src {shlex.quote(str(source.root))}"
            msg = (f"building ISA build {isa.name!r} of {source.describe()} failed (full log: {log}):\n"
                   + (f"first errors:\n{lead}" if lead else "") + f"{e}\n"
                   f"What to do: fix the tree (or the harness's server sources) and rerun; "
                   f"`rvvdiff build{src_arg} --isa {isa.name}` retries this build alone; "
                   f"--isa selects other ISA builds meanwhile.")
            if session_id() is not None:
                marker.write_text(msg)
            raise BuildError(msg) from None
        b = Build(isa, source, d, server, key, cflags, libs, failed, tuple(plan.undeclared))
        _write_note(d, {"isa": isa.name, "server": str(server), "log": str(log), "failed_adapters": failed,
                        "cmake_undeclared": list(plan.undeclared), "march": b.march})
        return b


def _build_libraries(source: GgmlSource, isa: IsaBuild, d: Path, cc: Compiler, jobs: int,
                     plan: CmakePlan, key: str) -> dict:
    """Configure, check the -march the tree's CMake chose, compile; return the stamp's content."""
    _log(d, f"=== build of {source.describe()} for {isa.name}, pid {os.getpid()}, {time.ctime()}")
    if plan.undeclared:
        _log(d, "options wanted but not declared by this tree (not passed): "
                + " ".join(f"{k}={v}" for k, v in plan.undeclared.items()))
    was = _configured_compiler(d)
    if was is not None and was != cc.cc:
        # CMake keeps the compiler of a directory's first configure whatever the toolchain file says now.
        _log(d, f"the directory was configured with another compiler ({was}): configuring afresh")
        (d / "CMakeCache.txt").unlink(missing_ok=True)
        shutil.rmtree(d / "CMakeFiles", ignore_errors=True)
    cmake_digest = digest(*(p.read_bytes() for p in _cmake_files(source) if p.is_file()))
    stamp = d / "rvvdiff-stamp.json"
    before = json.loads(stamp.read_text()).get("cmake_files") if stamp.exists() else cmake_digest
    if before != cmake_digest and (d / "CMakeCache.txt").exists():
        # The same directory at another revision (a bisect step, the gate's BASE slot): a cache
        # entry the old CMake files set and the new ones test (e.g. MATH_LIBRARY-NOTFOUND) would
        # survive; the cache is dropped, the compiled objects are kept.
        _log(d, "the tree's CMake files changed since the last configure: configuring with a fresh cache")
        (d / "CMakeCache.txt").unlink()
    tc = _toolchain_file(d, cc)
    opts = [f"-D{k}={v}" for k, v in plan.passed.items()]
    logf = d / "rvvdiff-build.log"
    run(["cmake", "-S", source.root, "-B", d, f"-DCMAKE_TOOLCHAIN_FILE={tc}", *opts],
        timeout=1800, what=f"CMake configure ({isa.name})", log_file=logf)
    cflags = _ggml_cpu_flags(d)
    meta = {"key": key, "cflags": list(cflags), "cmake": plan.passed, "cmake_undeclared": plan.undeclared,
            "cmake_files": cmake_digest}
    why = _unexpressible(source, isa, cflags)
    if why:
        _log(d, f"not built: {why}")
        return {**meta, "unavailable": why}
    run(["cmake", "--build", d, "--target", "ggml-cpu", "ggml-base", "-j", str(jobs)],
        timeout=3600, what=f"compiling ggml ({isa.name})", log_file=logf)
    return {**meta, "libs": [str(p) for p in _libs(d)]}


def _configured_compiler(d: Path) -> str | None:
    """The C compiler a build directory was first configured with (CMake's record of it), if any."""
    for f in sorted(d.glob("CMakeFiles/*/CMakeCCompiler.cmake")):
        m = re.search(r'^set\(CMAKE_C_COMPILER "([^"]*)"\)', f.read_text(errors="replace"), re.M)
        if m:
            return m.group(1)
    return None


def _unexpressible(source: GgmlSource, isa: IsaBuild, cflags: tuple[str, ...] | list[str]) -> str | None:
    why = march_mismatch(isa, _march(cflags))
    return f"{tree_name(source)}: {why}: this tree cannot make the {isa.name} build" if why else None


def _bindings(source: GgmlSource, d: Path) -> Path:
    """Generate the server's bindings for ``source`` into ``d/bindings`` (harness/build/bindings.py)."""
    from harness.build import bindings as gen

    write = gen.write
    out = d / "bindings"
    fresh = d / f"bindings.tmp{os.getpid()}"
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(parents=True)
    try:
        gen_dir = Path(write(source, fresh))
    except Exception as e:  # noqa: BLE001 - any failure of the generator is this build's one error
        shutil.rmtree(fresh, ignore_errors=True)
        tb = "".join(traceback.format_exception(e)[-6:])
        raise BuildError(f"generating the kernel server's bindings from {tree_name(source)} failed "
                         f"(harness/build/bindings.py):\n{tb}") from None
    # Bring ``out`` to exactly the generated set, touching only what changed (readers of an
    # unchanged file, e.g. a reproducer being compiled, are not disturbed).
    out.mkdir(exist_ok=True)
    new = {p.relative_to(gen_dir): p for p in gen_dir.rglob("*") if p.is_file()}
    for p in [q for q in out.rglob("*") if q.is_file()]:
        if p.relative_to(out) not in new:
            p.unlink()
    for rel, p in new.items():
        dst = out / rel
        if not dst.exists() or dst.read_bytes() != p.read_bytes():
            dst.parent.mkdir(parents=True, exist_ok=True)
            p.replace(dst)
    shutil.rmtree(fresh, ignore_errors=True)
    return out


def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:16]


def _include_dirs(cflags: tuple[str, ...]) -> list[Path]:
    """The ``-I`` directories of ``cflags`` that the harness generated (under the build dir)."""
    return [Path(cflags[i + 1]) for i, f in enumerate(cflags[:-1]) if f == "-I" and Path(cflags[i + 1]).name == "bindings"]


def _generated(cflags: tuple[str, ...]) -> bytes:
    """The content of the generated bindings the server objects include (part of their digest)."""
    out = []
    for inc in _include_dirs(cflags):
        for p in sorted(q for q in inc.rglob("*") if q.is_file()):
            out.append(str(p.relative_to(inc)).encode() + b"\0" + p.read_bytes())
    return b"\0".join(out)


def first_errors(text: str, n: int = 3) -> str:
    """The compiler's first ``n`` error lines (paths shortened to file names)."""
    lines = ([ln.strip() for ln in text.splitlines() if re.search(r"\berror:", ln)]
             or [ln.strip() for ln in text.splitlines()
                 if re.search(r"(?i)\berror\b|\bnot found\b|undefined reference", ln)])
    short = [re.sub(r"^\S*/([^/\s]+:\d+)", r"\1", ln) for ln in lines]
    return "\n".join(short[:n]) or (text.strip().splitlines() or ["no compiler message"])[-1]


def server_objects(d: Path, cc: Compiler, cflags: tuple[str, ...], lib_key: str,
                    sources: list[Path] | None = None) -> tuple[dict[str, Path], dict[str, str]]:
    """Compile each server source once per content; return ({source stem: object}, {failed adapter
    file: its first errors}).  An adapter's failure is cached like an object, so it is not retried
    until something it depends on changes; a core source failing raises :class:`CommandError`."""
    headers = b"".join(p.read_bytes() for p in sorted(SERVER_DIR.glob("*.h")))
    parts = (headers, _generated(cflags))
    objs: dict[str, Path] = {}
    failed: dict[str, str] = {}
    logf = d / "rvvdiff-build.log"
    for src in sources if sources is not None else server_sources():
        tag = digest(src.read_bytes(), *parts, " ".join(cflags), cc.identity, lib_key)
        obj = d / "server-obj" / f"{src.stem}-{tag}.o"
        fail = obj.with_suffix(".failed")
        if is_adapter(src) and fail.exists():
            failed[src.name] = fail.read_text()
            continue
        if not obj.exists():
            obj.parent.mkdir(exist_ok=True)
            tmp = obj.with_suffix(f".tmp{os.getpid()}.o")
            try:
                run([cc.cxx, "-O2", *cflags, "-I", SERVER_DIR, "-c", src, "-o", tmp], timeout=1800,
                    what=f"compiling the kernel server's {src.name}", log_file=logf)
            except CommandError as e:
                if not is_adapter(src):
                    raise
                failed[src.name] = first_errors(e.stderr + e.stdout)
                fail.write_text(failed[src.name])
                _log(d, f"adapter {src.name} does not compile against this tree: the server is linked without "
                        f"it (kernels {', '.join(adapter_kernels(src)) or 'none'} are not in this build)")
                continue
            tmp.replace(obj)
        objs[src.stem] = obj
    return objs, failed


def _link_server(d: Path, cc: Compiler, cflags: tuple[str, ...], libs: tuple[Path, ...],
                 lib_key: str) -> tuple[Path, dict[str, str]]:
    """Link the server from its cached objects, without adapters that do not compile.

    Servers are kept per content hash, so differently edited adapter files
    (e.g. two families being developed at once) do not rebuild each other.
    """
    objs, failed = server_objects(d, cc, cflags, lib_key)
    objs_l = list(objs.values())
    server = d / "servers" / digest(*(str(o) for o in objs_l), lib_key) / "rvvdiff-server"
    if not server.exists():
        server.parent.mkdir(parents=True, exist_ok=True)
        tmp = server.with_name(f"rvvdiff-server.tmp{os.getpid()}")
        run([cc.cxx, *objs_l, *libs, "-static", "-lm", "-lpthread", "-o", tmp], timeout=1800,
            what="linking the kernel server", log_file=d / "rvvdiff-build.log")
        tmp.replace(server)
    return server, failed


def link_objects(build: Build) -> list[Path]:
    """The adapter objects and registry of a build, without the request loop (``main``):
    what a standalone reproducer links with to call an adapter directly."""
    with locked(build.dir / ".lock"):
        objs, _ = server_objects(build.dir, compiler(), build.cflags, build.key)
    return [o for stem, o in objs.items() if stem != "server"]
