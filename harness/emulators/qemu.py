"""qemu-riscv64 (user mode), the default emulator: found, its -cpu properties probed, described.

QEMU runs the build's Linux kernel server with ``-cpu rv64,v=true,vlen=N,...``; it has the
tail/mask stress mode (``rvv_ta_all_1s``, ``rvv_ma_all_1s``, ``rvv_vl_half_avl``) and its
``-d in_asm`` log is what :mod:`harness.emulators.trace` reads.  The ``-cpu`` value is built here
only (:func:`cpu_props`, :func:`spell`, :func:`cpu`): for the kernel servers, the standalone
programs (:meth:`Emulator.run_program`) and the commands printed for users to copy.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.core import settings
from harness.core.config import HALF_AVL, ISA_BUILDS, STRESS_PROPS, VLENS, IsaBuild, cache_dir, locked
from harness.core.matrix import Point, emulator_value
from harness.core.proc import CommandError, execute, run
from harness.emulators.base import Emulator
from harness.toolchain.builds import Build
from harness.toolchain.cmake import march_extras, tree_name
from harness.toolchain.compilers import SERVER_DIR, ToolchainError, compiler, write_atomically

#: Every -cpu property the harness may ask for.
QEMU_PROPERTIES: tuple[str, ...] = tuple(dict.fromkeys(
    [p for b in ISA_BUILDS.values() for p in b.qemu] + list(STRESS_PROPS)))


def cpu_props(isa: IsaBuild, stress: bool = False, half_avl: bool | None = None) -> dict[str, bool]:
    """The CPU properties of an ISA build: exactly its extensions on, the others QEMU knows off; ``stress``:
    the tail/mask stress mode (:data:`~harness.core.config.STRESS_PROPS`); ``half_avl``: whether its
    ``rvv_vl_half_avl`` is on (default: with ``stress``; ggml's own tests run with the tail/mask part only)."""
    half = stress if half_avl is None else half_avl
    return {**isa.qemu, **{p: on for p, on in STRESS_PROPS.items() if (half if p == HALF_AVL else stress)}}


def spell(vlen: int, props: dict[str, bool]) -> str:
    """QEMU's ``-cpu`` value for a VLEN and a set of extension / stress properties: "v" first, then the
    VLEN and ELEN, then the others in their order; ValueError for a VLEN QEMU does not emulate."""
    if vlen not in VLENS:
        raise ValueError(f"VLEN {vlen}: QEMU emulates {', '.join(map(str, VLENS))}")
    items = [f"{k}={'true' if on else 'false'}" for k, on in sorted(props.items(), key=lambda kv: kv[0] != "v")]
    return "rv64," + ",".join(items[:1] + [f"vlen={vlen}", "elen=64"] + items[1:])


def cpu(at: Point, half_avl: bool | None = None) -> str:
    """The ``-cpu`` value of a point's ISA build and stress mode at its VLEN (:func:`cpu_props`, :func:`spell`)."""
    return spell(at.vlen, cpu_props(at.isa, at.stress, half_avl))


@dataclass(frozen=True)
class Qemu(Emulator):
    """qemu-riscv64 and the -cpu properties it accepts."""

    path: str
    version: str
    properties: frozenset[str]
    #: The C library a dynamically linked program runs against (``-L``: QEMU looks its loader and libraries up
    #: there first): a dispatch variant's build (:meth:`for_build`), the dispatch probe; empty: static programs.
    root: str = ""

    name = "qemu"
    label = "QEMU"
    #: QEMU's ``vlen`` property stops at 1024 (RVV's 65536 is beyond its register file).
    vlens = emulator_value("qemu").vlens
    has_stress = emulator_value("qemu").stress
    traces = True
    logs_exec = True
    cpu_flag = "-cpu"
    vlen_hint = "; VLEN 2048 and 4096 run on Spike: --emulator spike"
    vlen_limit = (f"QEMU stops at VLEN {max(VLENS)} (its vlen property's maximum); "
                  "VLEN 2048 and 4096 run on Spike: add --emulator spike (install: ci/setup.sh --spike)")
    replay_hint = "; replay on Spike: --emulator spike"

    @classmethod
    def find(cls) -> Qemu:
        return qemu()

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            qemu()
        except (ToolchainError, CommandError) as e:
            return str(e)
        return None

    @classmethod
    def header(cls) -> str:
        return describe()

    def lacking(self, props: dict[str, bool]) -> list[str]:
        """The properties among ``props`` that this QEMU does not know."""
        return [p for p in props if p not in self.properties]

    def lacking_reason(self, lacking: list[str], target: str) -> str:
        return (f"QEMU {self.version} ({self.path}) does not emulate {', '.join(lacking)}, needed by "
                f"{target}: install qemu-user 10 from bookworm-backports (ci/setup.sh) or set RVVDIFF_QEMU")

    def cpu(self, vlen: int, props: dict[str, bool]) -> str:
        """The ``-cpu`` argument for a VLEN and a set of extension / stress properties (:func:`spell`)."""
        return spell(vlen, props)

    def for_build(self, build: Build) -> Qemu:
        """This QEMU as it runs ``build``'s programs: against the build's C library when its server is dynamically
        linked (a dispatch variant's build: ``Build.runtime``)."""
        return self.with_runtime(build.runtime)

    def with_runtime(self, root: Path | None) -> Qemu:
        """This QEMU with ``-L root`` (its loader and libraries looked up there first), or itself for None."""
        return dataclasses.replace(self, root=str(root)) if root else self

    def _start(self, vlen: int, props: dict[str, bool]) -> list[str]:
        return [self.path, *(["-L", self.root] if self.root else []), "-cpu", self.cpu(vlen, props)]

    def command(self, server: Path, vlen: int, props: dict[str, bool]) -> list[str]:
        """The command that runs the kernel server ``server`` (the build's Linux binary)."""
        return [*self._start(vlen, props), str(server)]

    def trace_command(self, server: Path, vlen: int, props: dict[str, bool], log: Path) -> list[str]:
        return [*self._start(vlen, props), "-d", "in_asm,strace", "-D", str(log), str(server)]

    def exec_log_command(self, server: Path, vlen: int, props: dict[str, bool], log: Path) -> list[str]:
        return [*self._start(vlen, props), "-d", "in_asm", "-D", str(log), str(server)]

    def server_binary(self, build: Build) -> Path:
        return build.server

    def gap(self, build: Build) -> str | None:
        """None when QEMU emulates every extension the tree's -march adds on its own (they are on by
        default in QEMU's generic rv64 CPU when QEMU knows them), else a message that says what to do."""
        extras = march_extras(build.isa, build.march)
        if not extras:
            return None
        lacking = [e for e in extras if (e not in self.properties if e in QEMU_PROPERTIES else not _knows(self.path, e))]
        if not lacking:
            return None
        return (f"QEMU {self.version} ({self.path}) does not emulate {', '.join(lacking)}, which the CMake of "
                f"{tree_name(build.source)} adds to ggml-cpu's -march={build.march} for ISA build {build.isa.name}: "
                "install qemu-user 10 from bookworm-backports (ci/setup.sh) or set RVVDIFF_QEMU")

    def debug_hint(self, run_cmd: list[str], exe: Path) -> str | None:
        return (f"debug (then: gdb-multiarch {exe} -ex 'target remote :1234'):\n  "
                f"{shlex.join(run_cmd[:-1] + ['-g', '1234', str(exe)])}")

    def describe(self) -> str:
        return f"QEMU {self.version} ({self.path})"


def _probe_binary() -> Path:
    cc = compiler()
    src = SERVER_DIR / "probe.c"
    tag = hashlib.sha256((cc.identity + src.read_text()).encode()).hexdigest()[:12]
    out = cache_dir() / "toolchain" / f"probe-{tag}"
    if not out.exists():
        with locked(out.with_suffix(".lock")):
            if not out.exists():
                tmp = out.with_name(out.name + f".tmp{os.getpid()}")
                run([cc.cc, "-O1", "-static", src, "-o", tmp], timeout=600, what="building the QEMU probe")
                tmp.replace(out)
    return out


@functools.cache
def _knows(path: str, extension: str) -> bool:
    cp = execute([path, "-cpu", f"rv64,{extension}=true", _probe_binary()], timeout=60)
    return cp.finished("QEMU's -cpu property probe").returncode == 0


@functools.cache
def binary_name() -> str:
    """The qemu-riscv64 rvvdiff runs, as named (``$RVVDIFF_QEMU`` or ``qemu-riscv64``, looked up on PATH)."""
    return settings.get("QEMU") or "qemu-riscv64"


def qemu() -> Qemu:
    """Find qemu-riscv64 (``$RVVDIFF_QEMU`` or PATH), read its version and probe its -cpu properties.

    The probe result is cached per binary (path, size, mtime), so it costs one
    QEMU start per property once per machine.
    """
    name = binary_name()
    path = shutil.which(name)
    if path is None:
        raise ToolchainError(
            f"{name} not found. Run ci/setup.sh (installs qemu-user 10 from bookworm-backports), "
            "or point RVVDIFF_QEMU at a qemu-riscv64 binary (QEMU >= 9 recommended).")
    first = run([path, "--version"], timeout=30, what="qemu version").stdout.splitlines()[0]
    m = re.search(r"version (\d+\.\d+(\.\d+)?)", first)
    version = m.group(1) if m else first
    st = os.stat(path)
    key = hashlib.sha256(f"{path}|{st.st_size}|{st.st_mtime_ns}|{first}|{QEMU_PROPERTIES}".encode()).hexdigest()[:16]
    cache = cache_dir() / "toolchain" / f"qemu-props-{key}.json"
    if cache.exists():
        props = json.loads(cache.read_text())
    else:
        probe = _probe_binary()
        props = []
        for prop in QEMU_PROPERTIES:
            base = "v=true," if prop != "v" else ""
            cp = execute([path, "-cpu", f"rv64,{base}{prop}=true", probe], timeout=60)
            if cp.finished("QEMU's -cpu property probe").returncode == 0:
                props.append(prop)
        write_atomically(cache, json.dumps(props))
    return Qemu(path, version, frozenset(props))


def emulation_gap(build: Build) -> str | None:
    """QEMU's answer to :meth:`Qemu.gap` (``rvvdiff build`` warns with it)."""
    return qemu().gap(build)


def describe() -> str:
    """QEMU's line for report headers and ``rvvdiff setup``; never raises (a problem is described instead)."""
    try:
        q = qemu()
    except (ToolchainError, CommandError) as e:
        return f"unavailable: {e}"
    missing = [p for p in QEMU_PROPERTIES if p not in q.properties]
    return f"{q.path} {q.version}; -cpu properties: {', '.join(sorted(q.properties))}" + (
        f"; lacks: {', '.join(missing)}" if missing else "")
