"""The fixes of the findings as pull-request-sized series, one per bug class (``rvvdiff series``).

``harness/data/series.toml`` groups the fixes (harness/data/fixes/) by bug class, in order.  For each
series:

- :func:`applies_in_order`: whether its patches apply in that order to a tree (``patch --dry-run`` on
  the tree with the earlier patches of the series applied), and if not which patch and why (the buggy
  code is gone, or moved);
- :func:`commits`: the series as commits (the regression test for ggml's suite first, then one per fix), each
  with its llama.cpp-style message (:func:`test_message`, :func:`fix_message`); :func:`write_commits` makes them
  on a scratch repository of the tree and writes ``git format-patch`` output (:mod:`harness.upstream.formatpatch`);
- :func:`text_defects`: what no rendered text may hold (a machine-local path, a sentence cut short);
- :func:`stack`: the series a series builds on (``needs`` in series.toml, transitively), applied before it.

Its pull-request description and the index are :mod:`harness.upstream.series_pages`'.

The fixes come from the caller (``rvvdiff fixes``' catalogue, :class:`Fix` says what is read of them).
"""

from __future__ import annotations

import re
import shlex
import textwrap
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from harness.core.config import DATA_DIR, PROJECT_ROOT
from harness.core.errors import RvvdiffError
from harness.ggml import patches
from harness.ggml.source import GgmlSource
from harness.upstream import formatpatch, testcmd
from harness.upstream.paragraphs import paragraph


class Fix(Protocol):
    """What a series reads of a fix (harness/ggml/fix_catalogue.py's ``Fix``, a :class:`harness.ggml.patches.Patch`)."""

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
MAX_SUBJECT = 72


@dataclass
class Series:
    number: int
    name: str
    title: str
    fixes: list[Fix]
    test_note: str = ""
    #: harness/data/ggml-tests/<test>.patch, the series' regression test ('' : found by its ``fixes:`` header)
    test: str = ""
    test_subject: str = ""
    #: fix name -> commit subject
    subjects: dict[str, str] = field(default_factory=dict)
    #: how the series relates to llama.cpp's open issues and pull requests
    upstream: str = ""
    #: why the regression test reaches ggml-cpu's internals, where it cannot go through public API
    test_interface: str = ""
    #: what the regression test cannot see, and how its runs are set up for what it can
    test_scope: str = ""
    #: other series' fixes applied on both sides of a stress run of the test (before and after this series'
    #: fixes), where that stress also shows their finding in the test's unmodified checks
    stress_base: list[str] = field(default_factory=list)
    #: the llama.cpp issue the series fixes (each of its fix commits says ``Fixes #N``), 0 when none
    closes: int = 0
    #: fix name -> why the regression test cannot show its finding, and how it was checked (its commit message)
    unreached: dict[str, str] = field(default_factory=dict)
    #: for a fix of a departure from the RVV specification that no known core shows: says so (the description)
    conformance: str = ""
    #: the earlier series this one builds on (their commits come first: its regression test extends theirs)
    needs: list[str] = field(default_factory=list)

    @property
    def stem(self) -> str:
        return f"{self.number}-{self.name}"

    def test_patch(self) -> Path | None:
        return TESTS_DIR / f"{self.test}.patch" if self.test else ggml_test(self)


def load(cat: Mapping[str, Fix], path: Path = SERIES_FILE) -> list[Series]:
    """The series of ``path``, their fixes looked up in ``cat``; every fix of ``cat`` must be in exactly one."""
    out = []
    for i, s in enumerate(tomllib.loads(path.read_text())["series"], 1):
        unknown = [f for f in s["fixes"] if f not in cat]
        if unknown:
            raise RvvdiffError(f"{path}: series {s['name']} names fixes that harness/data/fixes/ lacks: {unknown}")
        subjects = s.get("subjects", {})
        bad = [f for f in s["fixes"] if not subjects.get(f)] + [
            x for x in [*subjects.values(), s.get("test_subject", "")] if len(x) > MAX_SUBJECT]
        if bad:
            raise RvvdiffError(f"{path}: series {s['name']}: every fix needs a commit subject of at most "
                               f"{MAX_SUBJECT} characters under [series.subjects] ({bad})")
        if s.get("test") and not (TESTS_DIR / f"{s['test']}.patch").is_file():
            raise RvvdiffError(f"{path}: series {s['name']}: test {s['test']!r} has no {TESTS_DIR.name}/{s['test']}.patch")
        base = s.get("stress_base", [])
        if any(f not in cat or f in s["fixes"] for f in base):
            raise RvvdiffError(f"{path}: series {s['name']}: stress_base names fixes of no other series: {base}")
        needs = s.get("needs", [])
        if any(n not in {x.name for x in out} for n in needs):
            raise RvvdiffError(f"{path}: series {s['name']}: needs names no earlier series: {needs}")
        out.append(Series(i, s["name"], s["title"], [cat[f] for f in s["fixes"]], s.get("test_note", ""),
                          s.get("test", ""), s.get("test_subject", ""), dict(subjects), s.get("upstream", ""),
                          s.get("test_interface", ""), s.get("test_scope", ""), list(base), s.get("closes", 0),
                          dict(s.get("unreached", {})), s.get("conformance", ""), list(needs)))
    listed = [f.name for s in out for f in s.fixes]
    missing = sorted(set(cat) - set(listed))
    if missing or len(listed) != len(set(listed)):
        raise RvvdiffError(f"{path}: every fix must be in exactly one series (missing: {missing})")
    return out


