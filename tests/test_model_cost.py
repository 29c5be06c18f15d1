"""The model-shaped cost case's arithmetic (harness/cost/prices/per_token.py): the set-up of a request cancels
between its reps 1 and reps 2 measurements, the row-scaling rule recovers a layer from two slices and is
checked against a third, and the spec parser says what to write.  No Spike: rows are synthetic, or the
instruction counts Spike measured for q4_0 on this machine (tinyllama:q4_0:1+32:check, pinned tree,
VLEN 256, zvfh, clang)."""

from __future__ import annotations

import pytest

from harness.cost.prices import memory_system, per_token

SPEC = per_token.parse_spec("tinyllama:q4_0:1+32:check")[0]
SETUP, FIXED, PER_ROW = 1_000_000, 50_000, 3_000  # per k, scaled below


def _row(k: int, m: int, n: int, reps: int, setup_per_row: int = 7) -> dict:
    """A synthetic cost-log row: set-up (placement, repacking: grows with the rows, does not repeat) plus
    ``reps`` computes of ``FIXED + m * PER_ROW`` (both grow with k and n)."""
    scale = k / 2048 * n
    compute = scale * (FIXED + m * PER_ROW)
    return {"instret": SETUP + setup_per_row * m * k + reps * compute, "vlen": 128, "name": per_token.case_name(SPEC),
            "size": per_token.size_label(k, m, n, reps)}


def _rows(**kw) -> dict:
    return {s: _row(*s, **kw) for s in SPEC.slices()}


def test_set_up_cancels() -> None:
    once, twice = per_token.work_of(_row(2048, 64, 1, 1)), per_token.work_of(_row(2048, 64, 1, 2))
    assert per_token.compute(once, twice, "x") == {"instructions": FIXED + 64 * PER_ROW}


def test_a_request_that_does_not_repeat_is_named() -> None:
    r = per_token.work_of(_row(2048, 64, 1, 1))
    with pytest.raises(per_token.ModelCostError, match="reps 2 costs no more than reps 1 by instructions"):
        per_token.compute(r, r, "model-tinyllama-q4_0 k2048-m64-n1")


def test_the_rule_recovers_a_layer_and_checks_itself() -> None:
    res = per_token.results(SPEC, _rows())
    assert [r.batch for r in res] == [1, 32]
    want = sum((k / 2048) * (FIXED + m * PER_ROW) for _, m, k in SPEC.shape.matmuls()) * SPEC.shape.layers
    assert res[0].per_token["instructions"] == pytest.approx(want)
    assert res[1].per_token["instructions"] == pytest.approx(want)  # per token: the batch divides out
    assert abs(res[1].checked["instructions"]) < 1e-12
    assert res[0].rate("instructions", 1.0, 2) == pytest.approx(2e9 / want)


def test_a_rule_without_the_fixed_part_fails_the_check() -> None:
    """The planted error: scaling a slice by m alone (no fixed part) is off at the check slice by more than
    the tolerance, and so is a fit that forgets to cancel the set-up."""
    rows = per_token.rows_by_slice(list(_rows().values()), SPEC, 128)
    work = {m: per_token.compute(per_token.work_of(rows[(2048, m, 32, 1)]), per_token.work_of(rows[(2048, m, 32, 2)]), "x")
            for m in (*per_token.SLICES, per_token.CHECK_SLICE)}
    proportional = per_token.Fit({"instructions": 0.0}, {"instructions": work[64]["instructions"] / 64})
    at_check = work[per_token.CHECK_SLICE]
    assert abs(per_token.check(proportional, per_token.CHECK_SLICE, at_check)["instructions"]) > per_token.CHECK_TOLERANCE
    raw = {m: per_token.work_of(rows[(2048, m, 32, 2)]) for m in per_token.SLICES}  # set-up not cancelled
    assert abs(per_token.check(per_token.fit(raw), per_token.CHECK_SLICE, at_check)["instructions"]) > per_token.CHECK_TOLERANCE
    assert abs(per_token.check(per_token.fit(work), per_token.CHECK_SLICE, at_check)["instructions"]) < 1e-12


#: Instructions retired (Spike) by q4_0 mul_mat requests, (k, m, n, reps) -> instret: the repacked
#: GEMM of the pinned tree at VLEN 256, zvfh, clang.
MEASURED = {(2048, 32, 32, 1): 2475869, (2048, 32, 32, 2): 4418572, (2048, 64, 32, 1): 3164437,
            (2048, 64, 32, 2): 5551058, (2048, 256, 32, 1): 7291609, (2048, 256, 32, 2): 12341750}


def test_the_rule_holds_on_measured_counts() -> None:
    work = {m: per_token.compute({"instructions": MEASURED[(2048, m, 32, 1)]},
                                 {"instructions": MEASURED[(2048, m, 32, 2)]}, "x")
            for m in (*per_token.SLICES, per_token.CHECK_SLICE)}
    fit = per_token.fit({m: work[m] for m in per_token.SLICES})
    err = per_token.check(fit, per_token.CHECK_SLICE, work[per_token.CHECK_SLICE])
    assert abs(err["instructions"]) < per_token.CHECK_TOLERANCE


@pytest.mark.parametrize("text, message", [
    ("tinyllama:q4_0", "write SHAPE:TYPE:BATCH"), ("llama9:q4_0:1", "SHAPE one of"),
    ("tinyllama:q4_0:1+x", "batches are positive"), ("tinyllama:q4_0:1:twice", "write SHAPE"),
    ("tinyllama:q4_0:1:cpu:cpu", "write SHAPE")])
