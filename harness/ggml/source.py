"""The ggml source under test: the pinned tree (fetched once) or a checkout named with --ggml-src."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from harness.core.config import cache_dir, locked
from harness.core.errors import RvvdiffError
from harness.core.proc import execute, run


class SourceError(RvvdiffError, RuntimeError):
    """The ggml tree is missing or unusable; the message says what to do."""


# The pinned target: llama-cpp-python's sdist vendors llama.cpp (and so ggml).
PINNED_PACKAGE = "llama-cpp-python"
PINNED_VERSION = "0.3.36"
PINNED_SDIST = "llama_cpp_python-0.3.36.tar.gz"
PINNED_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
PINNED_COMMIT = "0c1e570"  # llama.cpp commit vendored by that sdist (2026-10-01, ggml 0.25.3)

#: Files every RVV-capable tree has; without them there is nothing to test.
RVV_SOURCES = ("src/ggml-cpu/arch/riscv/quants.c", "src/ggml-cpu/arch/riscv/repack.cpp",
               "src/ggml-cpu/vec.cpp", "src/ggml-cpu/vec.h")


@dataclass(frozen=True)
class GgmlSource:
    """A ggml source tree ready to configure with CMake."""

    root: Path  # the directory CMake configures from (a llama.cpp root or a ggml repository root)
    ggml: Path  # the ggml directory inside it (root/ggml, or root itself for a ggml repository)
    label: str  # how reports name it
    commit: str
    pinned: bool = False

    @property
    def version(self) -> str:
        text = (self.ggml / "CMakeLists.txt").read_text(errors="replace")
        parts = [re.search(rf"set\(GGML_VERSION_{p}\s+(\d+)\)", text) for p in ("MAJOR", "MINOR", "PATCH")]
        return ".".join(m.group(1) for m in parts) if all(parts) else "unknown"

    @property
    def cpu_dir(self) -> Path:
        return self.ggml / "src" / "ggml-cpu"

    def describe(self) -> str:
        return f"{self.label} (ggml {self.version}, commit {self.commit}) at {self.root}"

    def content_hash(self) -> str:
        return _content_hash(self.root, self.ggml)


def _hashed_files(root: Path, ggml: Path) -> list[Path]:
    """The files whose content decides what the ggml-base and ggml-cpu builds produce."""
    files: list[Path] = []
    for d in (ggml / "include", ggml / "cmake", ggml / "src" / "ggml-cpu"):
        if d.is_dir():
            files += [p for p in d.rglob("*") if p.is_file()]
    files += [p for p in (ggml / "src").iterdir() if p.is_file()]
    files.append(ggml / "CMakeLists.txt")
    if root != ggml:
        files.append(root / "CMakeLists.txt")
        if (root / "cmake").is_dir():
            files += [p for p in (root / "cmake").rglob("*") if p.is_file()]
    return sorted(set(files))


@functools.cache
def _content_hash(root: Path, ggml: Path) -> str:
    h = hashlib.sha256()
    for p in _hashed_files(root, ggml):
        h.update(str(p.relative_to(root)).encode() + b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def _git_commit(path: Path) -> str | None:
    if shutil.which("git") is None:
        return None
    cp = execute(["git", "-C", path, "rev-parse", "--short=12", "HEAD"], timeout=30)
    if cp.returncode != 0:  # not a checkout, or no answer in time
        return None
    dirty = execute(["git", "-C", path, "status", "--porcelain", "--untracked-files=no"], timeout=60).finished("git status")
    return cp.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def resolve(path: str | Path | None) -> GgmlSource:
    """The tree to test: ``path`` (a llama.cpp or ggml checkout) or, when None, the pinned tree."""
    if path is None:
        return pinned()
    m = SDIST_SPEC.match(str(path).strip())
    if m:
        return from_pypi(m.group(1))
    p = Path(path).expanduser().resolve()
    if not p.exists():
        raise SourceError(f"--ggml-src {path}: no such directory. Give the root of a llama.cpp or ggml "
                          "checkout, llama-cpp-python==VERSION (the llama.cpp its sdist vendors), or leave "
                          "--ggml-src out to test the pinned tree.")
    if (p / "ggml" / "src" / "ggml-cpu").is_dir():
        root, ggml = p, p / "ggml"
    elif (p / "src" / "ggml-cpu").is_dir() and (p / "include" / "ggml.h").is_file():
        # Either a ggml repository, or the ggml/ folder of a llama.cpp checkout,
        # which cannot be configured alone: use its parent then.
        if p.name == "ggml" and (p.parent / "CMakeLists.txt").is_file() and (p.parent / "src").is_dir():
            root, ggml = p.parent, p
        else:
            root, ggml = p, p
    else:
        raise SourceError(f"--ggml-src {path}: not a llama.cpp or ggml checkout (expected ggml/src/ggml-cpu/ "
                          "or src/ggml-cpu/ inside it).")
    missing = [s for s in RVV_SOURCES if not (ggml / s).is_file()]
    if missing:
        raise SourceError(f"--ggml-src {path}: this tree has no RISC-V Vector sources (missing "
                          f"{', '.join(missing)}); rvvdiff needs a ggml with ggml-cpu/arch/riscv/ "
                          "(llama.cpp from mid-2025 on).")
    if not (root / "CMakeLists.txt").is_file():
        raise SourceError(f"--ggml-src {path}: {root}/CMakeLists.txt is missing; cannot configure the build.")
    return GgmlSource(root, ggml, str(p), _git_commit(root) or "unknown (not a git checkout)")


# ---------------------------------------------------------------- trees from PyPI

#: ``--ggml-src llama-cpp-python==0.3.20``: the llama.cpp an sdist of llama-cpp-python vendors.
SDIST_SPEC = re.compile(r"^llama-cpp-python==(\d+(?:\.\d+)*)$")


def _sdist_name(version: str) -> str:
    return f"llama_cpp_python-{version}.tar.gz"


def _pypi_sha256(version: str) -> str:
    """The sha256 PyPI publishes for the sdist of ``version`` (its JSON simple index)."""
    req = urllib.request.Request(f"https://pypi.org/simple/{PINNED_PACKAGE}/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            meta = json.load(r)
    except Exception as e:  # noqa: BLE001
        raise SourceError(f"cannot read PyPI's index of {PINNED_PACKAGE} ({e}); fetch the sdist yourself "
                          f"(pip download --no-deps --no-binary :all: {PINNED_PACKAGE}=={version}), extract it "
                          "and pass its vendor/llama.cpp as --ggml-src") from None
    for u in meta["files"]:
        if u["filename"] == _sdist_name(version):
            return u["hashes"]["sha256"]
    raise SourceError(f"{PINNED_PACKAGE}=={version}: PyPI has no sdist {_sdist_name(version)}")


def _download(version: str, dest: Path) -> None:
    """Fetch the sdist of ``version`` from PyPI (simple index, else ``pip download``) into ``dest``."""
    tmp = dest.with_name(dest.name + ".part")
    try:
        # PEP 691 JSON form of the simple index (what pip itself reads).
        req = urllib.request.Request(f"https://pypi.org/simple/{PINNED_PACKAGE}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            meta = json.load(r)
        url = next(u["url"] for u in meta["files"] if u["filename"] == dest.name)
        with urllib.request.urlopen(url, timeout=600) as r, open(tmp, "wb") as f:
            shutil.copyfileobj(r, f, 1 << 20)
        tmp.replace(dest)
        return
    except Exception as e:  # noqa: BLE001 - any failure falls back to pip, which knows local mirrors
        print(f"rvvdiff: direct download from PyPI failed ({e}); trying pip download", file=sys.stderr)
    pdir = dest.parent / "pip-download"
    run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         f"{PINNED_PACKAGE}=={version}", "-d", pdir], timeout=1800, what=f"pip download of {PINNED_PACKAGE}=={version}")
    (pdir / dest.name).replace(dest)


def sha256_of(path: Path) -> str:
    """The sha256 of a file (a downloaded sdist, a model), read in 1 MB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_sdist(version: str, sha256: str | None = None, root: Path | None = None) -> Path:
    """Download (once), verify and extract the llama.cpp that ``llama-cpp-python==version``
    vendors into ``root`` (default: the cache's src/llama-cpp-python-<version>); return it.
    ``sha256`` None: the digest PyPI publishes."""
    base = cache_dir() / "src"
    root = root or base / f"llama-cpp-python-{version}"
    done = root / ".rvvdiff-extracted"
    if done.exists():
        return root
    with locked(base / "fetch.lock"):
        if done.exists():
            return root
        sdist = base / _sdist_name(version)
        expected = sha256 or _pypi_sha256(version)
        if not sdist.exists():
            _download(version, sdist)
        digest = sha256_of(sdist)
        if digest != expected:
            sdist.unlink()
            raise SourceError(f"{sdist.name}: sha256 {digest} does not match {expected}; "
                              "the file was removed, run again.")
        if root.exists():
            shutil.rmtree(root)
        prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
        with tarfile.open(sdist) as tar:
            members = []
            for m in tar.getmembers():
                if m.name.startswith(prefix):
                    m.name = m.name[len(prefix):]
                    members.append(m)
            if not members:
                raise SourceError(f"{sdist.name} vendors no llama.cpp (no {prefix})")
            tar.extractall(root, members=members, filter="data")
        done.write_text(f"{sdist.name} sha256={digest}\n")
    return root


def from_pypi(version: str) -> GgmlSource:
    """The llama.cpp vendored by ``llama-cpp-python==version`` (fetched once into the cache)."""
    root = fetch_sdist(version)
    src = resolve(root)
    return GgmlSource(src.root, src.ggml, f"llama.cpp of {PINNED_PACKAGE} {version}", "unknown (vendored by an sdist)")


# ---------------------------------------------------------------- pinned tree


def fetch_pinned() -> Path:
    """Download (once), verify and extract the pinned llama.cpp; return its root."""
    return fetch_sdist(PINNED_VERSION, PINNED_SHA256, cache_dir() / "src" / f"llama.cpp-{PINNED_COMMIT}")


def pinned() -> GgmlSource:
    root = fetch_pinned()
    return GgmlSource(root, root / "ggml", f"pinned llama.cpp ({PINNED_PACKAGE} {PINNED_VERSION})",
                      PINNED_COMMIT, pinned=True)