def stack(series: Series, every: list[Series]) -> list[Series]:
    """The series ``series`` builds on, transitively, in the order of ``every`` (series.toml's): what "the series
    alone" is applied on top of (it alone needs nothing else); [] for a series that needs none."""
    by = {s.name: s for s in every}
    want: set[str] = set()
    todo = list(series.needs)
    while todo:
        n = todo.pop()
        if n not in want:
            want.add(n)
            todo += by[n].needs
    return [s for s in every if s.name in want]


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


def upstream_row(fix: str) -> dict[str, dict[int, str]]:
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


#: Abbreviations a sentence does not end at.
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "resp.", "approx.", "incl.", "no.")


def first_sentence(text: str) -> str:
    """The first sentence of ``text``: up to a '.', '!' or '?' followed by a space or the end, not inside
    parentheses or a code span, and not the dot of an abbreviation (:data:`_ABBREVIATIONS`); else all of it."""
    for m in re.finditer(r"[.!?](?=\s|$)", text):
        head = text[:m.end()]
        word = head.rsplit(None, 1)[-1].lstrip("(`*").lower()
        if word in _ABBREVIATIONS or head.count("(") > head.count(")") or head.count("`") % 2:
            continue
        return head
    return text


#: A path on one machine: a home, the temporary directory, a cache, a work tree.
LOCAL_PATH = re.compile(r"(?<![\w.:/])(?:/tmp/|/home/|/root/|/work/|/Users/|/var/folders/|~/|\$HOME/|"
                        r"\.cache/rvvdiff)")


def text_defects(text: str) -> list[str]:
    """What a text for upstream must not hold: a machine-local path, or a sentence cut short (a paragraph, outside
    code blocks, tables, lists and diffs, whose parentheses or code spans do not close, or that ends at an
    abbreviation)."""
    out = [f"local path: {m.group(0)!r} in {ln.strip()[:80]!r}"
           for ln in text.splitlines() for m in LOCAL_PATH.finditer(ln)]
    fenced, pars, cur = False, [], []
    for ln in text.splitlines() + [""]:
        if ln.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or not ln.strip() or ln.startswith(("|", "```")):
            pars += [" ".join(cur)] if cur else []
            cur = []
        else:
            cur.append(ln.strip())
    for par in pars:
        bare = re.sub(r"`[^`]*`", "", par)
        if bare.count("(") != bare.count(")") or par.count("`") % 2 or \
                par.rstrip().lower().endswith(tuple(f" {a}" for a in _ABBREVIATIONS) + tuple(f"({a}" for a in _ABBREVIATIONS)):
            out.append(f"cut sentence: {par!r}")
    return out


# ------------------------------------------------------------------ the commits


def header(patch: Path) -> dict[str, str]:
    """An rvvdiff patch file's header (the lines before the diff): ``key: value`` with indented continuations;
    the first line under ``title``."""
    lines = patch.read_text().split("\n--- a/")[0].splitlines()
    out: dict[str, str] = {"title": lines[0].split(":", 1)[1].strip() if lines else ""}
    key = ""
    for ln in lines[1:]:
        if ln.startswith(" ") and key:
            out[key] += " " + ln.strip()
        elif ":" in ln:
            key, _, val = ln.partition(":")
            key = key.strip()
            out[key] = val.strip()
    return out


def _wrap(par: str) -> str:
    """``par`` filled to 72 columns, never breaking inside a code span."""
    glued = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\0"), " ".join(par.split()))
    return textwrap.fill(glued, 72, break_long_words=False, break_on_hyphens=False).replace("\0", " ")


def local_refs(text: str) -> str:
    """``text`` without its references to this project's files (upstream has none of them)."""
    text = re.sub(r"\s*\((?:see below|[^()]*?\b(?:docs|harness|cases|tests)/[\w./<>-]+[^()]*)\)", "", text)
    return re.sub(r"`?\b(?:docs|harness|cases)/[\w./<>-]+`?", "rvvdiff", text)


