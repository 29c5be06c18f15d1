"""Every llama.cpp issue and pull request that a text for upstream cites is one rvvdiff read in the tracker
(harness/data/upstream_refs.toml), cited as what it is (an issue or a pull request) and in the texts of the findings
it is about; the series that fixes an issue says ``Fixes #N`` on each commit that fixes it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.ggml import fix_catalogue
from harness.upstream import fix_series, references

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "upstream"
SERIES = DOCS / "series"


@pytest.fixture(scope="module")
def every() -> list[fix_series.Series]:
    return fix_series.load(fix_catalogue.catalogue())


def _texts(every: list[fix_series.Series]) -> dict[str, tuple[str, list[str] | None]]:
    """name -> (text, the findings it is about; None: the index, about all of them)."""
    out: dict[str, tuple[str, list[str] | None]] = {}
    for d in sorted(DOCS.iterdir()):
        if (d / "issue.md").is_file():
            out[f"{d.name}/issue.md"] = ((d / "issue.md").read_text(), [d.name])
    for s in every:
        about = [fx.name for fx in s.fixes]
        out[f"{s.stem}.md"] = ((SERIES / f"{s.stem}.md").read_text(), about)
        for f in sorted((SERIES / s.stem).glob("*.patch")):
            out[f"{s.stem}/{f.name}"] = (f.read_text().split("\ndiff --git ")[0], about)
    out["README.md"] = ((SERIES / "README.md").read_text(), None)
    return out


def test_every_cited_issue_and_pull_request_is_read_and_cited_as_what_it_is(every: list[fix_series.Series]) -> None:
    texts = _texts(every)
    bad = {name: d for name, (text, about) in texts.items() if (d := references.defects(text, about))}
    assert not bad
    cited = {int(n) for text, _ in texts.values() for n in re.findall(r"#(\d{4,6})\b", text)}
    assert {29131, 28642} <= cited  # the checks see the citations at all
    assert set(references.load()) >= cited


def test_the_series_that_fixes_an_issue_says_so_on_each_commit_that_fixes_it(every: list[fix_series.Series]) -> None:
    for s in every:
        files = sorted((SERIES / s.stem).glob("*.patch"))
        heads = [f.read_text().split("\n---\n")[0] for f in files]
        fixes = heads[1:]  # the first commit is the regression test
        if s.closes:
            assert references.load()[s.closes].kind == "issue", s.stem
            assert all(h.rstrip().endswith(f"Fixes #{s.closes}") for h in fixes), s.stem
            assert f"Fixes #{s.closes}" not in heads[0], s.stem
        else:
            assert not any("Fixes #" in h for h in heads), s.stem


@pytest.mark.parametrize("text, about, said", [
    ("See pull request #12345.", None, "not in upstream_refs.toml"),
    ("Reported as llama.cpp pull request #29131.", None, "cited as a pull request, but it is an issue"),
    ("See issue #28642.", None, "cited as an issue, but it is a pull request"),
    ("Fixes #28642", None, "cited as closed by this commit"),
    # the q4_K 16x1 text once cited q4_0 8x8's pull request
    ("llama.cpp never runs the kernel (llama.cpp #28642 would change that)", ["repack_q4_K_16x1_vlen512"],
     "is about repack_q4_0_8x8_vlen512"),
])
def test_each_citation_defect_is_caught(text: str, about: list[str] | None, said: str) -> None:
    assert any(said in d for d in references.defects(text, about)), references.defects(text, about)


def test_a_right_citation_passes() -> None:
    assert references.defects("This is llama.cpp issue #29131. Fixes #29131", ["iq4_nl_odd_block_dropped"]) == []
    assert references.defects("Open pull request #28642 enables it.", ["repack_q4_0_8x8_vlen512"]) == []
