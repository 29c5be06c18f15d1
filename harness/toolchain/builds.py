"""Building ggml-base + ggml-cpu for riscv64 (through ggml's own CMake) and linking the kernel server.

One build directory per (source tree, ISA build, compiler), reused incrementally: a
kernel developer who edits one file of their tree pays for one recompile.  A
stamp holding the build key (a hash of the source content, the CMake options
and the compiler) says whether the libraries are current; the server's
objects and binary are cached by content on top of them.  Builds run under a
file lock, so concurrent pytest-xdist workers build once.

The build follows the tree's era.  Of the options the harness wants
(harness/core/config.py), only those the tree's CMake declares or reads are passed; an ISA
build that needs an option the tree lacks, or whose -march (as the tree's
CMake wrote it into ggml-cpu's flags) names other extensions than the build
promises, "cannot be expressed for this tree": :class:`IsaUnavailable`, which
the plugin turns into skips with the reason.  So is a -march the compiler itself
rejects (GCC 14 does not know zvfbfwma, harness/core/matrix.py's ``CANNOT_MAKE``): probed once per build key,
recorded in the stamp, in the compiler's own words.  The kernel server is compiled one source at a time: an adapter
(``k_*.cpp``) that does not compile against the tree is left out of the link and
costs only the kernels it registers
(:attr:`Build.failed_adapters`); the core (``core.cpp``, ``server.cpp``)
failing is a build error.
"""

from __future__ import annotations

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

from harness.core import settings
from harness.core.config import IsaBuild, cache_dir, locked
from harness.core.errors import RvvdiffError
from harness.core.matrix import DEFAULT_COMPILER
from harness.core.proc import CommandError
from harness.ggml.source import GgmlSource
from harness.toolchain import additions, bindings
from harness.toolchain.cmake import CmakePlan, cmake_files, cmake_options, march_mismatch, march_of, plan_options, tree_name
from harness.toolchain.cmake_build import CmakeBuild, build, build_dir, configure, cpu_flags, read_stamp, write_stamp
from harness.toolchain.compilers import (
    SERVER_DIR,
    Compiler,
    ToolchainError,
    compiler,
    glibc_root,
    rejected_flags,
    selected,
    shared_compiler,
)
from harness.toolchain.dispatch_build import EXTENSIONS, DispatchError, DispatchUnavailable, ensure_dispatch
from harness.toolchain.server import adapter_kernels, append_log, digest, first_errors, link_server, server_objects


class BuildError(RvvdiffError, RuntimeError):
    """Configuring or compiling failed; the message has the failing command and the compiler's output."""


class IsaUnavailable(BuildError):
    """The tree's CMake cannot make this ISA build: an option it neither declares nor reads, or a -march
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
    #: Options the harness wanted that the tree's CMake neither declares nor reads (and so were not passed).
    cmake_undeclared: tuple[str, ...] = ()
    #: The name of the compiler that made it (harness/toolchain/compilers.py's ``COMPILERS``, or ``user``).
    compiler: str = DEFAULT_COMPILER
    #: The C library its dynamically linked server runs against under an emulator (``qemu-riscv64 -L``): a
    #: dispatch variant's build (:func:`variant_build`); None: a static server.
    runtime: Path | None = None

    @property
    def log(self) -> Path:
        return self.dir / "rvvdiff-build.log"

    @property
    def march(self) -> str | None:
        return march_of(self.cflags)

    def missing_kernel(self, kernel: str) -> str | None:
        """Why ``kernel`` is not in this build's server (its adapter did not compile), or None."""
        for adapter, error in self.failed_adapters.items():
            if kernel in adapter_kernels(SERVER_DIR / adapter):
                first = error.splitlines()[0] if error else "no compiler message"
                return (f"not in this build: adapter {adapter} does not compile against {tree_name(self.source)} "
                        f"({first}); full log: {self.log}")
        return None


# ------------------------------------------------------------ the tree's CMake


# ------------------------------------------------------------ -march


# ------------------------------------------------------------ building

def build_key(source: GgmlSource, isa: IsaBuild, cc: Compiler) -> str:
    """Identifies the ggml libraries: source content, CMake options, compiler (its identity names
    it and its version, so a clang and a GCC build of one tree never share libraries).

    The options hashed are the *wanted* ones: what is passed (:func:`plan_options`) follows from
    them and the tree's CMake files, which the source's content hash covers.
    """
    h = hashlib.sha256()
    h.update(source.content_hash().encode())
    h.update(json.dumps({**cmake_options(isa), **additions.cmake_flags(isa, cc.name)}, sort_keys=True).encode())
    h.update(cc.identity.encode())
    return h.hexdigest()


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
    return settings.get("SESSION")


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




