"""The third estimate (harness/cost/prices/roofline.py, memory_system.roofline): a call's or a model-shaped token's
time is the largest of its compute, DRAM and L2 roofs on the board's threads; the DRAM share of the threads is one
core's measured stream times the threads, capped by the bus; a token's DRAM bytes are at least its weights once a
pass; the latency of dependent misses is named, not guessed; and a calibration row's roofline comes from its source
alone -- perturbing the board's figures in a copy of the data file changes no estimate."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from harness.cost.calibration import sources
from harness.cost.prices import memory_system as MS
from harness.cost.prices import per_token, roofline

X60 = MS.systems()["spacemit_x60"]
GHZ = 1.6e9


def test_the_roof_that_binds_is_named_and_the_rest_left_out_named() -> None:
    one = X60.dram_read.bytes_per_s
    # one thread: its own measured stream; eight: the bus's peak (8 x 6.44 GB/s would be more than it carries)
    assert MS.dram_bandwidth(X60, 1) == pytest.approx(one)
    assert MS.dram_bandwidth(X60, 8) == pytest.approx(X60.dram.peak_bytes_per_s)
    r = MS.roofline(1.6e9, one, X60, clock_hz=GHZ, threads=1, l2_bytes=0.0)
    assert (r.compute_s, r.dram_s, r.bound) == (pytest.approx(1.0), pytest.approx(1.0), "compute")
    # L2 bytes over the threads' reads from their L2s at one core's measured rate
    l2 = MS.roofline(1.6e9, 0.0, X60, clock_hz=GHZ, threads=2, l2_bytes=2 * 4.295 * 1.6e9 * 3)
    assert (l2.l2_s, l2.seconds, l2.bound) == (pytest.approx(3.0), pytest.approx(3.0), "L2")
    assert any("dependent misses" in t and "217.3 ns" in t and "not counted" in t for t in r.left_out)
    assert not any("bandwidth (not published)" in t for t in r.left_out)
    # a core with no published streams: its L2 roof is left out, named
    bare = MS.roofline(1.0, 1.0, MS.systems()["thead_c908"], clock_hz=GHZ, threads=1, l2_bytes=1e9)
    assert bare.l2_s is None and any("L2's bandwidth (not published)" in t for t in bare.left_out)


def _call(cycles: float, mca: float, l2: float, dram: float, units: int = 1000) -> dict:
    return {"units": units, "estimates": {"spacemit_x60": {"cycles": cycles}}, "mca": {"cycles": mca},
            "traffic": {"spacemit_x60": {"l2_bytes": l2, "dram_bytes": dram}}}


def test_a_calls_roofline_shares_the_bus_among_the_threads_calls() -> None:
    # 1.6 M cycles: 1 ms at 1.6 GHz; 2 MB from DRAM a call, eight calls at once on a 10.66 GB/s bus: 1.5 ms
    r = roofline.call(_call(1.6e6, 3.2e6, 0.0, 2e6), "table", threads=8)
    assert r is not None and r.bound == "DRAM" and r.seconds == pytest.approx(8 * 2e6 / X60.dram.peak_bytes_per_s)
    assert roofline.call(_call(1.6e6, 3.2e6, 0.0, 2e6), "mca", threads=8).bound == "compute"
    assert roofline.call({"units": 1, "estimates": {"spacemit_x60": {"cycles": 1.0}}}, "table", threads=8) is None
    got = roofline.ratios({e: roofline.call(_call(4.8e6, 4.8e6, 0, 2e6), e, threads=8) for e in roofline.ROOFED},
                          {e: roofline.call(_call(1.6e6, 3.2e6, 0, 2e6), e, threads=8) for e in roofline.ROOFED})
    # BEFORE 3 ms of compute; AFTER bound by its 1.5 ms of DRAM (table) or its 2 ms of compute (mca)
    assert got["table"] == {"x": pytest.approx(3e-3 / (16e6 / X60.dram.peak_bytes_per_s)), "bound": "compute / DRAM"}
    assert got["mca"] == {"x": pytest.approx(1.5), "bound": "compute / compute"}


def test_a_tokens_dram_bytes_are_at_least_its_weights_once_a_pass() -> None:
    spec = per_token.parse_spec("tinyllama:f16:32")[0]
    weights = per_token.weight_bytes(spec) / 32
    res = per_token.Result(spec, 32, {"table": 1e6, "l2_bytes": -5e6, "dram_bytes": 1.0}, {})
    r = roofline.token(res, "table", threads=8)
    assert r is not None and r.dram_s == pytest.approx(weights / X60.dram.peak_bytes_per_s)
    assert r.l2_s == pytest.approx(weights / (8 * 4.295 * 1.6e9))  # every weight enters an L1 once a pass too
    more = per_token.Result(spec, 32, {"table": 1e6, "l2_bytes": 5e6, "dram_bytes": 3 * weights}, {})
    assert roofline.token(more, "table", threads=8).dram_s == pytest.approx(3 * r.dram_s)
    assert roofline.token(per_token.Result(spec, 32, {"table": 1e6}, {}), "table", threads=8) is None


def test_slices_traffic_scales_by_rows_but_a_row_length_without_it_gives_the_layer_none() -> None:
    fits = {2048: per_token.Fit({"table": 1.0, "dram_bytes": 10.0}, {"table": 2.0, "dram_bytes": 3.0}),
            5632: per_token.Fit({"table": 1.0}, {"table": 2.0})}
    assert set(per_token.layer(per_token.SHAPES["tinyllama"], fits)) == {"table"}
    once = {"instructions": 10.0, "dram_bytes": 50.0}
    assert per_token.compute(once, {"instructions": 20.0, "dram_bytes": 40.0}, "x") == {"instructions": 10.0,
                                                                                      "dram_bytes": -10.0}


ROOT = Path(__file__).resolve().parents[1]


def test_no_estimate_reads_the_boards_figures(tmp_path: Path) -> None:
    """Every row's estimates (the roofline among them) recomputed from its committed source are the same with the
    board's figures of a copy of the data file changed: the estimators read the cost output, not the boards."""
    data = tmp_path / "calibration.toml"
    text = sources.DATA.read_text()
    perturbed = text
    rows = tomllib.loads(text)["row"]
    for raw in rows:  # every board figure scaled and swapped
        old = "measured = " + sources._value(raw["measured"])
        new = "measured = " + sources._value({t: [v[1] * 7.0, v[0] * 0.3] for t, v in raw["measured"].items()})
        assert old in perturbed, raw["name"]
        perturbed = perturbed.replace(old, new)
    data.write_text(perturbed)
    changed = tomllib.loads(data.read_text())["row"]
    assert [r["measured"] for r in changed] != [r["measured"] for r in rows]
    for raw, other in zip(rows, changed):
        src = sources.load_source(raw["name"])
        if src:
            assert sources.estimates_of(other, src) == sources.estimates_of(raw, src), raw["name"]
    assert sources.stale(data) == []
    # the rows whose source holds both trees' traffic have a roofline, which the perturbation did not move either
    with_traffic = [r for r in rows if '"traffic"' in json.dumps(sources.load_source(r["name"]))]
    assert all("roofline" in json.dumps(sources.estimates_of(r, sources.load_source(r["name"]))) for r in with_traffic)
