"""One record per quantized type: everything rvvdiff knows about a ggml block format except its
decoder (``oracles/quants.py``).

A record (:class:`QuantType`) says

* the **block layout**: elements per block, and the struct's fields in order (name, bytes, role),
  as ``ggml-common.h`` declares them -- the byte offsets of float scales and integer sub-scales
  that the strategies (``cases/quant_blocks.py``) write are derived from it;
* the **largest integer** one element's product holds (``max_int``; exact-by-construction rows);
* for a weight type, its **dot product's row**: the activation type the CPU backend pairs it
  with (``vec_dot_type``) and the error bound of ``ggml_vec_dot_<type>_<q8>`` (:class:`DotBound`,
  derived from the kernels' arithmetic; the rule is in ``cases/quant_dot.py``);
* for an IQ type, the grid its indices address (``oracles/quant_tables.py``) and how many grid
  references a block holds (the grid sweeps).

Adding a type: its decoder in ``oracles/quants.py`` (``@decoder("name")``) and its record here,
with its bound.  ``tests/test_quant_types.py`` names every place a half-added type still misses;
the type tables of docs/quants.md are rendered from :data:`RECORDS`
(``rvvdiff docs --write quant-types``).  Nothing here imports the harness.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

QK_K = 256

#: Roles of a block's bytes.  Float scales: ``fp16``, ``fp32``, ``e8m0``; ``sub``: packed integer
#: sub-scales; ``sub+fp16``: sub-scales whose top nibbles carry the block's fp16 scale (iq1_m);
#: ``payload``: quants, grid indices, signs, high bits; ``int16``: q8_K's stored sums.
ROLES = ("fp16", "fp32", "e8m0", "sub", "sub+fp16", "payload", "int8", "int16")


@dataclass(frozen=True)
class Field:
    """One member of a block struct: ``name``, ``nbytes`` bytes, playing ``role``."""

    name: str
    nbytes: int
    role: str
    what: str = ""  # what it holds, for the docs table


@dataclass(frozen=True)
class DotBound:
    """The bound of ``ggml_vec_dot_<type>_<vec_dot_type>``: ``K = a + b * n_blocks`` fp32 roundings
    at most (``depth = (a, b)``), where they come from, and the ``_vlN`` variants whose arithmetic
    was read (a variant the tree gains needs reading: the coverage scan fails until it is listed)."""

    depth: tuple[int, int]
    derivation: str
    variants: tuple[int, ...] = ()


@dataclass(frozen=True)
class QuantType:
    """Everything about one ggml quantized type but its decoder."""

    name: str  # ggml's type name (ggml_type_name), the test id
    block: int  # elements per block
    kind: str  # "weight" or "activation"
    fields: tuple[Field, ...]  # the struct, in order
    max_int: int | None = None  # largest |integer part| of x_i * y_i per unit of |q_y| (weights)
    vec_dot_type: str | None = None  # the activation type its vec_dot takes (None: no dot row)
    bound: DotBound | None = None
    grid: str | None = None  # IQ: the grid (oracles/quant_tables.py GRIDS) its indices address
    grid_refs: int = 0  # IQ: grid references per block

    @property
    def nbytes(self) -> int:
        return sum(f.nbytes for f in self.fields)

    def offsets(self, role: str) -> tuple[int, ...]:
        """Byte offsets of the fields playing ``role``."""
        out, off = [], 0
        for f in self.fields:
            if f.role == role:
                out.append(off)
            off += f.nbytes
        return tuple(out)

    def field(self, name: str) -> tuple[int, int]:
        """``[start, end)`` of the field called ``name``."""
        off = 0
        for f in self.fields:
            if f.name == name:
                return off, off + f.nbytes
            off += f.nbytes
        raise KeyError(f"{self.name} has no field {name!r}; it has {', '.join(f.name for f in self.fields)}")

    def span(self, *roles: str) -> tuple[int, int] | None:
        """``[start, end)`` covering every field playing one of ``roles`` (None if none does)."""
        spans, off = [], 0
        for f in self.fields:
            if f.role in roles:
                spans.append((off, off + f.nbytes))
            off += f.nbytes
        return (spans[0][0], spans[-1][1]) if spans else None


def _f(spec: str) -> tuple[Field, ...]:
    """Fields from ``"name:bytes:role:what; ..."`` (compact rows below)."""
    out = []
    for part in spec.split(";"):
        name, nbytes, role, *what = (s.strip() for s in part.split(":", 3))
        out.append(Field(name, int(nbytes), role, what[0] if what else ""))
    return tuple(out)


_AS_Q4_0 = "as q4_0"
RECORDS: tuple[QuantType, ...] = (
    QuantType("q4_0", 32, "weight", _f("d:2:fp16; qs:16:payload:nibbles - 8"), max_int=8, vec_dot_type="q8_0",
              bound=DotBound((2, 1), "per block sumi * d_x * d_y (two products; |sumi| <= 2^15 converts exactly), "
                             "one sum over blocks; RVV and generic alike")),
    QuantType("q4_1", 32, "weight", _f("d:2:fp16; m:2:fp16:minimum; qs:16:payload:nibbles"), max_int=15 + 1,
              vec_dot_type="q8_1",
              bound=DotBound((2, 1), "per block (d_x*d_y) * sumi + m*s (fp16 x fp16 products are exact; one product, "
                             "one addition), one sum over blocks")),
    QuantType("q5_0", 32, "weight", _f("d:2:fp16; qh:4:payload:5th bits; qs:16:payload:nibbles"), max_int=16,
              vec_dot_type="q8_0", bound=DotBound((2, 1), _AS_Q4_0)),
    QuantType("q5_1", 32, "weight", _f("d:2:fp16; m:2:fp16:minimum; qh:4:payload:5th bits; qs:16:payload:nibbles"),
              max_int=31 + 1, vec_dot_type="q8_1", bound=DotBound((2, 1), "as q4_1")),
    QuantType("q8_0", 32, "activation", _f("d:2:fp16; qs:32:int8"), max_int=128, vec_dot_type="q8_0",
              bound=DotBound((1, 1), "per block sumi * (d_x*d_y) (exact fp16 x fp16, one product; |sumi| < 2^20), "
                             "one sum over blocks")),
    QuantType("q8_1", 32, "activation", _f("d:2:fp16; s:2:fp16:d * sum(qs); qs:32:int8")),
    QuantType("q1_0", 128, "weight", _f("d:2:fp16; qs:16:payload:sign bits"), max_int=1, vec_dot_type="q8_0",
              bound=DotBound((6, 1), "per 128-block: 4 terms d_y * sum (one product each) summed in acc (4 additions), "
                             "times d_x (one product), one sum over blocks; vl128, vl256 and generic alike",
                             (128, 256))),
    QuantType("mxfp4", 32, "weight", _f("e:1:e8m0; qs:16:payload:E2M1 nibbles"), max_int=12, vec_dot_type="q8_0",
              bound=DotBound((2, 1), "per block (E8M0 * d_y) * acc: the scale product is exact unless it lands in "
                             "fp32's subnormals (counted), one product, one sum over blocks", (128, 256))),
    QuantType("iq4_nl", 32, "weight", _f("d:2:fp16; qs:16:payload:nibbles into kvalues_iq4nl"), max_int=127,
              vec_dot_type="q8_0",
              bound=DotBound((1, 1), "per block (d_x*d_y exact) * acc: one product, one sum over blocks", (128, 256))),
    QuantType("q2_K", QK_K, "weight",
              _f("scales:16:sub:4-bit scale and min; qs:64:payload:2-bit quants; d:2:fp16; dmin:2:fp16"),
              max_int=15 * 3 + 15, vec_dot_type="q8_K",
              bound=DotBound((3, 2), "RVV: dmin term and dall term per block (scale product + product each) in one "
                             "sum: 2 + 2 nb; generic: dall*isum - dmin*summs (3 roundings) per block: 3 + nb", (128, 256))),
    QuantType("q3_K", QK_K, "weight",
              _f("hmask:32:payload:high bits; qs:64:payload:2-bit quants; scales:12:sub:6-bit scales; d:2:fp16"),
              max_int=32 * 4, vec_dot_type="q8_K",
              bound=DotBound((10, 1), "RVV: d * isum per block (2 roundings; |isum| < 2^23): 2 + nb; generic: 8 lane "
                             "sums of d * aux32 (2 roundings, nb terms) added at the end (8): 10 + nb",
                             (128, 256, 512, 1024))),
    QuantType("q4_K", QK_K, "weight",
              _f("d:2:fp16; dmin:2:fp16; scales:12:sub:6-bit scales and mins; qs:128:payload:nibbles"),
              max_int=63 * 15 + 63, vec_dot_type="q8_K",
              bound=DotBound((10, 2), "vl128: two fused terms per block after one fadd: 2 + 2 nb; vl256: dmin*sumi "
                             "and d*(sum_1+sum_2) (inexact conversion past 2^24): 3 + 2 nb; generic: 8 lanes + mins, "
                             "2 + nb + 8", (128, 256))),
    QuantType("q5_K", QK_K, "weight",
              _f("d:2:fp16; dmin:2:fp16; scales:12:sub:6-bit scales and mins; qh:32:payload:5th bits; "
                 "qs:128:payload:nibbles"),
              max_int=63 * 31 + 63, vec_dot_type="q8_K",
              bound=DotBound((10, 1), "RVV: mins in sumf, d*aux32 (conversion, scale product, product) in sums, one "
                             "final addition: 4 + nb; generic: as q4_K, 10 + nb")),
    QuantType("q6_K", QK_K, "weight",
              _f("ql:128:payload:low nibbles; qh:64:payload:high 2 bits; scales:16:sub:int8 scales; d:2:fp16"),
              max_int=128 * 32, vec_dot_type="q8_K",
              bound=DotBound((10, 2), "vl128: two fmadd terms per block (conversion, scale product): 2 + 2 nb; "
                             "vl256-1024: d * sum_t (conversion past 2^24, 2 products): 3 + nb; generic: 8 lane sums: "
                             "10 + nb", (128, 256, 512, 1024))),
    QuantType("q8_K", QK_K, "activation", _f("d:4:fp32; qs:256:int8; bsums:32:int16:sums of 16 quants")),
    QuantType("tq1_0", QK_K, "weight", _f("qs:48:payload:5 trits per byte; qh:4:payload:4 trits per byte; d:2:fp16"),
              max_int=1, vec_dot_type="q8_K",
              bound=DotBound((2, 1), "per block sum * d_y * d_x (two products, |sum| < 2^16), one sum over blocks",
                             (128, 256, 512))),
    QuantType("tq2_0", QK_K, "weight", _f("qs:64:payload:2-bit trits; d:2:fp16"), max_int=2, vec_dot_type="q8_K",
              bound=DotBound((2, 1), "per block (float)sumi * (d_y*d_x): two products, one sum over blocks", (128, 256))),
    QuantType("iq2_xxs", QK_K, "weight",
              _f("d:2:fp16; qs:64:payload:per 32: 4 grid indices, then a uint32 of 4 x 7 sign bits and a 4-bit scale"),
              max_int=31 * 43, vec_dot_type="q8_K", grid="iq2xxs_grid", grid_refs=32,
              bound=DotBound((10, 1), "vl512/1024: per block 8 float terms in sum, then sum * (d_x*d_y): 2 + 8 + nb "
                             "(vl128/256: 4 terms); generic: d * bsum, 3 + nb; the final 0.125 is exact", (128, 256, 512))),
    QuantType("iq2_xs", QK_K, "weight",
              _f("d:2:fp16; qs:64:payload:uint16: 9-bit grid index, 7 sign bits; scales:8:sub:two 4-bit scales"),
              max_int=31 * 43, vec_dot_type="q8_K", grid="iq2xs_grid", grid_refs=32,
              bound=DotBound((10, 1), "vl512/1024: per block 8 float terms (isum*sc pairs) then scaled: 2 + 8 + nb; "
                             "vl128/256 and generic: d * sum (inexact conversion), 3 + nb", (128, 256, 512))),
    QuantType("iq2_s", QK_K, "weight",
              _f("d:2:fp16; qs:32:payload:grid index low bits; signs:32:payload; qh:8:payload:grid index high bits; "
                 "scales:8:sub:two 4-bit scales"),
              max_int=31 * 43, vec_dot_type="q8_K", grid="iq2s_grid", grid_refs=32,
              bound=DotBound((18, 1), "vl128/256/512: per block 16 float terms in sum_block, then sum_block * "
                             "(d_x*d_y): 2 + 16 + nb; vl1024: 1 term; generic: 3 + nb", (128, 256, 512, 1024))),
    QuantType("iq3_xxs", QK_K, "weight",
              _f("d:2:fp16; qs:64:payload:grid indices; signs_scales:32:payload:uint32: 4 x 7 sign bits, a 4-bit scale"),
              max_int=31 * 62, vec_dot_type="q8_K", grid="iq3xxs_grid", grid_refs=64,
              bound=DotBound((10, 1), "vl1024: 8 float terms per block then d * block_sum: 2 + 8 + nb; vl128/256: 4 "
                             "pairs (5); vl512: 2 inexact conversions; generic 3 + nb; the final 0.25 is exact",
                             (128, 256, 512, 1024))),
    QuantType("iq3_s", QK_K, "weight",
              _f("d:2:fp16; qs:64:payload:grid index low bits; qh:8:payload:grid index high bits; signs:32:payload; "
                 "scales:4:sub:two 4-bit scales"),
              max_int=31 * 15, vec_dot_type="q8_K", grid="iq3s_grid", grid_refs=64,
              bound=DotBound((10, 1), "vl128: 8 float terms per block then sum_block * (d_x*d_y): 2 + 8 + nb; "
                             "vl256: 4 pairs; vl512/1024: 2; generic 2 + nb", (128, 256, 512))),
    QuantType("iq1_s", QK_K, "weight",
              _f("d:2:fp16; qs:32:payload:grid index low bits; qh:16:payload:uint16: grid high bits, 3-bit scale, "
                 "delta sign"),
              max_int=15 * 8 + 15, vec_dot_type="q8_K", grid="iq1s_grid", grid_refs=32,
              bound=DotBound((3, 1), "per block d_x * d_y * (sumi + 1/8 sumi1): one addition, two products, one sum "
                             "over blocks; RVV and generic alike", (128, 256, 512, 1024))),
    QuantType("iq1_m", QK_K, "weight",
              _f("qs:32:payload:grid index low bits; qh:16:payload:grid high bits, delta signs; "
                 "scales:8:sub+fp16:3-bit scales, the fp16 d in the top nibbles"),
              max_int=15 * 8 + 15, vec_dot_type="q8_K", grid="iq1s_grid", grid_refs=32,
              bound=DotBound((3, 1), "as iq1_s", (128, 256, 512, 1024))),
    QuantType("iq4_xs", QK_K, "weight",
              _f("d:2:fp16; scales_h:2:sub:high 2 bits of 8 scales; scales_l:4:sub:low 4 bits; "
                 "qs:128:payload:nibbles into kvalues_iq4nl"),
              max_int=32 * 127, vec_dot_type="q8_K",
              bound=DotBound((3, 8), "RVV: d_x*d_y*(sumi) per block (conversion past 2^24, two products): 3 + nb; "
                             "generic: 8 terms (d4d8*(ls-32)) * sumi per block: 3 + 8 nb", (128, 256, 512, 1024))),
)

BY_NAME: dict[str, QuantType] = {r.name: r for r in RECORDS}

#: Quantized types of ggml (gguf-py's enum, the pinned tree's ``enum ggml_type``) rvvdiff has no
#: record for, and why.  A type in neither RECORDS nor here fails tests/test_quant_types.py.
UNTESTED: dict[str, str] = {
    "q2_0": "no RVV vec_dot in the pinned tree (arch-fallback.h maps its generic onto it)",
    "nvfp4": "no RVV vec_dot in the pinned tree (arch-fallback.h maps its generic onto it)",
}

#: ggml types that are not block-quantized (one element per block): no record needed.
PLAIN = ("f32", "f16", "bf16", "f64", "i8", "i16", "i32", "i64")


def record(name: str) -> QuantType:
    """The record of type ``name``; a clear error (saying where to add it) for an unknown one."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no record for quantization type {name!r} in oracles/quant_types.py; known: "
                       f"{', '.join(BY_NAME)}") from None