def known_cause(isa: IsaBuild, errors: str) -> str | None:
    """What a build's first compiler errors are known to mean, or None."""
    if not isa.march and "requires the 'zve32f' extension" in errors:
        return ("the tree guards its RVV code with __riscv_v_intrinsic, which clang defines without the vector "
                "extension: trees of this era do not build without V under clang (llama.cpp #22159); GCC 14 "
                "builds them (--cc gcc14)")
    return None


def failure_summary(error: str) -> str:
    """One line of a build failure's message (:func:`ensure_built`'s): its first compiler error (and what it
    is known to mean), or else the line that says what failed."""
    m = re.search(r"^first errors:\n  (.*)$", error, re.M)
    if m:
        cause = re.search(r"^known cause: (.*)$", error, re.M)
        return m.group(1) + (f" -- {cause.group(1)}" if cause else "")
    lines = [ln.strip() for ln in error.splitlines() if ln.strip()]
    return lines[1] if len(lines) > 1 else (lines or ["no message"])[0]


def failed_reason(source: GgmlSource, isa: IsaBuild, error: str, compiler_name: str | None = None) -> str:
    """The one line that every test of a failed ISA build but the first is skipped with."""
    by = f" by {compiler_name}" if compiler_name else ""
    return (f"ISA build {isa.name} of {tree_name(source)}{by} failed ({failure_summary(error)}): its error is reported "
            f"once, in the first test that needed it (and 'rvvdiff: ISA build {isa.name} ... failed' in the summary); "
            f"log: {build_dir(source, isa, compiler_name) / 'rvvdiff-build.log'}")


def ensure_built(source: GgmlSource, isa: IsaBuild, compiler_name: str | None = None, *,
                 jobs: int | None = None) -> Build:
    """Return the build of ``source`` for ``isa`` by the named compiler (default: the setting,
    :func:`harness.toolchain.compilers.selected`), configuring and compiling what is out of date.

    Raises :class:`IsaUnavailable` when the tree's CMake cannot express ``isa``,
    :class:`BuildFailedEarlier` (one line) when it failed earlier in this pytest session, and
    :class:`BuildError` (the command, the compiler's message, the log, what to do) when it fails now.
    """
    if isa.variant:
        return variant_build(source, isa, compiler_name)
    cc = compiler(compiler_name)
    d = build_dir(source, isa, cc.name)
    plan = plan_options(source, isa)
    d.mkdir(parents=True, exist_ok=True)
    if plan.unavailable:
        _write_note(d, {"isa": isa.name, "unavailable": plan.unavailable})
        raise IsaUnavailable(plan.unavailable)
    key = build_key(source, isa, cc)
    stamp = d / "rvvdiff-stamp.json"
    log = d / "rvvdiff-build.log"
    with locked(d / ".lock"):
        meta = read_stamp(stamp)
        marker = failure_marker(d)
        if session_id() is not None and marker.exists():
            raise BuildFailedEarlier(failed_reason(source, isa, marker.read_text(), cc.name))
        try:
            # A stamp without libraries records a configure whose -march did not fit; the check is
            # redone from its flags (cheap), so a corrected harness need not wait for a new key.
            # A -march the compiler rejected stays rejected for this key (the key names the compiler).
            if meta.get("key") != key or ("libs" not in meta and "rejected" not in meta
                                          and not _unexpressible(source, isa, meta["cflags"])):
                meta = _build_libraries(source, isa, d, cc, jobs=jobs or os.cpu_count() or 2, plan=plan, key=key)
                write_stamp(stamp, meta)
            why = _unexpressible(source, isa, meta["cflags"]) or meta.get("rejected")
            if why:
                raise IsaUnavailable(why)
            cflags, libs = tuple(meta["cflags"]), tuple(Path(p) for p in meta["libs"])
            cflags += (*additions.server_flags(isa, cc.name), "-I", str(_bindings(source, d)))
            server, failed = link_server(d, cc, cflags, libs, key)
        except IsaUnavailable as e:
            _write_note(d, {"isa": isa.name, "unavailable": str(e)})
            raise
        except (BuildError, CommandError) as e:
            # The compiler's first errors lead: the tail below may have lost them among the follow-on ones.
            first = first_errors(e.stderr + e.stdout, 3).splitlines() if isinstance(e, CommandError) else []
            lead = "".join(f"  {line}\n" for line in first)
            src_arg = "" if source.pinned else f" --ggml-src {shlex.quote(str(source.root))}"
            env = "" if cc.name == DEFAULT_COMPILER else f"RVVDIFF_COMPILER={cc.name} "
            cause = known_cause(isa, "\n".join(first))
            msg = (f"building ISA build {isa.name!r} of {source.describe()} with {cc.name} failed (full log: {log}):\n"
                   + (f"first errors:\n{lead}" if lead else "") + (f"known cause: {cause}\n" if cause else "") + f"{e}\n"
                   f"What to do: fix the tree (or the harness's server sources) and rerun; "
                   f"`{env}rvvdiff build{src_arg} --isa {isa.name}` retries this build alone; "
                   f"--isa selects other ISA builds meanwhile.")
            if session_id() is not None:
                marker.write_text(msg)
            raise BuildError(msg) from None
        b = Build(isa, source, d, server, key, cflags, libs, failed, tuple(plan.undeclared), cc.name)
        _write_note(d, {"isa": isa.name, "server": str(server), "log": str(log), "failed_adapters": failed,
                        "cmake_undeclared": list(plan.undeclared), "march": b.march})
        return b


