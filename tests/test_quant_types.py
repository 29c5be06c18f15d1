"""Every quantized type whole: each test names the places a half-added (or half-removed) type still
misses, with the file and what to add there.

Adding a type takes its record (oracles/quant_types.py: block layout, largest integer,
vec_dot_type and bound) and its decoder (oracles/quants.py, ``@decoder``); the strategies, the
test tables (cases/quant_dot.py, cases/quantize.py) and docs/quants.md's type table follow from
the record.  Only what cannot be derived is asked for separately: an IQ type's grid
(oracles/quant_tables.py) and grid-sweep encoder (cases/quant_blocks.py), an activation
type's quantizers (oracles/q8.py, cases/quantize.py)."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as G

from cases import quant_blocks as QB
from cases import quant_strategies as QS
from cases.quant_dot import DOTS
from cases.quantize import ORACLES, QUANTIZERS
from harness.ggml import source, tree
from oracles import dots as OD
from oracles import q8 as Q8
from oracles import quant_tables as T
from oracles import quant_types as QT
from oracles import quants as Q

#: Where gguf-py's block sizes are not ggml's, and why (compared with the pinned tree's build by
#: cases/test_quant_dot.py::test_rvv_vec_dot_coverage).
GGUF_SIZE_EXCEPTIONS = {"q8_1": "gguf-py lists an older block_q8_1 with fp32 d and s (40 bytes); ggml's has fp16 (36)"}


def _fail(problems: list[str], what: str) -> None:
    assert not problems, f"{what}:\n  " + "\n  ".join(problems)


def _ggml_types() -> dict[str, str]:
    """Every type name of gguf-py's GGMLQuantizationType and of the pinned tree's enum ggml_type,
    with where it was seen."""
    out = {tree.type_name(f"GGML_TYPE_{t.name}"): "gguf-py's GGMLQuantizationType" for t in G}
    for name in tree.of(source.pinned()).types:
        out[name] = "the pinned tree's enum ggml_type" if name not in out else out[name] + " and the pinned tree's enum"
    return out


def test_every_ggml_type_has_a_record_or_a_reason() -> None:
    """A block-quantized type of ggml is either recorded or listed in UNTESTED with the reason."""
    problems = [f"{name} (in {where}): no record -- add one to RECORDS in oracles/quant_types.py (block layout, "
                "largest integer, vec_dot_type, bound) and its decoder to oracles/quants.py (@decoder), or list it in "
                "UNTESTED there with the reason"
                for name, where in sorted(_ggml_types().items())
                if name not in QT.BY_NAME and name not in QT.UNTESTED and name not in QT.PLAIN]
    problems += [f"{name}: both recorded and listed in UNTESTED in oracles/quant_types.py -- remove it from UNTESTED"
                 for name in QT.UNTESTED if name in QT.BY_NAME]
    _fail(problems, "ggml types without a record")


def test_every_record_has_a_decoder_and_every_decoder_a_record() -> None:
    problems = [f"{r.name}: recorded in oracles/quant_types.py but no decoder -- add "
                f"`@decoder(\"{r.name}\") def _{r.name}(b: np.ndarray) -> Decoded` to oracles/quants.py "
                "(raw blocks (nb, nbytes) -> the exact decomposition)" for r in QT.RECORDS if r.name not in Q.DECODERS]
    problems += [f"{name}: a decoder in oracles/quants.py but no record -- add its record to RECORDS in "
                 "oracles/quant_types.py" for name in Q.DECODERS if name not in QT.BY_NAME]
    _fail(problems, "records and decoders out of step")


@pytest.mark.parametrize("name", [r.name for r in QT.RECORDS])
def test_record_is_consistent(name: str) -> None:
    """The record's fields fill its bytes; its roles, kind and pairing are known; its block size and
    bytes are gguf-py's; its decoder reads ``block`` elements from ``nbytes`` bytes; a weight type's
    dot row is whole (vec_dot_type, bound, largest integer)."""
    r = QT.record(name)
    where = f"{name}'s record in oracles/quant_types.py"
    problems = [f"{where}: field {f.name} has role {f.role!r}, not one of {QT.ROLES}"
                for f in r.fields if f.role not in QT.ROLES]
    problems += [f"{name}: field {f.name} has role {f.role!r}, whose bytes cases/quant_blocks.py does not draw -- "
                 "add a drawer for it (Layout, _write_scales, exact_pair's power-of-two scales) and the role to ROLES there"
                 for f in r.fields if f.role in QT.ROLES and f.role not in QB.ROLES]
    if r.kind not in ("weight", "activation"):
        problems.append(f"{where}: kind {r.kind!r} is neither 'weight' nor 'activation'")
    g = getattr(G, name.upper(), None)
    if g is not None and name not in GGUF_SIZE_EXCEPTIONS and GGML_QUANT_SIZES[g] != (r.block, r.nbytes):
        problems.append(f"{where}: {r.block} elements in {r.nbytes} bytes (the fields' sum), gguf-py says "
                        f"{GGML_QUANT_SIZES[g]} -- check the fields against ggml-common.h")
    if r.kind == "weight" and r.vec_dot_type is None:
        problems.append(f"{where}: a weight type without a dot product's row -- set vec_dot_type and bound")
    if r.vec_dot_type is not None:
        y = QT.BY_NAME.get(r.vec_dot_type)
        if y is None or y.kind != "activation":
            problems.append(f"{where}: vec_dot_type {r.vec_dot_type!r} is not a recorded activation type")
        if r.bound is None:
            problems.append(f"{where}: a dot row without a bound -- derive DotBound(depth=(a, b), derivation, "
                            "variants) from the kernel's arithmetic (the rule: cases/quant_dot.py's docstring)")
        if r.max_int is None:
            problems.append(f"{where}: a dot row without max_int (largest |integer part| of x_i * y_i per unit of "
                            "|q_y|), which exact-by-construction rows need")
    elif r.bound is not None:
        problems.append(f"{where}: a bound without a vec_dot_type")
    if name in Q.DECODERS:
        dec = Q.decode(name, np.zeros(r.nbytes * 2, np.uint8))
        if dec.n != 2 * r.block:
            problems.append(f"{name}: the decoder in oracles/quants.py reads {dec.n // 2} elements per block of "
                            f"{r.nbytes} bytes, the record says {r.block}")
    _fail(problems, f"{name} is not whole")


def test_every_dot_row_has_a_table_entry_and_strategies() -> None:
    """Every record with a dot row is in the quant_dot table and the strategies can build its rows
    (raw, exact by construction, grid sweeps for IQ types)."""
    problems = []
    table = {k.name for k in DOTS}
    for r in QT.dot_records():
        if r.name not in table:
            problems.append(f"{r.name}: not in DOTS (cases/quant_dot.py builds it from the records with a bound): "
                            "give its record a bound in oracles/quant_types.py")
            continue
        if r.name not in Q.DECODERS:
            continue  # named by the decoder test
        p = QS.exact_pair(r.name, r.vec_dot_type, 1, seed=1, payload="random", subscales="random")
        if not OD.dot(r.name, p.x, r.vec_dot_type, p.y).exact:
            problems.append(f"{r.name}: cases/quant_strategies.py exact_pair does not make an exact pair from the "
                            "record: check the float-scale roles of its fields and its max_int in oracles/quant_types.py")
        if r.grid is not None:
            if r.grid not in T.GRIDS:
                problems.append(f"{r.name}: its grid {r.grid!r} is not in GRIDS of oracles/quant_tables.py -- add it "
                                "(gguf-py class, entries, width; tests/test_quant_oracles.py checks it against "
                                "ggml-common.h)")
                continue
            try:
                QB.grid_sweep_row(r.name, seed=0)
            except ValueError:
                problems.append(f"{r.name}: no grid-sweep encoder -- add a branch for it to grid_sweep_row in "
                                "cases/quant_blocks.py (the inverse of its decoder)")
    _fail(problems, "dot rows without a table entry or strategies")


def test_every_activation_type_has_its_quantizers() -> None:
    """An activation type needs its reference quantizer (oracles/q8.py) and the RVV kernel's
    oracle (cases/quantize.py), which no record can derive."""
    problems = []
    for r in QT.RECORDS:
        if r.kind != "activation":
            continue
        if r.name not in Q8.REFERENCE_QUANTIZERS:
            problems.append(f"{r.name}: no reference quantizer -- add quantize_{r.name} to REFERENCE_QUANTIZERS in "
                            "oracles/quants.py")
        if r.name not in ORACLES:
            problems.append(f"{r.name}: no RVV oracle -- add (rvv semantics, reference semantics) to ORACLES in "
                            "cases/quantize.py")
    problems += [f"{name}: in ORACLES of cases/quantize.py but not an activation record of oracles/quant_types.py"
                 for name in ORACLES if QT.BY_NAME.get(name) is None or QT.BY_NAME[name].kind != "activation"]
    assert [q.name for q in QUANTIZERS] == [r.name for r in QT.RECORDS if r.kind == "activation" and r.name in ORACLES]
    _fail(problems, "activation types without their quantizers")


def test_docs_type_table_is_current() -> None:
    """docs/quants.md's type table is rendered from the records."""
    text = (QT.ROOT / QT.DOC).read_text()
    assert QT.render_doc(text) == text, (f"{QT.DOC}'s type table (<!-- quant_types --> block) is out of date: run "
                                         "`rvvdiff docs --write quant-types`")
