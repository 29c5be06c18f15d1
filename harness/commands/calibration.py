"""``rvvdiff calibration``: rvvdiff's cost estimates held against what boards measured (docs/calibration.md).

The data file (harness/data/calibration.toml) holds one row per published change: the board's llama-bench
speed-ups and rvvdiff's estimates of the same change, kept with the ``rvvdiff cost`` output they come from
(harness/data/calibration/<row>.json: the row's source).

``rvvdiff calibration show [--model | --roofline | --token]``
    the table of the rows' per-kernel estimates (``--model``: their model-shaped cases) against the boards,
    and the summary line ``rvvdiff cost`` prints (harness/cost/calibration/kernel_rows.py, model_rows.py);
    ``--roofline``: every test's error compute-only and as a roofline (harness/cost/calibration/roofline_rows.py);
    ``--token``: every model-shaped test's error as the layers' mul_mats and as whole tokens, the rest of a token
    added (harness/cost/calibration/token_rows.py).
``rvvdiff calibration write``
    the tables into docs/calibration.md, between their markers.
``rvvdiff calibration estimate COST_JSON FUNCTION [--before-function F]``
    an ``rvvdiff cost --base BEFORE --ggml-src AFTER`` run's ratios of FUNCTION for every priced core
    (``--before-function``: BEFORE's path as another function of HEAD);
``rvvdiff calibration estimate COST_JSON --model SPEC``
    the run's entry for a row's model-shaped case ``SPEC``.
``rvvdiff calibration record ROW [COST_JSON ...] [--cc CC]``
    keep the part of each cost.json row ROW needs (its source; ``--cc``: the compiler of a one-compiler
    COST_JSON) and write the row's estimates from that source into the data file.
``rvvdiff calibration rest COST_JSON [--commit C --spec SPEC]``
    keep a ``RVVDIFF_COST_REST=SPEC rvvdiff cost -k rest`` run's rows as the rest of a token's source
    (harness/data/calibration/rest.json): the pinned tree's, or with ``--commit`` a row tree's measured with
    ``--spec`` (harness/cost/calibration/token_rows.py).
``rvvdiff calibration check``
    every figure of the data file its source does not give (exit 1 when there is one).
``rvvdiff calibration compare OLD_TOML [NEW_TOML]``
    two versions of the data file (NEW: the current one): every estimate that differs, held-out rows last
    (``git show COMMIT:harness/data/calibration.toml > OLD_TOML`` gives the file of any commit).
``rvvdiff calibration measure ROW --ggml-git DIR [--cc LIST] [--out DIR] [--dry-run]``
    the row measured again: its two trees exported from a ggml-org/ggml clone, the ``rvvdiff cost`` runs its
    source holds redone, and recorded (harness/jobs/calibration_runs.py).
``rvvdiff calibration trees ROW --ggml-git DIR``
    the row's two trees made (exported, with its ``before_edit`` / ``after_lmul``) and printed, BEFORE then AFTER:
    what a row's first ``rvvdiff cost --base BEFORE --ggml-src AFTER`` run takes (docs/calibration.md).

Exit status: 0; 1 when ``check`` finds a figure its source does not give or a ``measure`` run fails; 2 for a
usage error or a row or file that cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.core.matrix import add_options
from harness.cost.calibration import data_diff, kernel_rows, model_rows, roofline_rows, sources, token_rows
from harness.jobs import calibration_runs


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rvvdiff calibration", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    s = sub.add_parser("show", help="the table of the rows against the boards, and the summary line")
    s.add_argument("--model", action="store_true", help="the model-shaped cases' table")
    s.add_argument("--roofline", action="store_true", help="every test's error compute-only and as a roofline")
    s.add_argument("--token", action="store_true", help="every model-shaped test's error as whole tokens")
    sub.add_parser("write", help="both tables into docs/calibration.md")
    e = sub.add_parser("estimate", help="a cost run's ratios for every priced core (or a model-shaped case's entry)")
    e.add_argument("cost_json", type=Path, metavar="COST_JSON")
    e.add_argument("function", nargs="?", metavar="FUNCTION", help="the function whose estimate stands for the change")
    e.add_argument("--before-function", default=None, help="BEFORE's path as another function of HEAD")
    e.add_argument("--model", default=None, metavar="SPEC", help="a model-shaped case (as rvvdiff cost --model takes it)")
    r = sub.add_parser("record", help="keep a cost run's part as the row's source and write the row's estimates")
    r.add_argument("row", metavar="ROW", help="the row's name in harness/data/calibration.toml")
    r.add_argument("cost_json", nargs="*", type=Path, metavar="COST_JSON")
    add_options(r, "compilers", one=True, defaults={"compilers": "clang"}, default_words={"compilers": "clang"},
                prefix="the compiler of a one-compiler COST_JSON: ")
    rr = sub.add_parser("rest", help="keep a cost run's rows of the rest of a token (rest.json)")
    rr.add_argument("cost_json", type=Path, metavar="COST_JSON")
    rr.add_argument("--commit", default=None, help="the row tree's commit it was measured on (default: the pinned tree)")
    rr.add_argument("--spec", default="", help="the RVVDIFF_COST_REST value it was measured with (with --commit)")
    sub.add_parser("check", help="every figure of the data file its source does not give")
    c = sub.add_parser("compare", help="two versions of the data file side by side")
    c.add_argument("old", type=Path, metavar="OLD_TOML")
    c.add_argument("new", type=Path, nargs="?", metavar="NEW_TOML", help="default: the current data file")
    m = sub.add_parser("measure", help="a row measured again from ggml's history, and recorded")
    m.add_argument("row", metavar="ROW", help="the row's name in harness/data/calibration.toml")
    m.add_argument("--ggml-git", type=Path, required=True, help="a git directory of ggml-org/ggml with its commits")
    add_options(m, "compilers", unset=True, default_words={"compilers": "the compilers the row's source holds"})
    m.add_argument("--out", type=Path, default=None, help="where the runs write (default: a new directory)")
    m.add_argument("--dry-run", action="store_true", help="print the commands, run none")
    t = sub.add_parser("trees", help="a row's two trees made from ggml's history and printed (BEFORE, AFTER)")
    t.add_argument("row", metavar="ROW", help="the row's name in harness/data/calibration.toml")
    t.add_argument("--ggml-git", type=Path, required=True, help="a git directory of ggml-org/ggml with its commits")
    return p


def main(argv: list[str]) -> int:
    p = _parser()
    a = p.parse_args(argv)
    if a.action == "show":
        if a.roofline:
            print(roofline_rows.block())
            return 0
        if a.token:
            print(token_rows.block())
            return 0
        print(model_rows.table() if a.model else kernel_rows.table())
        print(model_rows.summary() if a.model else kernel_rows.summary())
        return 0
    if a.action == "write":
        for what, write in (("per-kernel", kernel_rows.write_doc), ("model-shaped", model_rows.write_doc),
                            ("roofline", roofline_rows.write_doc), ("whole-token", token_rows.write_doc)):
            print(f"{kernel_rows.DOC}: the {what} table {'rewritten' if write() else 'already current'}")
        print(kernel_rows.summary())
        print(model_rows.summary())
        return 0
    if a.action == "estimate":
        cost = json.loads(a.cost_json.read_text())
        if a.model:
            if a.function:
                p.error("estimate takes FUNCTION or --model SPEC, not both")
            print(json.dumps(model_rows.estimate(cost, a.model)))
            return 0
        if not a.function:
            p.error("estimate needs COST_JSON and FUNCTION (or --model SPEC)")
        got = kernel_rows.every_core(cost, a.function, a.before_function)
        print(json.dumps({cc: {core: {k: round(v, 3) for k, v in r.items()} for core, r in per.items()}
                          for cc, per in got.items()}, indent=1))
        print("(estimates: a core's prices and LLVM's X60 model, not measurements; 'instructions' is the count ratio)",
              file=sys.stderr)
        return 0
    if a.action == "record":
        new = sources.record(a.row, a.cost_json, a.cc)
        print(f"{sources.DATA}: {a.row}: " + json.dumps(new))
        return 0
    if a.action == "rest":
        if a.commit and not a.spec:
            p.error("rest --commit C needs --spec SPEC (the RVVDIFF_COST_REST value of the run)")
        n = token_rows.keep_rest(json.loads(a.cost_json.read_text())["head"], commit=a.commit, spec=a.spec)
        print(f"{token_rows.REST}: {n} rows of the rest kept ({a.commit or 'the pinned tree'})")
        return 0
    if a.action == "check":
        bad = sources.stale()
        print("\n".join(bad) or f"{sources.DATA}: every estimate is its row's committed cost output's")
        return 1 if bad else 0
    if a.action == "compare":
        print("\n".join(data_diff.compare(a.old, a.new)))
        return 0
    if a.action == "trees":
        print("\n".join(map(str, calibration_runs.trees_of(calibration_runs.row(a.row), a.ggml_git))))
        return 0
    return calibration_runs.measure_again(a.row, a.ggml_git, list(a.cc) if a.cc else None, a.out, dry_run=a.dry_run)
