"""Every text for ggml's maintainers, rendered by its generator now (issue texts from the runs kept beside them,
series pages, commit messages): each class of defect a maintainer would stop at is a failure here.

1. metadata: the commits' author is git's own identity (an error that says what to set when there is none), never a
   made-up one; the series that fixes llama.cpp #29131 says so in the commit that completes the fix;
2. commit messages: no rvvdiff evidence, paths, pytest ids, "pinned tree" or Spike instruction ratios; the test
   commit gives the direct ``qemu-riscv64 ... build/bin/test-quantize-fns`` command, with the build options and
   compilers of the recorded runs; each series page gives its own commands, none through ctest;
3. wording: no doubled parenthesis, no colon before an attachment, no commands for a build a compiler cannot make, no
   shared upstream paragraph, the measuring compiler named, titles exactly the data;
4. every issue text reproduces without rvvdiff;
5. every text says what docs/model-effects.json says now (a re-render writes it: the committed text is the
   re-render's).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from harness.core.config import ISA_BUILDS
from harness.ggml import fix_catalogue
from harness.jobs import issue_runs
from harness.upstream import (
    fix_series,
    formatpatch,
    paragraphs,
    record,
    references,
    series_pages,
    spacemit_ime,
    testcmd,
    wording,
)

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "upstream"
ISSUES = sorted(d.name for d in DOCS.iterdir() if (d / "issue.md").is_file())


@pytest.fixture(scope="module")
def every() -> list[fix_series.Series]:
    return fix_series.load(fix_catalogue.catalogue())


def _rendered_issue(name: str) -> str:
    """The issue text ``rvvdiff report --upstream --rerender`` writes now from ``runs.json`` (into a copy)."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / name
        shutil.copytree(DOCS / name, out)
        assert issue_runs.rerender(out) in (0, 1)
        return (out / "issue.md").read_text()


@pytest.mark.parametrize("name", ISSUES)
def test_each_committed_issue_text_is_its_rerender(name: str) -> None:
    """The runs are kept beside the text, and the text is what the generator writes from them now: with today's
    wording and today's docs/model-effects.json (after that file changes, `rvvdiff report --upstream --rerender`)."""
    assert (DOCS / name / record.RECORD).is_file(), f"{name}: no {record.RECORD}"
    assert _rendered_issue(name) == (DOCS / name / "issue.md").read_text(), \
        f"docs/upstream/{name}/issue.md: run `rvvdiff report --upstream --rerender`"


@pytest.mark.parametrize("name", ISSUES)
def test_each_issue_text_is_sendable_and_reproduces_without_rvvdiff(name: str) -> None:
    text = (DOCS / name / "issue.md").read_text()
    assert wording.defects(text) == []
    # a stock reproducer: a program or ggml's own test, built by a stock compiler and run under stock qemu-riscv64
    # (with the build's environment first, the spacemit build's: ``env SPACEMIT_CORE_ARCH=... qemu-riscv64``); an
    # IME1 finding's program runs on a K1 board (no QEMU emulates IME), and its text says what was emulated instead
    if name in spacemit_ime.FIXES:
        assert "\n# on the board, as a user of it:\n./repro\n" in text and "**What was emulated.**" in text, name
    else:
        assert re.search(r"^(env (\w+=\S+ )+)?qemu-riscv64 -cpu rv64,v=true,vlen=\d+", text, re.M), name
    assert ("repro.c" in text or "repro.cpp" in text or "build/bin/test-quantize-fns" in text), name
    assert "rvvdiff report" not in text and "pytest" not in text
    # the model paragraph is exactly docs/model-effects.json's, or absent when it has no row
    said = paragraphs.model_lines(name)
    assert (said[-1] in text) if said else "**On a real model.**" not in text


def test_the_issue_texts_say_what_only_their_finding_says() -> None:
    texts = {n: (DOCS / n / "issue.md").read_text() for n in ISSUES}
    ups = [paragraphs_of(t, "Upstream") for t in texts.values()]
    assert len(set(ups)) == len(ups), "two issue texts share their Upstream paragraph"
    for n, t in texts.items():
        # the table's clang is zig's; the commands' clang is Debian's clang-22: the text says which measured
        if "| clang |" in t and "`repro.c`" in t:
            assert "zig's clang" in t and "clang-22" in t, n
        # no commands for a build the compiler cannot make (GCC 14 and zvfbfwma)
        for block in re.findall(r"```sh\n(.*?)```", t, re.S):
            assert not ("riscv64-linux-gnu-gcc-14" in block and "-DGGML_RV_ZVFBFWMA=ON" in block), n


def paragraphs_of(text: str, label: str) -> str:
    m = re.search(rf"^\*\*{label}\.\*\* (.+)$", text, re.M)
    return m.group(1) if m else ""


