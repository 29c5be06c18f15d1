"""The fixes of the findings as pull-request-sized series, one per bug class (``rvvdiff series``).

``harness/data/series.toml`` groups the fixes (harness/data/fixes/) by bug class, in order.  For each
series:

- :func:`applies_in_order`: whether its patches apply in that order to a tree (``patch --dry-run`` on
  the tree with the earlier patches of the series applied), and if not which patch and why (the buggy
  code is gone, or moved);
- :func:`description`: the pull-request description (at most :data:`MAX_LINES` lines): what, why, the
  evidence per VLEN (the upstream program's verdicts on the tree and with the fix, from
  ``docs/upstream/<fix>/issue.md``, and the fix's cost per VLEN, fixed / replaced instructions under
  Spike, from ``docs/findings/<fix>.md``), the patches in order, the regression test for ggml's own
  suite (``harness/data/ggml-tests/*.patch`` naming the series' fixes) and the trees it applies to;
- :func:`combined_patch`: the series' diffs in order (``patch -p1 < file``);
- :func:`index`: the series in order with each fix's issue text.

The fixes come from the caller (``rvvdiff fixes``' catalogue, :class:`Fix` says what is read of them).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.core.config import DATA_DIR, PROJECT_ROOT, VLENS
from harness.core.errors import RvvdiffError
from harness.ggml import patches
from harness.ggml.source import GgmlSource
from harness.upstream.issue import paragraph


class Fix(Protocol):
    """What a series reads of a fix (harness/commands/fixes.py's ``Fix``, a :class:`harness.ggml.patches.Patch`)."""

    name: str
    patch: Path

    @property
    def title(self) -> str: ...

    @property
    def report(self) -> Path: ...

    @property
    def text(self) -> str: ...


SERIES_FILE = DATA_DIR / "series.toml"
TESTS_DIR = DATA_DIR / "ggml-tests"
MAX_LINES = 40


@dataclass
class Series:
    number: int
    name: str
    title: str
    fixes: list[Fix]
    test_note: str = ""

    @property
    def stem(self) -> str:
        return f"{self.number}-{self.name}"


def load(cat: Mapping[str, Fix], path: Path = SERIES_FILE) -> list[Series]:
    """The series of ``path``, their fixes looked up in ``cat``; every fix of ``cat`` must be in exactly one."""
    out = []
    for i, s in enumerate(tomllib.loads(path.read_text())["series"], 1):
        unknown = [f for f in s["fixes"] if f not in cat]
        if unknown:
            raise RvvdiffError(f"{path}: series {s['name']} names fixes that harness/data/fixes/ lacks: {unknown}")
        out.append(Series(i, s["name"], s["title"], [cat[f] for f in s["fixes"]], s.get("test_note", "")))
    listed = [f.name for s in out for f in s.fixes]
    missing = sorted(set(cat) - set(listed))
    if missing or len(listed) != len(set(listed)):
        raise RvvdiffError(f"{path}: every fix must be in exactly one series (missing: {missing})")
    return out


def applies_in_order(series: Series, tree: GgmlSource,
                     why_not: Callable[[Fix, GgmlSource], str] | None = None) -> tuple[bool, str]:
    """Whether the series' patches apply one after the other to ``tree`` (nothing of ``tree`` is written);
    ``why_not`` says why a patch that does not apply conflicts (default: patch's own words)."""
    done: list[Fix] = []
    for fx in series.fixes:
        base = patches.apply(done, tree, "fix", "+".join(f.name for f in done)) if done else tree
        state, said = patches.applies(fx, base)
        if state != "applies":
            why = ("the tree already has this change" if state == "applied"
                   else (why_not(fx, base) if why_not else "") or " ".join(said.split())[:200])
            return False, f"{fx.name} does not apply ({why})"
        done.append(fx)
    return True, "applies"


def ggml_test(series: Series) -> Path | None:
    """The regression-test patch for ggml's suite whose header ``fixes`` names a fix of the series."""
    names = {f.name for f in series.fixes}
    for p in sorted(TESTS_DIR.glob("*.patch")) if TESTS_DIR.is_dir() else []:
        m = re.search(r"^fixes:\s*(.+)$", p.read_text(), re.M)
        if m and names & {x.strip() for x in m.group(1).split(",")}:
            return p
    return None


def _upstream_row(fix: str) -> dict[str, dict[int, str]]:
    """tree -> VLEN -> the worst verdict over the builds and compilers, from docs/upstream/<fix>/issue.md's table."""
    f = PROJECT_ROOT / "docs" / "upstream" / fix / "issue.md"
    rows = [ln for ln in (f.read_text().splitlines() if f.is_file() else []) if ln.startswith("| ")]
    if not rows:
        return {}
    head = [c.strip() for c in rows[0].strip("|").split("|")]
    first = next(i for i, c in enumerate(head) if c.startswith("VLEN "))  # (tree, compiler, builds before them)
    vlens = [int(c.split()[-1]) for c in head[first:]]
    out: dict[str, dict[int, str]] = {}
    rank = {"wrong": 4, "trap": 4, "ok": 2, "runs": 2, "not run": 0, "not built": 0}  # the worst wins; a run beats none
    for ln in rows[1:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        tree = cells[0].split(" (")[0]  # "pinned (spike)": Spike's own rows of a trap finding
        for vl, v in zip(vlens, cells[first:]):
            cur = out.setdefault(tree, {}).get(vl)
            out[tree][vl] = v if cur is None or rank.get(v, 1) > rank.get(cur, 1) else cur
    return out


def _cost_row(fix: str) -> str:
    """The fix's 'fixed / replaced' row per VLEN from its long report's Cost section, or ''."""
    f = PROJECT_ROOT / "docs" / "findings" / f"{fix}.md"
    m = re.search(r"^\| fixed / replaced \|(.+)\|$", f.read_text(), re.M) if f.is_file() else None
    return m.group(1).strip() if m else ""


def _first_sentence(text: str) -> str:
    m = re.match(r"(.+?[.!?])(\s|$)", text)
    return m.group(1) if m else text


def description(series: Series, trees: dict[str, tuple[bool, str]]) -> str:
    """The pull-request description (markdown, at most :data:`MAX_LINES` lines)."""
    lines = [f"## {series.title}", "", "**What.**"]
    for fx in series.fixes:
        md = fx.report.read_text() if fx.report.is_file() else ""
        head = md.splitlines()[0].lstrip("# ").strip() if md else fx.title
        lines.append(f"- {head} (`{fx.name}.patch`).")
    why = [_first_sentence(paragraph(fx.report.read_text(), "Who hits it"))
           for fx in series.fixes if fx.report.is_file()]
    lines += ["", "**Why.** " + " ".join(dict.fromkeys(w for w in why if w)), ""]
    rows = [_upstream_row(fx.name) for fx in series.fixes]
    vlens = sorted({v for r in rows for t in r.values() for v in t} | set(VLENS))
    lines += ["**Evidence** (the public-API program of `docs/upstream/<fix>/issue.md`, QEMU 10 up to VLEN 1024 and Spike"
              " above: wrong / ok on the tree -> with the fix; cost = instructions of the fixed / replaced code under Spike,"
              " `rvvdiff fixes cost`):", "",
              "| fix | " + " | ".join(f"VLEN {v}" for v in vlens) + " | cost per VLEN (128 .. 4096) |",
              "|---|" + "---|" * (len(vlens) + 1)]
    for fx in series.fixes:
        up = _upstream_row(fx.name)
        cells = [f"{up['pinned'].get(v, '?')} -> {up.get('fixed', {}).get(v, '?')}" if "pinned" in up else "no public program"
                 for v in vlens]
        cost = _cost_row(fx.name).replace(" | ", " / ") or "not measured yet"
        lines.append(f"| `{fx.name}` | " + " | ".join(cells) + f" | {cost} |")
    test = ggml_test(series)
    lines += ["", "**Patches, in order:** " + ", ".join(f"`{fx.name}.patch`" for fx in series.fixes)
              + f" (combined: `{series.stem}.patch`).",
              "**Regression test for ggml's suite:** " + (f"`{test.relative_to(PROJECT_ROOT)}` (docs/ggml-tests.md)." if test
                                                        else (series.test_note or "none yet") + "."),
              "**Applies to:** " + "; ".join(f"{t}: {'yes' if ok else why}" for t, (ok, why) in trees.items()) + "."]
    return "\n".join(lines) + "\n"


def combined_patch(series: Series) -> str:
    out = [f"# {series.title}\n"]
    for fx in series.fixes:
        out.append(fx.text[fx.text.index("\n--- a/") + 1:])
    return "\n".join(out)


def index(all_series: list[Series], verdicts: dict[str, dict[str, tuple[bool, str]]]) -> str:
    """``<out>/README.md``: the series in order, each fix with its upstream issue text and what it shows."""
    lines = ["# The findings as pull-request series", "",
             "Written by `rvvdiff series` from harness/data/series.toml; each fix's issue text and public-API program",
             "by `rvvdiff report --fix NAME --upstream` (docs/upstream/<fix>/).", ""]
    for s in all_series:
        trees = "; ".join(f"{t}: {'applies' if ok else why}" for t, (ok, why) in verdicts[s.name].items())
        lines += [f"## {s.number}. {s.title}", "", f"[{s.stem}.md]({s.stem}.md), [{s.stem}.patch]({s.stem}.patch). "
                  f"Applies to {trees}.", ""]
        for fx in s.fixes:
            issue = PROJECT_ROOT / "docs" / "upstream" / fx.name / "issue.md"
            text = issue.read_text() if issue.is_file() else ""
            head = text.splitlines()[0].lstrip("# ") if text else "no issue text yet"
            kind = ("public-API program" if "```c" in text or "is attached" in text
                    else "no public program (says why)" if text else "")
            lines.append(f"- [{fx.name}](../{fx.name}/issue.md) ({len(text.splitlines())} lines, {kind}): {head}")
        lines.append("")
    return "\n".join(lines)


def write(series: Series, trees: dict[str, tuple[bool, str]], out: Path) -> int:
    """Write ``<out>/<stem>.md`` (:func:`description`) and ``<out>/<stem>.patch`` (:func:`combined_patch`);
    return the description's length in lines."""
    text = description(series, trees)
    (out / f"{series.stem}.md").write_text(text)
    (out / f"{series.stem}.patch").write_text(combined_patch(series))
    return len(text.splitlines())
