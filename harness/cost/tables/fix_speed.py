"""The Speed paragraph of a series description: no board was used; Spike's instruction ratios; each fix's
estimated cycles per core (fixed / replaced) and how such estimates have fared against boards so far.

The estimates are ``rvvdiff cost``'s per-core figures (harness/cost/prices/cores.py: a call's instruction mix under
Spike priced with rvv-bench's reciprocal throughputs of a core, for the cores of that VLEN).  ``rvvdiff series
--cost SERIES`` (harness/commands/series.py) measures each fix of the series as ``rvvdiff fixes cost`` does (the
cost suite's real-model cases the change reaches, the patched tree against the pinned one) at the VLENs of the
cores rvvdiff has prices for, and keeps per fix and core the range over the cases of the fixed code's estimated
cycles over the replaced code's, in ``<out>/cycles.json``; :func:`paragraph` renders them.  The track record is
docs/calibration.md's (harness/cost/calibration/kernel_rows.py): the worst error factor of the X60 estimate against the
speed-ups boards measured for earlier RVV changes, and in how many of them it got the direction right.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from harness.cost.calibration import kernel_rows

#: The VLENs of the cores with rvv-bench prices (harness/data/cost/cores: X60, X100, Ascalon X at 256; A100 at 1024).
CYCLES_VLENS = (256, 1024)


def ratios(cost: Mapping[str, Any]) -> dict[str, list[float]]:
    """Per core ("SpacemiT X60 (SpacemiT K1), VLEN 256"): [lowest, highest] fixed / replaced estimated cycles over
    the rows of an ``rvvdiff cost`` cost.json (HEAD = the fixed tree, BASE = the pinned one)."""
    labels = {c["key"]: f"{c['core']}, VLEN {c['vlen']}" for c in cost.get("cores", [])}
    base = {(r["case"], r["vlen"], r["isa"]): r for r in cost.get("base", [])}
    got: dict[str, list[float]] = {}
    for h in cost.get("head", []):
        b = base.get((h["case"], h["vlen"], h["isa"]))
        for key, est in ((h.get("estimates") or {}).items() if b else ()):
            was = (b.get("estimates") or {}).get(key)
            if was and was.get("cycles"):
                got.setdefault(labels.get(key, key), []).append(est["cycles"] / was["cycles"])
    return {k: [round(min(v), 3), round(max(v), 3)] for k, v in sorted(got.items())}


def unmeasured(cost: Mapping[str, Any]) -> list[str]:
    """The cases of an ``rvvdiff cost`` cost.json that were not measured, one short line each: the tree (the fixed
    one or the replaced code's), the case and VLEN, and why (the emulator's reason, e.g. a trap Spike takes)."""
    out = []
    for key, why in sorted((cost.get("unmeasured") or {}).items()):
        side, _, case = key.partition(": ")
        m = re.match(r"(.*)-vlen(\d+)-(\w+)$", case)
        where = f"{m.group(1)} at VLEN {m.group(2)}" if m else case
        reason = why.split(" -- ", 1)[1] if " -- " in why else why
        reason = re.sub(r"^rvvdiff spike runtime: ", "", reason).split(" (")[0].strip()
        out.append(f"{'the replaced code' if side == 'base' else 'the fixed code'}, {where}: {reason[:160]}")
    return out


def _span(lo_hi: Sequence[float]) -> str:
    lo, hi = (f"{x:.3f}" for x in lo_hi)
    return lo if lo == hi else f"{lo}-{hi}"


def track_record() -> str:
    """One sentence: how far the X60 estimates have been from boards' measured speed-ups (clang builds)."""
    try:
        rs = kernel_rows.rows()
    except kernel_rows.CalibrationError as e:
        return f"Their track record against boards could not be read ({e})."
    parts = []
    given, held_out = [r for r in rs if not r.held_out], [r for r in rs if r.held_out]
    for est, what in (("table", "rvv-bench prices"), ("mca", "LLVM's X60 model")):
        w, h = kernel_rows.worst(given, est), kernel_rows.worst(held_out, est)
        (ok, n), (hok, hn) = kernel_rows.direction_right(given, est), kernel_rows.direction_right(held_out, est)
        said = []
        if w:
            once = sum(1 for r in given if r.used_for and r.factors(est, "clang"))
            said.append(f"within {w[0]:.1f}x of the measured speed-up on {w[1]} change{'s' if w[1] > 1 else ''}"
                        + (f" ({once} of them held out until used to change an estimator)" if once else "")
                        + f", the direction right on {ok} of {n}")
        if h:  # the rows kept out of every choice of the estimators: their own figures, never pooled
            said.append(f"on {h[1]} change{'s' if h[1] > 1 else ''} held out of every choice of the estimates, within "
                        f"{h[0]:.1f}x, the direction right on {hok} of {hn}")
        if said:
            parts.append(f"by {what} " + " and, ".join(said))
    if not parts:
        return "No board measurement has been set beside such an estimate yet."
    return ("Held against `llama-bench` speed-ups that SpacemiT K1 boards measured for earlier RVV changes, rvvdiff's"
            " X60 estimates of the changed kernel were " + "; ".join(parts) + " (clang builds): an estimate, not a"
            " measurement.")


def paragraph(fix_names: Sequence[str], cycles: Mapping[str, Any] | None) -> str:
    """The Speed paragraph for a series whose fixes are ``fix_names``; ``cycles``: its entry of cycles.json."""
    head = ("**Speed (an estimate).** No board was used and there are no `llama-bench` figures. Instructions retired under Spike:"
            " the table's cost column (fixed / replaced per VLEN).")
    got = {f: cycles[f] for f in fix_names if cycles and f in cycles}
    if not got:
        return (head + " Estimated cycles per core are not measured yet for these fixes"
                " (`rvvdiff series --cost` measures them).")
    cells = []
    for f, c in got.items():
        if c.get("cores"):
            cells.append(f"`{f}` ({c.get('compiler', 'clang')}, {c.get('isa', '?')} build): "
                         + ", ".join(f"{core} {_span(r)}" for core, r in c["cores"].items())
                         + (f" (not measured: {'; '.join(c['unmeasured'])})" if c.get("unmeasured") else ""))
        else:
            cells.append(f"`{f}`: not estimated ({c.get('why', 'no case of the cost suite reaches it')})")
    missing = [f for f in fix_names if f not in got]
    return (head + " Estimated cycles per call on each core with rvv-bench prices, fixed / replaced (the calls'"
            " instruction mix under Spike priced per core; the range over the cost suite's real-model cases the fix"
            " reaches): " + "; ".join(cells) + "."
            + (f" Not measured yet: {', '.join(f'`{m}`' for m in missing)}." if missing else "")
            + " " + track_record())