def test_titles_say_exactly_what_the_data_shows() -> None:
    title = {n: (DOCS / n / "issue.md").read_text().splitlines()[0] for n in ISSUES}
    q2k = title["repack_q2_K_16x1_generic_gemm_layout"]
    assert "scalar code" in q2k and "RVV" not in q2k and "clang and GCC 14" in q2k and "VLEN 128, 256" in q2k
    assert "every VLEN (128-1024)" in title["vec_dot_f16_unroll_tail_agnostic"]
    assert all(f in title["k_quants_vl512_agnostic_accumulator"] for f in ("q3_K", "q6_K", "iq1_m"))


def test_every_commit_message_is_for_ggml(every: list[fix_series.Series]) -> None:
    runs = json.loads(testcmd.TEST_RUNS.read_text())
    for s in every:
        msgs = [m for _, m in fix_series.commits(s)]
        for m in msgs:
            assert wording.defects(m) == [] and wording.commit_defects(m) == [], (s.stem, m)
        if not s.test_patch():  # no regression test (SpacemiT's series): every commit is a fix, none closes an issue
            assert not s.closes and not any(m.startswith("tests: ") for m in msgs), s.stem
            continue
        test = msgs[0]
        got = testcmd.read_runs(runs[s.name])
        for line in testcmd.run_lines(got):  # the recorded builds, tail/mask policy and first failing VLEN
            assert f"  {line}" in test.splitlines(), (s.stem, line)
        assert any(ln.startswith("  qemu-riscv64 -cpu rv64,") for ln in test.splitlines()), s.stem  # even if it passes
        assert all(f"-D{k}={v}" in test for r in testcmd.failing(got) for k, v in
                   ISA_BUILDS[r.isa].cmake.items()), s.stem
        assert all(r.compiler in test for r in testcmd.failing(got)), s.stem
        closes = [m for m in msgs if "Fixes #" in m]
        assert closes == (msgs[1:] if s.closes else []), s.stem  # every fix commit of the issue's series
    first = next(s for s in every if s.name == "odd-block-counts")
    assert first.closes == 29131 and all(m.rstrip().endswith("Fixes #29131") for _, m in fix_series.commits(first)[1:])
    bf16 = fix_series.commits(next(s for s in every if s.name == "tail-agnostic-accumulators"))[0][1]
    assert "-DGGML_RV_ZVFBFWMA=ON" in bf16 and "rvv_ta_all_1s=true,rvv_ma_all_1s=true" in bf16


def test_the_written_commits_carry_the_generators_messages_and_a_real_author(every: list[fix_series.Series]) -> None:
    for s in every:
        files = sorted((ROOT / "docs/upstream/series" / s.stem).glob("*.patch"))
        for f, (_, msg) in zip(files, fix_series.commits(s)):
            head = f.read_text().split("\ndiff --git ")[0]
            assert msg.rstrip().splitlines()[-1] in head, f.name
            assert "rvvdiff@localhost" not in head and "From: rvvdiff" not in head
            assert wording.commit_defects(head) == [], f.name


def test_each_series_page_gives_its_own_commands(every: list[fix_series.Series]) -> None:
    runs = json.loads(testcmd.TEST_RUNS.read_text())
    for s in every:
        page = (ROOT / "docs/upstream/series" / f"{s.stem}.md").read_text()
        assert wording.defects(page) == [], s.stem
        assert "ctest" not in page and "CROSSCOMPILING_EMULATOR" not in page, s.stem
        for line in testcmd.run_lines(testcmd.read_runs(runs.get(s.name, []))):
            assert line in page.splitlines(), (s.stem, line)
        assert "**Speed (an estimate).**" in page
        said = series_pages.model_paragraph(s)
        assert all(ln in page for ln in said if ln), s.stem
    assert "vlen=128" in (ROOT / "docs/upstream/series/1-odd-block-counts.md").read_text()
    six = (ROOT / "docs/upstream/series/6-generic-gemm-layout.md").read_text()  # its test reaches no fixed code:
    assert "vlen=256" in six and "passes before and after the fixes" in six   # the VLEN where the layout is picked
    four = (ROOT / "docs/upstream/series/4-tail-agnostic-accumulators.md").read_text()
    assert "specification-conformance fix" in four and "-DGGML_RV_ZVFBFWMA=ON" in four and "rvv_ta_all_1s=true" in four


def test_rvvdiff_series_refuses_to_write_without_an_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """No user.name / user.email and no --author: the command stops before writing anything, with one line that says
    which git config commands to run."""
    from harness.commands import cli

    for k in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["series", "--out", str(tmp_path / "out")]) == 2
    said = capsys.readouterr().err.strip()
    assert len(said.splitlines()) == 1 and "git config --global user.name" in said, said
    assert not (tmp_path / "out").exists()


