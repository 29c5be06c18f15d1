"""The lookup tables of ggml's quantization formats (IQ grids, sign patterns, non-linear value
sets), as integers, read from gguf-py.

Why gguf-py and not the tree under test: the oracle must not inherit a table from the code it
judges.  gguf-py is an independent implementation of the same file formats (it writes and reads
model files, so its tables must agree with ggml's or every model would decode wrongly), shipped
as its own package.  ``tests/test_quant_oracles.py`` checks these tables against the C arrays of
the pinned tree's ``ggml-common.h``, so a disagreement is found once, there, and not disguised
as a kernel failure.

gguf-py stores the grids as float32 values in ``(1, 1, entries, width)`` arrays; here they are
``int64`` arrays of shape ``(entries, width)`` holding the same (small, exact) values.
"""

from __future__ import annotations

from functools import cache

import numpy as np
from gguf import quants as gq

#: Grid name -> (gguf-py class holding it, entries, values per entry).
GRIDS: dict[str, tuple[type, int, int]] = {
    "iq2xxs_grid": (gq.IQ2_XXS, 256, 8),
    "iq2xs_grid": (gq.IQ2_XS, 512, 8),
    "iq2s_grid": (gq.IQ2_S, 1024, 8),
    "iq3xxs_grid": (gq.IQ3_XXS, 256, 4),
    "iq3s_grid": (gq.IQ3_S, 512, 4),
    "iq1s_grid": (gq.IQ1_S, 2048, 8),
}


@cache
def grid(name: str) -> np.ndarray:
    """The grid ``name`` (e.g. ``"iq2xxs_grid"``) as int64 ``(entries, width)``."""
    cls, entries, width = GRIDS[name]
    cls.init_grid()
    g = np.asarray(cls.grid, np.float64).reshape(entries, width)
    out = g.astype(np.int64)
    if not np.array_equal(out, g):
        raise ValueError(f"gguf-py's {name} holds non-integer values")
    out.setflags(write=False)
    return out


@cache
def ksigns_iq2xs() -> np.ndarray:
    """128 sign bytes: 7 explicit sign bits, the 8th makes the number of negatives even."""
    out = np.frombuffer(gq.IQ2_XXS.ksigns, np.uint8).astype(np.int64)
    out.setflags(write=False)
    return out


@cache
def kvalues_iq4nl() -> np.ndarray:
    """The 16 non-linear values of IQ4_NL / IQ4_XS."""
    out = np.array(gq.IQ4_NL.kvalues, np.int64)
    out.setflags(write=False)
    return out


@cache
def kvalues_mxfp4() -> np.ndarray:
    """The 16 E2M1 values of MXFP4, doubled (ggml's convention; the scale is halved to match)."""
    out = np.array(gq.MXFP4.kvalues, np.int64)
    out.setflags(write=False)
    return out


def sign_bits(sign_bytes: np.ndarray) -> np.ndarray:
    """Sign bytes -> +-1 per bit (bit j set: element j negative), shape ``(..., 8)``."""
    bits = (np.asarray(sign_bytes, np.int64)[..., None] >> np.arange(8)) & 1
    return 1 - 2 * bits
