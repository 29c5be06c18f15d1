"""What the harness asks of an emulator, whichever it is (QEMU user mode, Spike bare metal).

The kernel server pool, the pytest plugin, the failure reports and ``rvvdiff repro`` hold an
:class:`Emulator` and ask it: which VLENs it runs, whether it has the tail/mask stress mode,
which requested CPU properties it lacks, the command that starts a kernel server of a build
at a VLEN (and which binary of the build that is), how much longer its kernel deadlines are,
whether it can trace the functions a call executes, and what to say when it cannot do
something.  The answers that need no installed binary are class attributes, so the options
can be checked before the emulator is looked for (:func:`harness.emulators.registry.kind`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from harness.core.matrix import vlens_on
from harness.core.proc import CommandError, run
from harness.toolchain.builds import Build


@dataclass(frozen=True)
class Ran:
    """How a standalone program run under an emulator ended (:meth:`Emulator.run_program`)."""

    argv: list[str]
    #: Its exit status; None: it did not finish within the timeout (and was killed).
    returncode: int | None
    stdout: str
    stderr: str
    #: The environment it was given besides this process's (an ISA build's ``env``), as (name, value) pairs.
    env: tuple[tuple[str, str], ...] = ()

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def replay(self) -> list[str]:
        """The words that run it again from a shell: ``env NAME=VALUE ...`` before its argv when it was given an
        environment (the SpacemiT build's core type), else its argv."""
        return ["env", *(f"{k}={v}" for k, v in self.env), *self.argv] if self.env else list(self.argv)


class Emulator(ABC):
    """One emulator of the kernel server (an instance is a found, usable binary)."""

    #: The name ``--emulator`` takes.
    name: ClassVar[str]
    #: How messages call it ("QEMU", "Spike").
    label: ClassVar[str]
    #: The VLENs it emulates.
    vlens: ClassVar[tuple[int, ...]]
    #: Whether it has QEMU's tail/mask stress mode (agnostic elements written with ones).
    has_stress: ClassVar[bool]
    #: Kernel deadlines (--kernel-timeout) are this many times longer on it.
    timeout_factor: ClassVar[float] = 1.0
    #: Whether it can trace the functions a call executes (:mod:`harness.emulators.trace`).
    traces: ClassVar[bool] = False
    #: Whether it counts the instructions a call retires, exactly (:mod:`harness.cost.measure.spike_count`).
    counts: ClassVar[bool] = False
    #: Whether it logs the instructions its programs execute (--rvv-coverage, :mod:`harness.emulators.executed`).
    logs_exec: ClassVar[bool] = False
    #: The option its CPU string follows in a command ("-cpu", "--isa").
    cpu_flag: ClassVar[str]
    #: How a target on it is named after the VLEN and ISA build ("on Spike"; empty for the default).
    named_as: ClassVar[str] = ""
    #: File name suffix of the programs built for it (reproducers).
    suffix: ClassVar[str] = ""
    #: Appended to "cannot provide <properties>": what to do instead.
    lacking_hint: ClassVar[str] = ""
    #: Appended to "does not emulate VLEN <n>": where that VLEN runs.
    vlen_hint: ClassVar[str] = ""
    #: Appended by ``rvvdiff repro`` to "not replayed" for a VLEN beyond :attr:`vlens`.
    replay_hint: ClassVar[str] = ""
    #: The usage error of a --vlen beyond :attr:`vlens` (after "--vlen <list>: ").
    vlen_limit: ClassVar[str] = ""
    #: The usage error of --rvv-stress on an emulator without the stress mode.
    no_stress: ClassVar[str] = ""
    #: Why it cannot run a riscv64 Linux program that opens this machine's files (llama.cpp's tools on a
    #: model file: harness/model/machine.py), with what can; empty: it can.
    no_linux_programs: ClassVar[str] = ""

    path: str
    version: str

    @classmethod
    @abstractmethod
    def find(cls) -> Emulator:
        """The installed emulator (cached); raises ToolchainError saying how to install it."""

    @classmethod
    @abstractmethod
    def unavailable(cls) -> str | None:
        """None when it can run, else why not (with what to do); never raises."""

    @classmethod
    @abstractmethod
    def header(cls) -> str:
        """Its line in the report header (what it is, or why it is unusable); never raises."""

    @abstractmethod
    def describe(self) -> str:
        """Its name, version and path in one phrase."""

    @abstractmethod
    def lacking(self, props: dict[str, bool]) -> list[str]:
        """The requested CPU properties (ISA extensions, stress modes) it cannot provide."""

    @abstractmethod
    def lacking_reason(self, lacking: list[str], target: str) -> str:
        """The skip reason of a target (id ``target``) that needs properties it lacks."""

    @abstractmethod
    def cpu(self, vlen: int, props: dict[str, bool]) -> str:
        """Its CPU string for a VLEN and a set of extension / stress properties."""

    @abstractmethod
    def command(self, server: Path, vlen: int, props: dict[str, bool]) -> list[str]:
        """The command that runs ``server`` (:meth:`server_binary` of a build)."""

    @abstractmethod
    def server_binary(self, build: Build) -> Path:
        """The kernel server of ``build`` it runs (made on first use)."""

    @classmethod
    def resolve_vlens(cls, asked: tuple[int, ...] | None) -> tuple[int, ...]:
        """The VLENs of a run that asked for ``asked`` (None: all it runs: the matrix's VLENs of this emulator,
        harness/core/matrix.py); ValueError (after "--vlen <list>: ") for a VLEN it cannot run."""
        try:
            return vlens_on(cls.name, asked)
        except ValueError:
            raise ValueError(cls.vlen_limit) from None

    @classmethod
    def max_workers(cls) -> int | None:
        """The most pytest-xdist workers (one server each) worth starting on it; None: the host's cores decide."""
        return None

    def for_build(self, build: Build) -> Emulator:
        """The emulator as it runs ``build``'s programs (the pool's servers, the cost measure): itself, unless it
        must name what the build needs in its own command (Spike: the -march's extras, a matrix extension's
        library, the environment)."""
        return self

    def with_runtime(self, root: Path | None) -> Emulator:
        """The emulator as it runs a dynamically linked program against the C library under ``root`` (a dispatch
        build's: harness/toolchain/compilers.py's ``glibc_root``); None: a static program.  Itself: only an
        emulator that must be told where the program's loader and libraries are (QEMU's ``-L``) differs."""
        return self

    def killed(self, stderr_head: bytes) -> None:
        """After the pool killed a server's process (a hang): reach what that kill could not (a remote server)."""
        return None

    def lost(self, returncode: int | None) -> str | None:
        """What a server's exit status says when it is not the server's own (a dropped connection), else None."""
        return None

    def link_args(self, build: Build) -> list[str]:
        """What turns a static link of a build's objects into a program it runs (C reproducers)."""
        return []

    def gap(self, build: Build) -> str | None:
        """None when it runs every extension ``build``'s -march adds, else what to do."""
        return None

    def signal_of(self, returncode: int) -> int:
        """The server's exit status as ``Popen.returncode`` reports it (negative: killed by a signal)."""
        return returncode

    def explain(self, program: Path, stderr: str) -> str:
        """The server's stderr as shown in a crash message."""
        return stderr

    def debug_hint(self, run_cmd: list[str], exe: Path) -> str | None:
        """How to debug a reproducer under it, or None when it has no debugger stub."""
        return None

    def trace_command(self, server: Path, vlen: int, props: dict[str, bool], log: Path) -> list[str]:
        """The command that runs ``server`` logging each translated block to ``log`` (when :attr:`traces`)."""
        raise NotImplementedError(f"{self.label} cannot trace the functions a call executes")

    def exec_log_command(self, server: Path, vlen: int, props: dict[str, bool], log: Path) -> list[str]:
        """The command that runs ``server`` logging the instructions it executes for ``log`` (when :attr:`logs_exec`):
        QEMU writes ``log`` itself; Spike prints its PC histogram on stderr as it exits (:meth:`exec_log_end`)."""
        raise NotImplementedError(f"{self.label} cannot log the instructions a server executes")

    def exec_log_end(self, log: Path, stderr: bytes) -> None:
        """After a server started with :meth:`exec_log_command` ended (stopped, crashed or killed): what the emulator
        printed on its ``stderr`` made into the PCs of ``log`` (harness/emulators/executed.py) where the emulator
        prints them there (Spike); QEMU wrote ``log`` itself: nothing to do."""
        return None

    def server_stderr(self, text: str) -> str:
        """The part of a server's stderr that the server (or the emulator about it) wrote, without what
        :meth:`exec_log_command` added (Spike's PC histogram): what crash messages quote."""
        return text

    def run_program(self, program: Path, vlen: int, props: dict[str, bool], *, timeout: float,
                    args: Sequence[str] = (), what: str = "the program", env: Mapping[str, str] | None = None) -> Ran:
        """Run a standalone program (a reproducer, ggml's own test, llama.cpp's tools; not a kernel server) to its
        end with :meth:`command`, ``args`` after it, through :func:`harness.core.proc.run` (argv logged, ``timeout``
        seconds at most); its exit status is for the caller to judge, a timeout is ``returncode`` None.  ``env``:
        variables set for it, as the pool gives a kernel server its build's ``IsaBuild.env`` (QEMU's user mode and a
        native run hand their environment to the program); named in :attr:`Ran.replay`."""
        argv = [*self.command(program, vlen, props), *args]
        given = tuple(sorted((env or {}).items()))
        try:
            cp = run(argv, timeout=timeout, what=what, env=dict(given) or None)
        except CommandError as e:
            return Ran(e.argv, e.returncode, e.stdout, e.stderr, given)
        return Ran(argv, cp.returncode, cp.stdout, cp.stderr, given)
