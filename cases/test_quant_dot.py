"""Tests of the quant_dot family: quantized dot products (``ggml_vec_dot_<type>_<q8>`` in
arch/riscv/quants.c) against NumPy oracles.  The table, the bound (derived in cases/quant_dot.py's
docstring, numbers per type in oracles/quant_types.py), the checks and the reproducers of the
findings are in cases/quant_dot.py; this module holds only the tests."""

from __future__ import annotations

import pytest

from cases import quant_blocks as QB
from cases import quant_strategies as QS
from cases import quant_variants as V
from cases import strategies as S
from cases import subscales
from cases.quant_dot import (
    BY_NAME,
    DOTS,
    FINDINGS,
    GRID_DOTS,
    IDS,
    Finding,
    QuantDot,
    check_dot,
    weight_corpus,
)
from harness.check import observe
from harness.emulators.protocol import In, Out
from harness.ggml import tree
from harness.plugin.targets import session
from oracles import quants as Q

# ------------------------------------------------------------------ coverage


def test_rvv_vec_dot_coverage(target) -> None:
    """Every RVV vec_dot of the tree under test is in the table, and every VLEN variant it has is
    one the table's bound was derived from (the ``quant_dot`` scan of cases/coverage.py: uncovered
    entry points and variants fail, with file:line); table entries the tree lacks are not in this
    tree (listed, and their tests skipped); for the others, the tree's own block sizes and
    pairings match the oracles'."""
    inv = tree.of(session().source)
    scan = V.dot_coverage(inv, DOTS)
    problems = [f"{u.name} ({u.where}): {u.why}" for u in scan.uncovered]
    found = V.scan(session().source.cpu_dir)
    types = V.tree_types(target)
    by_id = {t.id: t.name for t in types.values()}
    for k in DOTS:
        if inv.missing(k.requires):
            continue  # not in this tree: listed below
        t = types.get(k.name)
        if t is None:
            problems.append(f"{k.name}: the tree's source has GGML_TYPE_{k.name.upper()}, but its build does not report it "
                            "(quant_types)")
            continue
        f = Q.fmt(k.name)
        if (t.block, t.nbytes) != (f.block, f.nbytes):
            problems.append(f"{k.name}: the tree's blocks are {t.block} elements in {t.nbytes} bytes, the oracle's "
                            f"{f.block} in {f.nbytes}: the struct layout changed")
        if by_id.get(t.vec_dot_type) != k.vec_dot_type or found.dots.get(k.name, k).vec_dot_type != k.vec_dot_type:
            problems.append(f"{k.name}: the tree pairs it with {by_id.get(t.vec_dot_type)}, the table with {k.vec_dot_type}")
        if not t.has_vec_dot:
            problems.append(f"{k.name}: the tree's CPU type traits have no vec_dot for it")
        if not t.has_generic:
            problems.append(f"{k.name}: the kernel server knows no *_generic twin for it")
    observe.note("rvv_types", " ".join(sorted(t for t, e in found.dots.items() if e.rvv)))
    if scan.not_in_tree:
        observe.note("not_in_tree", "; ".join(scan.not_in_tree))
    assert not problems, "coverage of the tree under test:\n  " + "\n  ".join(problems)


# ------------------------------------------------------------------ differential tests


@pytest.mark.parametrize("kernel", DOTS, ids=IDS)
def test_vec_dot(kernel: QuantDot, target, request: pytest.FixtureRequest) -> None:
    """Raw blocks with edge encodings (zero / negative / subnormal / largest scales, extreme
    sub-scales, constant payloads), activations raw or quantized from floats, rows of one block
    to ~10k elements and real models' row lengths (up to 14336); first the fixed edge pairs of
    ``QS.edge_pairs`` (1, 2, 3 blocks among them), last ``QS.loop_pairs`` (5 blocks, k = 14336)."""
    S.explore(request, QS.pairs(kernel.name, kernel.vec_dot_type), QS.edge_pairs(kernel.name, kernel.vec_dot_type),
              lambda pair: check_dot(kernel, target, pair), after=QS.loop_pairs(kernel.name, kernel.vec_dot_type))


@pytest.mark.parametrize("kernel", DOTS, ids=IDS)
def test_vec_dot_exact(kernel: QuantDot, target, request: pytest.FixtureRequest) -> None:
    """Rows exact by construction: the result must be exact, so a lost, doubled or misplaced
    block or element always shows, however small; first 1, 2 and 3 blocks of random and of
    saturated bytes, and after the draws 5 blocks and the longest real model's row the type can
    make exact (``QS.exact_every_run_counts``)."""
    counts = QS.exact_every_run_counts(kernel.name, kernel.vec_dot_type)
    edges = [QS.exact_pair(kernel.name, kernel.vec_dot_type, nb, seed=nb, payload=payload, subscales="random")
             for nb in counts if nb <= QS.EDGE_BLOCKS for payload in ("random", "ones")]
    loops = [QS.exact_pair(kernel.name, kernel.vec_dot_type, nb, seed=nb, payload="random", subscales="random")
             for nb in counts if nb > QS.EDGE_BLOCKS]
    S.explore(request, QS.exact_pairs(kernel.name, kernel.vec_dot_type), edges,
              lambda pair: check_dot(kernel, target, pair, exact=True), after=loops)


