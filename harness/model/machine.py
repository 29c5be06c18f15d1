"""Where llama.cpp's tools run: on this machine (the host's own build, the quantizers), or a riscv64 build
under the run's emulator (``--emulator``) at a VLEN with an ISA build's CPU and stress mode.

A riscv64 tool runs through :meth:`harness.emulators.base.Emulator.run_program`, the one way to run a
standalone program, so QEMU and a board that is this host (``--emulator native``) run it alike.  The
tools are Linux programs that open files of this machine (the model, the text, the reference logits): an
emulator that cannot run such a program (Spike, bare metal; a board over ssh) is refused with its own
reason (:attr:`~harness.emulators.base.Emulator.no_linux_programs`), never replaced by another emulator.

A build whose programs need an environment (``IsaBuild.env``: the SpacemiT backend's core type and memory
pool) gets it from the build's record, as the kernel server pool gives it to a server, and every replay line
names it.  Under QEMU that is the X60's core type: the backend's RVV ops run, its IME paths are off.  The IME1
paths run only under Spike with rvvdiff's library, which cannot run the tools: no model run reaches them,
and a refusal at such a build says so (:func:`on`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness.core.config import NOVECTOR, IsaBuild
from harness.core.errors import RvvdiffError
from harness.core.matrix import Point
from harness.core.proc import execute
from harness.emulators.base import Emulator, Ran
from harness.emulators.qemu import cpu_props


class CannotRun(RvvdiffError):
    """The run's emulator cannot run llama.cpp's tools at a target; the message says why and what can."""


class Host:
    """This machine: the host's own build of the tools runs natively."""

    def run(self, tool: Path, args: Sequence[str], *, timeout: float, what: str,
            env: Mapping[str, str] | None = None) -> Ran:
        """Run ``tool`` with ``args`` to its end (through :func:`harness.core.proc.execute`; a timeout is
        ``returncode`` None), with ``env`` set besides this process's environment."""
        given = tuple(sorted((env or {}).items()))
        r = execute([tool, *args], timeout=timeout, env=dict(given) or None)
        return Ran(r.argv, r.returncode, r.stdout, r.stderr, given)

    def describe(self) -> str:
        return "natively"


HOST = Host()


@dataclass(frozen=True)
class Machine:
    """A riscv64 target of the model family: the tools of an ISA build by a compiler, run under an emulator
    (or on a board) at a VLEN, with or without the tail/mask stress mode -- a matrix point (passed whole) and the
    emulator that runs it.  Made by :func:`on`."""

    emulator: Emulator
    at: Point
    #: The C library the tools run against (a dispatch build's dynamic programs: ``Tools.runtime``, QEMU's ``-L``);
    #: None: static programs.  Set by :meth:`with_runtime` from the tools that run.
    runtime: Path | None = None

    @property
    def vlen(self) -> int:
        return self.at.vlen

    @property
    def isa(self) -> IsaBuild:
        return self.at.isa

    @property
    def stress(self) -> bool:
        return self.at.stress

    @property
    def compiler(self) -> str:
        return self.at.compiler

    @property
    def props(self) -> dict[str, bool]:
        """The CPU properties of the ISA build and stress mode (:func:`harness.emulators.qemu.cpu_props`)."""
        return cpu_props(self.isa, self.stress)

    @property
    def env(self) -> dict[str, str]:
        """The environment the ISA build's programs need (``IsaBuild.env``, as the kernel servers get it)."""
        return dict(self.isa.env)

    def run(self, tool: Path, args: Sequence[str], *, timeout: float, what: str,
            env: Mapping[str, str] | None = None) -> Ran:
        """Run ``tool`` (a riscv64 Linux program) with ``args`` under the emulator, to its end, in the build's
        environment and ``env`` (the run's own: :attr:`harness.model.perplexity.Shape.env`)."""
        return self.emulator.with_runtime(self.runtime).run_program(tool, self.vlen, self.props, args=args,
                                                                    timeout=timeout, what=what,
                                                                    env={**self.env, **(env or {})})

    def with_runtime(self, root: Path | None) -> Machine:
        """This target running programs linked against the C library under ``root`` (None: static programs)."""
        return replace(self, runtime=root)

    def reference(self) -> Machine:
        """Where the reference runs: the no-V build by the same compiler under the same emulator, at its
        smallest VLEN (ggml's generic C reads no vector register: its logits are the same at every VLEN); static."""
        return replace(self, at=replace(self.at, vlen=min(self.emulator.vlens), isa=NOVECTOR, stress=False),
                       runtime=None)

    def describe(self) -> str:
        env = f", {_words(self.env)}" if self.env else ""
        libc = f", the C library of {self.runtime}" if self.runtime else ""
        return f"under {self.emulator.label} ({self.emulator.cpu(self.vlen, self.props)}{env}{libc})"


def _words(env: Mapping[str, str]) -> str:
    """An environment as a shell names it: ``NAME=VALUE ...``."""
    return " ".join(f"{k}={v}" for k, v in sorted(env.items()))


def _matrix_unreached(isa: IsaBuild) -> str:
    """What a refusal at a build with a matrix extension adds: no model run reaches its matrix paths."""
    if not isa.matrix:
        return ""
    return (f"; the {isa.name} build's {isa.matrix} paths run only under Spike with rvvdiff's library or on a board "
            f"that has {isa.matrix} (--emulator native), so no model run here reaches them: under QEMU the model "
            f"family runs the build with {_words(isa.env)}, its matrix paths off and its RVV ops on")


def on(emulator: Emulator, at: Point) -> Machine:
    """The target ``at`` (its VLEN, ISA build, stress mode and compiler) under ``emulator``; :class:`CannotRun`
    with the reason when the emulator cannot run llama.cpp's tools or lacks what the target needs."""
    if emulator.no_linux_programs:
        raise CannotRun(emulator.no_linux_programs + _matrix_unreached(at.isa))
    m = Machine(emulator, at)
    lacking = emulator.lacking(m.props)
    if lacking:
        raise CannotRun(emulator.lacking_reason(lacking, f"VLEN {at.vlen}, {at.isa.name}"))
    return m
