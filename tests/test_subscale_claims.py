"""The sub-blocks a finding's short report names are those that differ.

Every short report (harness/data/fixes/<fix>.md) whose title names sub-blocks or sub-scales of a
quantized vec_dot the sub-scale probe knows (cases/subscales.py) is checked against the probe:
cases/test_quant_dot.py::test_vec_dot_subscales moves one sub-scale at a time and names those that move
the result by the wrong amount.  Run on the pinned tree at every QEMU VLEN, in every ISA build, with and
without the stress modes, and on the tree with the fixes:

- at the fix's wrong VLENs with agnostic elements written as ones (--rvv-stress: undefined elements
  then carry no data), the sub-scales that differ are exactly those the title names, in both probed
  blocks; without stress they include them (stale register contents may depend on other sub-scales);
- a title saying the kernel swaps two sub-scales is checked for the swap: each moves the result as
  its partner should;
- at every other VLEN, and with the fixes everywhere, nothing differs.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest
from launch import pytest_child

from cases import subscales
from harness.ggml import fix_catalogue, patches, source


@dataclass(frozen=True)
class Claim:
    fix: fix_catalogue.Fix
    type: str
    fields: frozenset[str]  # the sub-scales the title names
    like: dict[str, str]  # for a swap: field -> the field whose move it makes


def _claim(fix: fix_catalogue.Fix) -> Claim | None:
    """What the title of ``fix``'s short report says about sub-blocks, in the forms the reports use."""
    title = fix.report.read_text().splitlines()[0]
    m = re.match(r"# ggml_vec_dot_(\w+?)_q8_K", title)
    if not m or m.group(1) not in subscales.FIELDS:
        return None
    name, labels = m.group(1), [f.label for f in subscales.FIELDS[m.group(1)]]
    if r := re.search(r"sub-blocks (\d)-(\d)\b", title):
        named = {f"sub-block {j}" for j in range(int(r.group(1)), int(r.group(2)) + 1)}
        return Claim(fix, name, frozenset(named), {})
    if "swaps the two 4-bit sub-scales of every 32-element group" in title:
        pairs = [(lo, hi) for lo, hi in zip(labels[::2], labels[1::2], strict=True)]
        return Claim(fix, name, frozenset(labels), {**dict(pairs), **{hi: lo for lo, hi in pairs}})
    return None


CLAIMS = [c for f in fix_catalogue.catalogue().values() if (c := _claim(f)) is not None]


def test_the_reports_naming_sub_blocks_are_read() -> None:
    """The claims are found (a title rewritten into a form _claim does not read would skip its check)."""
    assert sorted(c.fix.name for c in CLAIMS) == ["iq2_s_vl1024_scale_nibbles_swapped",
                                                 "iq2_xxs_vl512_subblock_offsets", "iq3_xxs_vl1024_subblock_offsets"]


@dataclass(frozen=True)
class Probed:
    """One failed test_vec_dot_subscales: per probed block, the fields that differ and their 'like'."""

    type: str
    vlen: int
    stress: bool
    blocks: list[tuple[set[str], dict[str, str]]]


def _failures(junit: Path) -> dict[str, Probed]:
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            continue
        m = re.search(r"\[(\w+)-vlen(\d+)-(\w+?)(-stress)?\]$", case.get("name", ""))
        assert m, case.get("name")
        blocks = []
        for line in (failure.get("message", "") + "\n" + (failure.text or "")).splitlines():
            b = re.search(rf"block \d+ of \d+: {subscales.WRONG}: ([^|]*)(?:\| {subscales.LIKE}: ([^|]*))?", line)
            if b:
                like = dict(p.split(" -> ") for p in (b.group(2) or "").strip().split("; ") if p)
                blocks.append(({s.strip() for s in b.group(1).split(";")}, like))
        out[case.get("name", "")] = Probed(m.group(1), int(m.group(2)), bool(m.group(4)), blocks[:2])
    return out


def _run(tree: Path, isa: str, out: Path) -> tuple[dict[str, Probed], str]:
    junit = out / "junit.xml"
    r = pytest_child("cases/test_quant_dot.py", "-k", "test_vec_dot_subscales", "--vlen", "all", "--isa", isa,
                     "--rvv-stress", "both", "--runxfail", "--ggml-src", str(tree), "--report-dir", str(out),
                     "--junitxml", str(junit), code=(0, 1))
    assert junit.exists(), r.stdout[-3000:] + r.stderr[-2000:]
    assert re.search(r"\d+ passed", r.stdout), r.stdout[-3000:]
    return _failures(junit), r.stdout


def test_pinned_tree_differs_exactly_where_the_reports_say(tmp_path: Path) -> None:
    failed, said = _run(source.pinned().root, "all", tmp_path)
    claims = {c.type: c for c in CLAIMS}
    expected = 0
    for c in CLAIMS:
        expected += sum(2 for vlen in (128, 256, 512, 1024) if c.fix.wrong_at(vlen)) * 3  # x stress, x 3 builds
    assert len(failed) == expected, f"{sorted(failed)}\n{said[-3000:]}"
    for name, p in failed.items():
        c = claims.get(p.type)
        assert c is not None and c.fix.wrong_at(p.vlen), f"{name} fails where no report says so: {p}"
        assert len(p.blocks) == 2, f"{name}: both probed blocks must differ: {p}"
        for fields, like in p.blocks:
            if p.stress:
                assert fields == c.fields, f"{name}: differ {sorted(fields)}, {c.fix.report.name} names {sorted(c.fields)}"
            else:
                assert fields >= c.fields, f"{name}: differ {sorted(fields)}, {c.fix.report.name} names {sorted(c.fields)}"
            if c.like:
                assert like == c.like, f"{name}: moves like {like}, the report says swapped: {c.like}"


@pytest.mark.long(2)
@pytest.mark.parametrize("isa", ["zvfh"])
def test_fixed_tree_differs_nowhere(isa: str, tmp_path: Path) -> None:
    tree = patches.apply([c.fix for c in CLAIMS], source.pinned(), "fix")
    failed, said = _run(tree.root, isa, tmp_path)
    assert not failed, f"{sorted(failed)}\n{said[-3000:]}"
