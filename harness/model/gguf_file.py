"""What a GGUF file holds, read from its header alone: architecture, sizes, tensors and their types.

gguf-py's reader parses every array into NumPy (20 s for SmolLM2's 49,152 tokens on a loaded machine);
this reader skips array bodies and reads only the header, so checking a file before a run costs
milliseconds.  It also decides the questions a run must not discover by hanging or crashing under
the emulator: is the file whole (every tensor's data inside it), which architecture and which tensor
types it needs (:func:`check_against_tree` holds them against the tree under test).
"""

from __future__ import annotations

import re
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from harness.model.catalogue import ModelError

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    #: The ggml type's number in the file and its name (gguf-py's spelling, lower case: ``q4_1``).
    type_id: int
    type: str
    offset: int
    nbytes: int


@dataclass(frozen=True)
class GgufInfo:
    path: Path
    version: int
    architecture: str
    #: Scalar and string metadata (arrays are given as their length).
    meta: dict[str, object]
    tensors: tuple[Tensor, ...]
    data_start: int
    size: int
    types: dict[str, int] = field(default_factory=dict)

    def number(self, key: str) -> int | float | None:
        v = self.meta.get(f"{self.architecture}.{key}")
        return v if isinstance(v, (int, float)) else None

    def describe(self) -> str:
        t = ", ".join(f"{n} {k.upper()}" for k, n in sorted(self.types.items(), key=lambda kv: -kv[1]))
        return (f"{self.architecture}, {self.number('block_count')} layers, hidden {self.number('embedding_length')}, "
                f"FFN {self.number('feed_forward_length')}, {self.number('attention.head_count')} heads, "
                f"{self.number('attention.head_count_kv')} KV heads; {len(self.tensors)} tensors: {t}")


class _Reader:
    def __init__(self, data: bytes, path: Path):
        self.b, self.i, self.path = data, 0, path

    def take(self, n: int) -> bytes:
        if self.i + n > len(self.b):
            raise ModelError(f"{self.path}: truncated GGUF ({len(self.b)} bytes; its header needs more): "
                             "download it again, or pass a whole file")
        out = self.b[self.i:self.i + n]
        self.i += n
        return out

    def scalar(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        return self.take(self.scalar("<Q")).decode("utf-8", errors="replace")

    def value(self, vtype: int):
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            itype, n = self.scalar("<I"), self.scalar("<Q")
            if itype in _SCALARS:
                self.take(n * struct.calcsize(_SCALARS[itype]))
            else:
                for _ in range(n):
                    self.value(itype)
            return _Array(itype, n)
        raise ModelError(f"{self.path}: not a GGUF this reader knows (metadata value type {vtype} at byte {self.i})")


@dataclass(frozen=True)
class _Array:
    item_type: int
    length: int


# The header of a GGUF is at most a few MB (the tokenizer's arrays); read that much first.
_HEAD = 32 << 20


def read(path: str | Path) -> GgufInfo:
    """The header of the GGUF at ``path``; :class:`ModelError` (one line, naming the file) when it is not
    a GGUF, is truncated, or names a tensor type gguf-py does not know."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: no such file (pass --gguf PATH to a GGUF model)")
    size = path.stat().st_size
    with open(path, "rb") as f:
        data = f.read(min(size, _HEAD))
    if data[:4] != b"GGUF":
        raise ModelError(f"{path}: not a GGUF file (it starts with {data[:4]!r}, not b'GGUF')")
    r = _Reader(data, path)
    r.take(4)
    version = r.scalar("<I")
    if version < 2:
        raise ModelError(f"{path}: GGUF version {version}; llama.cpp reads version 2 and later")
    n_tensors, n_kv = r.scalar("<Q"), r.scalar("<Q")
    meta: dict[str, object] = {}
    for _ in range(n_kv):
        key = r.string()
        v = r.value(r.scalar("<I"))
        meta[key] = v.length if isinstance(v, _Array) else v
    raw = []
    for _ in range(n_tensors):
        name = r.string()
        dims = tuple(r.scalar("<Q") for _ in range(r.scalar("<I")))
        raw.append((name, dims, r.scalar("<I"), r.scalar("<Q")))
    align = int(meta.get("general.alignment", 32))  # type: ignore[arg-type]
    data_start = (r.i + align - 1) // align * align
    tensors = []
    for name, dims, tid, off in raw:
        try:
            qt = GGMLQuantizationType(tid)
        except ValueError:
            raise ModelError(f"{path}: tensor {name} has ggml type {tid}, which this gguf package does not know "
                             "(a newer type than rvvdiff's gguf: upgrade gguf, or use another file)") from None
        block, nb = GGML_QUANT_SIZES[qt]
        n = 1
        for d in dims:
            n *= d
        tensors.append(Tensor(name, dims, tid, qt.name.lower(), off, n // block * nb))
    end = max((data_start + t.offset + t.nbytes for t in tensors), default=data_start)
    if end > size:
        last = max(tensors, key=lambda t: t.offset)
        raise ModelError(f"{path}: truncated GGUF: its tensors need {end:,} bytes, the file has {size:,} "
                         f"(tensor {last.name} is cut off): download it again, or pass a whole file")
    arch = meta.get("general.architecture")
    if not isinstance(arch, str):
        raise ModelError(f"{path}: no general.architecture in its metadata: not a model llama.cpp can load")
    types = Counter(t.type for t in tensors)
    return GgufInfo(path, version, arch, meta, tuple(tensors), data_start, size, dict(types))


def tree_architectures(root: Path) -> set[str]:
    """The architecture names the llama.cpp tree at ``root`` loads (``src/llama-arch.cpp``'s name table)."""
    f = root / "src" / "llama-arch.cpp"
    if not f.is_file():
        raise ModelError(f"{root}: no src/llama-arch.cpp: the model family needs a llama.cpp tree (a standalone "
                         "ggml tree has no llama-perplexity); pass --ggml-src with a llama.cpp checkout")
    text = f.read_text(errors="replace")
    m = re.search(r"LLM_ARCH_NAMES\s*=\s*\{(.*?)\n\};", text, re.S)
    return set(re.findall(r'\{\s*LLM_ARCH_\w+\s*,\s*"([^"]+)"\s*\}', m.group(1) if m else text))


def tree_types(ggml_h: Path) -> set[str]:
    """The ggml types (lower case, ``q4_1``) the tree's ``ggml.h`` enum declares."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", ggml_h.read_text(errors="replace"), flags=re.S)
    m = re.search(r"enum\s+ggml_type\s*\{(.*?)\}", text, re.S)
    return {n.lower() for n in re.findall(r"GGML_TYPE_(\w+)\s*=", m.group(1) if m else "") if n != "COUNT"}


def check_against_tree(info: GgufInfo, root: Path, ggml_h: Path) -> None:
    """:class:`ModelError` when the tree cannot load the file: an architecture or a tensor type it lacks."""
    archs = tree_architectures(root)
    if info.architecture not in archs:
        raise ModelError(f"{info.path}: architecture {info.architecture!r} is not one this tree loads "
                         f"({root / 'src' / 'llama-arch.cpp'} names {len(archs)}, e.g. llama): use a model of a "
                         "known architecture, or a newer tree")
    lacking = sorted(set(info.types) - tree_types(ggml_h))
    if lacking:
        raise ModelError(f"{info.path}: tensor type(s) {', '.join(lacking)} are not in this tree's ggml.h: "
                         "the tree cannot load the file; requantize it or use a newer tree")
