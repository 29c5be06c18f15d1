"""``rvvdiff series``: the fixes of the findings as pull-request-sized series, one per bug class.

For each series of ``harness/data/series.toml`` (:mod:`harness.upstream.series`): whether its patches
apply in order to the pinned tree and to every ``--ggml-src`` tree (for each tree, which patch does
not apply and why); ``<out>/<n>-<name>.md``, the pull-request description (at most 40 lines: what, why,
the evidence per VLEN, the patches in order, the regression test for ggml's own suite, the trees it
applies to); ``<out>/<n>-<name>.patch``, the series' diffs in order (``patch -p1 < file``); and
``<out>/README.md``, the series in order with each fix's upstream issue text.

Exit status: 0 when every series applies to the pinned tree; 1 otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import fixes as fixes_cmd
from harness.core.config import PROJECT_ROOT
from harness.ggml.source import GgmlSource, resolve
from harness.upstream import series as upstream_series


def _why_not(fx: fixes_cmd.Fix, tree: GgmlSource) -> str:
    """Why a fix that does not apply conflicts: the buggy code still there (rebase it), or changed (fixed upstream, moved)."""
    return fixes_cmd.standing(fx, tree).detail


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff series", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ggml-src", action="append", default=[], metavar="TREE",
                   help="another tree to check the series against (repeatable)")
    p.add_argument("--out", type=Path, default=PROJECT_ROOT / "docs" / "upstream" / "series",
                   help="where the descriptions and combined patches go (default: docs/upstream/series)")
    a = p.parse_args(argv)
    pinned = resolve(None)
    others = {t: resolve(t) for t in a.ggml_src}
    a.out.mkdir(parents=True, exist_ok=True)
    status = 0
    every = upstream_series.load(fixes_cmd.catalogue())
    verdicts: dict[str, dict[str, tuple[bool, str]]] = {}
    for s in every:
        trees = {f"pinned ({pinned.label}, {pinned.commit})": upstream_series.applies_in_order(s, pinned, _why_not)}
        trees.update({f"{src.label} (ggml {src.version})": upstream_series.applies_in_order(s, src, _why_not)
                      for src in others.values()})
        verdicts[s.name] = trees
        ok = next(iter(trees.values()))[0]
        status |= 0 if ok else 1
        n = upstream_series.write(s, trees, a.out)
        print(f"{s.stem}: {len(s.fixes)} patches; " + "; ".join(f"{t}: {'applies' if v[0] else v[1]}"
                                                                 for t, v in trees.items())
              + f"; {a.out / (s.stem + '.md')} ({n} lines{'' if n <= upstream_series.MAX_LINES else ', TOO LONG'})")
        status |= 0 if n <= upstream_series.MAX_LINES else 1
    (a.out / "README.md").write_text(upstream_series.index(every, verdicts))
    return status
