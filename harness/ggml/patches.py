"""Patches to a ggml tree: planted bugs (``harness/data/mutants/``) and fixes of findings (``harness/data/fixes/``).

A patch file starts with ``key: value`` lines describing it, then a unified diff whose paths are
those of a llama.cpp checkout (``a/ggml/src/...``): ``patch -p1`` applies it from a llama.cpp root.
A standalone ggml repository has the same files one level up (``src/...``); :func:`strip` gives
the ``-p`` level for the tree, so one patch serves both layouts.

A patched tree is a hard-linked copy of the source with only the patched files replaced (a second
or two, no disk), made once per (patch, source content) in the cache and then reused, so its
builds are incremental; it is tested with ``--ggml-src`` like any other tree.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness.core.config import cache_dir, locked
from harness.core.errors import UnknownName
from harness.core.proc import Result, execute, run
from harness.ggml.source import GgmlSource


@dataclass(frozen=True)
class Patch:
    name: str
    patch: Path

    @property
    def text(self) -> str:
        return self.patch.read_text()

    @property
    def meta(self) -> dict[str, str]:
        head = self.text.split("\n--- ", 1)[0]
        return dict(re.findall(r"^(\w[\w -]*): (.*)$", head, re.M))

    @property
    def files(self) -> list[str]:
        """The files the diff changes, as llama.cpp paths (``ggml/src/...``)."""
        return re.findall(r"^\+\+\+ b/(\S+)", self.text, re.M)


def catalogue(directory: Path, make: type[Patch] = Patch) -> dict[str, Patch]:
    return {p.stem: make(p.stem, p) for p in sorted(directory.glob("*.patch"))}


def named(directory: Path, names: list[str], kind: str, make: type[Patch] = Patch) -> list[Patch]:
    """The patches of ``directory``'s catalogue called ``names`` (all of them when ``names`` is empty);
    :class:`UnknownName` naming every unknown one, what is known, and where, for a patch of ``kind``."""
    cat = catalogue(directory, make)
    unknown = [n for n in names if n not in cat]
    if unknown:
        raise UnknownName(f"no {kind} {', '.join(repr(n) for n in unknown)}; known: {', '.join(cat) or '(none)'} "
                          f"(in {directory})")
    return [cat[n] for n in names] if names else list(cat.values())


def strip(source: GgmlSource) -> int:
    """``patch -p`` level: 1 from a llama.cpp root, 2 from a ggml repository (no ``ggml/`` level)."""
    return 1 if source.ggml != source.root else 2


def tree_path(source: GgmlSource, rel: str) -> Path:
    """Where a patch's llama.cpp path (``ggml/src/x``) is in ``source``."""
    if strip(source) == 2:
        rel = rel.split("/", 1)[1] if rel.startswith("ggml/") else rel
    return source.root / rel


def _patch(source: GgmlSource, p: Patch, *extra: str) -> Result:
    return execute(["patch", f"-p{strip(source)}", "--dry-run", "--batch", "-s", *extra, "-d", source.root, "-i", p.patch],
                   timeout=60).finished("patch --dry-run")


def applies(p: Patch, source: GgmlSource) -> tuple[str, str]:
    """Whether ``p`` applies to ``source`` (nothing is written): ("applies" | "applied" (the tree
    already has the change: only the reverse applies) | "conflict", patch's own words: offsets,
    fuzz, failed hunks).  Code that repeats can let both directions apply; then the forward wins."""
    fwd = _patch(source, p, "--forward")
    said = (fwd.stdout + fwd.stderr).strip()
    if fwd.returncode == 0:
        return "applies", said
    if _patch(source, p, "--reverse", "--force").returncode == 0:
        return "applied", "the reverse of the patch applies: the tree already has this change"
    return "conflict", said


def apply(patches: list[Patch], source: GgmlSource, kind: str, name: str | None = None) -> GgmlSource:
    """The tree of ``source`` with ``patches`` applied in order (made once, then reused).  ``kind``
    names the cache folder and the label ("mutant", "fix"); ``name`` the tree (default: the patches')."""
    name = name or "+".join(p.name for p in patches)
    h = hashlib.sha256()
    for p in patches:
        h.update(p.patch.read_bytes())
    h.update(source.content_hash().encode())
    tree = cache_dir() / (kind + ("es" if kind.endswith("x") else "s")) / f"{name[:80]}-{h.hexdigest()[:12]}"
    marker = tree / f".rvvdiff-{kind}"
    with locked(tree.with_suffix(".lock")):
        if not marker.exists():
            if tree.exists():
                shutil.rmtree(tree)
            run(["cp", "-al", source.root, tree], timeout=600, what=f"copying the ggml tree for {kind} {name}")
            copy = GgmlSource(tree, tree / source.ggml.relative_to(source.root), source.label, source.commit)
            for p in patches:
                for rel in p.files:
                    f = tree_path(copy, rel)
                    if f.is_file() and f.stat().st_nlink > 1:
                        data = f.read_bytes()  # break the hard link before patching
                        f.unlink()
                        f.write_bytes(data)
                run(["patch", f"-p{strip(copy)}", "--forward", "--batch", "-d", tree, "-i", p.patch], timeout=60,
                    what=f"applying {kind} {p.name}")
            marker.write_text("".join(p.text for p in patches))
    ggml = tree / source.ggml.relative_to(source.root)
    return GgmlSource(tree, ggml, f"{kind} {name} of {source.label}", f"{source.commit}+{name}")
