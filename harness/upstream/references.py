"""The llama.cpp issues and pull requests that texts for upstream cite, checked against the tracker as read.

``harness/data/upstream_refs.toml`` records each number rvvdiff's texts may cite: issue or pull request, its title and
state as read in llama.cpp's tracker, and the findings whose texts it is about.  :func:`defects` is what a text citing
them must not do: cite a number that is not recorded (unread, or a typo), call an issue a pull request or the reverse,
cite a number in the text of a finding (or series) it is not about, or close (``Fixes #N``) anything but an issue.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from harness.core.config import DATA_DIR

REFS_FILE = DATA_DIR / "upstream_refs.toml"
#: A citation: the words just before ``#N`` say what the text takes it for.
_CITED = re.compile(r"(?:(?P<issue>\bissue)|(?P<pull>\bpull request|\bPR)|(?P<fixes>\bFixes))?\s*#(?P<n>\d{3,6})\b")


@dataclass(frozen=True)
class Ref:
    """One issue or pull request of llama.cpp's tracker, as rvvdiff read it before citing it."""

    number: int
    #: "issue" or "pull request"
    kind: str
    title: str
    state: str
    opened: str
    #: the findings (fix names) whose texts may cite it
    fixes: tuple[str, ...]


@cache
def load(path: Path = REFS_FILE) -> dict[int, Ref]:
    """The recorded references by number."""
    rows = tomllib.loads(path.read_text()).get("ref", [])
    return {r["number"]: Ref(r["number"], r["kind"], r["title"], r["state"], r["opened"], tuple(r.get("fixes", ())))
            for r in rows}


def _a(kind: str) -> str:
    return f"an {kind}" if kind == "issue" else f"a {kind}"


def defects(text: str, about: Iterable[str] | None = None) -> list[str]:
    """What is wrong with the citations of ``text``, a text about the findings ``about`` (fix names; None: any)."""
    refs, out = load(), []
    about = None if about is None else set(about)
    for m in _CITED.finditer(text):
        n = int(m["n"])
        ref = refs.get(n)
        if ref is None:
            out.append(f"#{n}: not in {REFS_FILE.name} (read it in llama.cpp's tracker and record it there)")
            continue
        said = "issue" if m["issue"] or m["fixes"] else "pull request" if m["pull"] else ""
        if said and said != ref.kind:
            out.append(f"#{n} cited as {'closed by this commit' if m['fixes'] else _a(said)}, but it is {_a(ref.kind)}"
                       f" ({ref.title!r})")
        if about is not None and not about & set(ref.fixes):
            out.append(f"#{n} ({ref.title!r}) is about {', '.join(ref.fixes)}, not this text's "
                       f"{', '.join(sorted(about))}")
    return list(dict.fromkeys(out))
