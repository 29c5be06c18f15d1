"""The model-shaped estimates held against the boards: for each change of harness/data/calibration.toml,
the estimated tokens/s ratio of one transformer layer's mul_mats (harness/cost/prices/per_token.py: BEFORE's
cycles per token over AFTER's, at the board's VLEN, one core) beside the board's llama-bench ratio.

A row's ``model_case`` table says which case (``spec``, as ``rvvdiff cost --model`` takes it) and its estimated
ratio per batch and estimator (``b1 = { table = ..., mca = ..., instructions = ... }``); each measured test
is compared with one batch: token generation (``tg*``) with batch 1, a prompt (``ppN``) with batch N
where it was measured, else with the largest batch measured (said in the table).  The error factor is
estimated / measured, as in harness/cost/calibration/kernel_rows.py; held-out rows are summarised apart.

``rvvdiff calibration show --model`` prints the table (harness/commands/calibration.py), ``write`` puts it into
docs/calibration.md between its markers, ``estimate COST_JSON --model SPEC`` prints a cost run's entry for a row
(:func:`estimate`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.cost.calibration import kernel_rows, sources
from harness.cost.prices import per_token

_BEGIN, _END = "<!-- model calibration table -->", "<!-- /model calibration table -->"
#: The markers of the held-out rows' summary table (:func:`held_out_table`).
HELD = ("<!-- held-out model table -->", "<!-- /held-out model table -->")
SUMMARISED = ("table", "mca")


@dataclass(frozen=True)
class ModelRow:
    row: kernel_rows.Row
    spec: str
    #: compiler -> batch -> estimator -> BEFORE / AFTER cycles per token
    estimates: Mapping[str, Mapping[int, Mapping[str, float]]]
    #: False: shown, but not in the summary (the case does not run what the board ran; ``note`` says why).
    summarised: bool = True
    note: str = ""

    def batch_for(self, test: str, cc: str = "clang") -> int | None:
        have = sorted(self.estimates.get(cc, {}))
        if not have:
            return None
        if test.startswith("tg"):
            return 1 if 1 in have else None
        n = int(test[2:]) if test.startswith("pp") and test[2:].isdigit() else None
        prompt = [b for b in have if b > 1]
        return n if n in have else (prompt[-1] if prompt else None)

    def factor(self, estimator: str, test: str, cc: str = "clang") -> float | None:
        b = self.batch_for(test, cc)
        e = self.estimates.get(cc, {}).get(b, {}).get(estimator) if b else None
        return e / self.row.speedup(test) if e else None


def parse(text: str, where: str = "calibration.toml") -> list[ModelRow]:
    data = tomllib.loads(text)
    by_name = {r.name: r for r in kernel_rows.parse(text, where)}
    out = []
    for r in data.get("row", []):
        got = r.get("model_case") or []
        for m in [got] if isinstance(got, dict) else got:
            out.append(_case(m, r, by_name, where))
    return out


def _case(m: Mapping[str, Any], r: Mapping[str, Any], by_name: Mapping[str, kernel_rows.Row], where: str) -> ModelRow:
    try:
        per_token.parse_spec(m["spec"])
        est = {("clang" if k == "estimates" else k.removeprefix("estimates_")): {
            int(b.removeprefix("b")): {e: float(x) for e, x in v.items()} for b, v in per.items()}
            for k, per in m.items() if k.startswith("estimates")}
    except (KeyError, ValueError, AttributeError) as e:
        raise kernel_rows.CalibrationError(f"{where}: row {r.get('name')}: model_case needs spec = "
                                           f"'SHAPE:TYPE:BATCHES' and estimates = {{ b1 = {{ table = ... }} }} "
                                           f"({e})") from None
    return ModelRow(by_name[r["name"]], m["spec"], est, bool(m.get("summarised", True)), m.get("note", ""))


def rows() -> list[ModelRow]:
    return parse(kernel_rows.DATA.read_text(), str(kernel_rows.DATA)) if kernel_rows.DATA.is_file() else []


def worst(rs: list[ModelRow], estimator: str, cc: str = "clang") -> tuple[float, int] | None:
    fs = [max(f, 1 / f) for r in rs for t in r.row.measured if (f := r.factor(estimator, t, cc)) is not None]
    n = sum(1 for r in rs if any(r.factor(estimator, t, cc) is not None for t in r.row.measured))
    return (max(fs), n) if fs else None


def direction_right(rs: list[ModelRow], estimator: str, cc: str = "clang") -> tuple[int, int]:
    """(cases where every measured test moved the way its batch's estimate says, cases with an estimate)."""
    def moves(r: ModelRow) -> list[bool]:
        return [(f * r.row.speedup(t) > 1) == (r.row.speedup(t) > 1) for t in r.row.measured
                if (f := r.factor(estimator, t, cc)) is not None]
    with_est = [m for r in rs if (m := moves(r))]
    return sum(all(m) for m in with_est), len(with_est)


def summary(rs: list[ModelRow] | None = None) -> str:
    """One line: the worst error factor of the model-shaped ratios, per compiler and estimator, held-out rows
    apart, cases marked not summarised left out."""
    rs = [r for r in (rows() if rs is None else rs) if r.summarised]
    parts = []
    for cc in sorted({cc for r in rs for cc in r.estimates}, key=lambda cc: (cc != "clang", cc)):
        for est in SUMMARISED:
            given = [r for r in rs if not r.row.held_out]
            got, held = worst(given, est, cc), worst([r for r in rs if r.row.held_out], est, cc)
            used = len({r.row.name for r in given if r.row.used_for})
            if got or held:
                parts.append(kernel_rows.estimator_part(
                    cc, est, got, held, used=used, right=direction_right(given, est, cc),
                    right_held=direction_right([r for r in rs if r.row.held_out], est, cc), plural=True))
    if not parts:
        return f"model-shaped calibration: no row yet ({kernel_rows.DOC_LINK})"
    return ("model-shaped estimates against boards (one layer's mul_mats, t/s ratio, error either way): "
            + "; ".join(parts) + f" ({kernel_rows.DOC_LINK})")


def table(rs: list[ModelRow] | None = None) -> str:
    rs = rows() if rs is None else rs
    ests = per_token.ESTIMATORS
    head = ["change", "model case", "test", "measured x", "batch", "built by", *(f"est. x {e}" for e in ests),
            *(f"error {e}" for e in ests)]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for held in (False, True):
        for r in (r for r in rs if r.row.held_out == held):
            ccs = sorted(r.estimates, key=lambda cc: (cc != "clang", cc))
            lines = [(t, cc) for t in r.row.measured for cc in ccs]
            for i, (t, cc) in enumerate(lines):
                b = r.batch_for(t, cc)
                got = r.estimates.get(cc, {}).get(b, {}) if b else {}
                n = int(t[2:]) if t.startswith("pp") and t[2:].isdigit() else 1
                bl = "-" if b is None else (f"{b}" if b == n or t.startswith("tg") else f"{b} (for {n})")
                spec = f"`{r.spec}`" + ("" if r.summarised else " (not summarised)") + (f": {r.note}" if r.note else "")
                first = [r.row.label, spec] if i == 0 else ["", ""]
                same = i > 0 and lines[i - 1][0] == t
                measured = ["", ""] if same else [t, f"{r.row.speedup(t):.2f}"]
                out.append("| " + " | ".join([
                    *first, *measured, bl, cc, *(f"{got[e]:.2f}" if e in got else "-" for e in ests),
                    *(f"{f:.2f}" if (f := r.factor(e, t, cc)) is not None else "-" for e in ests)]) + " |")
    return "\n".join(out)


def _span(values: list[float], unit: str = "x") -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.2f}{unit}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}{unit}-{hi:.2f}{unit}"


