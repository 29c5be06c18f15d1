"""The size table (cases/loops.py): every loop level of every family is crossed twice plus its
remainder on every run at every VLEN, real-model sizes are drawn, and the docs show the
current tables."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cases import families
from cases import loops as L

FAMILIES = families.families()


def _toy(every_run: tuple[int, ...], hi: int, *, remainder: bool = True) -> L.Family:
    loop = L.Loop("toy", "strip-mining", "n", lambda vlen: vlen // 32, remainder=remainder, real=(4096,))
    return L.Family("toy", "docs/none.md", [loop], lambda vlen: {"n": L.Drawn(every_run, 1, hi)})


def test_witness_needs_two_full_iterations_and_a_remainder() -> None:
    loop = _toy((), 1).loops[0]
    assert L.witness(loop, [8, 16, 17], 256) == 17  # step 8: 16 is two trips without remainder
    assert L.witness(loop, [8, 16, 15], 256) is None
    assert L.witness(L.Loop("t", "l", "n", lambda v: 8, remainder=False), [16], 256) == 16


def test_problems_name_each_unreached_vlen_and_undrawn_real_sizes() -> None:
    # step is 4 / 8 / 16 / 32: 33 crosses every VLEN but 1024 (2 * 32 + 1 = 65 would).
    probs = L.problems(_toy((33,), 100))
    assert len(probs) == 2, probs
    assert "VLEN 1024" in probs[0] and "never drawn" in probs[1]
    assert L.problems(_toy((65, 33), 4096)) == []


def test_every_family_is_registered() -> None:
    """A definition module that registers loop levels or a coverage scan is one of cases/families.py's
    families (a module it does not import would have no loop check, no coverage scan, no docs table)."""
    assert sorted(FAMILIES) == sorted(families.MODULES)
    cases = Path(families.__file__).parent
    registering = {p.stem for p in cases.glob("*.py")
                   if re.search(r"\b(?:L|loops|coverage)\.register\(", p.read_text())}
    imported = {m.__name__.rsplit(".", 1)[-1] for m in families.MODULES.values()}
    missing = sorted(registering - imported)
    assert not missing, (f"cases/{missing[0]}.py registers a family that cases/families.py does not import: "
                         "add it to the imports and to MODULES there")


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_loop_is_reached_at_every_vlen(name: str) -> None:
    family = FAMILIES[name]
    assert family.loops, f"{name}: no loop levels declared"
    assert L.problems(family) == []


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_docs_table_is_current(name: str) -> None:
    family = FAMILIES[name]
    text = (L.ROOT / family.doc).read_text()
    assert name in L.doc_blocks(text), f"{family.doc} has no <!-- loops:{name} --> block: run rvvdiff docs --write loops"
    assert L.render_doc(text, FAMILIES) == text, f"{family.doc}: table out of date: run rvvdiff docs --write loops"
