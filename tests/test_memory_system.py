"""The memory system around each priced core (harness/data/cost/memory.toml, harness/cost/prices/memory_system.py):
every priced core has an entry with its sources, the K1's figures are the datasheet's and device tree's, Spike's
cache model is configured from them, a malformed entry is named, and the roofline is the larger of its roofs."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cost.prices import cores
from harness.cost.prices import memory_system as MS


def test_every_priced_core_has_an_entry_with_a_source() -> None:
    systems = MS.systems()
    assert {c.key for c in cores.all_cores()} <= set(systems), "a priced core has no entry in memory.toml"
    for s in systems.values():
        assert s.source, s.core
        assert s.caches or "caches" in s.missing, f"{s.core}: no caches and none said missing"
        assert s.dram or any("DRAM interface" in m for m in s.missing), f"{s.core}: no DRAM and none said missing"


def test_the_k1s_published_figures_configure_the_cache_model() -> None:
    x60 = MS.systems()["spacemit_x60"]
    assert (x60.caches["l1d"].ways, x60.caches["l2"].ways, x60.caches["l2"].shared_by) == (4, 16, 4)
    assert x60.spike_options() == ["--dc=128:4:64", "--ic=128:4:64", "--l2=512:16:64"]
    assert x60.dram is not None and x60.dram.peak_bytes_per_s == pytest.approx(10.664e9)
    assert x60.cores == 8 and x60.cluster == 4
    assert MS.systems()["tt_asc_x"].spike_options() == []


def test_the_k1s_measured_streams_and_latencies_are_published_figures_with_their_sources() -> None:
    x60 = MS.systems()["spacemit_x60"]
    assert x60.l2_read is not None and x60.dram_read is not None and x60.latency is not None
    assert (x60.l2_read.bytes_per_cycle, x60.dram_read.bytes_per_cycle) == (4.295, 4.022)
    assert x60.dram_read.bytes_per_s == pytest.approx(6.4352e9)
    assert (x60.latency.l2_ns, x60.latency.dram_ns) == (24.69, 217.3)
    assert "rvv-bench-results 91f720dc3d1f" in x60.l2_read.source and "the rule" in x60.dram_read.source
    assert "sbc-bench" in x60.latency.source and "8to7qX" in x60.latency.source
    # what is not published stays named
    assert any("all-core" in m for m in x60.missing) and any("four cores at once" in m for m in x60.missing)


@pytest.mark.parametrize(("text", "message"), [
    ('[c]\nsoc = "S"\n', "says no source"),
    ('[c]\nsource = "s"\nl1d = { size = 32768, sets = 100, line = 64 }\n', "is not sets x ways x line"),
    ('[c]\nsource = "s"\nl1d = { size = 24576, sets = 96, line = 64 }\n', "not a power"),
    ('[c]\nsource = "s"\nl2 = { sets = 128, line = 64 }\n', "needs size, sets and line"),
    ('[c]\nsource = "s"\n[c.dram]\nkind = "x"\nbus_bits = 32\nmt_s = 1\n', "dram says no source"),
    ('[c]\nsource = "s"\n[c.l2_read]\nbytes_per_cycle = 4.0\nclock_ghz = 1.6\n', r"\[c.l2_read\] needs"),
    ('[c]\nsource = "s"\n[c.dram_read]\nbytes_per_cycle = 0\nclock_ghz = 1.6\nsource = "b"\n', "positive"),
    ('[c]\nsource = "s"\n[c.latency]\nl2_ns = 20\ndram_ns = 200\nsource = ""\n', "latency. says no source"),
])
def test_a_malformed_entry_is_named(text: str, message: str) -> None:
    with pytest.raises(MS.MemoryDataError, match=message):
        MS.parse(text)


def test_the_roofline_is_the_larger_roof_and_names_what_it_leaves_out() -> None:
    x60 = MS.systems()["spacemit_x60"]
    # 1.6e9 cycles on 8 threads at 1.6 GHz: 0.125 s; 2.1328e9 bytes at 10.664 GB/s: 0.2 s -> DRAM-bound
    r = MS.roofline(1.6e9, 2.1328e9, x60, clock_hz=1.6e9, threads=8)
    assert (r.compute_s, r.dram_s, r.seconds, r.bound) == (pytest.approx(0.125), pytest.approx(0.2), pytest.approx(0.2),
                                                           "DRAM")
    assert MS.roofline(1.6e9, 1e6, x60, clock_hz=1.6e9, threads=8).bound == "compute"
    assert any("L2" in t for t in r.left_out) and any("latency" in t for t in r.left_out)
    none = MS.roofline(1.6e9, 1e12, MS.systems()["spacemit_x100"], clock_hz=1.6e9, threads=8)
    assert none.dram_s is None and none.bound == "compute" and "DRAM" in none.left_out[0]
    with pytest.raises(ValueError):
        MS.roofline(1.0, 1.0, x60, clock_hz=1.6e9, threads=0)


def test_the_docs_table_is_the_data_files() -> None:
    text = (Path(__file__).resolve().parents[1] / MS.DOC).read_text()
    assert MS.render_doc(text) == text, f"{MS.DOC}'s memory table is stale: run rvvdiff docs --write memory"
    assert "| `spacemit_x60` (SpacemiT K1) | 32 KiB, 4-way, 64 B lines |" in MS.markdown()
