"""Planted bugs: small patches (``harness/data/mutants/*.patch``) applied to a copy of a ggml tree.

A mutant tree is a hard-linked copy of the source with only the patched
files replaced (harness/ggml/patches.py), so making one costs a second or two and
no disk; it is then built like any other tree (its own build directory) and
tested with ``--ggml-src``.  Each patch starts with ``key: value`` lines describing the
bug (class, family, which test should catch it) before the diff itself.
"""

from __future__ import annotations

from harness.core.config import DATA_DIR
from harness.ggml import patches
from harness.ggml.patches import Patch as Mutant
from harness.ggml.source import GgmlSource

MUTANTS_DIR = DATA_DIR / "mutants"


def catalogue() -> dict[str, Mutant]:
    return patches.catalogue(MUTANTS_DIR)


def get(name: str) -> Mutant:
    return patches.named(MUTANTS_DIR, [name], "mutant")[0]


def apply(mutant: Mutant, source: GgmlSource) -> GgmlSource:
    """The tree of ``source`` with ``mutant`` applied (made once, then reused)."""
    return patches.apply([mutant], source, "mutant")
