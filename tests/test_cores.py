"""Vector instruction names (harness/binary/rvvnames.py) and the estimated cycles on real cores
(harness/cost/prices/cores.py): decoding checked against words GNU objdump names, prices against the
imported tables, and an estimate worked by hand."""

from __future__ import annotations

import pytest

from harness.binary.rvvnames import name
from harness.cost.prices import cores

# Words from the pinned tree's server binary, named by riscv64-linux-gnu-objdump -M no-aliases
# (the bf16 ones, which binutils 2.40 does not know, by the Zvfbfwma / Zvfbfmin encodings).
WORDS = [
    (0xF6F5A957, "vwmacc.vv", False),  # v18,v11,v15
    (0xC6A80557, "vwredsum.vs", False),
    (0xC4C58657, "vwredsum.vs", True),  # ...,v0.t
    (0x22050707, "vlseg2e8.v", False),
    (0x0B778507, "vlse8.v", False),
    (0x06EB6807, "vluxei32.v", False),
    (0x02858007, "vl1re8.v", False),
    (0x028504A7, "vs1r.v", False),
    (0x42A024D7, "vmv.x.s", False),
    (0x428017D7, "vfmv.f.s", False),
    (0x4AC61457, "vfwcvt.f.f.v", False),
    (0x4A8A14D7, "vfncvt.f.f.w", False),
    (0xB2803557, "vnsrl.wi", False),
    (0x33980C57, "vrgather.vv", False),
    (0x3E80B457, "vslidedown.vi", False),
    (0x3D223A57, "vslidedown.vi", True),
    (0x5D088957, "vmerge.vvm", False),  # the mask is an input, not a v0.t
    (0x5E003457, "vmv.v.i", False),
    (0x02852457, "vredsum.vs", False),
    (0x06A714D7, "vfredusum.vs", False),
    (0x4A93A7D7, "vsext.vf2", False),
    (0x62404057, "vmseq.vx", False),
    (0x428826D7, "vcpop.m", False),
    (0x9E80B757, "vmv2r.v", False),
    (0xCD817057, "vsetivli", False),
    (0xB287D857, "vfmacc.vf", False),
    (0x668AA457, "vmand.mm", False),
    (0x5208A457, "vid.v", False),
    (0xEF866557, "vwmul.vx", False),
    (0xA2A594D7, "vfmadd.vv", False),
    (0xEE949457, "vfwmaccbf16.vv", False),
    (0x4A8E94D7, "vfncvtbf16.f.f.w", False),
]


@pytest.mark.parametrize(("word", "mnemonic", "masked"), WORDS, ids=[f"{w:08x}" for w, _, _ in WORDS])
def test_vector_words_are_named_as_objdump_names_them(word: int, mnemonic: str, masked: bool) -> None:
    assert name(word) == (mnemonic, masked)


def test_scalar_words_have_no_vector_name() -> None:
    assert name(0x00B50533) is None  # add
    assert name(0x0005A007) is None  # flw: LOAD-FP with a scalar width


def _x60() -> cores.Core:
    return next(c for c in cores.all_cores() if c.key == "spacemit_x60")


def test_the_imported_tables_say_where_they_come_from() -> None:
    got = cores.all_cores()
    assert {c.key for c in got} >= {"spacemit_x60", "spacemit_x100", "tt_asc_x", "spacemit_a100", "thead_c908", "xiangshan_v3"}
    for c in got:
        assert c.vlen in (128, 256, 1024) and "rvv-bench-results" in c.source and len(c.prices) > 500
    assert cores.vlens() == {128, 256, 1024}


def test_a_vlen_128_core_says_it_cannot_price_memory_and_counts_it_unpriced() -> None:
    """The C908 (K230) and XiangShan V3 pages time no load or store: their tables say so, and a call's loads
    are counted as unpriced on them, never priced by a guess."""
    at_128 = {c.key: c for c in cores.for_vlen(128)}
    assert set(at_128) == {"thead_c908", "xiangshan_v3"}
    for c in at_128.values():
        assert c.cannot_price.startswith("vector loads and stores")
        e = cores.estimate(c, {"vle8.v e8m1": 10, "vadd.vv e8m1": 4, "scalar": 3})
        assert e.unpriced == 10 and "vle8.v e8m1" in e.unpriced_names and e.cycles > 0
    assert all(not c.cannot_price for c in cores.all_cores() if c.vlen != 128)


def test_prices_follow_the_vtype_and_the_mask() -> None:
    x60 = _x60()
    # The X60 (VLEN 256, 128-bit datapath) as rvv-bench measured it: a vadd occupies it one cycle up
    # to LMUL 1 and doubles with LMUL; a vrgather.vv grows with the square of LMUL.
    assert cores.price(x60, "vadd.vv e8m1") == (1.0, False)
    assert cores.price(x60, "vadd.vv e8m4") == (4.0, False)
    assert cores.price(x60, "vadd.vv e32m1 v0.t")[0] == 2.0
    gathers = [cores.price(x60, f"vrgather.vv e8m{m}")[0] for m in (1, 2, 4, 8)]
    assert gathers == sorted(gathers) and gathers[-1] > 60 * gathers[0]
    assert cores.price(x60, "vmv2r.v e8m1") == (4.0, False)  # whole-register move: any vtype
    assert cores.price(x60, "vl1re8.v e32m1") == (cores.price(x60, "vle8.v e8m1")[0], True)
    assert cores.price(x60, "vsetvli") == (x60.scalar, True)
    assert cores.price(x60, "vluxei32.v e32m1") == (None, False)  # not measured: unpriced
    assert cores.price(x60, "vadd.vv e?") == (None, False)  # vtype unknown: unpriced


