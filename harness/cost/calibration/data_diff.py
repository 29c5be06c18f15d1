"""Two versions of the calibration data file side by side: what an estimator's change did to every row.

:func:`lines` (``rvvdiff calibration compare OLD_TOML [NEW_TOML]``; NEW: the current data file) gives, as
Markdown tables, every estimate that differs between the two -- per row, compiler and estimator: the estimated
speed-up before and after and its error factor against each test the board measured (estimate over measured);
each model-shaped case's per-batch estimates; every other priced core's ratio -- held-out rows last, under
their own heading, so that a change is judged on the rows it could have been fitted to apart from the ones it
could not.  ``git show COMMIT:harness/data/calibration.toml > OLD_TOML`` gives the file of any commit.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.cost.calibration import sources


def _cases(raw: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {c["spec"]: c for c in sources.model_cases(raw)}


def _errors(raw: Mapping[str, Any], value: float) -> str:
    got = [value / (a / b) for b, a in raw["measured"].values()]
    lo, hi = min(got), max(got)
    return f"{lo:.2f}" if abs(hi - lo) < 0.005 else f"{lo:.2f}-{hi:.2f}"


def lines(old: list[Mapping[str, Any]], new: list[Mapping[str, Any]]) -> list[str]:
    """The Markdown of the comparison (module docstring)."""
    before = {r["name"]: r for r in old}
    kernel = ["| row | built by | estimator | est. x before | est. x after | error before | error after |",
              "|---|---|---|---|---|---|---|"]
    model = ["| row | model case | built by | batch | estimator | est. x before | est. x after |",
             "|---|---|---|---|---|---|---|"]
    other = ["| row | core | x before | x after |", "|---|---|---|---|"]
    for held in (False, True):
        for raw in [r for r in new if (bool(r.get("held_out")) and not r.get("used_for")) == held]:
            name, was = raw["name"], before.get(raw["name"], {})
            label = f"held out: {name}" if held else name
            for field in sorted(k for k in raw if k.startswith("estimates")):
                cc = "clang" if field == "estimates" else field.removeprefix("estimates_")
                for est, v in raw[field].items():
                    w = was.get(field, {}).get(est)
                    if w != v:
                        kernel.append(f"| {label} | {cc} | {est} | {w if w is not None else '-'} | {v} | "
                                      f"{_errors(raw, w) if w else '-'} | {_errors(raw, v)} |")
            old_cases = _cases(was)
            for spec, case in _cases(raw).items():
                for field in sorted(k for k in case if k.startswith("estimates")):
                    cc = "clang" if field == "estimates" else field.removeprefix("estimates_")
                    for batch, per in case[field].items():
                        for est, v in per.items():
                            w = old_cases.get(spec, {}).get(field, {}).get(batch, {}).get(est)
                            if w != v:
                                model.append(f"| {label} | `{spec}` | {cc} | {batch.removeprefix('b')} | {est} | "
                                             f"{w if w is not None else '-'} | {v} |")
            for core, p in raw.get("priced", {}).items():
                w = was.get("priced", {}).get(core, {}).get("x")
                if w != p["x"]:
                    other.append(f"| {label} | {core} | {w if w is not None else '-'} | {p['x']} |")
    return ["Per-kernel estimates (error: estimated over measured speed-up, over the row's tests):", "", *kernel,
            "", "Model-shaped cases:", "", *model, "", "Other priced cores (clang's builds):", "", *other]


def compare(old: Path, new: Path | None = None) -> list[str]:
    """:func:`lines` of two versions of the data file (``new`` None: the current one)."""
    return lines(*(tomllib.loads(f.read_text()).get("row", []) for f in (old, new or sources.DATA)))
