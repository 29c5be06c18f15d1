"""The rest of a token (harness/cost/prices/token_rest.py, costs/model_rest.py): the calls a forward pass runs
besides the layers' mul_mats at a model's shape, each counted as often as a pass runs it, one compute per call from
reps 1 and 2, the head scaled by rows; and the whole token's speed-up (Amdahl's) in
harness/cost/calibration/token_rows.py."""

from __future__ import annotations

import pytest

from costs import model_rest
from harness.cost.calibration import token_rows
from harness.cost.prices import per_token
from harness.cost.prices import token_rest as TR

TINY, QWEN = per_token.SHAPES["tinyllama"], per_token.SHAPES["qwen3-1.7b"]


def test_the_calls_are_a_llama_layer_at_the_shape_and_qwen3_adds_its_head_norms() -> None:
    by = {c.name: c for c in TR.calls(TINY, 32)}
    assert set(by) == {"rms_norm", "norm_mul", "rope", "kv_store", "attention", "residual_add", "swiglu"}
    assert by["rms_norm"].srcs == (("f32", (2048, 32, 1, 1)),) and (by["rms_norm"].per_layer, by["rms_norm"].per_pass) == (2, 1)
    assert by["rope"].srcs[0] == ("f32", (64, 32 + 4, 32, 1)) and by["rope"].iparams == (64, 0, 2048)  # normal mode
    assert by["swiglu"].srcs[0] == ("f32", (5632, 32, 1, 1)) and by["swiglu"].per_layer == 1
    assert by["attention"].attention == (32, 32, 64, 32, 4)
    assert by["kv_store"].dst == "f16" and by["kv_store"].srcs[0][1] == (256, 32, 1, 1)
    assert next(c for c in TR.calls(TINY, 1) if c.name == "attention").attention == (1, TR.TG_CONTEXT, 64, 32, 4)
    q = {c.name: c for c in TR.calls(QWEN, 1)}
    assert q["qk_norm"].srcs == (("f32", (128, 24, 1, 1)),) and q["rope"].iparams[1] == 2  # NeoX


def test_the_cost_cases_exist_only_when_named_and_reach_every_call_at_both_reps() -> None:
    assert model_rest.cases(None) == []
    cs = model_rest.cases("tinyllama:q6_K@1+32:1+32+128")
    ids = {c.id for c in cs}
    assert "spacemit_ops-rest-tinyllama-rope-n128-r2" in ids and "flash_attn-rest-tinyllama-attention-n32-r1" in ids
    assert "spacemit_ops-rest-tinyllama-rope-n32-r1" not in ids  # an op: at the smallest and largest batch only
    assert "repack-rest-tinyllama-head-q6_K-k2048-m64-n32-r2" in ids and not any("head" in i and "n128" in i for i in ids)
    assert len(cs) == (6 * 2 + 3) * 2 + 2 * 2 * 2  # (ops x 2 batches + attention x 3) x reps + head slices x batches x reps
    assert not any("head" in c.id for c in model_rest.cases("tinyllama:own:1"))
    with pytest.raises(per_token.ModelCostError, match=r"SHAPE:HEAD\[@BATCH"):
        TR.parse_spec("tinyllama:q6_K")


def _rows(shape: per_token.Shape, n: int, per: dict[str, int], head: tuple[int, int] | None = None) -> list[dict]:
    """Rows of every call at batch n: reps 1 costs 1000 (the set-up), reps 2 1000 + the call's compute."""
    out = []
    for c in TR.calls(shape, n):
        for r in per_token.REPS:
            out.append({"name": TR.case_name(shape, c.name), "size": TR.size_label(n, r), "vlen": 256,
                        "instret": 1000 + (r - 1) * per.get(c.name, 10)})
    if head:
        fixed, per_row = head
        for m in per_token.SLICES:
            for r in per_token.REPS:
                out.append({"name": TR.head_name(shape, "q6_K"), "size": per_token.size_label(shape.hidden, m, n, r),
                            "vlen": 256, "instret": 500 + (r - 1) * (fixed + m * per_row)})
    return out


