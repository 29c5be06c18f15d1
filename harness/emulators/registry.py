"""The emulators by name, as ``--emulator`` (pytest, ``rvvdiff repro``) chooses them.

A name is ``qemu`` or ``spike`` (the emulators), or a board (harness/emulators/board.py): ``native``
(pytest runs on the riscv64 host) or ``ssh:HOST[:DIR]`` (a board reached over ssh), whose class is
made for that spec.  The names, their grammar and what each runs are the emulator axis of the matrix
(harness/core/matrix.py); tests/test_matrix.py holds the classes against it.
"""

from __future__ import annotations

from harness.core.matrix import DEFAULT_EMULATOR
from harness.emulators import board, spike_ext
from harness.emulators.base import Emulator
from harness.emulators.qemu import Qemu
from harness.emulators.spike import Spike

EMULATORS: dict[str, type[Emulator]] = {"qemu": Qemu, "spike": Spike}
#: The emulator of a run that names none; the others are named in messages and replay commands.
DEFAULT = DEFAULT_EMULATOR
NAMES: tuple[str, ...] = tuple(EMULATORS)


def kind(name: str) -> type[Emulator]:
    """The class of the emulator called ``name``: what it can do, without looking for its binary
    (or reaching a board)."""
    if name in EMULATORS:
        return EMULATORS[name]
    return board.kind(name)


def is_board(name: str) -> bool:
    """Whether ``name`` is real hardware (native, ssh:HOST) rather than an emulator."""
    return name not in EMULATORS and issubclass(kind(name), board.Board)


def get(name: str) -> Emulator:
    """The installed emulator called ``name``; raises ToolchainError (with what to do) when it is not.  Spike
    comes offering rvvdiff's IME1 library to the builds compiled for IME1 (:func:`spike_ext.offering`)."""
    emu = kind(name).find()
    return spike_ext.offering(emu) if isinstance(emu, Spike) else emu