def test_a_bad_spec_says_what_to_write(text: str, message: str) -> None:
    with pytest.raises(per_token.ModelCostError, match=message):
        per_token.parse_spec(text)


def test_the_layer_shapes() -> None:
    assert per_token.SHAPES["tinyllama"].matmuls() == (
        ("q", 2048, 2048), ("k", 256, 2048), ("v", 256, 2048), ("o", 2048, 2048), ("gate", 5632, 2048),
        ("up", 5632, 2048), ("down", 2048, 5632))
    assert len(SPEC.slices()) == 2 * 2 * 2 * 2 + 2
    (cpu,) = per_token.parse_spec("qwen3-1.7b:q1_0:1+64:cpu:check")
    assert cpu.cpu and cpu.check and per_token.case_name(cpu) == "model-qwen3-1.7b-q1_0-cpu"


def test_rows_of_several_isa_builds_are_refused() -> None:
    rows = [{**r, "isa": isa} for isa in ("v", "zvfh") for r in _rows().values()]
    with pytest.raises(per_token.ModelCostError, match="several ISA builds .v, zvfh.; run with one --isa"):
        per_token.rows_by_slice(rows, SPEC, 128)


def test_the_report_gives_per_token_the_ratio_and_the_bound() -> None:
    head = [{**r, "isa": "zvfh"} for r in _rows().values()]
    base = [{**r, "instret": r["instret"] * 3} for r in head]  # set-up and compute 3x dearer
    lines = per_token.report({"head": head, "base": base}, [SPEC], 1.0, 2, vlen=128)
    assert "batch 1: per token instructions" in lines[2] and "BASE / HEAD: instructions 3.00x" in lines[2]
    assert "rule checked at 256 rows: instructions +0.00 %" in lines[3]
    assert "ceiling estimate at 1 GHz x 2 threads" in lines[0]



def test_the_dram_roof_reads_each_weight_once_a_pass_at_the_published_bus() -> None:
    f16, q4 = per_token.parse_spec("tinyllama:f16:1+32,tinyllama:q4_0:1")
    params = 22 * (2 * 2048 * 2048 + 2 * 256 * 2048 + 3 * 5632 * 2048)  # TinyLlama's seven mul_mats, 22 layers
    assert per_token.weight_bytes(f16) == params * 2 and per_token.weight_bytes(q4) == params * 18 / 32
    x60 = memory_system.systems()["spacemit_x60"]
    assert per_token.dram_roof(f16, 1, x60) == pytest.approx(10.664e9 / (params * 2))
    assert per_token.dram_roof(f16, 32, x60) == pytest.approx(32 * per_token.dram_roof(f16, 1, x60))
    assert per_token.dram_roof(f16, 1, memory_system.systems()["tt_asc_x"]) is None


def test_float_specs_parse_and_say_where_their_vector_kernels_are() -> None:
    f16, bf16, f32 = per_token.parse_spec("tinyllama:f16:1+32+128,tinyllama:bf16:1,qwen3-1.7b:f32:4:check")
    assert (f16.type, f16.batches, f16.cpu) == ("f16", (1, 32, 128), False) and f32.check
    assert per_token.case_name(bf16) == "model-tinyllama-bf16" and len(f16.slices()) == 3 * 2 * 2 * 2
    with pytest.raises(per_token.ModelCostError, match="float weights are not repacked .write tinyllama:f16:1."):
        per_token.parse_spec("tinyllama:f16:1:cpu")
    with pytest.raises(per_token.ModelCostError, match="takes a float or quantized weight type, not 'i8'"):
        per_token.parse_spec("tinyllama:i8:1")
    notes = per_token.notes([f16, bf16, f32], ("v", "zvfh"))
    assert notes == [
        "model case tinyllama:f16: f16's vector kernels (tinyBLAS_RVV, ggml_vec_dot_f16) need zvfh (--isa zvfh, "
        "zvfbfwma); at --isa v it measures ggml's C loop (the report names each batch's path)",
        "model case tinyllama:bf16: bf16's vector kernels (tinyBLAS_RVV, ggml_vec_dot_bf16) need zvfbfwma (--isa "
        "zvfbfwma); at --isa v,zvfh it measures ggml's C loop (the report names each batch's path)"]
    assert per_token.notes([f16, bf16], ("zvfbfwma",)) == []


def test_the_report_names_each_batch_path() -> None:
    """A float spec's rows carry the path each slice measured; BASE's is named where it differs (a change that
    moved the batch to another path), and the tree's prediction where the run disagrees with it."""
    spec = per_token.parse_spec("tinyllama:f16:1+32")[0]
    fallback, gemm = "ggml_vec_dot_f16 (vec_dot fallback)", "tinyBLAS_RVV<float16m2>::gemm<2,2,8>"

    def rows(path32: str, **extra) -> list[dict]:
        return [{**_row(*s), "name": per_token.case_name(spec), "isa": "zvfh", "path": fallback if s[2] == 1 else path32,
                 **extra} for s in spec.slices()]
    lines = per_token.report({"head": rows(gemm), "base": rows(fallback)}, [spec], 1.0, 1, vlen=128)
    assert "batch 1: per token" in lines[2] and lines[2].endswith(f"; path: {fallback}")
    assert lines[3].endswith(f"; path: {gemm} (BASE: {fallback})")
    odd = per_token.report({"head": rows(fallback, path_expected=gemm)}, [spec], 1.0, 1, vlen=128)
    assert odd[3].endswith(f"; path: {fallback}; the tree predicted {gemm}")