@pytest.mark.parametrize("kernel", GRID_DOTS, ids=[k.name for k in GRID_DOTS])
@pytest.mark.parametrize("y_seed", [0, 1])
def test_vec_dot_grid(kernel: QuantDot, target, y_seed: int) -> None:
    """Every grid entry of the IQ type (and every sign pattern, sub-scale and delta), in one row
    against power-of-two activations with small quants: exact, so one wrong entry shows."""
    x = QB.grid_sweep_row(kernel.name, seed=y_seed)
    n = x.shape[0] * Q.fmt(kernel.name).block
    y = QS.exact_activation_row(kernel.vec_dot_type, n // Q.fmt(kernel.vec_dot_type).block, y_seed, max_q=1)
    check_dot(kernel, target, QS.Pair(kernel.name, kernel.vec_dot_type, x, y), exact=True)


# ------------------------------------------------------------------ weights made by ggml's quantizers


@pytest.mark.parametrize("kernel", DOTS, ids=IDS)
def test_vec_dot_weights(kernel: QuantDot, target) -> None:
    """Weights made by ggml's own quantizer from float rows (what models hold: scales and
    sub-scales chosen by the quantizer's search), each against activations quantized from
    signed, positive and constant floats: every row of the corpus, every run."""
    corpus = weight_corpus(target, kernel.name)
    for key in sorted(corpus):
        x = Q.blocks(kernel.name, corpus[key])
        n = x.shape[0] * Q.fmt(kernel.name).block
        for seed, kind in enumerate(QB.FLOAT_KINDS):
            y = QB.quantized_activation_row(kernel.vec_dot_type, QB.activation_floats(kind, n, seed))
            observe.note("weights", f"{key[0]} x {key[1]} blocks")
            check_dot(kernel, target, QS.Pair(kernel.name, kernel.vec_dot_type, x, y))


# ------------------------------------------------------------------ findings: minimal reproducers


@pytest.mark.parametrize("finding", FINDINGS, ids=[f.name for f in FINDINGS])
def test_vec_dot_finding(finding: Finding, target) -> None:
    """The smallest case of each finding (exact: one block, d = 1, small integers), at every
    target: it fails where the pinned tree is wrong (the VLENs noted in FINDINGS, listed in
    known_failures.toml) and must pass everywhere else, and everywhere once fixed."""
    check_dot(BY_NAME[finding.kernel], target, finding.pair(), exact=True)
    observe.note("finding", f"{finding.name}: right at {target.id}")


# ------------------------------------------------------------------ sub-scales: which elements each one scales


@pytest.mark.parametrize("kernel", [BY_NAME[n] for n in subscales.FIELDS], ids=list(subscales.FIELDS))
def test_vec_dot_subscales(kernel: QuantDot, target) -> None:
    """Each integer sub-scale of a block moved alone (cases/subscales.py): the result must move by the
    oracle's amount, exactly, in a one-block row and in the second block of two.  A failure names the
    sub-scales the kernel applies to the wrong elements."""
    lines = []
    for block, n_blocks in ((0, 1), (1, 2)):
        responses = subscales.probe(kernel.name, target, block=block, n_blocks=n_blocks)
        if any(r.differs for r in responses):
            lines.append(f"block {block} of {n_blocks}: {subscales.summary(responses)}")
    assert not lines, f"{kernel.entry} at {target.id}:\n" + "\n".join(lines)


# ------------------------------------------------------------------ which variant ran


@pytest.mark.parametrize("kernel", DOTS, ids=IDS)
def test_traced_vec_dot_variant(kernel: QuantDot, target) -> None:
    """Trace one call: record which VLEN variant executed (table: ``rvvdiff recorded
    quant-variants``), and fail if it is not the one the source dispatches to at this
    VLEN -- in particular if the scalar twin ran although the tree has an RVV path."""
    target.needs_vector("which VLEN variant of the RVV vec_dot runs")
    found = V.scan(session().source.cpu_dir)
    entry = found.dots.get(kernel.name)
    if entry is None or entry.name != kernel.entry:
        pytest.skip(f"not in this tree: {found.path} defines no {kernel.entry} (ggml's generic serves it; "
                    "test_rvv_vec_dot_coverage lists it)")
    if entry.dispatch_note:
        pytest.skip(f"which variant serves VLEN {target.vlen} is unknown: {entry.dispatch_note}")
    vlen_bytes = int(target.server().hello.get("rvv_vlen_bytes", 0))
    assert vlen_bytes * 8 == target.vlen, f"the server runs at VLEN {vlen_bytes * 8}, not {target.vlen}"
    pair = QS.exact_pair(kernel.name, kernel.vec_dot_type, 2, seed=1, payload="random", subscales="random")
    tr = target.trace("quant_vec_dot", [V.type_id(target, kernel.name), pair.n, 0], [],
                      [In(pair.x), In(pair.y), Out(4)])
    label, problem = V.observed_variant(entry, tr.call, target.vlen)
    src = session().source
    table = V.record(f"{src.commit}-{src.content_hash()[:8]}", target.isa.name, target.vlen, target.stress,
                     kernel.name, label)
    observe.note("variant", label)
    observe.note("variant_table", str(table))
    assert problem is None, problem
