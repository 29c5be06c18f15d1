"""The every-run shapes of the flash-attention family (cases/flash_attn.py) that exist for one branch
of ops.cpp: they must still take it when their sizes are made cheaper."""

from __future__ import annotations

import pytest

from cases import flash_attn as FA
from cases import flash_attn_problems as FP

VLENS = (128, 256, 512, 1024)


def _split_ranges(n_kv: int, threads: int) -> list[tuple[int, int]]:
    """Each thread's KV range as ggml_compute_forward_flash_attn_ext_f16's split path cuts it
    (chunk_size = ceil(nek1 / nth), ic_start = ith * chunk_size, ic_end = min(ic_start + chunk_size, nek1))."""
    size = (n_kv + threads - 1) // threads
    return [(i * size, min(i * size + size, n_kv)) for i in range(threads)]


def _empty_after_short_chunk(n_kv: int, threads: int) -> bool:
    ranges = _split_ranges(n_kv, threads)
    full = ranges[0][1] - ranges[0][0]
    ran = [b - a for a, b in ranges if a < n_kv]
    return len(ran) < threads and ran[-1] < full


def test_empty_chunk_split_matches_the_ranges_of_ops_cpp() -> None:
    for n_kv in range(FP.SPLIT_MIN_KV, 1200, 7):
        for threads in (1, 3, 4, 25, 28, 64):
            ranges = _split_ranges(n_kv, threads)
            ran = [b - a for a, b in ranges if a < n_kv]
            assert FA.empty_chunk_split(n_kv, threads) == (ranges[0][1] - ranges[0][0], ran[-1],
                                                           threads - len(ran)), (n_kv, threads)


def test_the_empty_chunk_shape_leaves_a_thread_without_positions_after_a_shorter_chunk() -> None:
    assert FA.EMPTY_CHUNK_KV >= FP.SPLIT_MIN_KV
    assert FA.empty_chunk_split(FA.EMPTY_CHUNK_KV, FA.EMPTY_CHUNK_THREADS) == (22, 20, 1)
    assert _empty_after_short_chunk(FA.EMPTY_CHUNK_KV, FA.EMPTY_CHUNK_THREADS)


def test_no_fewer_threads_leave_one_empty_after_a_shorter_chunk() -> None:
    """The fewest threads that do it at n_kv >= 512 (beyond threads^2 positions every thread has some)."""
    for threads in range(1, FA.EMPTY_CHUNK_THREADS):
        assert not any(_empty_after_short_chunk(n, threads) for n in range(FP.SPLIT_MIN_KV, threads * threads + 1))


@pytest.mark.parametrize("vlen", VLENS)
def test_one_split_case_runs_the_empty_chunk_shape_on_the_split_path(vlen: int) -> None:
    runs = {c.name: [sh for sh in FA.loop_shapes(c, vlen) if sh.threads > 4] for c in FP.CASES}
    assert {name for name, shapes in runs.items() if shapes} == {FA.EMPTY_CHUNK_CASE}
    (sh,) = runs[FA.EMPTY_CHUNK_CASE]
    case = next(c for c in FP.CASES if c.name == FA.EMPTY_CHUNK_CASE)
    assert FP.fused_path(case.k, case.v, sh.n_q, sh.n_kv, sh.dv) == "split"
    assert _empty_after_short_chunk(sh.n_kv, sh.threads)
    assert sh.threads <= 64  # the kernel server's MAX_THREADS (harness/server/server.h)


@pytest.mark.parametrize("case", [c for c in FP.CASES if c.path == "one_chunk" and c.k == c.v and c.k in ("f32", "f16")],
                         ids=lambda c: c.name)
def test_one_chunk_shapes_stay_one_chunk_in_a_build_without_vector(case: FP.AttnCase) -> None:
    """ops.cpp's tiled rule keeps DV % GGML_F32_EPR under #if defined(GGML_SIMD): a build without V
    (rv64gc) takes the tiled path at 64 queries whatever DV is, so its one-chunk shapes are a query short."""
    rule = FP.tiled_rule()
    assert rule.dv_epr, "the pinned tree's tiled rule has the DV condition"
    odd_dv = FP.Shape(64, 64, 64, 6, 1, 1, 1)  # the near miss of a vector build
    assert FP.fused_path(case.k, case.v, 64, 64, 6) == "one_chunk"
    assert FP.fused_path(case.k, case.v, 64, 64, 6, vector=False) == "tiled"
    for sh in (odd_dv, FP.Shape(100, 64, 64, 64, 1, 1, 1), FP.Shape(64, 200, 64, 6, 1, 1, 1)):
        for vector in (True, False):
            kept = FP._keep_one_chunk(case, sh, vector)
            assert FP.fused_path(case.k, case.v, kept.n_q, kept.n_kv, kept.dv, vector=vector) == "one_chunk", (sh, vector)
