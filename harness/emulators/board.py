"""Real RISC-V hardware as the kernel servers' "emulator": ``--emulator native`` and ``--emulator ssh:HOST[:DIR]``.

A board runs the same cross-built, statically linked kernel server with the same framed protocol on
stdin/stdout; what differs from QEMU is that the CPU is the board's own.  Its VLEN (``vlenb``), its
extensions (``riscv_hwprobe`` and ``/proc/cpuinfo``), its cores and what its vector unit does with
tail- and mask-agnostic elements are read once by a small probe program (harness/server/board_probe.c)
run on the board; a board runs at its VLEN only, has no stress mode (its policy is its core's own, shown
in the report header), and an ISA build that needs an extension it lacks is skipped with that reason.

``native``: pytest runs on the riscv64 Linux host itself and starts the server directly, or through
``RVVDIFF_NATIVE_LAUNCHER`` (a command put before the program; the tests' stand-in board is
qemu-riscv64 at a fixed CPU).  ``ssh:HOST[:DIR]``: each program is copied once (named by its content's
hash) to DIR on HOST (default ``.cache/rvvdiff-board`` under the remote home) and started over ssh
(``RVVDIFF_SSH``: the ssh command and its options); the remote shell reports the server's pid on stderr
first, so a server the pool kills for a hang is also killed on the board, and passes on its exit status.
An ssh exit status of 255 is ssh's own failure (unreachable board, dropped connection); a remote status 128+N is the server killed
by signal N.  docs/board.md has the set-up of a board.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import ClassVar

from harness.core import settings
from harness.core.config import STRESS_PROPS, cache_dir, locked
from harness.core.matrix import SSH_SPEC, emulator_value
from harness.core.proc import DEVNULL, Process, execute, run
from harness.emulators.base import Emulator
from harness.toolchain.builds import Build
from harness.toolchain.compilers import SERVER_DIR, ToolchainError, compiler

#: Every VLEN a RISC-V core may have (RVV: a power of two from 32 to 65536 bits; rvvdiff's kernels need >= 128).
BOARD_VLENS: tuple[int, ...] = tuple(2 ** k for k in range(7, 17))
#: The remote directory of ``ssh:HOST`` without ``:DIR`` (relative: under the remote home).
DEFAULT_DIR = ".cache/rvvdiff-board"
#: riscv_hwprobe's RISCV_HWPROBE_KEY_IMA_EXT_0 bits rvvdiff reads (Linux uapi asm/hwprobe.h); the rest
#: come from /proc/cpuinfo's isa line.
HWPROBE_BITS = {"v": 1 << 2, "zfh": 1 << 27, "zfhmin": 1 << 28, "zvfh": 1 << 30, "zvfhmin": 1 << 31}
#: What the remote shell writes to stderr before it becomes the program (the pid to kill on a hang).
PID_LINE = re.compile(rb"^rvvdiff-pid=(\d+)$", re.M)
#: ssh's exit status for its own failures (no connection, connection lost).
SSH_FAILED = 255


class BoardError(ToolchainError):
    """A board that cannot be used (unreachable, no V, a probe that fails): says what to do."""


@dataclass(frozen=True)
class Probe:
    """What the probe program read on the board."""

    vlen: int
    cores: int
    extensions: frozenset[str]
    tail: str
    mask: str
    source: str

    def policy(self) -> str:
        return f"tail-agnostic elements {self.tail}, mask-agnostic elements {self.mask} (measured by a probe)"


def parse_probe(text: str) -> Probe:
    """The probe's ``key=value`` lines as a :class:`Probe`; ValueError when they are not a probe's."""
    kv = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    if "vlenb" not in kv:
        raise ValueError(f"not the board probe's output: {text.strip()[:200]!r}")
    exts: set[str] = set()
    source = []
    if "hwprobe_ima_ext_0" in kv:
        bits = int(kv["hwprobe_ima_ext_0"])
        exts |= {n for n, b in HWPROBE_BITS.items() if bits & b}
        source.append("riscv_hwprobe")
    if isa := kv.get("cpuinfo_isa", "").strip().lower():
        head, *multi = isa.split("_")
        exts |= set(head.removeprefix("rv64").removeprefix("rv32")) | set(multi)
        source.append("/proc/cpuinfo")
    return Probe(int(kv["vlenb"]) * 8, int(kv.get("cores", "1")), frozenset(exts), kv.get("tail_agnostic", "unknown"),
                 kv.get("mask_agnostic", "unknown"), " and ".join(source) or "nothing (no hwprobe, no cpuinfo isa line)")


def helper_program(stem: str, march: str = "rv64gc") -> Path:
    """harness/server/<stem>.c (the board probe, the counter reader), built once per compiler and source."""
    cc = compiler()
    src = SERVER_DIR / f"{stem}.c"
    tag = hashlib.sha256((cc.identity + march + src.read_text()).encode()).hexdigest()[:12]
    out = cache_dir() / "toolchain" / f"{stem.replace('_', '-')}-{tag}"
    if not out.exists():
        with locked(out.with_suffix(".lock")):
            if not out.exists():
                tmp = out.with_name(out.name + f".tmp{os.getpid()}")
                run([cc.cc, "-O1", "-static", f"-march={march}", src, "-o", tmp], timeout=600,
                    what=f"building harness/server/{stem}.c")
                tmp.replace(out)
    return out


def probe_program() -> Path:
    """harness/server/board_probe.c (static, -march=rv64gcv)."""
    return helper_program("board_probe", "rv64gcv")


class Board(Emulator):
    """A RISC-V Linux host that runs the servers itself (a subclass says how programs reach it)."""

    label = "board"
    vlens = BOARD_VLENS
    has_stress = emulator_value("native").stress
    cpu_flag = "on"
    vlen_limit = "a board runs at its own VLEN only"
    no_stress = ("a board has one tail/mask policy, its core's own (the report header shows what it does with "
                 "agnostic elements); the stress mode runs under QEMU: drop --rvv-stress or use --emulator qemu")
    lacking_hint = "; its tests run under QEMU: --emulator qemu"

    path = ""
    version = ""

    # ------------------------------------------------ what a subclass provides

    def where(self) -> str:
        """The board in messages ("this host", "board HOST")."""
        raise NotImplementedError

    def run_argv(self, program: PurePosixPath | Path, *args: str) -> list[str]:
        """The command that starts ``program`` (already on the board) with ``args`` and stdin/stdout connected."""
        raise NotImplementedError

    def place(self, program: Path) -> PurePosixPath | Path:
        """``program`` on the board (copied there once when the board is remote)."""
        return program

    def pid(self, proc: Process, stderr_head: bytes) -> int | None:
        """The pid, on the board, of the server ``proc`` started (None: not known)."""
        return proc.pid

    # ------------------------------------------------ the probe and the options

    @functools.cached_property
    def probe(self) -> Probe:
        prog = self.place(probe_program())
        argv = self.run_argv(prog)
        cp = execute(argv, timeout=120, stdin=DEVNULL, text=False)
        if cp.timed_out:
            raise BoardError(f"{self.where()}: the probe did not finish within 120 s ({shlex.join(argv)})")
        out, err = cp.stdout.decode(errors="replace"), self._clean(cp.stderr)
        if cp.returncode != 0:
            raise BoardError(f"{self.where()}: the probe failed (exit {cp.returncode}; {shlex.join(argv)})"
                             + (f": {err.strip()[-500:]}" if err.strip() else "")
                             + "; a board needs RISC-V Linux with V (docs/board.md)")
        try:
            return parse_probe(out)
        except ValueError as e:
            raise BoardError(f"{self.where()}: {e}") from None

    @classmethod
    def resolve_vlens(cls, asked: tuple[int, ...] | None) -> tuple[int, ...]:
        board = cls.find()
        have = board.probe.vlen
        if asked is not None and tuple(asked) != (have,):
            raise ValueError(f"{board.where()} has VLEN {have} (vlenb {have // 8}, read from the hardware) and runs "
                             f"at that VLEN only: drop --vlen or give --vlen {have}; other VLENs run under QEMU "
                             "(--emulator qemu)")
        return (have,)

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            cls.find().probe  # noqa: B018
        except ToolchainError as e:
            return str(e)
        return None

    @classmethod
    def header(cls) -> str:
        try:
            b = cls.find()
            p = b.probe
        except ToolchainError as e:
            return f"unavailable: {e}"
        return (f"{b.describe()}: VLEN {p.vlen}, {p.cores} cores, extensions from {p.source}: "
                f"{', '.join(sorted(e for e in p.extensions if e == 'v' or e.startswith('zv') or e.startswith('zf')))}; "
                f"{p.policy()}")

    @classmethod
    def max_workers(cls) -> int | None:
        """The board's cores: the most xdist workers (one server each) worth starting."""
        try:
            return cls.find().probe.cores
        except ToolchainError:
            return None

    # ------------------------------------------------ the Emulator interface

    def lacking(self, props: dict[str, bool]) -> list[str]:
        return [p for p, on in props.items() if on and (p in STRESS_PROPS or p not in self.probe.extensions)]

    def lacking_reason(self, lacking: list[str], target: str) -> str:
        return (f"{self.where()} lacks {', '.join(lacking)} (read from {self.probe.source}), needed by {target}; "
                "its tests run under QEMU: --emulator qemu")

    def cpu(self, vlen: int, props: dict[str, bool]) -> str:
        return f"{self.where()} (VLEN {self.probe.vlen})"

    def command(self, server: Path, vlen: int, props: dict[str, bool]) -> list[str]:
        return self.run_argv(server)

    def server_binary(self, build: Build) -> Path:
        return self.place(build.server)  # type: ignore[return-value]

    def explain(self, program: Path, stderr: str) -> str:
        return self._clean(stderr.encode())

    @staticmethod
    def _clean(stderr: bytes) -> str:
        return PID_LINE.sub(b"", stderr).decode(errors="replace").strip()


