"""Tests of the quantize family: activation quantizers (``quantize_row_q8_0 / _q8_1 / _q8_K`` in
arch/riscv/quants.c) against the NumPy reference quantizers, bit for bit.  The table, the tolerance
(none) and its reasons, the inputs and the checks are in cases/quantize.py; this module holds only
the tests."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cases import quant_variants as V
from cases.quantize import (
    IDS,
    IMPL_RVV,
    QUANTIZERS,
    Quantizer,
    check_quantizer,
    coverage_scan,
    edge_rows,
    float_rows,
    make_row,
)
from harness.check import observe
from harness.emulators.protocol import In, Out
from harness.ggml import tree
from harness.plugin.targets import session
from oracles import quants as Q


def test_quantize_coverage(target) -> None:
    """Every RVV activation quantizer of the tree under test is in the table (an unknown one fails,
    with file:line); table entries the tree lacks, or has no RVV body for, are listed as not in
    this tree."""
    scan = coverage_scan(tree.of(session().source))
    if scan.not_in_tree:
        observe.note("not_in_tree", "; ".join(scan.not_in_tree))
    assert not scan.uncovered, ("RVV activation quantizers the quantize table (cases/quantize.py) does not know:\n  " +
                                "\n  ".join(f"{u.name} ({u.where}): {u.why}" for u in scan.uncovered))


@pytest.mark.parametrize("q", QUANTIZERS, ids=IDS)
@given(data=st.data())
def test_quantize(q: Quantizer, target, data: st.DataObject) -> None:
    """Rows of every input kind, 1 to ~320 blocks and real models' row lengths: RVV bit for bit against its oracle, the twin
    against the reference, and RVV against the reference only by the documented rule."""
    x = data.draw(float_rows(q.block), label="x")
    check_quantizer(q, target, x)


@pytest.mark.parametrize("q", QUANTIZERS, ids=IDS)
def test_quantize_edges(q: Quantizer, target) -> None:
    """Fixed rows every run (:func:`edge_rows`): few blocks of exact ties, +-amax pairs, zero and
    constant blocks, five blocks, a real model's row and a long mixed row."""
    for nb, kinds, seed in edge_rows(q.block):
        check_quantizer(q, target, make_row(nb, q.block, kinds, seed))


@pytest.mark.parametrize("q", QUANTIZERS, ids=IDS)
def test_quantize_variant(q: Quantizer, target) -> None:
    """Trace one call: the RVV body of quantize_row_<q> ran, not the generic / reference one."""
    target.needs_vector(f"which body of quantize_row_{q.name} runs")
    found = V.scan(session().source.cpu_dir)
    entry = found.quantizers.get(q.name)
    if entry is None or not entry.rvv:
        pytest.skip(f"not in this tree: {found.path} has no RVV quantize_row_{q.name} (ggml's reference serves it; "
                    "test_quantize_coverage lists it)")
    if entry.dispatch_note:
        pytest.skip(f"which variant serves VLEN {target.vlen} is unknown: {entry.dispatch_note}")
    x = make_row(2, q.block, ["gaussian"], 0)
    tr = target.trace("quant_from_float", [V.type_id(target, q.name), x.size, IMPL_RVV], [],
                      [In(x), Out(Q.row_bytes(q.name, x.size))])
    ran = {f for f in tr.call if f.startswith(("quantize_row_", "ggml_vec_dot"))}
    label, problem = V.observed_variant(entry, ran, target.vlen)
    if f"quantize_row_{q.name}_ref" in ran and problem is None:
        label, problem = "reference", f"quantize_row_{q.name} ran the scalar reference although the tree has an RVV body"
    src = session().source
    V.record(f"{src.commit}-{src.content_hash()[:8]}", target.isa.name, target.vlen, target.stress,
             f"quantize_row_{q.name}", label)
    observe.note("variant", label)
    assert problem is None, problem
