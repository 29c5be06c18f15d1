"""Models of every type: the base models requantized by the host's ``llama-quantize`` (with an importance
matrix from the host's ``llama-imatrix`` on the fixed text for the i-quants), once, into the cache.

A requantized file is keyed by its source's digest, the type, the importance matrix's key and the host
tools' key (the tree's content and the host compiler).  ``llama-quantize`` decides each tensor's type as it
does for users (the output and embedding tensors keep their own rules; a tensor whose rows do not fit the
type's block falls back), so a file holds the mix a user's would.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from harness.core.config import cache_dir, locked
from harness.core.proc import CommandError, run
from harness.model.catalogue import ModelError
from harness.model.machine import HOST
from harness.model.perplexity import TEXT, invoke
from harness.model.reference import file_digest
from harness.model.tools import Tools


def _derived_dir() -> Path:
    d = cache_dir() / "models" / "derived"
    d.mkdir(parents=True, exist_ok=True)
    return d


def imatrix(host: Tools, model: Path, *, text: Path = TEXT, ctx: int = 64, timeout: float = 1800) -> Path:
    """The importance matrix of ``model`` on ``text`` by the host's llama-imatrix (cached)."""
    key = hashlib.sha256(json.dumps([file_digest(model), file_digest(text), host.key, ctx]).encode()).hexdigest()[:20]
    out = _derived_dir() / f"imatrix-{key}.gguf"
    with locked(out.with_suffix(".lock")):
        if not out.is_file():
            tmp = out.with_name(out.stem + ".part.gguf")
            invoke(HOST, host.tool("llama-imatrix"), model, ["-f", str(text), "-c", str(ctx), "-o", str(tmp),
                                                            "--no-ppl", "-t", "2"],
                   timeout=timeout, what=f"llama-imatrix of {model.name}")
            tmp.replace(out)
    return out


def requantize(host: Tools, model: Path, qtype: str, *, imatrix_file: Path | None = None,
               timeout: float = 1800) -> Path:
    """``model`` requantized to ``qtype`` (a llama-quantize type name: Q4_K, IQ2_XXS, F16, ...)."""
    parts = [file_digest(model), qtype, host.key, file_digest(imatrix_file) if imatrix_file else None]
    key = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:20]
    out = _derived_dir() / f"{model.stem.split('.')[0]}-{qtype.lower()}-{key}.gguf"
    with locked(out.with_suffix(".lock")):
        if not out.is_file():
            tmp = out.with_name(out.stem + ".part.gguf")
            args = ["--allow-requantize", *(["--imatrix", str(imatrix_file)] if imatrix_file else []),
                    str(model), str(tmp), qtype, "2"]
            try:
                run([host.tool("llama-quantize"), *args], timeout=timeout, what=f"llama-quantize {qtype} of {model.name}")
            except CommandError as e:
                raise ModelError(f"llama-quantize could not make {qtype} from {model.name}:\n{e}") from None
            tmp.replace(out)
    return out