def _evidence_rows(fix: str) -> list[str]:
    """docs/upstream/<fix>/issue.md's verdict table as plain lines, one per tree x compiler x builds."""
    f = PROJECT_ROOT / "docs" / "upstream" / fix / "issue.md"
    rows = [ln for ln in (f.read_text().splitlines() if f.is_file() else []) if ln.startswith("| ")]
    if not rows:
        return []
    head = [c.strip() for c in rows[0].strip("|").split("|")]
    out = []
    for ln in rows[1:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if len(cells) != len(head) or set(cells) <= {"---", ""}:
            continue
        if all(c in ("not built", "not run") for h, c in zip(head, cells) if h.startswith("VLEN ")):
            continue
        lead = [c for h, c in zip(head, cells) if not h.startswith("VLEN ")]
        verdicts = [f"{h.split()[-1]} {c}" for h, c in zip(head, cells) if h.startswith("VLEN ")]
        out.append(f"  {', '.join(lead)}: " + ", ".join(verdicts))
    return out


def recorded_runs(series: Series) -> list[str]:
    """The recorded lines of the series' regression test runs (harness/upstream/testcmd.py's ``TEST_RUNS``), [] when none."""
    import json

    return json.loads(testcmd.TEST_RUNS.read_text()).get(series.name, []) if testcmd.TEST_RUNS.is_file() else []


def subjects(path: Path = SERIES_FILE) -> dict[str, str]:
    """Each fix's commit subject, quoted (how a text for upstream names another series' fix)."""
    return {f: f'"{subj}"' for s in tomllib.loads(path.read_text())["series"]
            for f, subj in s.get("subjects", {}).items()}


def _code(lines: list[str]) -> list[str]:
    """Shell lines indented as a commit message's code block."""
    return [f"  {ln}" for ln in lines]


#: Non-ASCII characters of the fix reports and their ASCII spelling (llama.cpp's AGENTS.md, "Code and Commit
#: Standards": ASCII in commits).
_ASCII = str.maketrans({"±": "+/-", "≡": "==", "—": "-", "–": "-", "→": "->", "×": "x", "…": "...", "≤": "<=",
                        "≥": ">=", "≈": "~"})


def ascii_text(text: str) -> str:
    """``text`` with the characters of :data:`_ASCII` spelled in ASCII."""
    return text.translate(_ASCII)


def _types(fx: Fix) -> set[str]:
    """The ggml types whose kernels the fix changes (its header's ``functions``), as test-quantize-fns names them."""
    funcs = header(fx.patch).get("functions", "")
    return set(re.findall(r"ggml_vec_dot_([a-z0-9]+(?:_[A-Za-z0-9]+)?)_q8_", funcs)
               + re.findall(r"ggml_vec_dot_(bf16|f16|f32)\b(?!_unroll)", funcs)
               + re.findall(r"ggml_ge[mv][mv]_([a-z0-9]+_[A-Za-z0-9]+)_\d+x\d+", funcs))


def what_was_wrong(fx: Fix) -> str:
    """What was wrong, in two sentences: the fix report's title and the first sentence of its root cause."""
    md = fx.report.read_text() if fx.report.is_file() else ""
    title = md.splitlines()[0].lstrip("# ").strip() if md else fx.title
    return local_refs(" ".join(x for x in (title.rstrip(".") + ".", first_sentence(paragraph(md, "Root cause"))) if x))


def fix_message(series: Series, fx: Fix) -> str:
    """The commit message of one fix, short and factual: the subject; what was wrong (:func:`what_was_wrong`); where
    the series' regression test fails without it (the recorded runs whose failing checks are of the fix's types) and
    the command that shows it, or why the test cannot show it and how it was checked; the llama.cpp issue it fixes
    (``Fixes #N`` on every fix commit of a series that fixes one).
    The evidence (tables, runs per VLEN, cost, effect on a model) is the series page's."""
    body = [_wrap(what_was_wrong(fx))]
    runs = testcmd.of_types(testcmd.read_runs(recorded_runs(series)), _types(fx))
    where = testcmd.where_it_fails(runs, subjects(), what=False, options=False)
    if fx.name in series.unreached:
        body.append(_wrap(f"Testing: {series.unreached[fx.name]}"))
    elif where:
        body.append("\n".join([_wrap("Without this change the test of the first commit fails under qemu-riscv64: "
                                      + "; ".join(where) + "."), "", *_code(testcmd.run_lines(runs)[:1])]))
    trailer = [f"Fixes #{series.closes}"] if series.closes else []  # each commit that fixes part of the issue
    return ascii_text("\n".join([series.subjects[fx.name], "", "\n\n".join(body), *([""] + trailer if trailer else [])])
                      + "\n")


def _items(lines: list[str]) -> list[str]:
    """``lines`` as a commit message's list, each item filled to 72 columns."""
    return [textwrap.fill(f"- {ln}", 72, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
            for ln in lines]


def test_message(series: Series) -> str:
    """The commit message of the series' regression test, short and factual: what it checks and why the suite missed
    the bug (the first two sentences of the test's ``why``), where it fails before the fixes (compilers, build
    options, VLENs, from the recorded runs) and the commands that show it; for a test that cannot reach the fixed
    code on this tree, where it was run and the command that runs it."""
    h = header(series.test_patch())
    why = h.get("why", "")
    why = why[:1].upper() + why[1:]
    said = first_sentence(why)
    more = first_sentence(why[len(said):].strip())
    said += f" {more}" if more and len(said) + len(more) < 300 else ""
    runs = testcmd.read_runs(recorded_runs(series))
    where = testcmd.where_it_fails(runs, subjects(), what=False)
    out = [series.test_subject, "", _wrap(local_refs(said))]
    if where:
        out += ["", _wrap("Before the fixes that follow it fails under qemu-riscv64, built with ggml's CMake and "
                          "-DLLAMA_BUILD_TESTS=ON by:"), *_items(where), "", *_code(testcmd.run_lines(runs))]
    elif runs:  # it cannot reach the fixed code on this tree: how it was run, and the command
        r, vlens = runs[0], sorted({v for x in runs for v in x.vlens})
        out += ["", _wrap(f"It cannot reach the fixed code on this tree: built with -DLLAMA_BUILD_TESTS=ON by "
                          f"{' and '.join(dict.fromkeys(x.compiler for x in runs))} ({testcmd.isa_options(r.isa)}), it "
                          f"passes before and after the fixes that follow at VLEN {' and '.join(map(str, vlens))}:"), "",
                *_code([shlex.join(testcmd.run_line(r.at(vlens[0])))])]
    return ascii_text("\n".join(out) + "\n")


def commits(series: Series) -> list[tuple[str, str]]:
    """(diff, message) per commit, in order: the regression test (if any), then each fix."""
    out = []
    test = series.test_patch()
    if test is not None and series.test_subject:
        out.append((formatpatch.strip_header(test.read_text()), test_message(series)))
    out += [(formatpatch.strip_header(fx.text), fix_message(series, fx)) for fx in series.fixes]
    return out


def touched(series: Series, every: list[Series] | None = None) -> list[str]:
    """The files (llama.cpp paths) the series' commits change, and those of the series it builds on."""
    return sorted({ln[6:].split("\t")[0].strip() for x in [*stack(series, every or []), series]
                   for d, _ in commits(x) for ln in d.splitlines() if ln.startswith("+++ b/")})


def write_commits(series: Series, tree: Path, scratch: Path, out: Path, author: str,
                  every: list[Series] | None = None) -> list[Path]:
    """Commit the series as ``author`` (``Name <mail>``: :func:`harness.upstream.formatpatch.identity` for the
    person who runs the generator), dated now, on a scratch repository of ``tree`` (the files it touches), on top of
    the commits of the series it builds on (:func:`stack` over ``every``), and write its own commits as
    ``git format-patch`` output into ``out``; returns the files.

    A commit whose patch is the one ``out`` held before but for the commit id and the date keeps that date, and the
    commits of the series it builds on take the dates of their own files beside ``out`` (written before it, as
    ``rvvdiff series`` writes them in order): re-rendering unchanged series rewrites no byte of their files."""
    under = stack(series, every or [])
    below: list[tuple[str, str, str | None]] = []
    for x in under:
        dates = [d for _, d in formatpatch.previous(out.parent / x.stem).values()]
        made = commits(x)
        below += [(diff, msg, dates[i] if len(dates) == len(made) else None) for i, (diff, msg) in enumerate(made)]
    before = formatpatch.previous(out)  # read before format_patches replaces them
    done = commits(series)

    def write(kept: dict[int, str]) -> list[Path]:
        repo = formatpatch.base_repo(tree, scratch, touched(series, every))
        for diff, msg, when in below:
            formatpatch.commit(repo, diff, msg, author=author, when=when)
        for i, (diff, msg) in enumerate(done):
            formatpatch.commit(repo, diff, msg, author=author, when=kept.get(i))
        return formatpatch.format_patches(repo, len(done), out)

    files = write({})
    kept = {i: before[f.name][1] for i, f in enumerate(files)
            if f.name in before and formatpatch.unstamped(f.read_text()) == before[f.name][0]}
    return write(kept) if kept else files
