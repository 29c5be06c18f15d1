"""The estimates held against the boards: published before / after measurements of real RVV changes to
ggml, beside rvvdiff's estimate of the same change (harness/data/calibration.toml; docs/calibration.md).

A row is one change (a pull request: its ggml commit and the commit's parent), one board and what the
board reported (tokens/s before and after, per llama-bench test: ``pp512``, ``tg32``), and rvvdiff's
estimated speed-up of the kernel the model's weights run through at the board's VLEN: BEFORE's estimated
cycles over AFTER's, by each estimator (``table``: rvv-bench's X60 prices, harness/cost/prices/cores.py;
``mca``: LLVM's X60 model, harness/cost/prices/mca.py), from ``rvvdiff cost --base BEFORE --ggml-src AFTER``.

The **error factor** of an estimate against a measured test is estimated speed-up / measured speed-up
(1: exact; 2: the estimate promised twice the board's gain; 0.5: half).  :func:`summary` is the line
``rvvdiff cost`` prints next to every estimated change: the worst factor seen, either way, over the rows
not held out, per estimator.  Rows marked ``held_out`` were kept out of every choice made from the table
and are summarised apart; a held-out row used to change an estimator (``used_for``) is held out no longer,
and its label says so.

``rvvdiff calibration show`` prints the table (harness/commands/calibration.py), ``write`` puts it into
docs/calibration.md between its markers, ``estimate COST_JSON FUNCTION`` prints :func:`every_core` of a cost run;
a row's estimates come from its committed source (harness/cost/calibration/sources.py).
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cost.calibration import sources
from harness.cost.calibration.sources import CalibrationError, cost_ratios
from harness.cost.prices import cores, estimate_pair

DATA = sources.DATA
DOC = Path(__file__).resolve().parents[3] / "docs" / "calibration.md"
DOC_LINK = "docs/calibration.md"
ESTIMATORS = {"table": "rvv-bench prices", "mca": "llvm-mca", "instructions": "instructions"}
#: The estimators the summary line states (the instruction ratio is a reference: no core's prices).
SUMMARISED = ("table", "mca")
_BEGIN, _END = "<!-- calibration table -->", "<!-- /calibration table -->"


@dataclass(frozen=True)
class Row:
    name: str  # "llama.cpp #18784"
    change: str
    board: str
    vlen: int
    model: str
    kernel: str  # the function whose estimate stands for the change
    before: str  # ggml-org/ggml commit
    after: str
    measured: Mapping[str, tuple[float, float]]  # test -> (t/s before, t/s after)
    #: compiler -> estimator -> BEFORE / AFTER cycles per unit (``estimates``: clang's builds;
    #: ``estimates_<compiler>``: another compiler's, e.g. ``estimates_gcc14``).
    estimates: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: Kept apart from every choice made from the table: set aside before any number was computed for it
    #: and not yet used to change an estimator.
    held_out: bool = False
    note: str = ""
    #: The function BEFORE ran instead, when the change moved the work to another one (a new path).
    before_kernel: str = ""
    #: The estimator change a held-out row was used for: it is held out no longer (``held_out`` is False)
    #: and every table and summary says so.
    used_for: str = ""
    #: Every other priced core's BEFORE / AFTER ratio at the row's VLEN, clang's builds: core key ->
    #: ``x`` and the shares of BEFORE's and AFTER's instructions its table cannot price.
    priced: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The row's name as the tables print it: held out, or once held out and what it was used for."""
        if self.held_out:
            return f"held out: {self.name}"
        return f"{self.name} (held out until used for {self.used_for})" if self.used_for else self.name

    def speedup(self, test: str) -> float:
        b, a = self.measured[test]
        return a / b

    def factor(self, estimator: str, test: str, cc: str = "clang") -> float | None:
        e = self.estimates.get(cc, {}).get(estimator)
        return e / self.speedup(test) if e else None

    def factors(self, estimator: str, cc: str = "clang") -> list[float]:
        return [f for t in self.measured if (f := self.factor(estimator, t, cc)) is not None]


