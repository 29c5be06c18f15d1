"""The differential suite on several ggml trees (``rvvdiff trees``, harness/commands/trees.py): per tree,
every ISA build built or said why not (:func:`run_tree`), ``pytest cases --ggml-src TREE --vlen all --isa
all`` with its own report directory, its ``results.json`` counted (passed, failed and errors, known
failures, skipped as "not in this tree", other skips with each distinct reason, the time), and the
table of the rows (:func:`render`) that docs/trees.md records."""

from __future__ import annotations

import collections
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.matrix import DEFAULT_ISAS, ISAS, Matrix
from harness.core.runner import run_suite
from harness.ggml import source
from harness.toolchain import builds
from harness.toolchain.compilers import ToolchainError


@dataclass
class Row:
    tree: str
    described: str = ""
    builds: dict[str, str] = field(default_factory=dict)  # ISA build -> "built" / reason it is not
    counts: collections.Counter = field(default_factory=collections.Counter)
    other_skips: collections.Counter = field(default_factory=collections.Counter)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    exit_code: int = 0

    def cells(self) -> list[str]:
        c = self.counts
        builds = ", ".join(f"{k}: {v}" for k, v in self.builds.items())
        return [self.described or self.tree, builds, str(sum(c.values())), str(c["passed"]),
                str(c["skipped-not-in-tree"]), str(c["skipped-other"]), str(c["xfailed"]),
                str(c["failed"] + c["error"] + c["xpassed"]), f"{self.seconds / 60:.1f}"]


HEADER = ["tree", "ISA builds", "tests", "passed", "not in this tree", "other skips", "known failures",
          "failed", "minutes"]


def _builds(tree: str, compilers: Mapping[str, tuple[str, ...]] | None = None) -> tuple[str, dict[str, str]]:
    """Build every ISA build of ``tree`` with each of ``compilers`` (``--cc``'s, parsed; None: the
    setting's compiler), compiler by compiler; say what became of each."""
    src = source.resolve(tree)
    order = list(compilers or [None])
    out: dict[str, str] = {}
    for compiler, name in sorted(Matrix(compilers=compilers).builds(), key=lambda b: order.index(b[0])):
        label = name if len(order) == 1 else f"{name} by {compiler}"
        try:
            builds.ensure_built(src, ISAS[name], compiler)
            out[label] = "built"
        except ToolchainError as e:
            out[label] = f"compiler not installed: {str(e)[:200]}"
        except builds.IsaUnavailable as e:
            out[label] = "not expressible: " + str(e).strip().splitlines()[0][:200]
        except builds.BuildError as e:
            out[label] = "FAILED: " + builds.first_errors(str(e), 1)[:200]
    return src.describe(), out


def run_tree(tree: str, report_root: Path, pytest_args: list[str],
             compilers: Mapping[str, tuple[str, ...]] | None = None) -> Row:
    row = Row(tree)
    t0 = time.time()
    row.described, row.builds = _builds(tree, compilers)
    slug = re.sub(r"[^\w.=-]+", "_", tree.strip("/"))[-80:]
    rdir = report_root / slug
    log = report_root / f"{slug}.log"
    run = run_suite(["cases", *Matrix(isas=DEFAULT_ISAS, compilers=compilers, tree=tree).pytest_args(), "-q",
                     "-p", "no:cacheprovider", *pytest_args], report_dir=rdir, output=log)
    row.exit_code = run.exit
    row.seconds = time.time() - t0
    if not run.has_results:
        row.failures.append(f"no results.json (pytest exit {row.exit_code}); see {log}")
        return row
    for r in run.results.values():
        outcome, reason = r["outcome"], r.get("reason", "") or ""
        if outcome == "skipped":
            if "not in this tree" in reason:
                outcome = "skipped-not-in-tree"
            else:
                outcome = "skipped-other"
                # One line per reason, whatever the VLEN and ISA build it names.
                general = re.sub(r"vlen\d+(-\w+)?|(?<=\bon )vlen\S+", "vlen*", re.sub(r"\s+", " ", reason))
                row.other_skips[general[:160]] += 1
        if outcome in ("failed", "error", "xpassed"):
            row.failures.append(f"{outcome}: {r['nodeid']}: {reason[:200]}")
        row.counts[outcome] += 1
    return row


def render(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in rows]
    for r in rows:
        if r.other_skips or r.failures:
            lines.append("")
            lines.append(f"**{r.described or r.tree}**")
            for reason, n in r.other_skips.most_common():
                lines.append(f"- skipped ({n}): {reason}")
            for f in r.failures[:50]:
                lines.append(f"- {f}")
            if len(r.failures) > 50:
                lines.append(f"- ... and {len(r.failures) - 50} more")
    return "\n".join(lines)
