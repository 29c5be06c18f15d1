"""The model-shaped rows estimated as a model runs: each tree's whole token, the layers' mul_mats (the row's
model-shaped case, measured on that tree) and the rest of the token (harness/cost/prices/token_rest.py), and
BEFORE's token over AFTER's (Amdahl's law: the rest dilutes the kernel's gain), beside the compute-only mul_mats
the model-shaped table holds, for every board test; held-out rows apart (docs/calibration.md, between
``<!-- token table -->`` markers; ``rvvdiff calibration write``).

Where each part comes from:

* the mul_mats: the row's committed source (harness/data/calibration/<row>.json), clang's builds;
* the rest but the output head: each tree's own where it was measured on a tree of the row's commit (``by_commit``
  of :data:`REST`, harness/data/calibration/rest.json), else the pinned tree's for that tree, which the table says
  (``rest: each tree's`` / ``rest: pinned``): the rows' changes do not touch these ops, so a tree's own changes the
  share, not the direction;
* the output head: where it is the case's own weight type (a float model's, Bonsai's q1_0) the row's own slices at
  ``k = hidden`` on each tree (``head: own``), so the changed kernel runs it; else (q6_K) the pinned tree's, both
  trees (``head: pinned q6_K``).

The roofline (harness/cost/prices/roofline.py ``token``) takes the token's cycles as its compute and adds the head's
weights, once a pass, to the DRAM and L2 floors; the rest's own traffic is not counted (its ops move activations,
not weights: small beside a pass's weights).

Nothing here reads a board figure to make an estimate: the batch a test is held against is the model-shaped
table's rule (harness/cost/calibration/model_rows.py ``batch_for``), the threads the board run's.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from harness.cost.calibration import kernel_rows, model_rows, sources
from harness.cost.prices import memory_system, per_token, roofline
from harness.cost.prices import token_rest as TR

MARKERS = ("<!-- token table -->", "<!-- /token table -->")
SHARE_MARKERS = ("<!-- token share table -->", "<!-- /token share table -->")
#: The rest's committed cost output (the pinned tree, clang, VLEN 256) and the specs it was measured with.
REST = sources.SOURCES / "rest.json"
REST_SPECS = "tinyllama:q6_K@1+32:1+32+64+128,qwen3-1.7b:own:1+64"
ESTIMATORS = per_token.ESTIMATORS
ROOFED = roofline.ROOFED


def keep_rest(rows: list[Mapping[str, Any]], path: Path = REST, commit: str | None = None, spec: str = "") -> int:
    """Keep a cost run's rows of the rest (cost.json's ``head``, or ``--cost-log`` rows) in the rest's source, a row
    measured again replacing the one it repeats: the pinned tree's, or with ``commit`` a row tree's (measured with
    ``spec``, a ``RVVDIFF_COST_REST`` value); returns the rows kept."""
    have = json.loads(path.read_text()) if path.is_file() else {"what": f"the rest of a token: {REST_SPECS}"}
    kept = [{k: r[k] for k in sources.KEPT if k in r} for r in rows if str(r.get("name", "")).startswith(TR.CASE_PREFIX)]
    if commit is None:
        have = sources.merge(have, {"clang": {"head": kept}})
    else:
        old = have.setdefault("by_commit", {}).get(commit, {})
        merged = sources.merge({"per_compiler": {"clang": {"head": old.get("rows", [])}}}, {"clang": {"head": kept}})
        have["by_commit"][commit] = {"spec": spec or old.get("spec", ""), "rows": merged["per_compiler"]["clang"]["head"]}
    path.write_text(json.dumps(have, indent=0, sort_keys=True) + "\n")
    _source.cache_clear()
    return len(kept)


@cache
def _source() -> dict[str, Any]:
    return json.loads(REST.read_text()) if REST.is_file() else {}


def _rest_rows() -> list[dict[str, Any]]:
    return _source().get("per_compiler", {}).get("clang", {}).get("head", [])


def tree_rests() -> dict[str, dict[tuple[str, int], TR.Rest]]:
    """The rest measured on the rows' own trees, by commit (the row's ``before`` / ``after``)."""
    return {c: rests(got["rows"], got["spec"]) for c, got in _source().get("by_commit", {}).items()}


def rests(rows: list[Mapping[str, Any]] | None = None, specs: str = REST_SPECS) -> dict[tuple[str, int], TR.Rest]:
    """The rest per (shape, batch) from the committed rest source of the pinned tree (or ``rows`` measured with
    ``specs``); a batch not measured is absent."""
    rows = list(_rest_rows()) if rows is None else rows
    out = {}
    for spec in TR.parse_spec(specs):
        for n in spec.batches:
            for sp in (spec, TR.Spec(spec.shape, None, spec.batches)):  # with its head, else without
                try:
                    out[(spec.shape.name, n)] = TR.rest(sp, rows, only=(n,))[0]
                    break
                except per_token.ModelCostError:
                    continue
    return out


@dataclass(frozen=True)
class Side:
    """One tree's token at one batch: the mul_mats (all layers), the rest, the head, per token, one core."""

    mul_mats: per_token.Work
    rest: per_token.Work
    head: per_token.Work
    head_own: bool
    result: per_token.Result
    #: Where the rest was measured: "pinned" or the tree's commit.
    rest_from: str = "pinned"

    @property
    def token(self) -> per_token.Work:
        return TR.token(self.mul_mats, self.rest, self.head)

    def rest_share(self) -> dict[str, float]:
        """The share of the token that is not the layers' mul_mats (the rest and the head)."""
        t = self.token
        return {e: 1 - self.mul_mats[e] / t[e] for e in t}

    def kernel_share(self) -> dict[str, float]:
        """The share of the token on the model-shaped case's path (the changed kernel's): the layers' mul_mats, and
        the head where it is their type."""
        t = self.token
        return {e: (self.mul_mats[e] + (self.head[e] if self.head_own else 0.0)) / t[e] for e in t}