def parse(text: str, where: str = "calibration.toml") -> list[Row]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise CalibrationError(f"{where}: not TOML: {e}") from None
    rows = []
    for i, r in enumerate(data.get("row", []), 1):
        try:
            measured = {t: (float(v[0]), float(v[1])) for t, v in r["measured"].items()}
            bad = [t for t, (b, a) in measured.items() if b <= 0 or a <= 0]
            if bad or not measured:
                raise CalibrationError(f"{where}: row {i} ({r.get('name')}): measured needs test = [before, after] "
                                       f"t/s, both positive ({', '.join(bad) or 'none given'})")
            estimates = {("clang" if k == "estimates" else k.removeprefix("estimates_")): v for k, v in r.items()
                         if k == "estimates" or k.startswith("estimates_")}
            unknown = {e for v in estimates.values() for e in v} - set(ESTIMATORS)
            if unknown:
                raise CalibrationError(f"{where}: row {i} ({r['name']}): unknown estimator {sorted(unknown)}; "
                                       f"known: {', '.join(ESTIMATORS)}")
            rows.append(Row(r["name"], r["change"], r["board"], int(r["vlen"]), r["model"], r["kernel"],
                            r["before"], r["after"], measured,
                            {cc: {k: float(x) for k, x in v.items()} for cc, v in estimates.items() if v},
                            bool(r.get("held_out", False)) and not r.get("used_for"), r.get("note", ""),
                            r.get("before_kernel", ""), r.get("used_for", ""), r.get("priced", {})))
        except KeyError as e:
            raise CalibrationError(f"{where}: row {i}: missing field {e.args[0]!r}") from None
    return rows


@functools.lru_cache(maxsize=1)
def rows() -> tuple[Row, ...]:
    return tuple(parse(DATA.read_text(), str(DATA))) if DATA.is_file() else ()


def compilers(rs: list[Row] | tuple[Row, ...]) -> list[str]:
    """The compilers some row has estimates of, clang first."""
    return sorted({cc for r in rs for cc in r.estimates}, key=lambda cc: (cc != "clang", cc))


def worst(rs: list[Row] | tuple[Row, ...], estimator: str, cc: str = "clang") -> tuple[float, int] | None:
    """(the largest error factor either way, rows with an estimate) over ``rs``; None without any."""
    fs = [max(f, 1 / f) for r in rs for f in r.factors(estimator, cc)]
    n = sum(1 for r in rs if r.factors(estimator, cc))
    return (max(fs), n) if fs else None


def direction_right(rs: list[Row] | tuple[Row, ...], estimator: str, cc: str = "clang") -> tuple[int, int]:
    """(rows where every measured test moved the way the estimate says, rows with an estimate)."""
    with_est = [r for r in rs if estimator in r.estimates.get(cc, {})]
    ok = [r for r in with_est if all((r.estimates[cc][estimator] > 1) == (r.speedup(t) > 1) for t in r.measured)]
    return len(ok), len(with_est)


def estimator_part(cc: str, est: str, got: tuple[float, int] | None, held: tuple[float, int] | None, *, used: int,
                   right: tuple[int, int], right_held: tuple[int, int], plural: bool = False) -> str:
    """One compiler's and estimator's part of a summary line (this module's and model_rows.py's): the worst error
    factor over the rows given (``used`` of them held out until used for an estimator; ``plural``: "changes" even
    for one) and over the held-out ones apart, and on how many of each the direction was right."""
    (ok, n), (hok, hn) = right, right_held
    given = got and f"{got[0]:.1f}x on {got[1]} change{'s' if plural or got[1] > 1 else ''}" + (
        f" ({used} held out until used for an estimator)" if used else "")
    return (f"{cc} builds, X60 by {ESTIMATORS[est]} within "
            + ", ".join(x for x in (given, held and f"{held[0]:.1f}x on {held[1]} held out") if x)
            + (f", direction right on {ok} of {n}" if n else "")
            + (f", {'on' if n else 'direction right on'} {hok} of {hn} held out" if hn else ""))


def summary(rs: list[Row] | tuple[Row, ...] | None = None) -> str:
    """The calibration error seen so far, one line, with the link (module docstring); a data file that does
    not read is said in the line (the cost report it is part of is not lost to it)."""
    if rs is None:
        try:
            rs = rows()
        except CalibrationError as e:
            return f"calibration: unknown ({e}; {DOC_LINK} says how a row is written)"
    parts = []
    for cc, est in ((cc, est) for cc in compilers(rs) for est in SUMMARISED):
        given, out = [r for r in rs if not r.held_out], [r for r in rs if r.held_out]
        got, held = worst(given, est, cc), worst(out, est, cc)
        if got or held:
            used = sum(1 for r in given if r.used_for and r.factors(est, cc))
            parts.append(estimator_part(cc, est, got, held, used=used, right=direction_right(given, est, cc),
                                        right_held=direction_right(out, est, cc)))
    if not parts:
        return f"calibration: no board measurement set beside an estimate yet ({DOC_LINK})"
    return ("calibration against boards (changed kernel's estimated speed-up vs the model's t/s, error either way): "
            + "; ".join(parts) + f" ({DOC_LINK})")


