"""Reference logits: made once per model, text, tree, reference build and run shape, and kept in the cache.

The reference is a run of ``llama-perplexity --kl-divergence-base FILE`` by a build without RVV: the
tree's generic C for riscv64 under the emulator (the differential pair that isolates the RVV kernels), or
the host's own build (a second opinion).  Its file holds the text's tokens and the logits of every scored
position; every run under test reads it back.  The file is keyed by everything it depends on (the model's
digest, the text's, the tools build's key, which names the tree's content, the compiler and the options,
and the run's context and chunks), made under a lock so that parallel workers make it once.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from harness.core.config import cache_dir, locked
from harness.model.catalogue import sha256_of
from harness.model.machine import Host, Machine
from harness.model.perplexity import TEXT, Shape, base_args, invoke
from harness.model.tools import Tools


@dataclass(frozen=True)
class Reference:
    """A reference's logits file and how it was made."""

    path: Path
    tools: Tools
    #: Where it ran (:meth:`harness.model.machine.Machine.describe`: under which emulator, or natively).
    where: str
    seconds: float
    made_now: bool

    def describe(self) -> str:
        return f"{self.tools.describe()}, {self.where}"


#: sha256 of the model and text files, by (path, size, mtime): a cache, not run state.
_DIGESTS: dict[tuple[str, int, float], str] = {}


def file_digest(path: Path) -> str:
    """sha256 of a file, remembered per (path, size, mtime) in this process."""
    st = path.stat()
    k = (str(path), st.st_size, st.st_mtime)
    if k not in _DIGESTS:
        _DIGESTS[k] = sha256_of(path)
    return _DIGESTS[k]


def reference(tools: Tools, on: Host | Machine, model: Path, shape: Shape, *, text: Path = TEXT,
              timeout: float = 3600) -> Reference:
    """The reference logits of ``model`` on ``text`` by ``tools`` (run on ``on``), made if missing."""
    ref_shape = Shape(shape.ctx, shape.chunks, threads=1, repack=True)
    key = hashlib.sha256(json.dumps([file_digest(model), file_digest(text), tools.key, ref_shape.ctx,
                                     ref_shape.chunks]).encode()).hexdigest()[:24]
    d = cache_dir() / "model" / "reference"
    d.mkdir(parents=True, exist_ok=True)
    out = d / f"{key}.kld"
    meta = d / f"{key}.json"
    where = on.describe()
    with locked(d / f"{key}.lock"):
        if out.is_file() and meta.is_file():
            m = json.loads(meta.read_text())
            return Reference(out, tools, where, m["seconds"], False)
        tmp = out.with_name(out.name + ".part")
        t0 = time.monotonic()
        invoke(on, tools.tool("llama-perplexity"), model, base_args(ref_shape, tmp, text), timeout=timeout,
               what=f"the reference run ({tools.describe()}) of {model.name}")
        secs = time.monotonic() - t0
        tmp.replace(out)
        meta.write_text(json.dumps({"model": str(model), "tools": tools.describe(), "where": where,
                                    "shape": ref_shape.label(), "seconds": secs}))
        return Reference(out, tools, where, secs, True)