def variant_build(source: GgmlSource, isa: IsaBuild, compiler_name: str | None = None) -> Build:
    """The ISA build of a dispatch variant (``isa.variant``: riscv64_v, riscv64_v_zvfh): the distribution's build of
    ``source`` by the named compiler (harness/toolchain/dispatch_build.py), and a kernel server compiled with the
    variant's flags and linked against its own ``libggml-cpu-<variant>.so`` and ``libggml-base.so``, which runs against
    the GCC 14 root's glibc (:attr:`Build.runtime`).  :class:`IsaUnavailable` when the tree has no such variant, the
    compiler cannot build it, or its code may use an extension the ISA build's emulated CPU lacks or lacks one the
    build promises (``isa.march``)."""
    name = compiler_name or selected()
    runtime = glibc_root()
    try:
        d = ensure_dispatch(source, name)
    except DispatchUnavailable as e:
        raise IsaUnavailable(str(e)) from None
    except (DispatchError, CommandError) as e:
        raise BuildError(f"the dispatch build of {tree_name(source)} by {name} failed: {e}") from None
    v = next((x for x in d.variants if x.name == isa.variant), None)
    if v is None or v.library is None:
        why = f"does not declare it ({', '.join(x.name for x in d.variants)})" if v is None else f"did not build: {v.error}"
        raise IsaUnavailable(f"variant {isa.variant} of {d.describe()} {why}")
    # Its code may use only what the emulated CPU has, and must have what the ISA build promises (``isa.march``); an
    # implied extension a compiler does not name is neither (GCC 14 defines no __riscv_zvfhmin under zvfh).
    cpu = [e for e in EXTENSIONS if e in isa.extensions]
    if not set(isa.march) <= set(v.extensions) <= set(cpu):
        raise IsaUnavailable(f"variant {isa.variant} of {d.describe()} lets its code use {', '.join(v.extensions)}, "
                             f"not what the {isa.name} build promises ({', '.join(isa.march)}) within what its "
                             f"emulated CPU has ({', '.join(cpu)})")
    cc = shared_compiler(name)
    base = next(d.dir.glob("**/libggml-base.so"))
    libs = (v.library, base)
    with locked(d.dir / ".server.lock"):
        cflags = (*(cpu_flags(d.dir, f"ggml-cpu-{v.name}") or ()), "-I", str(_bindings(source, d.dir)))
        try:
            server, failed = link_server(d.dir, cc, cflags, libs, d.key, dynamic=True)
        except CommandError as e:
            raise BuildError(f"the kernel server against {v.library} ({d.describe()}) failed (log: {d.log}):\n"
                             f"{first_errors(e.stderr + e.stdout)}") from None
    return Build(isa, source, d.dir, server, d.key, cflags, libs, failed, (), name, runtime)