def side(result: per_token.Result, slices: Mapping[tuple[int, int, int, int], Mapping[str, Any]],
         rest: TR.Rest, rest_from: str = "pinned") -> Side:
    spec = result.spec
    own = TR.head_type(spec.type) == spec.type
    head = TR.own_head(spec, slices, result.batch) if own else {e: v for e, v in rest.parts["head"].items()}
    return Side({e: v for e, v in result.per_token.items() if e in ESTIMATORS}, rest.total(with_head=False), head, own,
                result, rest_from)


def roofed(s: Side, estimator: str, threads: int) -> memory_system.Roofline | None:
    """The token's roofline on ``threads`` cores: its cycles (with the rest) as the compute, the mul_mats' traffic
    and the head's weights once a pass as the memory; None without the mul_mats' traffic."""
    t = s.result.per_token
    if estimator not in s.token or any(k not in t for k in per_token.TRAFFIC):
        return None
    spec = s.result.spec
    head_type = spec.type if s.head_own else TR.QUANTIZED_HEAD
    floor = per_token.weight_bytes(spec) / s.result.batch
    head = TR.head_bytes(spec.shape, head_type) / s.result.batch
    return memory_system.roofline(s.token[estimator], max(t["dram_bytes"], floor) + head, roofline.system(),
                                  clock_hz=roofline.CLOCK_GHZ * 1e9, threads=threads,
                                  l2_bytes=max(t["l2_bytes"], floor) + head)


@dataclass(frozen=True)
class Test:
    """One board test against one model-shaped case's batch: compute-only mul_mats and whole tokens."""

    row: kernel_rows.Row
    spec: str
    test: str
    batch: int
    summarised: bool
    before: Side
    after: Side
    threads: int

    @property
    def board(self) -> float:
        return self.row.speedup(self.test)

    def x(self, estimator: str, whole: bool) -> float | None:
        """BEFORE / AFTER: the mul_mats' (``whole`` False) or the tokens' (True); ``roof_<e>``: the token's
        roofline (``whole`` False: the mul_mats' roofline as roofline.py makes it)."""
        if estimator.startswith("roof_"):
            e = estimator.removeprefix("roof_")
            if whole:
                b, a = roofed(self.before, e, self.threads), roofed(self.after, e, self.threads)
            else:
                b, a = (roofline.token(s.result, e, threads=self.threads) for s in (self.before, self.after))
            return b.seconds / a.seconds if b and a else None
        b, a = (self.before.token, self.after.token) if whole else (self.before.mul_mats, self.after.mul_mats)
        return b[estimator] / a[estimator] if estimator in b and estimator in a else None

    def error(self, estimator: str, whole: bool) -> float | None:
        x = self.x(estimator, whole)
        return None if x is None else x / self.board

    def right(self, estimator: str, whole: bool) -> bool | None:
        x = self.x(estimator, whole)
        return None if x is None else (x > 1) == (self.board > 1)