def dot_records() -> list[QuantType]:
    """The records with a dot product's row (the quant_dot family's table), in table order."""
    return [r for r in RECORDS if r.vec_dot_type is not None]


# ------------------------------------------------------------------ the docs' type table

#: The checkout, and the page that carries the table (relative to it).
ROOT = Path(__file__).resolve().parent.parent
DOC = "docs/quants.md"
_BLOCK = re.compile(r"(<!-- quant_types -->\n)(.*?)(<!-- /quant_types -->)", re.S)


def _field(f: Field) -> str:
    role = "" if f.role == "payload" else f.role
    what = "; ".join(s for s in (role, f.what) if s)
    return f"{f.name}[{f.nbytes}]" + (f" ({what})" if what else "")


def table() -> str:
    """The type table of docs/quants.md, from :data:`RECORDS`."""
    lines = ["| type | block | bytes | fields (bytes) | max int | pairs with | (a, b) | variants read | "
             "where (a, b) come from |", "|" + "---|" * 9]
    for r in RECORDS:
        b = r.bound
        cells = [r.name, str(r.block), str(r.nbytes), ", ".join(_field(f) for f in r.fields),
                 "-" if r.max_int is None else str(r.max_int), r.vec_dot_type or "-",
                 f"({b.depth[0]}, {b.depth[1]})" if b else "-",
                 (", ".join(f"vl{v}" for v in b.variants) or "one body") if b else "-",
                 b.derivation if b else "-"]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    untested = "; ".join(f"{n}: {why}" for n, why in UNTESTED.items())
    lines.append(f"\nNot tested (no record): {untested}.")
    return "\n".join(lines) + "\n"


def render_doc(text: str) -> str:
    """``text`` with its ``<!-- quant_types -->`` block replaced by the current :func:`table`."""
    if not _BLOCK.search(text):
        raise ValueError(f"{DOC} has no <!-- quant_types --> ... <!-- /quant_types --> block")
    return _BLOCK.sub(lambda m: m.group(1) + table() + m.group(3), text)
