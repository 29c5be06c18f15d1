"""What a ggml tree has: its types, its symbols, its RVV sources (read with harness/ggml/csource.py).

The kernel families declare what each of their kernels needs from a tree (``requires``: ggml
type enumerators such as ``GGML_TYPE_Q2_0`` and function names such as
``ggml_vec_dot_q2_0_q8_0``); the plugin asks :func:`of` at collection, and a test whose kernel
needs what the tree lacks is skipped as "not in this tree", with the missing names.  The type ids
the Python side sends to the kernel server come from here too (the tree's own ``enum
ggml_type``), never from a table in the tests.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from harness.ggml import csource
from harness.ggml.source import GgmlSource


class NotInTree(LookupError):
    """A name the tree under test does not have."""


def type_name(enumerator: str) -> str:
    """``GGML_TYPE_Q4_K`` -> ``q4_K``, ``GGML_TYPE_IQ4_NL`` -> ``iq4_nl``, ``GGML_TYPE_BF16`` ->
    ``bf16``: ggml's own type names (``ggml_type_name``)."""
    low = enumerator.removeprefix("GGML_TYPE_").lower()
    return low[:-2] + "_K" if low.endswith("_k") else low


def _source_files(ggml: Path) -> list[Path]:
    files = sorted((ggml / "include").glob("*.h")) + sorted((ggml / "src").glob("*.h"))
    cpu = ggml / "src" / "ggml-cpu"
    for pattern in ("*.h", "*.c", "*.cpp", "arch/riscv/*", "llamafile/*", "spacemit/*"):
        files += sorted(p for p in cpu.glob(pattern) if p.is_file() and p.suffix in (".h", ".c", ".cpp"))
    return list(dict.fromkeys(files))


@dataclass
class Tree:
    """The inventory of one ggml tree."""

    source: GgmlSource
    types: dict[str, int] = field(default_factory=dict)  # ggml type name -> enum value
    symbols: set[str] = field(default_factory=set)  # functions declared or defined, structs, enumerators
    notes: list[csource.Note] = field(default_factory=list)
    #: The functions (members included) of each file a ``file:function`` need named, read once per inventory.
    defined: dict[str, frozenset[str]] = field(default_factory=dict)

    def has(self, name: str) -> bool:
        """A symbol of the tree; or, for a name with a ``/``, a file of its ggml directory
        (``src/ggml-cpu/spacemit/ime_env.cpp``), or a function defined in that file, member functions included
        (``src/ggml-cpu/spacemit/ime.cpp:forward_mul_mat_id``): where a bare name is also another file's."""
        if "/" not in name:
            return name in self.symbols
        rel, _, function = name.partition(":")
        path = self.source.ggml / rel
        if not path.is_file():
            return False
        if function and rel not in self.defined:
            self.defined[rel] = frozenset(csource.read(path).functions(None, members=True))
        return not function or function in self.defined[rel]

    def missing(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if not self.has(n)]

    def type_id(self, name: str) -> int:
        """The tree's enum value of ggml type ``name`` (``q4_0``, ``bf16`` ...)."""
        try:
            return self.types[name]
        except KeyError:
            raise NotInTree(f"ggml type {name!r} is not in this tree ({self.source.describe()})") from None

    def file(self, rel: str) -> csource.CFile:
        """A file of the tree's ggml directory (``src/ggml-cpu/vec.cpp``), read once."""
        return csource.read(self.source.ggml / rel)


@functools.lru_cache(maxsize=16)
def _inventory(source: GgmlSource, content: str) -> Tree:
    t = Tree(source)
    enum = csource.read(source.ggml / "include" / "ggml.h").enum("ggml_type")
    t.types = {type_name(k): v for k, v in enum.items() if k != "GGML_TYPE_COUNT"}
    t.symbols |= set(enum)
    for p in _source_files(source.ggml):
        f = csource.read(p)
        t.symbols |= f.declared() | f.types()
        t.notes += f.notes
    return t


def of(source: GgmlSource) -> Tree:
    """The inventory of ``source`` (read once per content)."""
    return _inventory(source, source.content_hash())