def tests(text: str | None = None, rest_rows: list[Mapping[str, Any]] | None = None,
          load: Any = None, trees: Mapping[str, Mapping[tuple[str, int], TR.Rest]] | None = None) -> list[Test]:
    """Every board test of every model-shaped case with a source on both trees and the rest at its batch: each
    tree's rest where it was measured on a tree of the row's commit (``trees``: by commit; default the committed
    source's), else the pinned tree's."""
    text = kernel_rows.DATA.read_text() if text is None else text
    load = load or sources.load_source
    raws = {r["name"]: r for r in tomllib.loads(text).get("row", [])}
    got = rests(rest_rows)
    trees = (tree_rests() if rest_rows is None else {}) if trees is None else trees
    out = []
    for m in model_rows.parse(text):
        raw = raws[m.row.name]
        run = load(m.row.name).get("per_compiler", {}).get("clang", {})
        if not run.get("head") or not run.get("base") or not raw.get("threads"):
            continue
        spec = per_token.parse_spec(m.spec)[0]
        vlen = int(raw["vlen"])
        slices = {t: per_token.rows_by_slice(run[s], spec, vlen) for t, s in (("before", "base"), ("after", "head"))}
        res = {t: {r.batch: r for r in per_token.results(spec, sl)} for t, sl in slices.items()}
        for t in m.row.measured:
            b = m.batch_for(t)
            if b is None or (spec.shape.name, b) not in got or b not in res["after"]:
                continue
            rest = got[(spec.shape.name, b)]
            own = TR.head_type(spec.type) == spec.type
            if not own and "head" not in rest.parts:
                continue  # the head's type not measured at this batch
            sides = []
            for tree, commit in (("before", raw["before"]), ("after", raw["after"])):
                mine = trees.get(commit, {}).get((spec.shape.name, b))
                use = (mine, commit) if mine is not None and (own or "head" in mine.parts) else (rest, "pinned")
                sides.append(side(res[tree][b], slices[tree], *use))
            out.append(Test(m.row, m.spec, t, b, m.summarised, *sides, int(raw["threads"])))
    return out


COLUMNS = ("instructions", "table", "mca", "roof_table", "roof_mca")


def table(ts: list[Test] | None = None) -> str:
    ts = tests() if ts is None else ts
    head = ["change", "model case (head)", "test (batch)", "board x"]
    head += [f"{e}: mul_mats x -> token x (error)" for e in COLUMNS]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    last = None
    for held in (False, True):
        for t in (t for t in ts if t.row.held_out == held):
            first = (t.row.name, t.spec) != last
            last = (t.row.name, t.spec)
            froms = {t.before.rest_from, t.after.rest_from}
            where = "pinned" if froms == {"pinned"} else (
                "each tree's" if "pinned" not in froms else f"BEFORE {t.before.rest_from}, AFTER {t.after.rest_from}")
            case = f"`{t.spec}` (head {'own' if t.before.head_own else TR.QUANTIZED_HEAD}; rest: {where})" + (
                "" if t.summarised else " (not summarised)")
            cells = [t.row.label if first else "", case if first else "", f"{t.test} ({t.batch})", f"{t.board:.2f}"]
            for e in COLUMNS:
                a, b = t.x(e, False), t.x(e, True)
                cells.append("-" if a is None or b is None else
                             f"{a:.2f} -> {b:.2f} ({a / t.board:.2f} -> {b / t.board:.2f})")
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _part(ts: list[Test], e: str) -> str:
    have = [t for t in ts if t.x(e, True) is not None and t.x(e, False) is not None]
    if not have:
        return f"{e}: none"
    worst = {w: max(max(f, 1 / f) for t in have if (f := t.error(e, w)) is not None) for w in (False, True)}
    right = {w: sum(bool(t.right(e, w)) for t in have) for w in (False, True)}
    return (f"{e}: worst error {worst[False]:.2f}x mul_mats -> {worst[True]:.2f}x token, direction right on "
            f"{right[False]} -> {right[True]} of {len(have)}")


