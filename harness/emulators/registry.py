"""The emulators by name, as ``--emulator`` (pytest, ``rvvdiff repro``) chooses them."""

from __future__ import annotations

from harness.emulators.base import Emulator
from harness.emulators.qemu import Qemu
from harness.emulators.spike import Spike

EMULATORS: dict[str, type[Emulator]] = {"qemu": Qemu, "spike": Spike}
#: The emulator of a run that names none; the others are named in messages and replay commands.
DEFAULT = "qemu"
NAMES: tuple[str, ...] = tuple(EMULATORS)


def kind(name: str) -> type[Emulator]:
    """The class of the emulator called ``name``: what it can do, without looking for its binary."""
    return EMULATORS[name]


def get(name: str) -> Emulator:
    """The installed emulator called ``name``; raises ToolchainError (with what to do) when it is not."""
    return kind(name).find()
