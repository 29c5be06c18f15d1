"""What no text for upstream may say: the checks every issue text, series page and commit message passes.

:func:`defects` is the one check of every text: a machine-local path anywhere (code included), a sentence cut at an
abbreviation, a doubled parenthesis, a program announced with a colon and then attached instead, rvvdiff's own
commands (a pytest id, ``rvvdiff report``) given as the way to reproduce, ctest run through a runner patch that no
series carries.  :func:`commit_defects` adds what a commit message must not hold: rvvdiff named as the measuring
tool, rvvdiff paths, "pinned tree", Spike instruction-count ratios, a test run named without its command.
"""

from __future__ import annotations

import re
from functools import cache

from harness.ggml import fix_catalogue

#: Paths of one machine that must never reach an upstream text (a checkout, a cache, a temporary tree).
LOCAL_PATH = re.compile(r"(?<![\w.])(?:/tmp/|/root/|/home/|/work/|/check/|~/\.cache)")
#: "e.g." / "i.e." and the capitalised word after it.
_ABBREV = re.compile(r"\b(?:e\.g|i\.e)\.(?:\s+([A-Z][a-z]+)\b|\s*$)", re.M)
#: Reproductions that need a checkout of rvvdiff, and the ctest set-up of a patch no series carries.
_INSIDE_THE_TOOL = re.compile(r"pytest '?cases/|rvvdiff report --upstream|ctest-emulator|CMAKE_CROSSCOMPILING_EMULATOR")
#: A commit message's words that belong to the series page or to rvvdiff, not to ggml's history.
_NOT_IN_COMMITS = re.compile(r"Measured with rvvdiff|\bpinned tree\b|\b(?:docs|harness|cases)/\S+|"
                             r"::test_\w+\[|instructions retired|fixed / the replaced|under Spike, per VLEN|"
                             r"run: test-quantize-fns|^Expected: ", re.M)


@cache
def _finding_ids() -> re.Pattern[str]:
    """rvvdiff's own names of its findings (the fixes' names), as whole words."""
    names = sorted(fix_catalogue.catalogue(), key=len, reverse=True)
    return re.compile(r"(?<![\w/.])(?:" + "|".join(map(re.escape, names)) + r")(?![\w])")


def _prose(text: str) -> list[str]:
    """The paragraphs of a markdown text outside fenced code."""
    out, cur, fence = [], [], False
    for ln in text.splitlines():
        if ln.startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        if ln.strip():
            cur.append(ln)
        elif cur:
            out.append(" ".join(cur))
            cur = []
    return out + [" ".join(cur)] * bool(cur)


def defects(text: str) -> list[str]:
    """What makes a text for upstream unsendable (the module's list)."""
    out = [f"machine-local path {m.group(0)!r} in: {ln.strip()[:120]}" for ln in text.splitlines()
           for m in LOCAL_PATH.finditer(ln)]
    out += [f"reproduces only with rvvdiff: {ln.strip()[:120]}" for ln in text.splitlines() if _INSIDE_THE_TOOL.search(ln)]
    out += [f"rvvdiff's own finding id {m.group(0)!r} (name the function, the commit or the bug instead) in: "
            f"{ln.strip()[:120]}" for ln in text.splitlines() for m in _finding_ids().finditer(ln)]
    lines = text.splitlines()
    out += [f"a program announced with a colon, then attached: {a.strip()[:80]!r} / {b.strip()[:80]!r}"
            for a, b in zip(lines, lines[1:]) if a.rstrip().endswith(":") and b.rstrip().endswith("is attached.")]
    for para in _prose(text):
        for m in _ABBREV.finditer(para):
            unbalanced = para.count("(") != para.count(")")
            if m.group(1) is None or unbalanced:
                out.append(f"sentence cut at {m.group(0).split()[0]!r}: ...{para[max(0, m.start() - 60):m.end() + 30]}")
        bare = re.sub(r"`[^`]*`", "", para)
        out += [f"doubled parenthesis: ...{bare[max(0, m.start() - 60):m.end() + 5]}"
                for m in re.finditer(r"\([^()]*\([^()]*\)\)", bare)]
    return out


def commit_defects(message: str) -> list[str]:
    """What a commit message for ggml must not hold, beyond :func:`defects`; a phrase wrapped across lines too."""
    flat = re.sub(r"[ \t]*\n[ \t]*", " ", message)
    found = dict.fromkeys(m.group(0) for text in (message, flat) for m in _NOT_IN_COMMITS.finditer(text))
    odd = dict.fromkeys(c for c in message if not c.isascii())
    return [f"not for a commit message: {w!r}" for w in found] + [f"not ASCII: {c!r}" for c in odd]