def summary(ts: list[Test] | None = None) -> list[str]:
    """A line for the given rows' tests and one for the held-out rows' (summarised cases only), per estimator: the
    worst error either way and the tests the direction was right on, mul_mats alone and whole tokens."""
    ts = [t for t in (tests() if ts is None else ts) if t.summarised]
    out = []
    for held, label in ((False, "Given rows"), (True, "Held-out rows")):
        mine = [t for t in ts if t.row.held_out == held]
        out.append(f"- **{label}** ({len(mine)} tests): " + "; ".join(_part(mine, e) for e in COLUMNS) + ".")
    return out


def share_lines(ts: list[Test] | None = None) -> list[str]:
    """Per row's case and batch: the share of each tree's token on the changed kernel's path (the layers' mul_mats,
    and the head where it is their type), per estimator."""
    ts = tests() if ts is None else ts
    out = ["| change, model case | batch | the changed kernel's path's share of a token, BEFORE -> AFTER: "
           + " | ".join(ESTIMATORS) + " |", "|---|---|" + "---|" * len(ESTIMATORS)]
    seen = set()
    for t in ts:
        if (t.row.name, t.spec, t.batch) in seen:
            continue
        seen.add((t.row.name, t.spec, t.batch))
        b, a = t.before.kernel_share(), t.after.kernel_share()
        out.append(f"| {t.row.label}, `{t.spec}` | {t.batch} | "
                   + " | ".join(f"{b[e] * 100:.1f} % -> {a[e] * 100:.1f} %" if e in b and e in a else "-"
                                for e in ESTIMATORS) + " |")
    return out


def rest_lines(got: Mapping[tuple[str, int], TR.Rest] | None = None) -> list[str]:
    """Per shape and batch: the rest's cycles per token by part (table estimator), and its total per estimator."""
    got = rests() if got is None else got
    names = sorted({k for r in got.values() for k in r.parts}, key=lambda k: (k == "head", k))
    out = ["| shape | batch | " + " | ".join(f"{n} (table, M)" for n in names) + " | rest without head: "
           + " / ".join(ESTIMATORS) + " (M a token) |", "|---|---|" + "---|" * (len(names) + 1)]
    for (shape, n), r in sorted(got.items()):
        tot = r.total(with_head=False)
        out.append(f"| {per_token.SHAPES[shape].label} | {n} | "
                   + " | ".join(f"{r.parts[k]['table'] / 1e6:.2f}" if k in r.parts and "table" in r.parts[k] else "-"
                                for k in names) + " | "
                   + " / ".join(f"{tot[e] / 1e6:.2f}" for e in ESTIMATORS if e in tot) + " |")
    return out


def block(ts: list[Test] | None = None) -> str:
    ts = tests() if ts is None else ts
    return table(ts) + "\n\n" + "\n".join(summary(ts))


def write_doc(doc: Path = kernel_rows.DOC) -> bool:
    """The table and its summary, the shares and the rest's parts between their markers; True when it changed."""
    text = doc.read_text()
    ts = tests()
    new = model_rows.between(text, MARKERS, block(ts), doc)
    new = model_rows.between(new, SHARE_MARKERS, "\n".join(rest_lines()) + "\n\n" + "\n".join(share_lines(ts)), doc)
    if new != text:
        doc.write_text(new)
    return new != text


def doc_block(doc: Path = kernel_rows.DOC, markers: tuple[str, str] = MARKERS) -> str:
    text = doc.read_text()
    begin, end = markers
    return text.split(begin, 1)[1].split(end, 1)[0].strip() if begin in text else ""