def _riscv_linux() -> bool:
    return sys.platform.startswith("linux") and platform.machine() == "riscv64"


class Native(Board):
    """``--emulator native``: the host itself is the board."""

    name = "native"
    named_as = "on this host"

    def __init__(self, launcher: tuple[str, ...]) -> None:
        self.launcher = launcher
        self.path = shlex.join(launcher) if launcher else "direct"
        self.version = platform.release()

    @classmethod
    def find(cls) -> Native:
        return _native(settings.get("NATIVE_LAUNCHER") or "")

    def where(self) -> str:
        return "this host" + (f" (through {shlex.join(self.launcher)})" if self.launcher else "")

    def describe(self) -> str:
        return f"native: {self.where()}, Linux {self.version}"

    def run_argv(self, program: PurePosixPath | Path, *args: str) -> list[str]:
        return [*self.launcher, str(program), *args]


@functools.cache
def _native(launcher: str) -> Native:
    if not launcher and not _riscv_linux():
        raise BoardError(f"--emulator native runs the kernel server directly on a riscv64 Linux host; this is "
                         f"{platform.machine()} {sys.platform}: from here use --emulator ssh:BOARD (docs/board.md)")
    return Native(tuple(shlex.split(launcher)))


class Ssh(Board):
    """``--emulator ssh:HOST[:DIR]``: a board reached over ssh (a class per spec: :func:`kind`)."""

    host: ClassVar[str]
    remote_dir: ClassVar[str]

    no_linux_programs = ("a board over ssh runs programs on its own files, and llama.cpp's tools open the model and "
                         "the reference logits on this machine (rvvdiff does not copy them to the board): run the model "
                         "family on the board itself (--emulator native) or under QEMU (--emulator qemu)")

    def __init__(self, ssh: tuple[str, ...]) -> None:
        self.ssh = ssh
        self.path = shlex.join(ssh)
        self.version = ""
        self._placed: set[str] = set()

    @classmethod
    def find(cls) -> Ssh:
        return _ssh(cls, settings.get("SSH") or "ssh")

    def where(self) -> str:
        return f"board {self.host}"

    def describe(self) -> str:
        return f"ssh: board {self.host} ({self.remote_dir}; {self.path})"

    def argv(self, remote: str) -> list[str]:
        """The local command that runs the shell command ``remote`` on the board."""
        return [*self.ssh, "-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=5",
                "-o", "ServerAliveCountMax=3", self.host, remote]

    def run_argv(self, program: PurePosixPath | Path, *args: str) -> list[str]:
        # The inner shell becomes the program (its pid first on stderr); the outer one passes on its exit
        # status, 128+N for a signal N (a program killed by a signal would otherwise be ssh's 255).
        inner = f"echo rvvdiff-pid=$$ >&2 && exec {shlex.join([str(program), *args])}"
        return self.argv(f"sh -c {shlex.quote(inner)}; exit $?")

    def place(self, program: Path) -> PurePosixPath:
        """Copy ``program`` to the board once (its name is its content's hash; a copy is written under a
        temporary name and renamed, so workers copying at once do not clash)."""
        digest = hashlib.sha256(program.read_bytes()).hexdigest()[:16]
        remote = PurePosixPath(self.remote_dir) / f"{program.name}-{digest}"
        if str(remote) in self._placed:
            return remote
        q = shlex.quote(str(remote))
        tmp = shlex.quote(f"{remote}.tmp{os.getpid()}")
        check = execute(self.argv(f"test -x {q}"), timeout=60, stdin=DEVNULL, text=False)
        if check.timed_out or check.returncode == SSH_FAILED:
            said = "no answer within 60 s" if check.timed_out else check.stderr.decode(errors="replace").strip()[-300:]
            raise BoardError(f"{self.where()} is unreachable ({self.path}): {said}; check `ssh {self.host} true` "
                             "works without a password (docs/board.md)")
        if check.returncode != 0:
            with program.open("rb") as f:
                cp = execute(self.argv(f"mkdir -p {shlex.quote(self.remote_dir)} && cat > {tmp} && "
                                       f"chmod 755 {tmp} && mv -f {tmp} {q}"),
                             timeout=600, stdin=f, text=False)
            if cp.timed_out:
                raise BoardError(f"copying {program} to {self.where()}:{remote} did not finish within 600 s")
            if cp.returncode != 0:
                raise BoardError(f"copying {program} to {self.where()}:{remote} failed (exit {cp.returncode}): "
                                 f"{cp.stderr.decode(errors='replace').strip()[-300:]}")
        self._placed.add(str(remote))
        return remote

    def pid(self, proc: Process, stderr_head: bytes) -> int | None:
        m = PID_LINE.search(stderr_head)
        return int(m.group(1)) if m else None

    def killed(self, stderr_head: bytes) -> None:
        """The pool killed the local ssh of a server (a hang): kill the server on the board too."""
        m = PID_LINE.search(stderr_head)
        if m is None:
            return
        try:
            execute(self.argv(f"kill -9 {int(m.group(1))}"), timeout=30, stdin=DEVNULL)  # a failure changes nothing
        except OSError:
            pass

    def signal_of(self, returncode: int) -> int:
        """A remote status 128+N is the server killed by signal N; 255 is ssh's own failure."""
        return -(returncode - 128) if 128 < returncode < 128 + 65 else returncode

    def explain(self, program: Path, stderr: str) -> str:
        text = self._clean(stderr.encode())
        if "rvvdiff-pid=" not in stderr:
            return (f"the ssh connection to {self.where()} failed before the server started"
                    + (f": {text}" if text else ""))
        return text

    def lost(self, returncode: int | None) -> str | None:
        if returncode == SSH_FAILED:
            return f"the ssh connection to {self.where()} dropped (ssh exit {SSH_FAILED})"
        return None


@functools.cache
def _ssh(cls: type[Ssh], ssh: str) -> Ssh:
    return cls(tuple(shlex.split(ssh)))


@functools.cache
def kind(spec: str) -> type[Board]:
    """The board emulator class of ``native`` or ``ssh:HOST[:DIR]``; ValueError (what to write) otherwise."""
    if spec == "native":
        return Native
    emulator_value(spec)  # the table's grammar, or ValueError saying what to write
    m = SSH_SPEC.match(spec)
    if m is None:
        raise ValueError(f"--emulator {spec}: not a board (native or ssh:HOST[:DIR])")
    host, remote_dir = m.group("host"), m.group("dir") or DEFAULT_DIR
    return type(f"Ssh_{host}", (Ssh,), {"name": spec, "host": host, "remote_dir": remote_dir,
                                        "named_as": f"on board {host}"})