def test_the_author_is_gits_own_identity_and_none_is_a_clear_error(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for k in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    with pytest.raises(formatpatch.NoIdentity, match="git config --global user.name") as refused:
        formatpatch.identity(repo)
    assert "\n" not in str(refused.value) and "user.email" in str(refused.value)
    subprocess.run(["git", "-C", str(repo), "config", "user.name", "Ada Lovelace"], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.email", "ada@example.org"], check=True)
    assert formatpatch.identity(repo) == "Ada Lovelace <ada@example.org>"
    monkeypatch.setenv("GIT_AUTHOR_NAME", "A U Thor")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "author@example.com")
    assert formatpatch.identity(repo) == "A U Thor <author@example.com>"


@pytest.mark.parametrize("planted, check", [
    ("Run here (QEMU 10.0.2 (VLEN 2048, 4096 under Spike)), the program.", "doubled parenthesis"),
    ("Tree: t. The program (ggml's public API only):\nThe program, `repro.c` (34 lines), is attached.", "attached"),
    ("```sh\npytest 'cases/test_vec_ops.py::test_vec_op[dot_f16_unroll-vlen256-zvfh-stress]'\n```", "rvvdiff"),
    ("Needs `rvvdiff report --upstream --spike`.", "rvvdiff"),
    ("Configure with `-DCMAKE_CROSSCOMPILING_EMULATOR=qemu-riscv64` and run ctest.", "rvvdiff"),
])
def test_each_wording_defect_is_caught(planted: str, check: str) -> None:
    assert any(check in d for d in wording.defects(planted)), planted


@pytest.mark.parametrize("planted", [
    "A separate bug from the misaligned load of the same function (`iq2_xxs_vl512_misaligned_load`).",
    "(fixed: with the patch `vec_dot_bf16_tail_agnostic`)",
    "See k_quants_vl512_agnostic_accumulator for the q3_K part.",
])
def test_an_internal_finding_id_is_caught_in_any_text(planted: str) -> None:
    """rvvdiff's names of its findings mean nothing upstream: an issue text, a page or a commit that holds one fails."""
    assert any("finding id" in d for d in wording.defects(planted)), planted
    assert not any("finding id" in d for d in wording.defects("docs/upstream/iq4_nl_odd_block_dropped/issue.md: "
                                                              "ggml_vec_dot_iq4_nl_q8_0, iq4_nl_odd_blocks"))


def test_no_text_for_upstream_names_a_finding_by_its_id(every: list[fix_series.Series]) -> None:
    series = ROOT / "docs/upstream/series"
    texts = {n: (DOCS / n / "issue.md").read_text() for n in ISSUES}
    texts |= {f"{s.stem}.md": (series / f"{s.stem}.md").read_text() for s in every}
    texts |= {f.name: f.read_text().split("\ndiff --git ")[0] for s in every for f in (series / s.stem).glob("*.patch")}
    texts |= {f"{s.stem} commit {i}": m for s in every for i, (_, m) in enumerate(fix_series.commits(s), 1)}
    bad = {n: d for n, t in texts.items() if (d := [x for x in wording.defects(t) if "finding id" in x])}
    assert not bad


@pytest.mark.parametrize("planted", [
    "Every 16-element sum wraps by \u00b165536.",
    "K \u2261 32 mod 64",
    "Measured with rvvdiff (a public-API program per finding) under qemu-riscv64.",
    "Expected: pinned tree: \"q4_K dot product error: FAILED\".",
    "Cost: instructions retired by the fixed / the replaced code under Spike, per VLEN 128 to 4096: 1.04.",
    "Test: tests/test-quantize-fns.cpp; run: test-quantize-fns.",
    "Test: tests/test-quantize-fns.cpp (CPU backend only, public API); run:\ntest-quantize-fns, zvfh build.",
    "See harness/data/fixes/q4_K_int16_subblock_sum.md.",
    "Reproducer: cases/test_quant_dot.py::test_vec_dot_finding[q4_K-vlen256-zvfh].",
])
def test_each_commit_message_defect_is_caught(planted: str) -> None:
    assert wording.commit_defects(planted), planted


PROPOSALS = DOCS / "proposals"


def test_every_proposal_passes_the_checks_of_a_text_for_upstream() -> None:
    """A finding that is a proposal, not a fix (docs/upstream/proposals/: the dispatch build's zvfh variant), has no
    patch, test or series, but its text is checked as every text for upstream is: no machine path, no finding id, no
    reproduction only through rvvdiff, every issue or pull request it cites read in the tracker, and it opens by saying
    that it is material for a person to check and send under upstream's AI usage policy."""
    pages = sorted(PROPOSALS.glob("*.md"))
    assert pages, "docs/upstream/proposals/ holds the dispatch build's proposal"
    for p in pages:
        text = p.read_text()
        assert wording.defects(text) == [] and references.defects(text) == [], p.name
        first = text.splitlines()[0]
        assert first.startswith("> Material for a person to check") and "AI usage policy" in first, p.name


def test_the_proposal_check_sees_a_defect() -> None:
    planted = "> Material for a person to check.\n\nMeasured in /root/.cache/rvvdiff/cost; see #12345."
    assert wording.defects(planted) and references.defects(planted)