def table(rs: list[Row] | tuple[Row, ...] | None = None) -> str:
    """The Markdown table of docs/calibration.md: one line per row and measured test (the change, board and
    model named on its first line)."""
    rs = rows() if rs is None else rs
    head = ["change", "board, VLEN", "model, kernel", "test", "measured t/s", "measured x", "built by",
            *(f"est. x {e}" for e in ESTIMATORS), *(f"error {e}" for e in ESTIMATORS), "est. x other cores (table)"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for held in (False, True):
        for r in (r for r in rs if r.held_out == held):
            lines = [(t, cc) for t in r.measured for cc in compilers([r])] or [(t, "") for t in r.measured]
            for i, (t, cc) in enumerate(lines):
                b, a = r.measured[t]
                got = r.estimates.get(cc, {})
                est = [f"{got[e]:.2f}" if e in got else "-" for e in ESTIMATORS]
                err = [f"{f:.2f}" if (f := r.factor(e, t, cc)) is not None else "-" for e in ESTIMATORS]
                kernel = f"`{r.before_kernel}` -> `{r.kernel}`" if r.before_kernel else f"`{r.kernel}`"
                first = [f"{r.label}: {r.change} ({r.before} -> {r.after})", f"{r.board}, {r.vlen}",
                         f"{r.model}; {kernel}"] if i == 0 else ["", "", ""]
                same = i > 0 and lines[i - 1][0] == t
                measured = ["", ""] if same else [f"{b:g} -> {a:g}", f"{r.speedup(t):.2f}"]
                others = other_cores(r) if i == 0 else ""
                out.append("| " + " | ".join([*first, "" if same else t, *measured, cc or "-", *est, *err, others]) + " |")
    return "\n".join(out)


def other_cores(r: Row) -> str:
    """The other cores' cell of a row: each core's ratio and, where its table cannot price some of the calls'
    instructions, their shares (BEFORE / AFTER), which its cycles leave out."""
    labels = {c.key: c.label for c in cores.all_cores()}
    return "; ".join(f"{labels.get(k, k)} {v['x']:.2f}" + (
        f" ({v['unpriced_before']:.0%} / {v['unpriced_after']:.0%} of instructions unpriced)"
        if v.get("unpriced_before") or v.get("unpriced_after") else "") for k, v in r.priced.items()) or "-"


def write_doc(doc: Path = DOC) -> bool:
    """Put :func:`table` between the markers of ``doc``; True when it changed."""
    text = doc.read_text()
    if _BEGIN not in text or _END not in text:
        raise CalibrationError(f"{doc}: no {_BEGIN} ... {_END} markers to put the table between")
    new = text.split(_BEGIN)[0] + _BEGIN + "\n" + table() + "\n" + _END + text.split(_END, 1)[1]
    if new != text:
        doc.write_text(new)
    return new != text


def doc_table(doc: Path = DOC) -> str:
    text = doc.read_text()
    return text.split(_BEGIN, 1)[1].split(_END, 1)[0].strip() if _BEGIN in text else ""


def every_core(cost: Mapping[str, Any], function: str, before_function: str | None = None) -> dict[str, dict]:
    """:func:`cost_ratios` for every priced core at its own VLEN (harness/cost/prices/cores.py: the X60, X100 and Ascalon
    at 256, the A100 at 1024; LLVM's model only for the X60), per compiler of the run: ``{compiler: {"<core>
    (VLEN n)": ratios}}``.  A one-compiler cost.json is keyed ``run``; a multi-compiler one (``per_compiler``)
    by its compilers.  A core whose VLEN the run did not measure is left out; none at all is an error."""
    runs = cost["per_compiler"] if "per_compiler" in cost else {"run": cost}
    out: dict[str, dict] = {}
    for cc, run in runs.items():
        per = {}
        for core in cores.all_cores():
            try:
                r = cost_ratios(run, function, core.vlen, core.key, before_function)
            except CalibrationError:
                continue
            if core.key != estimate_pair.X60_KEY:
                r.pop("mca", None)
            per[f"{core.label} (VLEN {core.vlen})"] = r
        if per:
            out[cc] = per
    if not out:
        vlens = sorted({int(r["vlen"]) for run in runs.values() for r in run.get("head", []) if r["function"] == function})
        raise CalibrationError(f"{function}: no priced core's VLEN ({', '.join(str(v) for v in sorted(cores.vlens()))}) "
                               f"among the cost run's rows of both trees (it measured it at VLEN {vlens or 'none'})")
    return out
