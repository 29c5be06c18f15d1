"""Scalar instructions by class (harness/cost/prices/scalar_classes.py) and their prices per core
(harness/cost/prices/scalar_prices.py): the classes checked against words LLVM's assembler encodes, the kept LLVM figures
recomputed, the sources of each core's prices, and no calibration row read."""

from __future__ import annotations

import ast
import inspect

import pytest

from harness.cost.measure import spike_count
from harness.cost.prices import cores, mca, scalar_prices
from harness.cost.prices import scalar_classes as SC

# (word, length, class): encodings by llvm-mc-22 -triple=riscv64 -mattr=+m,+a,+f,+d,+c,+zcb -show-encoding.
WORDS = [
    (0x00C58533, 4, SC.ALU),  # add a0, a1, a2
    (0x0085B503, 4, SC.LOAD),  # ld a0, 8(a1)
    (0x0045A507, 4, SC.LOAD),  # flw fa0, 4(a1)
    (0x00A5B423, 4, SC.STORE),  # sd a0, 8(a1)
    (0x00A5A227, 4, SC.STORE),  # fsw fa0, 4(a1)
    (0x00B50463, 4, SC.BRANCH),  # beq a0, a1, 8
    (0x008000EF, 4, SC.JUMP),  # jal ra, 8
    (0x000580E7, 4, SC.JUMP),  # jalr ra, 0(a1)
    (0x02C58533, 4, SC.MUL),  # mul a0, a1, a2
    (0x02C5D533, 4, SC.DIV),  # divu a0, a1, a2
    (0x02C5E53B, 4, SC.DIV),  # remw a0, a1, a2
    (0x00C5F553, 4, SC.FP),  # fadd.s fa0, fa1, fa2
    (0x6AC5F543, 4, SC.FP),  # fmadd.d fa0, fa1, fa2, fa3
    (0x18C5F553, 4, SC.FP_DIV),  # fdiv.s fa0, fa1, fa2
    (0x5A05F553, 4, SC.FP_DIV),  # fsqrt.d fa0, fa1
    (0xC2202573, 4, SC.OTHER),  # csrr a0, vlenb
    (0x0FF0000F, 4, SC.OTHER),  # fence
    (0x00B6252F, 4, SC.OTHER),  # amoadd.w a0, a1, (a2)
    (0x6505, 2, SC.ALU),  # c.lui a0, 1
    (0x0808, 2, SC.ALU),  # c.addi4spn a0, sp, 16
    (0x41C8, 2, SC.LOAD),  # c.lw a0, 4(a1)
    (0x6588, 2, SC.LOAD),  # c.ld a0, 8(a1)
    (0xE588, 2, SC.STORE),  # c.sd a0, 8(a1)
    (0x0505, 2, SC.ALU),  # c.addi a0, 1
    (0xA021, 2, SC.JUMP),  # c.j 8
    (0xC501, 2, SC.BRANCH),  # c.beqz a0, 8
    (0xE501, 2, SC.BRANCH),  # c.bnez a0, 8
    (0x050A, 2, SC.ALU),  # c.slli a0, 2
    (0x6522, 2, SC.LOAD),  # c.ldsp a0, 8(sp)
    (0xE42A, 2, SC.STORE),  # c.sdsp a0, 8(sp)
    (0x8502, 2, SC.JUMP),  # c.jr a0
    (0x9502, 2, SC.JUMP),  # c.jalr a0
    (0x852E, 2, SC.ALU),  # c.mv a0, a1
    (0x952E, 2, SC.ALU),  # c.add a0, a1
    (0x9002, 2, SC.OTHER),  # c.ebreak
    (0x81C8, 2, SC.LOAD),  # c.lbu a0, 1(a1) (Zcb)
    (0x8DA8, 2, SC.STORE),  # c.sh a0, 2(a1) (Zcb)
    (0x9D4D, 2, SC.MUL),  # c.mul a0, a1 (Zcb)
    (0x9D61, 2, SC.ALU),  # c.zext.b a0 (Zcb)
]


@pytest.mark.parametrize(("word", "size", "cls"), WORDS, ids=[f"{w:#x}" for w, _, _ in WORDS])
def test_each_scalar_word_is_in_its_class(word: int, size: int, cls: str) -> None:
    assert spike_count.scalar_key((word, size)) == cls


def test_every_class_is_reached_and_the_mix_keys_are_the_old_ones_where_they_existed() -> None:
    assert {c for _, _, c in WORDS} == set(SC.CLASSES)
    assert (SC.ALU, SC.MUL, SC.DIV) == ("scalar", "scalar mul", "scalar div")  # a kept mix of the old tally reads alike


def _core(key: str) -> cores.Core:
    return next(c for c in cores.all_cores() if c.key == key)


def test_each_price_comes_from_its_evidence() -> None:
    x60 = _core("spacemit_x60")
    src = scalar_prices.source(x60.key, x60.prices)
    assert src[SC.ALU] == "rvv-bench's add" and src[SC.MUL] == "rvv-bench's mul"
    assert "spacemit-x60 model" in src[SC.LOAD] and "spacemit-x60 model" in src[SC.BRANCH]
    add = scalar_prices.median(x60.prices[("add", False)])
    assert cores.price(x60, "scalar") == (add, False)  # integer arithmetic: as before the split
    assert cores.price(x60, SC.BRANCH) == (scalar_prices.modelled()["spacemit_x60"][SC.BRANCH], False)
    assert cores.price(x60, SC.OTHER) == (add, True)  # no source: the core's arithmetic, approximated
    c908 = _core("thead_c908")  # no LLVM model: loads priced as its measured add, approximated
    assert cores.price(c908, SC.LOAD) == (scalar_prices.median(c908.prices[("add", False)]), True)
    assert cores.price(c908, SC.DIV)[1] and cores.price(c908, SC.DIV)[0] == cores.price(c908, SC.MUL)[0]
    asc = _core("tt_asc_x")  # rvv-bench times no scalar instruction there: LLVM's Ascalon model prices them all
    assert "tt-ascalon-d8" in scalar_prices.source(asc.key, asc.prices)[SC.ALU]
    bare = cores.Core("none", "no evidence", 256, "", {})
    assert cores.price(bare, SC.LOAD) == (None, False) and cores.price(bare, "vsetvli") == (None, False)


def test_the_kept_llvm_figures_are_what_llvm_mca_gives() -> None:
    if mca.tools() is None:
        pytest.skip(f"no llvm-mca to recompute the figures with: {mca.INSTALL}")
    assert scalar_prices.render() == scalar_prices.PRICES.read_text(), \
        "harness/data/cost/scalar_prices.toml is stale: rvvdiff prices scalar --write"


def test_no_price_reads_a_calibration_row() -> None:
    """The prices come from the cores' tables and LLVM only: the module imports nothing of the calibration."""
    tree = ast.parse(inspect.getsource(scalar_prices))
    names = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not any("calibration" in n for n in names), names
    assert "calibration" not in scalar_prices.PRICES.read_text()
