"""``rvvdiff trees``: the differential suite on several ggml trees, and one table of the outcomes.

For each tree (a path, or ``llama-cpp-python==X``): every ISA build is built (or reported as not
expressible for the tree, or failed, with the reason), then ``pytest cases --ggml-src TREE --vlen
all --isa all`` runs with its own report directory, and its ``results.json`` is counted: passed,
failed (and errors), known failures (xfailed), skipped as "not in this tree", other skips (each
distinct reason listed), and the time.  The table is what docs/trees.md records.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.config import ISA_BUILDS, PROJECT_ROOT, parse_compilers
from harness.core.runner import add_cc_option, cc_args, run_suite
from harness.ggml import source
from harness.toolchain import builds
from harness.toolchain.compilers import COMPILERS, ToolchainError

ROOT = PROJECT_ROOT


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


def _builds(tree: str, cc: str | None = None) -> tuple[str, dict[str, str]]:
    """Build every ISA build of ``tree`` with each compiler ``cc`` (a ``--cc`` value; default: the
    setting's compiler); say what became of each."""
    src = source.resolve(tree)
    chosen = parse_compilers(cc, tuple(COMPILERS), tuple(ISA_BUILDS)) if cc else {None: tuple(ISA_BUILDS)}
    out: dict[str, str] = {}
    for compiler, name in ((c, i) for c, isas in chosen.items() for i in isas):
        label = name if len(chosen) == 1 else f"{name} by {compiler}"
        try:
            builds.ensure_built(src, ISA_BUILDS[name], compiler)
            out[label] = "built"
        except ToolchainError as e:
            out[label] = f"compiler not installed: {str(e)[:200]}"
        except builds.IsaUnavailable as e:
            out[label] = "not expressible: " + str(e).strip().splitlines()[0][:200]
        except builds.BuildError as e:
            out[label] = "FAILED: " + builds.first_errors(str(e), 1)[:200]
    return src.describe(), out


def run_tree(tree: str, report_root: Path, pytest_args: list[str], cc: str | None = None) -> Row:
    row = Row(tree)
    t0 = time.time()
    row.described, row.builds = _builds(tree, cc)
    slug = re.sub(r"[^\w.=-]+", "_", tree.strip("/"))[-80:]
    rdir = report_root / slug
    log = report_root / f"{slug}.log"
    run = run_suite(["cases", "--ggml-src", tree, "--vlen", "all", "--isa", "all", "-q", "-p", "no:cacheprovider",
                     *cc_args(cc), *pytest_args], report_dir=rdir, output=log)
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff trees", description=__doc__.split("\n\n")[0])
    p.add_argument("trees", nargs="+", help="ggml / llama.cpp checkouts, or llama-cpp-python==VERSION; "
                   "extra pytest arguments follow a -- (e.g. -- -n 2)")
    p.add_argument("--report-dir", type=Path, default=ROOT / "reports" / "trees")
    p.add_argument("--out", type=Path, help="also write the table to this file")
    add_cc_option(p)
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    a = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    a.report_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for t in a.trees:
        print(f"rvvdiff trees: {t} ...", file=sys.stderr, flush=True)
        rows.append(run_tree(t, a.report_dir, extra, a.cc))
        print(render(rows[-1:]), file=sys.stderr, flush=True)
    table = render(rows)
    print(table)
    if a.out:
        a.out.write_text(table + "\n")
    return 1 if any(r.counts["failed"] + r.counts["error"] + r.counts["xpassed"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
