"""The calibration rows before and after the roofline: each board test's error factor by each cycle estimator
compute-only (the row's ``estimates``) and as a roofline on the board's threads (its ``roofline``,
harness/cost/prices/roofline.py), per kernel and per model-shaped case, held-out rows apart, and on how many tests
each got the direction right (docs/calibration.md, between ``<!-- roofline table -->`` markers; ``rvvdiff
calibration write``).

A roofline is clang's builds' only (the traffic was counted on them), so the compute-only figure beside it is
clang's too.  A test is held against the batch harness/cost/calibration/model_rows.py holds it against; its error
is estimated over measured speed-up, as everywhere in the calibration.  A row or case with no traffic in its
source has no roofline: shown with "-", and counted apart.  The summary's "before" is over the same tests as its
"after", so that the two are comparable.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.cost.calibration import kernel_rows, model_rows, sources

MARKERS = ("<!-- roofline table -->", "<!-- /roofline table -->")
ESTIMATORS = ("table", "mca")


@dataclass(frozen=True)
class Test:
    """One board test held against one estimate (a kernel's, or a model-shaped case's batch)."""

    row: kernel_rows.Row
    what: str  # "kernel `f`" or the case's spec
    test: str
    batch: int | None  # the model-shaped batch it is held against (None: a kernel's)
    compute: Mapping[str, float]  # estimator -> compute-only estimate (clang)
    roofed: Mapping[str, Any]  # estimator -> roofline estimate, bound_<estimator> -> "BEFORE / AFTER" ({}: none)
    summarised: bool = True
    threads: str = "-"  # the board run's threads (the row's)

    @property
    def board(self) -> float:
        return self.row.speedup(self.test)

    def error(self, estimator: str, after: bool) -> float | None:
        got = (self.roofed if after else self.compute).get(estimator)
        return got / self.board if got else None

    def right(self, estimator: str, after: bool) -> bool | None:
        f = self.error(estimator, after)
        return None if f is None else (f * self.board > 1) == (self.board > 1)


def tests(text: str | None = None) -> list[Test]:
    """Every board test of the data file (``text``: its contents) against the row's kernel and its model cases."""
    text = kernel_rows.DATA.read_text() if text is None else text
    raws = {r["name"]: r for r in tomllib.loads(text).get("row", [])}
    rows = {r.name: r for r in kernel_rows.parse(text)}
    out: list[Test] = []
    for name, raw in raws.items():
        r = rows[name]
        if r.estimates.get("clang"):
            out += [Test(r, f"kernel `{r.kernel}`", t, None, r.estimates["clang"], raw.get("roofline", {}),
                         threads=str(raw.get("threads", "-"))) for t in r.measured]
    cases = {name: [c for c in ([raw["model_case"]] if isinstance(raw.get("model_case"), Mapping)
                                else raw.get("model_case", []))] for name, raw in raws.items()}
    seen: dict[str, int] = {}
    for m in model_rows.parse(text):
        i = seen[m.row.name] = seen.get(m.row.name, -1) + 1
        raw_case = cases[m.row.name][i]
        for t in m.row.measured:
            b = m.batch_for(t)
            if b is None:
                continue
            out.append(Test(rows[m.row.name], f"`{m.spec}`", t, b, m.estimates.get("clang", {}).get(b, {}),
                            raw_case.get("roofline", {}).get(f"b{b}", {}), m.summarised,
                            str(raws[m.row.name].get("threads", "-"))))
    return out


def _cell(t: Test, e: str) -> list[str]:
    c, r = t.compute.get(e), t.roofed.get(e)
    fb, fa = t.error(e, False), t.error(e, True)
    return [f"{c:.2f}" if c else "-",
            f"{r:.2f} ({t.roofed.get(f'bound_{e}', '?')})" if r else "-",
            (f"{fb:.2f}" if fb else "-") + " -> " + (f"{fa:.2f}" if fa else "-")]


