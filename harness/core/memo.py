"""Results of pure, slow readings kept on disk between runs, keyed by their inputs and by the code that
computes them.

The reader of ggml's sources (harness/ggml/cpreproc.py and csource.py) preprocesses a tree's kernel files
and the headers they include at every pytest start: the known failures' fingerprints and the families'
coverage scans took about 2.5 s of CPU per process (every xdist worker, every ``pytest -k`` a developer
runs).  Its results depend only on the text read, the macros and the reader's own code, so they are kept
here: ``<cache>/memo/<name>/<key>.pickle``.  A key is the digest of the inputs and of the code's source
files; a change to either makes a new key, never a stale answer.  A file that cannot be read back (a
partial write, another Python) is recomputed and rewritten; writes go through a temporary file and a
rename, so xdist workers writing the same key at once do no harm.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from harness.core.config import cache_dir

T = TypeVar("T")


def code_digest(files: Iterable[Path]) -> str:
    """A digest of the text of ``files`` (the code whose results are kept)."""
    h = hashlib.sha256()
    for f in sorted(Path(p) for p in files):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


class DiskMemo:
    """One kind of result, kept under ``<cache>/memo/<name>``; ``code`` is the digest of the code computing it."""

    def __init__(self, name: str, code: str) -> None:
        self.name = name
        self.code = code

    def key(self, *parts: str | bytes) -> str:
        h = hashlib.sha256(self.code.encode())
        for p in parts:
            b = p.encode() if isinstance(p, str) else p
            h.update(len(b).to_bytes(8, "little") + b)
        return h.hexdigest()

    def _path(self, key: str) -> Path:
        return cache_dir() / "memo" / self.name / key[:2] / f"{key}.pickle"

    def get(self, key: str) -> object | None:
        """The result kept under ``key``, or None."""
        try:
            return pickle.loads(self._path(key).read_bytes())
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError, TypeError):
            return None

    def put(self, key: str, value: object) -> None:
        """Keep ``value`` under ``key`` (a failure to write only costs the next run the computation)."""
        path = self._path(key)
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except OSError:
            if tmp is not None:  # a full disk midway leaves no partial file behind
                Path(tmp).unlink(missing_ok=True)

    def through(self, key: str, compute: Callable[[], T], kind: type | tuple[type, ...]) -> T:
        """The result kept under ``key`` if it is a ``kind``; else ``compute()``, kept."""
        kept = self.get(key)
        if isinstance(kept, kind):
            return kept  # type: ignore[return-value]
        value = compute()
        self.put(key, value)
        return value