def test_an_estimate_is_the_mix_priced_instruction_by_instruction() -> None:
    x60 = _x60()
    mix = {"vsetvli": 2, "vle8.v e8m1": 4, "vwmacc.vv e8m1": 4, "vluxei32.v e32m1": 1, "scalar": 10,
           "scalar mul": 1}
    e = cores.estimate(x60, mix)
    by_hand = (2 * x60.scalar + 4 * cores.price(x60, "vle8.v e8m1")[0] + 4 * cores.price(x60, "vwmacc.vv e8m1")[0]
               + 10 * x60.scalar + cores.price(x60, "scalar mul")[0])
    assert e.cycles == pytest.approx(by_hand)
    assert e.vector == pytest.approx(by_hand - 10 * x60.scalar - cores.price(x60, "scalar mul")[0])
    assert (e.unpriced, e.approximated, e.unpriced_names) == (1, 2, ("vluxei32.v e32m1",))
    assert cores.estimates(512, mix) == {} and cores.estimates(256, {}) == {}
    assert set(cores.estimates(256, mix)) == {"spacemit_x60", "spacemit_x100", "tt_asc_x"}


def test_import_fills_blank_cells_from_the_undisturbed_table() -> None:
    cols = "".join(f"<th>{c}</th>" for c in cores.COLUMNS)
    cell = "<td></td>" * len(cores.COLUMNS)
    filled = "<td>2.00</td>" * len(cores.COLUMNS)
    page = (f'<table id="tblMaa"><thead><tr><th>instruction</th>{cols}</tr></thead>'
            f"<tr><td>vfadd.vv v8,v16,v24</td>{cell}</tr></table>"
            f'<table id="tblMuu"><tr><td>vfadd.vv v8,v16,v24</td>{filled}</tr>'
            f"<tr><td>vfadd.vv v8,v16,v24,v0.t</td>{filled}</tr></table>")
    text = cores.import_page(page, "# core: T\n# vlen: 256\n")
    rows = [ln.split("\t") for ln in text.splitlines() if not ln.startswith("#")]
    assert rows[0][:3] == ["instruction", "mask", "e8mf8"]
    assert rows[1][:3] == ["vfadd.vv", "", "2"] and rows[2][:2] == ["vfadd.vv", "v0.t"]
    with pytest.raises(ValueError, match="no instruction table"):
        cores.import_page("<html></html>", "")


def _row(case: str, vlen: int, mix: dict[str, int], twin: str | None) -> dict:
    n = sum(mix.values())
    return {"case": case, "family": "quant_dot", "function": case.replace("-", "_"), "size": "k4096",
            "impl": "generic" if twin is None else "rvv", "twin": twin, "units": 4096, "unit": "element",
            "vlen": vlen, "isa": "zvfh", "instret": n, "executed": n, "vector": 1, "mix": mix}


def test_the_report_prices_rows_at_their_cores_and_flags_a_dearer_vector_kernel() -> None:
    from harness.cost.tables import suite_tables

    # Fewer instructions than the twin, but LMUL-8 gathers: dearer on the A100 (VLEN 1024) estimate.
    vec = {"vsetvli": 10, "vrgather.vv e8m8": 10, "scalar": 20}
    twin = {"scalar": 1000}
    rows = {}
    for vlen in (256, 1024, 2048):
        rows[("k", vlen, "zvfh")] = _row("k", vlen, vec, "k-generic")
        rows[("k-generic", vlen, "zvfh")] = _row("k-generic", vlen, twin, None)
    t = suite_tables.CostTable(rows)
    assert t.costlier_than_twin() == []  # by instructions the vector kernel is 25 times cheaper
    dear = t.costlier_than_twin_on_cores()
    assert len(dear) == 1 and "SpacemiT A100" in dear[0] and "VLEN 1024" in dear[0]
    md = t.markdown()
    assert "### Estimated cycles at VLEN 256" in md and "### Estimated cycles at VLEN 1024" in md
    assert "VLEN 2048:" not in md  # no core measured there
    j = t.as_json()
    at256 = next(r for r in j["head"] if r["case"] == "k" and r["vlen"] == 256)
    assert set(at256["estimates"]) == {"spacemit_x60", "spacemit_x100", "tt_asc_x"}
    assert next(r for r in j["head"] if r["vlen"] == 2048)["estimates"] == {}


def test_a_move_carries_the_estimated_change_on_the_cores_of_its_vlen() -> None:
    from harness.cost.tables import suite_tables

    base = {("k", 256, "zvfh"): _row("k", 256, {"vadd.vv e8m1": 100, "scalar": 100}, None)}
    head = {("k", 256, "zvfh"): _row("k", 256, {"vrgather.vv e8m4": 100, "scalar": 110}, None)}
    slower, faster = suite_tables.CostTable(head, base).moves()
    assert not faster and len(slower) == 1
    m = slower[0]
    assert m.ratio == pytest.approx(210 / 200)
    x60 = _x60()
    by_hand = (100 * cores.price(x60, "vrgather.vv e8m4")[0] + 110 * x60.scalar) / (100 + 100 * x60.scalar)
    assert m.on_cores["SpacemiT X60 (SpacemiT K1)"] == pytest.approx(by_hand)
    assert "est. SpacemiT X60 (SpacemiT K1) +" in m.describe()
