"""The kernel server: its sources and adapters, its objects compiled with ggml-cpu's flags (cached by
content), the link."""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

from harness.core.proc import CommandError, run
from harness.toolchain.compilers import SERVER_DIR, Compiler


def server_sources() -> list[Path]:
    """The kernel server: its core and one adapter file per kernel family."""
    return sorted(SERVER_DIR.glob("*.cpp"))


def is_adapter(src: Path) -> bool:
    """An adapter file (``k_*.cpp``): one that fails to compile costs only its own kernels."""
    return src.name.startswith("k_")


_KERNEL = re.compile(r'^\s*RVVDIFF_KERNEL\(\s*"([^"]+)"', re.M)


@functools.cache
def _kernels_of(path: Path, mtime_ns: int) -> tuple[str, ...]:
    return tuple(_KERNEL.findall(path.read_text(errors="replace")))


def adapter_kernels(path: Path) -> tuple[str, ...]:
    """The kernel names an adapter registers (its ``RVVDIFF_KERNEL("name", ...)`` lines)."""
    return _kernels_of(path, path.stat().st_mtime_ns) if path.exists() else ()


def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:16]


def _include_dirs(cflags: tuple[str, ...]) -> list[Path]:
    """The ``-I`` directories of ``cflags`` that the harness generated (under the build dir)."""
    return [Path(cflags[i + 1]) for i, f in enumerate(cflags[:-1]) if f == "-I" and Path(cflags[i + 1]).name == "bindings"]


def _generated(cflags: tuple[str, ...]) -> bytes:
    """The content of the generated bindings the server objects include (part of their digest)."""
    out = []
    for inc in _include_dirs(cflags):
        for p in sorted(q for q in inc.rglob("*") if q.is_file()):
            out.append(str(p.relative_to(inc)).encode() + b"\0" + p.read_bytes())
    return b"\0".join(out)


def first_errors(text: str, n: int = 3) -> str:
    """The compiler's first ``n`` error lines (paths shortened to file names)."""
    lines = ([ln.strip() for ln in text.splitlines() if re.search(r"\berror:", ln)]
             or [ln.strip() for ln in text.splitlines()
                 if re.search(r"(?i)\berror\b|\bnot found\b|undefined reference", ln)])
    short = [re.sub(r"^\S*/([^/\s]+:\d+)", r"\1", ln) for ln in lines]
    return "\n".join(short[:n]) or (text.strip().splitlines() or ["no compiler message"])[-1]


def server_objects(d: Path, cc: Compiler, cflags: tuple[str, ...], lib_key: str,
                    sources: list[Path] | None = None) -> tuple[dict[str, Path], dict[str, str]]:
    """Compile each server source once per content; return ({source stem: object}, {failed adapter
    file: its first errors}).  An adapter's failure is cached like an object, so it is not retried
    until something it depends on changes; a core source failing raises :class:`CommandError`."""
    headers = b"".join(p.read_bytes() for p in sorted(SERVER_DIR.glob("*.h")))
    parts = (headers, _generated(cflags))
    objs: dict[str, Path] = {}
    failed: dict[str, str] = {}
    logf = d / "rvvdiff-build.log"
    for src in sources if sources is not None else server_sources():
        tag = digest(src.read_bytes(), *parts, " ".join(cflags), cc.identity, lib_key)
        obj = d / "server-obj" / f"{src.stem}-{tag}.o"
        fail = obj.with_suffix(".failed")
        if is_adapter(src) and fail.exists():
            failed[src.name] = fail.read_text()
            continue
        if not obj.exists():
            obj.parent.mkdir(exist_ok=True)
            tmp = obj.with_suffix(f".tmp{os.getpid()}.o")
            try:
                run([cc.cxx, "-O2", *cflags, "-I", SERVER_DIR, "-c", src, "-o", tmp], timeout=1800,
                    what=f"compiling the kernel server's {src.name}", log_file=logf)
            except CommandError as e:
                if not is_adapter(src):
                    raise
                failed[src.name] = first_errors(e.stderr + e.stdout)
                fail.write_text(failed[src.name])
                append_log(d, f"adapter {src.name} does not compile against this tree: the server is linked without "
                        f"it (kernels {', '.join(adapter_kernels(src)) or 'none'} are not in this build)")
                continue
            tmp.replace(obj)
        objs[src.stem] = obj
    return objs, failed


def link_server(d: Path, cc: Compiler, cflags: tuple[str, ...], libs: tuple[Path, ...],
                 lib_key: str, *, dynamic: bool = False) -> tuple[Path, dict[str, str]]:
    """Link the server from its cached objects, without adapters that do not compile: statically, or with
    ``dynamic`` against the shared libraries ``libs`` (found again at run time through their directories, named
    in the server as its run path: a dispatch variant's build).

    Servers are kept per content hash, so differently edited adapter files
    (e.g. two families being developed at once) do not rebuild each other.
    """
    objs, failed = server_objects(d, cc, cflags, lib_key)
    objs_l = list(objs.values())
    server = d / "servers" / digest(*(str(o) for o in objs_l), lib_key) / "rvvdiff-server"
    if not server.exists():
        server.parent.mkdir(parents=True, exist_ok=True)
        tmp = server.with_name(f"rvvdiff-server.tmp{os.getpid()}")
        how = [f"-Wl,-rpath,{':'.join(dict.fromkeys(str(lib.parent) for lib in libs))}"] if dynamic else ["-static"]
        run([cc.cxx, *objs_l, *libs, *how, "-lm", "-lpthread", "-o", tmp], timeout=1800,
            what="linking the kernel server", log_file=d / "rvvdiff-build.log")
        tmp.replace(server)
    return server, failed


def append_log(d: Path, text: str) -> None:
    with open(d / "rvvdiff-build.log", "a") as f:
        f.write(text if text.endswith("\n") else text + "\n")
