"""The fixes of findings: ``harness/data/fixes/<name>.patch`` (a :class:`harness.ggml.patches.Patch` whose
header says what it fixes: ``rvvdiff fix:`` title, ``finding``, ``functions``, ``tests``, ``cost``,
``cost-with``, ``check-with``, ``cost-k``, ``wrong-vlens``, ``vector-path``) beside its upstream-ready report ``<name>.md``,
the known-failure entries that name it (``fix = "<name>"``), and where a fix stands on a tree: it
applies, it is already in the tree, or it no longer applies (and then whether the buggy code is still
there).  Verifying a fix is harness/jobs/fix_checks.py, measuring its cost harness/jobs/fix_cost_runs.py,
the command ``rvvdiff fixes`` harness/commands/fixes.py.
"""

from __future__ import annotations

import fnmatch
import functools
from dataclasses import dataclass, field
from pathlib import Path

from harness.core import settings
from harness.core.config import DATA_DIR
from harness.ggml import known, patches
from harness.ggml.source import GgmlSource

FIXES_DIR = DATA_DIR / "fixes"


def fixes_dir() -> Path:
    """``$RVVDIFF_FIXES_DIR`` if set (the project's tests use their own), else ``harness/data/fixes/``."""
    return settings.path("FIXES_DIR") or FIXES_DIR


class Fix(patches.Patch):
    @property
    def title(self) -> str:
        return self.meta.get("rvvdiff fix", self.name)

    @property
    def report(self) -> Path:
        return self.patch.with_suffix(".md")

    @functools.cached_property
    def entries(self) -> list[known.Known]:
        return [e for e in known.load() if e.fix == self.name]

    @functools.cached_property
    def tests(self) -> list[str]:
        """The finding's tests: its known-failure entries' globs and the header's ``tests``."""
        return list(dict.fromkeys([e.test for e in self.entries] + self._list("tests")))

    def _list(self, key: str) -> list[str]:
        """A comma-separated header value as a list."""
        return [t.strip() for t in self.meta.get(key, "").split(",") if t.strip()]

    @property
    def cost_isas(self) -> list[str]:
        """The ISA builds whose code the patch changes (header ``cost``): the cost runs measure these."""
        return self._list("cost")

    @property
    def cost_with(self) -> list[str]:
        """Fixes applied to both trees before the cost is measured (header ``cost-with``)."""
        return self._list("cost-with")

    @property
    def check_with(self) -> list[str]:
        """Fixes applied to both trees of the check (header ``check-with``): the fix of another bug whose
        failures the finding's tests share, without which they cannot pass on the patched tree."""
        return self._list("check-with")

    @property
    def cost_k(self) -> str:
        """A pytest -k expression narrowing the cost cases the change reaches (header ``cost-k``): the
        reach of a graph op (mul_mat dispatches to every repacked kernel) is wider than what it runs."""
        return self.meta.get("cost-k", "").strip()

    def wrong_at(self, vlen: int) -> bool:
        """Whether the replaced code is wrong at ``vlen`` (header ``wrong-vlens``: ``all`` or a list):
        there the fix may cost more than it."""
        vlens = self._list("wrong-vlens")
        return "all" in vlens or str(vlen) in vlens

    def is_finding_test(self, nodeid: str) -> bool:
        return any(fnmatch.fnmatchcase(nodeid, g) or nodeid.startswith(g) for g in self.tests)


def catalogue() -> dict[str, Fix]:
    return patches.catalogue(fixes_dir(), Fix)  # type: ignore[return-value]


def select(names: list[str]) -> list[Fix]:
    return patches.named(fixes_dir(), names, "fix", Fix)  # type: ignore[return-value]


# ------------------------------------------------------------------ where a fix stands on a tree


@dataclass
class Standing:
    fix: str
    state: str  # applies, applied, conflict
    detail: str
    entries: list[str] = field(default_factory=list)  # "#n applies (fingerprint)" ...

    def describe(self) -> str:
        words = {"applies": "applies", "applied": "already in the tree",
                 "conflict": "no longer applies"}[self.state]
        return f"{self.fix}: {words}" + (f" -- {self.detail}" if self.detail else "")


def standing(fix: Fix, source: GgmlSource) -> Standing:
    state, said = patches.applies(fix, source)
    verdicts = [e.judge(source) for e in fix.entries]
    entries = [f"#{v.entry.number} {'applies' if v.applies else 'does not apply'} ({v.why})" for v in verdicts]
    detail = ""
    if state == "conflict":
        if any(v.applies for v in verdicts):
            detail = ("the buggy code is still there (a known-failure entry's fingerprint matches) but the patch "
                      "does not apply: the code around it moved; rebase the patch")
        else:
            detail = ("the functions the finding names changed or are gone: the bug may be fixed upstream or "
                      f"moved; run the finding's tests to see ({', '.join(fix.tests)})")
        detail += f". patch says: {' '.join(said.split())[:300]}"
    elif state == "applies" and ("offset" in said or "fuzz" in said):
        detail = f"with {' '.join(said.split())[:200]}"
    return Standing(fix.name, state, detail, entries)
