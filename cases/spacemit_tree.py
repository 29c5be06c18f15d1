"""What a tree's SpacemiT backend (ggml-cpu/spacemit/) holds, by its era: the families' "not in this tree" and their
coverage scans, and the model family's runs, ask here.

Before its rewrite of 2026-05-14 (ggml 81a56c6f) the backend was ime.cpp and ime1_kernels.cpp only: its norms members
of ime.cpp's ``tensor_traits_common``, IME1 on every core (no ``ime_env.cpp``, no core types), no MUL_MAT_ID,
rvv_kernels.cpp or repack.cpp (docs/spacemit.md, "Trees before the rewrite").
"""

from __future__ import annotations

from harness.ggml.source import GgmlSource

#: The backend's directory in a tree's ggml directory.
BACKEND = "src/ggml-cpu/spacemit"


def before_rewrite(source: GgmlSource | None) -> bool:
    """The tree's SpacemiT backend predates its core types (ime_env.cpp, 2026-05): IME1 on every core."""
    d = None if source is None else source.ggml / BACKEND
    return d is not None and d.is_dir() and not (d / "ime_env.cpp").is_file()


def absent(src: GgmlSource, rel: str) -> str:
    """What a coverage scan says of a SpacemiT file the tree lacks: no backend at all, or a backend from before the
    rewrite (its norms are ime.cpp's members, which test_spacemit_op runs and the scan, which reads free functions,
    does not list)."""
    if not (src.ggml / BACKEND).is_dir():
        return "ggml-cpu/spacemit/ (no SpacemiT backend in this tree)"
    return (f"{rel} (this tree's SpacemiT backend predates it: ime.cpp and ime1_kernels.cpp only, its norms ime.cpp's "
            "members, run by test_spacemit_op)")
