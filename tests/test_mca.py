"""The second cost estimate (harness/cost/prices/mca.py: LLVM's X60 model over the executed basic blocks)
and the comparison of the two estimates (harness/cost/prices/estimate_pair.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.cost.prices import cores, estimate_pair, mca

_FN = {0x100: "f", 0x200: "g"}


def _fn(pc: int) -> str:
    return _FN[max(s for s in _FN if s <= pc)]


INSNS = {0x100: ("vsetvli", "t0, a0, e32, m1, ta, ma"), 0x104: ("vle32.v", "v8, (a1)"),
         0x108: ("addi", "a1, a1, 0x20"), 0x10c: ("bnez", "a0, 0x100 <f>"),
         0x110: ("li", "a0, 0x0"), 0x112: ("ret", ""),
         0x200: ("addi", "a0, a0, 0x1"), 0x204: ("addi", "a0, a0, 0x1")}


def test_blocks_end_at_branches_count_changes_gaps_and_functions() -> None:
    hist = {0x100: 5, 0x104: 5, 0x108: 5, 0x10c: 5,  # the loop: one block, ended by its branch
            0x110: 1, 0x112: 1,  # after it, once: a block of its own (count differs anyway)
            0x200: 1, 0x204: 1}  # another function, same count, contiguous in address with nothing
    got = mca.blocks(hist, INSNS, _fn)
    assert [(b.pcs, b.count) for b in got] == [((0x100, 0x104, 0x108, 0x10c), 5), ((0x110, 0x112), 1),
                                               ((0x200, 0x204), 1)]
    # The same counts on both sides of a branch stay two blocks; an unexecuted address splits too.
    same = {0x100: 3, 0x104: 3, 0x108: 3, 0x10c: 3, 0x110: 3, 0x112: 3}
    assert [b.pcs for b in mca.blocks(same, INSNS, _fn)] == [(0x100, 0x104, 0x108, 0x10c), (0x110, 0x112)]
    gap = {0x100: 2, 0x108: 2}
    assert [b.pcs for b in mca.blocks(gap, INSNS, _fn)] == [(0x100,), (0x108,)]


def test_instructions_are_given_to_the_assembler_without_symbols_and_with_local_branch_targets() -> None:
    assert mca.asm_line("bnez", "a0, 0x10710dc <_ZN7rvvdiff8registryEv+0x18>") == "bnez\ta0, ."
    assert mca.asm_line("j", "0x1071298 <f+0x5c>") == "j\t."
    assert mca.asm_line("jalr", "-0x33c(ra) <__cxa_guard_acquire>") == "jalr\t-0x33c(ra)"
    assert mca.asm_line("ret", "") == "ret"
    assert mca.asm_line("addi", "a0, a0, -0x1") == "addi\ta0, a0, -0x1"


def test_a_block_starts_with_the_vtype_in_force_as_llvm_mca_instruments() -> None:
    b = mca.Block((0x104, 0x108), 4)
    text = mca.region_text([b], INSNS, lambda pc: "e16m4" if pc == 0x104 else "")
    assert text.splitlines() == ["# LLVM-MCA-BEGIN b0", "# LLVM-MCA-RISCV-SEW E16", "# LLVM-MCA-RISCV-LMUL M4",
                                 "vle32.v\tv8, (a1)", "addi\ta1, a1, 0x20", "# LLVM-MCA-END"]


needs_mca = pytest.mark.skipif(mca.tools() is None, reason=mca.unavailable() or "llvm-mca present")


@needs_mca
def test_the_model_prices_lmul_and_dependency_chains() -> None:
    def per_iter(body: str, vt: str = "") -> float:
        head = [f"# LLVM-MCA-RISCV-SEW E{vt[1:3]}", f"# LLVM-MCA-RISCV-LMUL {vt[3:].upper()}"] if vt else []
        r = mca.run_mca("\n".join(["# LLVM-MCA-BEGIN x", *head, body, "# LLVM-MCA-END"]) + "\n")[0]
        return r["SummaryView"]["TotalCycles"] / r["SummaryView"]["Iterations"]

    m1, m8 = per_iter("vfmacc.vv v16, v8, v12", "e32m1"), per_iter("vfmacc.vv v16, v8, v12", "e32m8")
    assert m8 > m1  # LMUL 8 occupies the unit longer than the m1 chain's latency
    chained = per_iter("vfmacc.vv v16, v8, v12\nvfmacc.vv v16, v8, v12", "e32m1")
    independent = per_iter("vfmacc.vv v16, v8, v12\nvfmacc.vv v20, v8, v12", "e32m1")
    assert chained > independent  # an accumulator waits for itself


@needs_mca
def test_an_estimate_is_block_cycles_times_executions_shared_by_mix_key(tmp_path: Path) -> None:
    mc = shutil.which(Path(mca.tools().mca).name.replace("llvm-mca", "llvm-mc"))
    if not mc:
        pytest.skip("no llvm-mc beside llvm-mca to assemble the test's object")
    src = tmp_path / "k.s"
    src.write_text(".text\n.globl f\nf:\n  vsetvli t0, a0, e32, m8, ta, ma\n  vle32.v v8, (a1)\n"
                   "  vfmacc.vv v16, v8, v8\n  addi a0, a0, -1\n  ret\n")
    obj = tmp_path / "k.o"
    subprocess.run([mc, "-triple=riscv64", "-mattr=+v", "-filetype=obj", str(src), "-o", str(obj)], check=True)
    keys = {0: "vsetvli", 4: "vle32.v e32m8", 8: "vfmacc.vv e32m8", 12: "scalar", 16: "scalar"}
    once = mca.estimate(obj, {pc: 1 for pc in keys}, lambda pc: "f", keys.__getitem__,
                        lambda pc: "e32m8" if pc in (4, 8) else "")
    ten = mca.estimate(obj, {pc: 10 for pc in keys}, lambda pc: "f", keys.__getitem__,
                       lambda pc: "e32m8" if pc in (4, 8) else "")
    assert once.blocks == 1 and once.skipped == 0 and once.cycles > 0
    assert ten.cycles == pytest.approx(10 * once.cycles)
    assert sum(ten.by_key.values()) == pytest.approx(ten.cycles)
    assert ten.by_key["vfmacc.vv e32m8"] > ten.by_key["scalar"]
    # A PC the disassembly does not hold is counted as skipped, never priced.
    odd = mca.estimate(obj, {**{pc: 1 for pc in keys}, 0x400: 7}, lambda pc: "f", lambda pc: keys.get(pc, "scalar"),
                       lambda pc: "")
    assert odd.skipped == 7


def _row(case: str, mix: dict[str, int], mca_by_key: dict[str, float] | None) -> dict:
    return {"case": case, "function": case, "vlen": 256, "isa": "zvfh", "units": 1, "instret": sum(mix.values()),
            "mix": mix, **({"mca": {"cycles": sum(mca_by_key.values()), "by_key": mca_by_key}} if mca_by_key else {})}


def test_estimates_apart_by_more_than_the_factor_name_the_instructions_responsible() -> None:
    x60 = estimate_pair.x60(256)
    mix = {"vredsum.vs e32m1": 10, "scalar": 100}
    table = cores.breakdown(x60, mix)
    close = _row("close", mix, {k: v * 1.2 for k, v in table.items()})
    far = _row("far", mix, {"vredsum.vs e32m1": table["vredsum.vs e32m1"] + 3 * sum(table.values()),
                            "scalar": table["scalar"]})
    none = _row("none", mix, None)
    rows = {(r["case"], 256, "zvfh"): r for r in (close, far, none)}
    found = estimate_pair.disagreements(rows)
    assert [d.case for d in found] == ["far"]
    d = found[0]
    assert d.factor == pytest.approx(4.0)
    assert d.responsible[0][0] == "vredsum.vs e32m1"
    assert "x4.00" in d.describe() and "vredsum.vs e32m1" in d.describe()
    assert estimate_pair.compare(none) is None
    assert estimate_pair.mca_ratio(far, close) == pytest.approx(4.0 / 1.2)


def test_a_failed_second_estimate_is_said_in_the_report() -> None:
    from harness.cost.tables import suite_tables

    row = {**_row("k", {"scalar": 10}, None), "mca": {"model": "spacemit-x60", "error": "RuntimeError: llvm-mca died"},
           "size": "k4096", "impl": "rvv", "twin": None, "executed": 10, "vector": 0, "unit": "element"}
    assert estimate_pair.mca_cycles(row) is None and estimate_pair.compare(row) is None
    md = suite_tables.CostTable({("k", 256, "zvfh"): row}).markdown()
    assert "No X60 (llvm-mca) estimate (1; llvm-mca failed):" in md and "RuntimeError: llvm-mca died" in md


def test_a_failing_llvm_mca_leaves_the_measurement_with_the_reason(monkeypatch, tmp_path: Path) -> None:
    from harness.cost.measure import spike_count

    def broken(*a, **k):
        raise RuntimeError("llvm-mca exited with 1: bad input")

    monkeypatch.setattr(mca, "estimate", broken)
    got = spike_count.second_estimate(tmp_path / "server", spike_count.Image((), (0,), ("f",)), spike_count.Counter({0: 1}))
    assert got == {"model": "spacemit-x60", "error": "RuntimeError: llvm-mca exited with 1: bad input"}