def table(ts: list[Test] | None = None) -> str:
    ts = tests() if ts is None else ts
    head = ["change", "estimate", "test", "board x", "threads"]
    for e in ESTIMATORS:
        head += [f"{e}: compute x", f"{e}: roofline x (bound BEFORE / AFTER)", f"error {e}: compute -> roofline"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    last = None
    for held in (False, True):
        for t in (t for t in ts if t.row.held_out == held):
            first = (t.row.name, t.what) != last
            last = (t.row.name, t.what)
            what = t.what + ("" if t.summarised else " (not summarised)")
            test = t.test + ("" if t.batch is None else f" (batch {t.batch})")
            cells = [t.row.label if first else "", what if first else "", test, f"{t.board:.2f}", t.threads]
            for e in ESTIMATORS:
                cells += _cell(t, e)
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _part(ts: list[Test], e: str) -> str:
    roofed = [t for t in ts if t.error(e, True) is not None]
    if not roofed:
        return f"{e}: no roofline yet (no traffic in the sources of these {len(ts)} tests)"
    worst = {a: max(max(f, 1 / f) for t in roofed if (f := t.error(e, a)) is not None) for a in (False, True)}
    right = {a: sum(bool(t.right(e, a)) for t in roofed) for a in (False, True)}
    n = len(roofed)
    return (f"{e}: worst error {worst[False]:.1f}x compute-only -> {worst[True]:.1f}x roofline, direction right on "
            f"{right[False]} of {n} tests -> {right[True]} of {n}")


def summary(ts: list[Test] | None = None) -> list[str]:
    """One line for the given rows' tests and one for the held-out rows' (summarised cases only), per estimator:
    the worst error either way and the tests the direction was right on, compute-only and roofline, over the tests
    with a roofline; and how many tests have none."""
    ts = [t for t in (tests() if ts is None else ts) if t.summarised]
    out = []
    for held, label in ((False, "Given rows"), (True, "Held-out rows")):
        mine = [t for t in ts if t.row.held_out == held]
        without = sum(1 for t in mine if not any(t.error(e, True) for e in ESTIMATORS))
        out.append(f"- **{label}** ({len(mine)} tests, {without} without a roofline): "
                   + "; ".join(_part(mine, e) for e in ESTIMATORS) + ".")
    return out


def block(ts: list[Test] | None = None) -> str:
    ts = tests() if ts is None else ts
    return table(ts) + "\n\n" + "\n".join(summary(ts))


def write_doc(doc: Path = kernel_rows.DOC) -> bool:
    """The table and its summary between the markers of ``doc``, and :func:`traffic_lines` between theirs; True when
    either changed."""
    traffic = write_traffic(doc)
    text = doc.read_text()
    begin, end = MARKERS
    if begin not in text or end not in text:
        raise kernel_rows.CalibrationError(f"{doc}: no {begin} ... {end} markers to put the table between")
    new = text.split(begin)[0] + begin + "\n" + block() + "\n" + end + text.split(end, 1)[1]
    if new != text:
        doc.write_text(new)
    return new != text or traffic


def doc_block(doc: Path = kernel_rows.DOC, markers: tuple[str, str] = MARKERS) -> str:
    text = doc.read_text()
    begin, end = markers
    return text.split(begin, 1)[1].split(end, 1)[0].strip() if begin in text else ""


# ------------------------------------------------------------------ each side's roofs, from the sources

TRAFFIC_MARKERS = ("<!-- roofline traffic table -->", "<!-- /roofline traffic table -->")


def traffic_lines() -> list[str]:
    """Per row, model-shaped case and batch with traffic on both trees: each tree's cycles and traffic per token and
    the time each roof takes on the row's threads (harness/cost/prices/roofline.py ``token``), computed from the
    row's committed source."""
    from harness.cost.prices import per_token, roofline

    out = ["| row, model case | batch | tree | table / mca cycles a token | L2 / DRAM MB a token (weights once) | "
           "compute ms table / mca | L2 ms | DRAM ms | bound table / mca |", "|---|---|---|---|---|---|---|---|---|"]
    for raw in sources.read()[1]:
        run = sources.load_source(raw["name"]).get("per_compiler", {}).get("clang", {})
        for case in sources.model_cases(raw):
            if not case.get("roofline") or not raw.get("threads"):
                continue
            spec = per_token.parse_spec(case["spec"])[0]
            sides = [(tree, per_token.results(spec, per_token.rows_by_slice(run.get(side, []), spec, int(raw["vlen"]))))
                     for tree, side in (("BEFORE", "base"), ("AFTER", "head"))]
            for i in range(len(sides[0][1])):
                for j, (tree, res) in enumerate(sides):
                    r = res[i]
                    if any(k not in r.per_token for k in per_token.TRAFFIC):
                        continue
                    roofs = {e: roofline.token(r, e, threads=int(raw["threads"])) for e in roofline.ROOFED}
                    t, rt = r.per_token, roofs["table"]
                    w = per_token.weight_bytes(spec) / r.batch
                    first = i == 0 and j == 0
                    out.append(f"| {raw['name'] + ', `' + case['spec'] + '`' if first else ''} | "
                               f"{r.batch if j == 0 else ''} | {tree} | {t['table'] / 1e6:.1f} M / {t['mca'] / 1e6:.1f} M | "
                               f"{t['l2_bytes'] / 1e6:.1f} / {t['dram_bytes'] / 1e6:.1f} ({w / 1e6:.1f}) | "
                               f"{rt.compute_s * 1e3:.2f} / {roofs['mca'].compute_s * 1e3:.2f} | "
                               f"{(rt.l2_s or 0) * 1e3:.2f} | {(rt.dram_s or 0) * 1e3:.2f} | "
                               f"{rt.bound} / {roofs['mca'].bound} |")
    return out


def write_traffic(doc: Path = kernel_rows.DOC) -> bool:
    text = doc.read_text()
    begin, end = TRAFFIC_MARKERS
    if begin not in text or end not in text:
        raise kernel_rows.CalibrationError(f"{doc}: no {begin} ... {end} markers to put the table between")
    new = text.split(begin)[0] + begin + "\n" + "\n".join(traffic_lines()) + "\n" + end + text.split(end, 1)[1]
    if new != text:
        doc.write_text(new)
    return new != text
