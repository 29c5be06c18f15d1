"""The cost path end to end under Spike, on a few kernels: two runs count the same; a planted slowdown
(ggml_vec_dot_q4_0_q8_0 with a discarded second pass: harness/data/cost/) is listed slower, the
reverse change faster; a kernel the change does not reach is not measured; a kernel that traps or
hangs is one clear line, and a run that measures none of its cases exits 3 naming the trap; the same
cases measured on GCC 14's build and clang's side by side (``--cc gcc14,clang``) when GCC 14 is
installed.

``rvvdiff cost`` runs as a user runs it (its own pytest, ``--changed-only``) on the pinned tree and
on the planted one, at VLEN 128 and 1024 of the zvfh build.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import gcc14_missing
from launch import rvvdiff

from harness.core.config import DATA_DIR, ISA_BUILDS
from harness.cost.measure.spike_count import CostError
from harness.cost.measure.spike_runs import measure
from harness.cost.prices import cores
from harness.emulators import protocol as P
from harness.emulators import spike
from harness.ggml import patches
from harness.ggml.source import resolve
from harness.toolchain.builds import ensure_built

WHY_NOT = spike.available()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"SKIPPED: the cost checks did not run: {WHY_NOT}")

PLANTED = DATA_DIR / "cost" / "slowdown_q4_0_extra_pass.patch"
SELECT = ["--isa", "zvfh", "--vlen", "128,1024", "-n", "2"]
#: HEAD and BASE for the planted change, every quantized dot selected: only q4_0's is reached.
CHANGED = ["--changed-only", "-k", "quant_dot"]


def _cost(tmp: Path, *args: str, cache: bool = True, select: list[str] = SELECT) -> tuple[int, dict, str]:
    cp = rvvdiff("cost", *args, *select, "--out", tmp, code=None, timeout=3600,
                 env={} if cache else {"RVVDIFF_COST_CACHE": "0"})
    data = json.loads((tmp / "cost.json").read_text()) if (tmp / "cost.json").is_file() else {}
    return cp.returncode, data, cp.stdout + cp.stderr


@pytest.fixture(scope="module")
def trees() -> tuple[str, str]:
    pinned = resolve(None)
    planted = patches.apply([patches.Patch(PLANTED.stem, PLANTED)], pinned, "cost-plant")
    return str(pinned.root), str(planted.root)


def test_two_runs_count_the_same(tmp_path: Path) -> None:
    runs = []
    for i in (1, 2):
        code, data, out = _cost(tmp_path / str(i), "-k", "quant_dot and q4_0", cache=False)
        assert code == 0, out
        runs.append(sorted((r["case"], r["vlen"], r["instret"], r["vector"], r["vector_work"], json.dumps(r["functions"]),
                            json.dumps(r["mix"], sort_keys=True), json.dumps(r["estimates"], sort_keys=True))
                           for r in data["head"]))
        for r in data["head"]:  # the mix accounts for every instruction of the call; the cores of each VLEN price it
            assert sum(r["mix"].values()) == r["executed"], r["case"]
            assert set(r["estimates"]) == ({"spacemit_a100"} if r["vlen"] == 1024 else {"thead_c908", "xiangshan_v3"}), r["case"]
            if r["vlen"] == 1024:
                assert r["estimates"]["spacemit_a100"]["cycles"] > 0 and not r["estimates"]["spacemit_a100"]["unpriced"]
            else:  # the VLEN-128 tables time no load or store: the RVV kernel's loads are counted unpriced, never guessed
                vector_loads = sum(n for k, n in r["mix"].items() if cores.MEMORY_OP.match(k))
                for e in r["estimates"].values():
                    assert e["cycles"] > 0 and e["unpriced"] >= vector_loads, r["case"]
                assert vector_loads > 0 or r["case"].endswith("generic"), r["case"]
    assert runs[0] == runs[1] and len(runs[0]) == 2 * 2 * 2  # k4096 / k14336, RVV / twin, two VLENs


def test_planted_slowdown_is_slower_and_unreached_kernels_are_not_measured(tmp_path: Path, trees) -> None:
    pinned, planted = trees
    code, data, out = _cost(tmp_path, "--ggml-src", planted, "--base", pinned, *CHANGED)
    assert code == 0, out
    slower = {(m["case"], m["vlen"]) for m in data["slower"]}
    assert slower == {(f"quant_dot-q4_0-k{k}", v) for k in (4096, 14336) for v in (128, 1024)}, out
    assert not data["faster"], out
    measured = {r["case"] for r in data["head"]} | {r["case"] for r in data["base"]}
    assert measured == {"quant_dot-q4_0-k4096", "quant_dot-q4_0-k14336"}, (
        f"only the kernel the change reaches is measured (not its generic twin, not q8_0 ...): {sorted(measured)}")
    assert all(m["ratio"] > 1.2 for m in data["slower"]), data["slower"]


@pytest.mark.long(2)
def test_planted_speedup_is_faster(tmp_path: Path, trees) -> None:
    pinned, planted = trees
    code, data, out = _cost(tmp_path, "--ggml-src", pinned, "--base", planted, *CHANGED, "--block-slower", "0")
    assert code == 0, out  # nothing slower: --block-slower 0 does not block
    assert {(m["case"], m["vlen"]) for m in data["faster"]} == {
        (f"quant_dot-q4_0-k{k}", v) for k in (4096, 14336) for v in (128, 1024)}, out
    assert not data["slower"]


def test_a_slower_case_blocks_with_block_slower(tmp_path: Path, trees) -> None:
    pinned, planted = trees
    code, _, out = _cost(tmp_path, "--ggml-src", planted, "--base", pinned, *CHANGED, "--block-slower", "5")
    assert code == 1 and "blocking: a case is slower by more than 5 %" in out, out


def test_a_run_that_measures_none_of_its_cases_exits_3_and_says_why(tmp_path: Path) -> None:
    """The pinned tree's ``ggml_vec_dot_iq2_xxs_q8_K_vl512`` traps under Spike at VLEN 1024 (a misaligned vector
    load: harness/data/fixes/iq2_xxs_vl512_misaligned_load.md): neither of its two cases is measured, and the
    command says so and exits 3 instead of passing with an empty table."""
    code, data, out = _cost(tmp_path, "-k", "quant_dot and iq2_xxs and not generic",
                            select=["--isa", "zvfh", "--vlen", "1024", "-n", "1"])
    assert code == 3, out
    assert "rvvdiff cost: 2 cases selected" in out and "0 of 2 selected cases measured" in out, out
    assert "not measured: failed, 2 cases (head: quant_dot-iq2_xxs-k" in out and "misaligned" in out, out
    assert "rvvdiff cost: incomplete: 0 of 2 selected cases measured: 2 failed" in out, out
    assert not data["head"] and len(data["unmeasured"]) == 2


@pytest.mark.parametrize(("kernel", "says"), [("selftest_sigill", "died of signal 4"),
                                              ("selftest_hang", "no answer within 5 s")])
def test_a_kernel_that_traps_or_hangs_is_one_clear_line(kernel: str, says: str) -> None:
    build = ensure_built(resolve(None), ISA_BUILDS["zvfh"])
    with pytest.raises(CostError) as e:
        measure(spike.spike(), build, 128, (kernel, [], [], [P.Out(4)]), timeout=5)
    assert says in str(e.value) and "under Spike" in str(e.value), str(e.value)


@pytest.mark.long(2)
def test_the_start_up_snapshot_measures_what_a_fresh_start_measures(tmp_path: Path) -> None:
    """A run resumed from the snapshot taken after ggml's start-up (harness/cost/measure/snapshot.py) counts
    exactly what a run from the ELF entry counts: instructions, histogram by function, mix."""
    select = "(quant_dot and q4_K and k4096) or (vec_ops and silu and n4109) or (flash_attn and split and f16)"
    runs = {}
    for snap in ("0", "1"):
        os.environ["RVVDIFF_COST_SNAPSHOT"] = snap
        try:
            code, data, out = _cost(tmp_path / snap, "-k", select, cache=False)
        finally:
            del os.environ["RVVDIFF_COST_SNAPSHOT"]
        assert code == 0, out
        runs[snap] = {(r["case"], r["vlen"]): (r["instret"], r["executed"], r["vector_work"], r["functions"], r["mix"])
                      for r in data["head"]}
    assert len(runs["1"]) == 2 * (2 + 1 + 1) and runs["0"] == runs["1"]  # q4_K: RVV and twin; two VLENs




def test_gcc14_and_clang_builds_are_measured_side_by_side(tmp_path: Path) -> None:
    """The kernel server built by GCC 14 (static glibc) runs bare metal under Spike with the runtime
    (harness/server/spike/rt.c), and its calls are counted like clang's: both compilers' rows, the two
    measures of each call agree, and the comparison lists only calls both measured."""
    why = gcc14_missing()
    if why:
        pytest.skip(f"SKIPPED: GCC 14 is not installed: {why}")
    code, data, out = _cost(tmp_path, "-k", "quant_dot and q4_0 and k4096", "--cc", "gcc14,clang")
    assert code == 0, out
    assert data["compilers"] == ["gcc14", "clang"], out
    for cc in ("gcc14", "clang"):
        rows = data["per_compiler"][cc]["head"]
        assert {(r["case"], r["vlen"]) for r in rows} == {(c, v) for c in ("quant_dot-q4_0-k4096",
                                                                          "quant_dot-q4_0-k4096-generic")
                                                         for v in (128, 1024)}, (cc, out)
        for r in rows:
            assert 0 <= r["executed"] - r["instret"] <= 16 and r["function"] in r["functions"], (cc, r["case"])
    rvv = {cc: next(r for r in data["per_compiler"][cc]["head"] if r["case"] == "quant_dot-q4_0-k4096"
                    and r["vlen"] == 1024) for cc in ("gcc14", "clang")}
    assert rvv["gcc14"]["vector"] > 0 and rvv["clang"]["vector"] > 0
    assert all(g["case"].startswith("quant_dot-q4_0-k4096") for g in data["dearer"])
