"""Every upstream issue text, rendered by the generator (harness/upstream/issue.py, direct.py) for every finding
with a fix, and every committed one (docs/upstream/<finding>/issue.md): no machine-local path, no sentence cut at an
abbreviation, numbers expected vs actual, what upstream has and whether the newest tree still has the bug.

The rendering needs no build: the verdicts are made up from each fix's header (its wrong VLENs and builds), the
rest (cause, impact, upstream paragraph, enabling patch, program) is what ``rvvdiff report --upstream`` writes.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from harness.core.config import ISA_BUILDS
from harness.core.matrix import CANNOT_MAKE, ISAS, Point, can_make
from harness.ggml import fix_catalogue, known, source
from harness.upstream import direct, paragraphs, program, public, runs, spacemit_direct, spacemit_ime, wording
from harness.upstream import issue as issue_text

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs/upstream"
FIXES = sorted(fix_catalogue.catalogue())


def _entry(fix: str) -> known.Known | None:
    return next((k for k in known.load() if k.fix == fix and not k.seen_in), None)


def _builds(fx) -> list[str]:
    """The ISA builds a fix's program runs in: its backend's (a SpacemiT fix's: the spacemit build; else ggml-cpu's)."""
    return [i for i in fx.cost_isas if ISAS[i].backend != "cpu"] or list(ISA_BUILDS)


def _verdicts(fx) -> list[runs.Verdict]:
    """Made-up verdicts in the shape a run gives: clang wrong at the fix's wrong VLENs in its builds, GCC 14 the
    same where it builds (not zvfbfwma, not spacemit), the fixed tree right."""
    said = fx.meta.get("wrong-vlens", "512").strip()
    wrong = {128, 256, 512, 1024} if said == "all" else {int(v) for v in said.split(",")}
    out = []
    for cc in ("clang", "gcc14"):
        for isa in _builds(fx):
            for vl in (128, 256, 512, 1024):
                if cc == "gcc14" and isa == "zvfbfwma":
                    out += [runs.Verdict(t, isa, vl, None, "not built: riscv64-linux-gnu-gcc-14: error: extension "
                                         "'zvfbfwma' unsupported", "qemu", cc) for t in ("pinned", "fixed")]
                    continue
                if not can_make(cc, isa):
                    out += [runs.Verdict(t, isa, vl, None, f"not built: {CANNOT_MAKE[(cc, isa)]}", "qemu", cc)
                            for t in ("pinned", "fixed")]
                    continue
                out.append(runs.Verdict("pinned", isa, vl, vl in wrong and isa in fx.cost_isas,
                                        f"C[0] = 0, expected 32 (bound 0)\nVLEN {vl}: 1 of 1 wrong", "qemu", cc))
                out.append(runs.Verdict("fixed", isa, vl, False, f"VLEN {vl}: 0 of 1 wrong", "qemu", cc))
    return out


def render(fix: str) -> str:
    """The issue text of ``fix`` as the generator writes it (the public form the committed text has)."""
    fx = fix_catalogue.catalogue()[fix]
    entry = _entry(fix)
    md = fx.report.read_text() if fx.report.exists() else ""
    pinned = source.pinned()
    enable = DOCS / fix / "enable.patch"
    if fix in spacemit_ime.FIXES:  # the IME1 GEMM: replays under Spike, the committed program for a board
        said = {"pinned": "C[0] = 0, expected 1 (bound 0)\nVLEN 256: 1 of 1 wrong", "fixed": "VLEN 256: 0 of 1 wrong"}
        verdicts = [runs.Verdict(t, "spacemit", 256, t == "pinned", f"weights in {spacemit_ime.BUFT}\n{said[t]}", "spike")
                    for t in said]
        return spacemit_ime.text(fix, {"label": pinned.label, "commit": pinned.commit}, verdicts, entry,
                                 (DOCS / fix / "repro.c").read_text())
    if fix in spacemit_direct.PROGRAMS:  # a program that calls SpacemiT's function directly, its committed one
        prog = DOCS / fix / "repro.cpp"
        src = prog.read_text() if prog.is_file() else "int main() { return 1; }\n"
        return direct.direct_issue(fix, {"label": pinned.label, "commit": pinned.commit}, _verdicts(fx), entry,
                                   spacemit_direct.why(fix), src)
    if fix in direct.PROGRAMS or fix in direct.BY_TEST:
        verdicts = [runs.Verdict(t, "zvfh", vl, t == "pinned", "s = nan nan, expected -30 -30" if t == "pinned" else
                                 "s = -30 -30, expected -30 -30", "qemu", cc, True)
                    for cc in ("clang", "gcc14") for t in ("pinned", "fixed") for vl in (128, 256)]
        return direct.direct_issue(fix, {"label": pinned.label, "commit": pinned.commit}, verdicts, entry,
                                   "no code of this tree calls it")
    pub = (public.exact_repack("q4_0" if "q4_0" in fix else "q4_K") if enable.is_file() else
           types.SimpleNamespace(what="one row times one row, k = 32"))
    pub.function = " / ".join(entry.functions or ("ggml_f",))
    src = program.program(pub, pub.function) if enable.is_file() else (DOCS / fix / "repro.c").read_text()
    case = types.SimpleNamespace(data={"ggml": {"label": pinned.label, "commit": pinned.commit},
                                       "comparison": {"name": "C"}})
    verdicts = _verdicts(fx)
    stock_runs = [v for v in verdicts if v.isa == "zvfh" and v.vlen == 512 and v.compiler == "gcc14"]
    at = Point(512, _builds(fx)[0] if _builds(fx) != list(ISA_BUILDS) else "zvfh")
    return issue_text.issue(case, pub, src, verdicts, recorded=at, tree=pinned, stock_runs=stock_runs,
                            cause=paragraphs.paragraph(md, "Root cause") or paragraphs.reason_of(entry),
                            impact=paragraphs.paragraph(md, "Who hits it"), fix=fix,
                            enable=enable.read_text() if enable.is_file() else "")


def test_defects_name_local_paths_and_cut_sentences_and_pass_clean_prose() -> None:
    planted = ("**What goes wrong.** The sum runs over K = `ne[0]` (e.g. Nobody on this tree calls it.\n\n"
               "Built from /tmp/trees/ggml-2026-08-21 and ~/.cache/rvvdiff/src.\n\nA list, i.e.\n")
    said = wording.defects(planted)
    assert any("'/tmp/'" in d for d in said) and any("'~/.cache'" in d for d in said)
    assert sum("sentence cut at 'e.g.'" in d for d in said) == 1 and any("'i.e.'" in d for d in said), said
    clean = ("Built with the compiler of upstream's CI (e.g. GCC 14) and with clang (i.e. Debian's clang-22).\n\n"
             "```sh\ncmake -S llama.cpp -B rv\n```\n")
    assert wording.defects(clean) == []


@pytest.mark.parametrize("fix", FIXES)
def test_every_generated_text_is_sendable(fix: str) -> None:
    """Rendered from the generator: no local path, no cut sentence, numbers, the upstream paragraph with the
    newest tree, at most MAX_LINES lines."""
    text = render(fix)
    assert wording.defects(text) == [], text
    assert len(text.splitlines()) <= issue_text.MAX_LINES, len(text.splitlines())
    ours = _builds(fix_catalogue.catalogue()[fix]) == list(ISA_BUILDS)  # (NEWEST compared ggml-cpu's RVV files)
    assert "**Upstream.**" in text and (paragraphs.NEWEST in text) == ours, text
    assert "expected" in text and ("got" in text or "wrong" in text), text
    if (DOCS / fix / "enable.patch").is_file():
        assert "**Reaching it.**" in text and "enable.patch" in text


def test_a_planted_local_path_or_cut_in_the_generator_fails_the_render(monkeypatch: pytest.MonkeyPatch) -> None:
    fix = "iq4_nl_odd_block_dropped"
    assert wording.defects(render(fix)) == []
    monkeypatch.setitem(paragraphs.UPSTREAM, fix, "Seen in the tree at /tmp/trees/ggml-2026-08-21.")
    assert any("machine-local path" in d for d in wording.defects(render(fix)))
    monkeypatch.setitem(paragraphs.UPSTREAM, fix, "It reads the tail (e.g. Nobody on this tree.")
    assert any("sentence cut" in d for d in wording.defects(render(fix)))
    # a text without public program gives a stock reproducer, not rvvdiff's own command
    assert "pytest" not in render("vec_dot_f16_unroll_tail_agnostic")


@pytest.mark.parametrize("fix", FIXES)
def test_every_committed_text_is_sendable(fix: str) -> None:
    path = DOCS / fix / "issue.md"
    assert path.is_file(), f"run: rvvdiff report --fix {fix} --upstream --out docs/upstream/{fix}"
    text = path.read_text()
    assert wording.defects(text) == [], f"{path}: regenerate it (rvvdiff report --upstream --rerender)"
    assert "**Upstream.**" in text, f"{path}: regenerate it"