def held_out_table(rs: list[ModelRow] | None = None) -> str:
    """The held-out model-shaped cases in one line per compiler: the board's ratio per test, and each estimator's
    ratio over the batches the tests are held against with its error factor, as spans."""
    rs = [r for r in (rows() if rs is None else rs) if r.row.held_out]
    ests = per_token.ESTIMATORS
    out = ["| row (held out), model case | built by | board x per test | "
           + " | ".join(f"est. x {e} (error)" for e in ests) + " |", "|" + "---|" * (3 + len(ests))]
    for r in rs:
        for i, cc in enumerate(sorted(r.estimates, key=lambda cc: (cc != "clang", cc))):
            board = ", ".join(f"{t} {r.row.speedup(t):.2f}x" for t in r.row.measured) if i == 0 else ""
            cells = []
            for e in ests:
                batches = {b for t in r.row.measured if (b := r.batch_for(t, cc)) is not None}
                xs = [v for b in batches if (v := r.estimates[cc].get(b, {}).get(e)) is not None]
                fs = [f for t in r.row.measured if (f := r.factor(e, t, cc)) is not None]
                cells.append(f"{_span(xs)} ({_span(fs)})" if xs and fs else "-")
            out.append(f"| {r.row.name + ', `' + r.spec + '`' if i == 0 else ''} | {cc} | {board} | "
                       + " | ".join(cells) + " |")
    return "\n".join(out)


def between(text: str, markers: tuple[str, str], body: str, doc: Path) -> str:
    """``text`` with ``body`` put between its two ``markers`` (lines of ``doc``, named when they are missing)."""
    begin, end = markers
    if begin not in text or end not in text:
        raise kernel_rows.CalibrationError(f"{doc}: no {begin} ... {end} markers to put the table between")
    return text.split(begin)[0] + begin + "\n" + body + "\n" + end + text.split(end, 1)[1]


def write_doc(doc: Path = kernel_rows.DOC) -> bool:
    """Both model-shaped tables (:func:`table`, :func:`held_out_table`) into ``doc``; True when it changed."""
    text = doc.read_text()
    new = between(between(text, (_BEGIN, _END), table(), doc), HELD, held_out_table(), doc)
    if new != text:
        doc.write_text(new)
    return new != text


def doc_table(doc: Path = kernel_rows.DOC, markers: tuple[str, str] = (_BEGIN, _END)) -> str:
    text = doc.read_text()
    return text.split(markers[0], 1)[1].split(markers[1], 1)[0].strip() if markers[0] in text else ""


def estimate(cost: Mapping[str, Any], spec_text: str, vlen: int = 256) -> dict[str, dict[str, float]]:
    """A ``rvvdiff cost --base BEFORE --ggml-src AFTER --model SPEC`` run's ratios, as a row's ``estimates``."""
    return sources.model_ratios(cost, spec_text, vlen)
