"""Planted bugs: small patches (``mutants/*.patch``) applied to a copy of a ggml tree.

A mutant tree is a hard-linked copy of the source with only the patched
files replaced, so making one costs a second or two and no disk; it is then
built like any other tree (its own build directory) and tested with
``--ggml-src``.  Each patch starts with ``key: value`` lines describing the
bug (class, family, which test should catch it) before the diff itself.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from .config import cache_dir, locked
from .proc import run
from .source import GgmlSource

MUTANTS_DIR = Path(__file__).resolve().parent.parent / "mutants"


@dataclass(frozen=True)
class Mutant:
    name: str
    patch: Path

    @property
    def meta(self) -> dict[str, str]:
        head = self.patch.read_text().split("\n--- ", 1)[0]
        return dict(re.findall(r"^([\w-]+): (.*)$", head, re.M))

    @property
    def files(self) -> list[str]:
        return re.findall(r"^\+\+\+ b/(\S+)", self.patch.read_text(), re.M)


def catalogue() -> dict[str, Mutant]:
    return {p.stem: Mutant(p.stem, p) for p in sorted(MUTANTS_DIR.glob("*.patch"))}


def get(name: str) -> Mutant:
    cat = catalogue()
    if name not in cat:
        raise KeyError(f"no mutant {name!r}; known: {', '.join(cat) or '(none)'} (in {MUTANTS_DIR})")
    return cat[name]


def apply(mutant: Mutant, source: GgmlSource) -> GgmlSource:
    """The tree of ``source`` with ``mutant`` applied (made once, then reused)."""
    tag = hashlib.sha256(mutant.patch.read_bytes() + source.content_hash().encode()).hexdigest()[:12]
    tree = cache_dir() / "mutants" / f"{mutant.name}-{tag}"
    marker = tree / ".rvvdiff-mutant"
    with locked(tree.with_suffix(".lock")):
        if not marker.exists():
            if tree.exists():
                shutil.rmtree(tree)
            run(["cp", "-al", source.root, tree], timeout=600, what="copying the ggml tree for a mutant")
            for rel in mutant.files:
                f = tree / rel
                data = f.read_bytes()  # break the hard link before patching
                f.unlink()
                f.write_bytes(data)
            run(["patch", "-p1", "--forward", "--batch", "-d", tree, "-i", mutant.patch], timeout=60,
                what=f"applying mutant {mutant.name}")
            marker.write_text(mutant.patch.read_text())
    ggml = tree / source.ggml.relative_to(source.root)
    return GgmlSource(tree, ggml, f"mutant {mutant.name} of {source.label}", f"{source.commit}+{mutant.name}")