def _build_libraries(source: GgmlSource, isa: IsaBuild, d: Path, cc: Compiler, *, jobs: int,
                     plan: CmakePlan, key: str) -> dict:
    """Configure, check the -march the tree's CMake chose, compile; return the stamp's content."""
    append_log(d, f"=== build of {source.describe()} for {isa.name}, pid {os.getpid()}, {time.ctime()}")
    if plan.undeclared:
        append_log(d, "options wanted but neither declared nor read by this tree (not passed): "
                + " ".join(f"{k}={v}" for k, v in plan.undeclared.items()))
    if plan.read_only:
        append_log(d, "passed without an option() in this tree, as its CMake reads them: "
                + " ".join(f"{k}={plan.passed[k]} ({f})" for k, f in plan.read_only.items()))
    cmake_digest = digest(*(p.read_bytes() for p in cmake_files(source) if p.is_file()))
    # The tree's CMake files are an input of the configure: the same directory at another revision (a bisect step,
    # the gate's BASE slot) is configured with a fresh cache (an entry the old files set and the new ones test, e.g.
    # MATH_LIBRARY-NOTFOUND, would survive); the compiled objects are kept.  What rvvdiff adds to the tree's own
    # build for this compiler (harness/toolchain/additions.py) is said in the log.
    b = CmakeBuild(source.root, d, plan.passed, compiler=cc, inputs=cmake_digest,
                   c_flags=additions.flags(isa, cc.name), cxx_flags=additions.flags(isa, cc.name, cxx=True))
    for line in additions.describe(isa, cc.name):
        append_log(d, line)
    logf = d / "rvvdiff-build.log"
    configure(b, what=isa.name, log=logf)
    cflags = cpu_flags(d)
    if cflags is None:
        raise BuildError(f"{d}: CMake produced no ggml-cpu.dir/flags.make; is this a ggml tree with a CPU backend?")
    meta = {"key": key, "cflags": list(cflags), "cmake": plan.passed, "cmake_undeclared": plan.undeclared}
    why = _unexpressible(source, isa, cflags)
    if why:
        append_log(d, f"not built: {why}")
        return {**meta, "unavailable": why}
    rejected = _rejected(source, isa, cc, cflags)
    if rejected:
        append_log(d, f"not built: {rejected}")
        return {**meta, "unavailable": rejected, "rejected": rejected}
    build(b, ("ggml-cpu", "ggml-base"), jobs=jobs, timeout=3600, what=f"compiling ggml ({isa.name})", log=logf)
    return {**meta, "libs": [str(p) for p in _libs(d)]}


def _unexpressible(source: GgmlSource, isa: IsaBuild, cflags: tuple[str, ...] | list[str]) -> str | None:
    why = march_mismatch(isa, march_of(cflags))
    return f"{tree_name(source)}: {why}: this tree cannot make the {isa.name} build" if why else None


def _rejected(source: GgmlSource, isa: IsaBuild, cc: Compiler, cflags: tuple[str, ...]) -> str | None:
    """Why the compiler cannot make this build: it rejects the -march/-mabi the tree's CMake chose."""
    flags = tuple(f for f in cflags if f.startswith(("-march=", "-mabi=")))
    complaint = rejected_flags(cc, flags)
    if complaint is None:
        return None
    return (f"compiler {cc.name} rejects {' '.join(flags)}, the flags the CMake of {tree_name(source)} "
            f"gives ggml-cpu ({complaint}): it cannot make the {isa.name} build")


def compiler_gap(isa: IsaBuild, compiler_name: str) -> str | None:
    """Why the named compiler cannot make ``isa`` whatever the tree (it rejects the -march ggml's CMake
    spells for it today, e.g. GCC 14 and zvfbfwma), or None; for the report header, before any build.
    A compiler that is not installed says so elsewhere (its identity); here it is None."""
    try:
        cc = compiler(compiler_name)
    except ToolchainError:
        return None
    flags = (f"-march=rv64gc{'_'.join(isa.march)}", "-mabi=lp64d")
    complaint = rejected_flags(cc, flags)
    return f"{cc.name} rejects {flags[0]} ({complaint})" if complaint else None


def _bindings(source: GgmlSource, d: Path) -> Path:
    """Generate the server's bindings for ``source`` into ``d/bindings`` (harness/toolchain/bindings.py)."""
    write = bindings.write
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
                         f"(harness/toolchain/bindings.py):\n{tb}") from None
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


def link_objects(build: Build) -> list[Path]:
    """The adapter objects and registry of a build, without the request loop (``main``):
    what a standalone reproducer links with to call an adapter directly."""
    with locked(build.dir / ".lock"):
        objs, _ = server_objects(build.dir, compiler(build.compiler), build.cflags, build.key)
    return [o for stem, o in objs.items() if stem != "server"]