def test_each_call_counts_as_often_as_a_pass_runs_it_over_the_batch() -> None:
    (r,) = TR.rest(TR.Spec(TINY, "q6_K", (4,)), _rows(TINY, 4, {"rms_norm": 400, "swiglu": 800}, head=(40, 2)))
    assert r.parts["rms_norm"]["instructions"] == pytest.approx(400 * (2 * 22 + 1) / 4)  # 2 a layer, 1 a pass
    assert r.parts["swiglu"]["instructions"] == pytest.approx(800 * 22 / 4)
    assert r.parts["head"]["instructions"] == pytest.approx((40 + 32000 * 2) / 4)  # scaled to the vocab's rows
    assert r.total(with_head=False)["instructions"] == pytest.approx(
        sum(v["instructions"] for k, v in r.parts.items() if k != "head"))


def test_an_op_is_scaled_by_rows_between_its_batches_and_the_attention_is_not() -> None:
    spec = TR.Spec(TINY, None, (1, 8, 16))
    rows = _rows(TINY, 1, {"swiglu": 100, "attention": 50}) + _rows(TINY, 16, {"swiglu": 1600 + 100, "attention": 9000})
    rows += [r for r in _rows(TINY, 8, {"attention": 700}) if "attention" in r["name"]]
    got = {r.batch: r for r in TR.rest(spec, rows)}
    # swiglu: 100 at 1 row, 1700 at 16: at 8 rows the line through them, 100 + 7 x 1600 / 15
    assert got[8].parts["swiglu"]["instructions"] == pytest.approx((100 + 7 * 1600 / 15) * 22 / 8)
    assert got[8].parts["attention"]["instructions"] == pytest.approx(700 * 22 / 8)  # measured at its batch
    with pytest.raises(per_token.ModelCostError, match="attention at batch 8"):
        TR.rest(spec, [r for r in rows if not ("attention" in r["name"] and r["size"] == "n8-r2")])


def test_the_whole_tokens_speed_up_is_amdahls_and_a_wrong_share_fails() -> None:
    before, after = {"table": 900.0}, {"table": 300.0}  # the kernel 3x faster
    rest = {"table": 100.0}
    b, a = TR.token(before, rest), TR.token(after, rest)
    assert TR.speedup(b, a)["table"] == pytest.approx(1000 / 400)  # 2.5x, not 3x: the rest dilutes it
    assert TR.speedup(b, a)["table"] != pytest.approx(3.0)
    # the head of a float model runs the changed kernel on each tree: it speeds up with it
    own_b, own_a = TR.token(before, rest, {"table": 90.0}), TR.token(after, rest, {"table": 30.0})
    assert TR.speedup(own_b, own_a)["table"] == pytest.approx(1090 / 430)
    assert TR.share(b, a, before, after)["table"] == (pytest.approx(0.9), pytest.approx(0.75))


def test_the_head_type_is_the_model_files() -> None:
    assert [TR.head_type(t) for t in ("f16", "q1_0", "q2_K", "iq1_s")] == ["f16", "q1_0", "q6_K", "q6_K"]
    # Bonsai's 1-bit head: 151936 x 2048 weights at q1_0's 18 bytes a 128
    assert TR.head_bytes(QWEN, "q1_0") == pytest.approx(151936 * 2048 * 18 / 128)
    assert TR.head_bytes(TINY, "f16") == pytest.approx(32000 * 2048 * 2)


def test_the_docs_token_tables_are_the_sources() -> None:
    assert token_rows.doc_block() == token_rows.block(), (
        "docs/calibration.md's token table is not the sources': run rvvdiff calibration write")
    assert token_rows.doc_block(markers=token_rows.SHARE_MARKERS) == (
        "\n".join(token_rows.rest_lines()) + "\n\n" + "\n".join(token_rows.share_lines()))


ROW = """
[[row]]
name = "x #1"
change = "c"
board = "b"
threads = 8
vlen = 256
model = "m"
kernel = "k"
before = "a"
after = "b"
measured = { pp32 = [1.0, 2.0] }
model_case = { spec = "tinyllama:f16:32", estimates = { b32 = { instructions = 3.0 } } }
"""


def _slices(spec: per_token.Spec, per_mac: float) -> list[dict]:
    """The model-shaped case's rows at every k, slice, batch and rep: each compute ``per_mac`` a MAC, set-up 1000."""
    return [{"name": per_token.case_name(spec), "size": per_token.size_label(k, m, n, r), "vlen": 256,
             "instret": 1000 + (r - 1) * per_mac * m * k * n} for n in spec.batches for k in spec.shape.ks()
            for m in per_token.SLICES for r in per_token.REPS]


def test_a_rows_token_is_its_trees_mul_mats_and_own_head_plus_the_pinned_rest() -> None:
    spec = per_token.parse_spec("tinyllama:f16:32")[0]
    source = {"per_compiler": {"clang": {"base": _slices(spec, 3.0), "head": _slices(spec, 1.0)}}}
    rest = _rows(TINY, 1, {}) + _rows(TINY, 128, {}) + [r for r in _rows(TINY, 32, {"attention": 3200})
                                                        if "attention" in r["name"]]
    (t,) = token_rows.tests(ROW, rest, load=lambda name: source)
    layers = sum(m * k for _, m, k in TINY.matmuls()) * TINY.layers  # MACs a token
    head = 32000 * 2048
    assert t.x("instructions", False) == pytest.approx(3.0)  # the mul_mats alone: the kernel's 3x
    other = t.before.rest["instructions"]
    # every op 10 at batches 1 and 128, so 10 at 32: norms and their mul 2 a layer + 1 a pass, RoPE, swiglu 1 a layer,
    # the KV store and the adds 2; the attention measured at 32
    assert other == pytest.approx((22 * 3200 + 10 * (2 * 45 + 2 * 22 + 2 * 44)) / 32)
    # the head is f16, the case's own type: it runs the changed kernel and speeds up 3x with it; the rest does not
    assert t.x("instructions", True) == pytest.approx((3 * (layers + head) + other) / (layers + head + other))
    assert t.before.rest_share()["instructions"] == pytest.approx((3 * head + other) / (3 * (layers + head) + other))
    assert t.before.kernel_share()["instructions"] == pytest.approx(3 * (layers + head) / (3 * (layers + head) + other))


def test_a_tree_whose_rest_was_measured_takes_its_own_and_the_table_says_so() -> None:
    spec = per_token.parse_spec("tinyllama:f16:32")[0]
    source = {"per_compiler": {"clang": {"base": _slices(spec, 3.0), "head": _slices(spec, 1.0)}}}
    pinned = _rows(TINY, 1, {}) + _rows(TINY, 128, {}) + [r for r in _rows(TINY, 32, {"attention": 3200})
                                                          if "attention" in r["name"]]
    own = TR.rest(TR.Spec(TINY, None, (32,)), _rows(TINY, 32, {"attention": 6400}))[0]  # AFTER's tree: "b"
    (t,) = token_rows.tests(ROW, pinned, load=lambda name: source, trees={"b": {("tinyllama", 32): own}})
    assert (t.before.rest_from, t.after.rest_from) == ("pinned", "b")
    assert t.after.rest["instructions"] - t.before.rest["instructions"] == pytest.approx(22 * 3200 / 32)
    assert "rest: BEFORE pinned, AFTER b" in token_rows.table([t])


def test_no_estimate_reads_the_boards_figures() -> None:
    spec = per_token.parse_spec("tinyllama:f16:32")[0]
    source = {"per_compiler": {"clang": {"base": _slices(spec, 3.0), "head": _slices(spec, 1.0)}}}
    rest = _rows(TINY, 1, {}) + _rows(TINY, 128, {}) + [r for r in _rows(TINY, 32, {}) if "attention" in r["name"]]
    a, b = (token_rows.tests(text, rest, load=lambda name: source)[0]
            for text in (ROW, ROW.replace("pp32 = [1.0, 2.0]", "pp32 = [5.0, 1.0]")))
    assert a.board != b.board and a.x("instructions", True) == b.x("instructions", True)
    assert a.right("instructions", True) and not b.right("instructions", True)  # only the judgement moves
