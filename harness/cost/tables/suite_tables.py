"""Tables of the cost suite's rows (``--cost-log``): per kernel x VLEN x ISA build, HEAD against BASE.

A row is one measured call (costs/test_cost.py): instructions retired, vector instructions and vector
work (harness/cost/measure/spike_count.py).  Read here:

* **cost per unit**: instructions per element (or per MAC) of the call, the figure that must fall as
  VLEN grows if the kernel uses the longer vectors;
* **vs scalar twin**: the entry point's instructions over its ``*_generic`` twin's, same build and VLEN
  (below 1: the vector code is cheaper);
* **HEAD / BASE**: the same case on the two trees; beyond ``threshold`` (default 2 %) it is listed
  *slower* or *faster*;
* **paths by batch**: the cases of a batch sweep side by side, each batch with the path it measured
  (harness/cost/tables/batch_paths.py);
* **flags**: an RVV case whose cost per unit does not fall by at least :data:`SCALING_GAIN` from one
  VLEN to the next (the longer vector is not used: a fixed-width path, a variant that slides more
  than it computes), and one that costs more than its scalar twin;
* **estimated cycles on real cores**: a row's instruction mix priced with the per-instruction
  throughput tables of the cores whose VLEN it ran at (harness/cost/prices/cores.py), and at VLEN 256 LLVM's
  X60 model over the executed blocks (harness/cost/prices/mca.py); where the two differ by more than 1.5x,
  the instructions responsible (harness/cost/prices/estimate_pair.py).  Every estimated change is followed by the
  calibration error seen so far against boards (harness/cost/calibration/kernel_rows.py, docs/calibration.md).
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cost.calibration import kernel_rows
from harness.cost.prices import cores, estimate_pair
from harness.cost.tables import batch_paths

#: A VLEN step must make the cost per unit fall by at least this fraction to count as scaling.
SCALING_GAIN = 0.05
#: Default HEAD / BASE change listed as slower or faster.
THRESHOLD = 0.02

Key = tuple[str, int, str]  # (case, vlen, isa)


def read_rows(path: Path) -> dict[Key, dict[str, Any]]:
    """The rows of a ``--cost-log`` file by (case, VLEN, ISA build); a missing file has none."""
    rows: dict[Key, dict[str, Any]] = {}
    if not path.is_file():
        return rows
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            rows[(r["case"], int(r["vlen"]), r["isa"])] = r
    return rows


@dataclass(frozen=True)
class Move:
    """A case whose cost moved between BASE and HEAD at one target."""

    case: str
    function: str
    vlen: int
    isa: str
    base: int
    head: int
    #: HEAD / BASE of the estimated cycles on the cores of this VLEN (core label -> ratio), where both have a mix.
    on_cores: dict[str, float] = field(default_factory=dict, compare=False)
    #: The compiler that built both trees, when a run measured more than one ("": the only one).
    compiler: str = ""

    @property
    def ratio(self) -> float:
        return self.head / self.base

    def describe(self) -> str:
        est = "".join(f"; est. {c} {(r - 1) * 100:+.1f} %" for c, r in self.on_cores.items())
        cc = f", {self.compiler}" if self.compiler else ""
        return (f"{self.function} ({self.case}) at VLEN {self.vlen}, {self.isa}{cc}: {self.base} -> {self.head} "
                f"instructions ({(self.ratio - 1) * 100:+.1f} %{est})")

    def as_dict(self) -> dict[str, Any]:
        return {"case": self.case, "function": self.function, "vlen": self.vlen, "isa": self.isa,
                "base": self.base, "head": self.head, "ratio": round(self.ratio, 4),
                "on_cores": {c: round(r, 4) for c, r in self.on_cores.items()},
                **({"compiler": self.compiler} if self.compiler else {})}


@dataclass
class CostTable:
    """HEAD's rows (and BASE's), with the judgements drawn from them."""

    head: dict[Key, dict[str, Any]]
    base: dict[Key, dict[str, Any]] = field(default_factory=dict)
    #: Cases that could not be measured, by node id: the one line saying why (trap, hang, build).
    unmeasured: dict[str, str] = field(default_factory=dict)
    threshold: float = THRESHOLD
    #: The compiler that built the measured trees, when a run measured more than one (named in its moves).
    compiler: str = ""

    # ---------------------------------------------------------- views

    def cases(self) -> list[str]:
        """The cases in the order they ran, each scalar twin right after its entry point."""
        seen = list(dict.fromkeys(k[0] for k in [*self.head, *self.base]))
        first = {c: i for i, c in enumerate(seen)}
        lead = lambda c: c.removesuffix("-generic")  # noqa: E731
        return sorted(seen, key=lambda c: (first.get(lead(c), first[c]), c.endswith("-generic")))

    def targets(self, case: str) -> list[tuple[int, str]]:
        return sorted({(v, i) for c, v, i in [*self.head, *self.base] if c == case}, key=lambda t: (t[1], t[0]))

    def row(self, case: str, vlen: int, isa: str, *, base: bool = False) -> dict[str, Any] | None:
        return (self.base if base else self.head).get((case, vlen, isa))

    def per_unit(self, r: dict[str, Any] | None) -> float | None:
        return r["instret"] / r["units"] if r else None

    def vs_twin(self, case: str, vlen: int, isa: str, *, base: bool = False) -> float | None:
        r = self.row(case, vlen, isa, base=base)
        if not r or not r.get("twin"):
            return None
        t = self.row(r["twin"], vlen, isa, base=base)
        return r["instret"] / t["instret"] if t and t["instret"] else None

    def estimates(self, r: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
        """{core key: estimate} of a row at the cores of its VLEN (none without an instruction mix)."""
        return cores.estimates(int(r["vlen"]), r.get("mix") or {}) if r else {}

    def head_over_base(self, case: str, vlen: int, isa: str) -> float | None:
        h, b = self.row(case, vlen, isa), self.row(case, vlen, isa, base=True)
        return h["instret"] / b["instret"] if h and b and b["instret"] else None

    # ---------------------------------------------------------- judgements

    def moves(self) -> tuple[list[Move], list[Move]]:
        """(slower, faster): the cases measured on both trees whose instructions moved beyond the threshold."""
        slower, faster = [], []
        for key, h in self.head.items():
            b = self.base.get(key)
            if not b or not b["instret"]:
                continue
            m = Move(key[0], h["function"], key[1], key[2], b["instret"], h["instret"], self._core_ratios(h, b),
                     self.compiler)
            if m.ratio > 1 + self.threshold:
                slower.append(m)
            elif m.ratio < 1 - self.threshold:
                faster.append(m)
        order = lambda m: (-abs(m.ratio - 1), m.case, m.isa, m.vlen)  # noqa: E731
        return sorted(slower, key=order), sorted(faster, key=order)

    def _core_ratios(self, h: dict[str, Any], b: dict[str, Any]) -> dict[str, float]:
        eh, eb = self.estimates(h), self.estimates(b)
        out = {c.label: eh[c.key]["cycles"] / eb[c.key]["cycles"] for c in cores.for_vlen(int(h["vlen"]))
               if c.key in eh and c.key in eb and eb[c.key]["cycles"]}
        m = estimate_pair.mca_ratio(h, b)
        return {**out, estimate_pair.MCA_LABEL: m} if m is not None else out

    def not_scaling(self, rows: dict[Key, dict[str, Any]] | None = None) -> list[str]:
        """One line per RVV case and ISA build whose cost per unit does not fall from a VLEN to the next."""
        rows = self.head if rows is None else rows
        by: dict[tuple[str, str], dict[int, dict[str, Any]]] = defaultdict(dict)
        for (case, vlen, isa), r in rows.items():
            if r["impl"] == "rvv" and r.get("vector", 0) > 0:
                by[(case, isa)][vlen] = r
        out = []
        for (case, isa), per in sorted(by.items()):
            vlens = sorted(per)
            flat = [f"{a}->{b}: x{per[b]['instret'] / per[a]['instret']:.2f}" for a, b in zip(vlens, vlens[1:])
                    if per[a]["instret"] and per[b]["instret"] > (1 - SCALING_GAIN) * per[a]["instret"]]
            if flat:
                fn = next(iter(per.values()))["function"]
                out.append(f"{fn} ({case}, {isa}): no cheaper at the longer VLEN for " + ", ".join(flat))
        return out

    def costlier_than_twin(self, rows: dict[Key, dict[str, Any]] | None = None) -> list[str]:
        """One line per RVV case and ISA build that retires more instructions than its scalar twin somewhere."""
        base = rows is self.base
        rows = self.head if rows is None else rows
        by: dict[tuple[str, str], list[str]] = defaultdict(list)
        for case, vlen, isa in sorted(rows, key=lambda k: (k[0], k[2], k[1])):
            ratio = self.vs_twin(case, vlen, isa, base=base)
            if ratio is not None and ratio > 1:
                by[(case, isa)].append(f"VLEN {vlen} x{ratio:.2f}")
        return [f"{rows[next(k for k in rows if k[0] == case)]['function']} ({case}, {isa}): costlier than its "
                f"scalar twin at " + ", ".join(v) for (case, isa), v in by.items()]

    def costlier_than_twin_on_cores(self) -> list[str]:
        """One line per RVV case and ISA build whose estimated cycles on some core exceed its scalar twin's
        (the instruction count may say otherwise: a few LMUL-8 reductions or gathers outweigh many scalar
        instructions on a core that executes them element group by element group)."""
        by: dict[tuple[str, str], list[str]] = defaultdict(list)
        for (case, vlen, isa), r in sorted(self.head.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
            twin = self.row(r["twin"], vlen, isa) if r.get("twin") else None
            est, t_est = self.estimates(r), self.estimates(twin)
            for c in cores.for_vlen(vlen):
                if c.key in est and c.key in t_est and t_est[c.key]["cycles"]:
                    ratio = est[c.key]["cycles"] / t_est[c.key]["cycles"]
                    if ratio > 1:
                        by[(case, isa)].append(f"{c.label} (VLEN {vlen}) x{ratio:.2f}")
        return [f"{self.head[next(k for k in self.head if k[0] == case)]['function']} ({case}, {isa}): "
                "estimated costlier than its scalar twin on " + ", ".join(v) for (case, isa), v in by.items()]

    # ---------------------------------------------------------- output

    def as_json(self) -> dict[str, Any]:
        slower, faster = self.moves()
        est = lambda rows: [{**r, "estimates": self.estimates(r)} for r in rows.values()]  # noqa: E731
        return {"threshold": self.threshold, "head": est(self.head), "base": est(self.base),
                "cores": [{"key": c.key, "core": c.label, "vlen": c.vlen, "source": c.source} for c in cores.all_cores()],
                "slower": [m.as_dict() for m in slower], "faster": [m.as_dict() for m in faster],
                "not_scaling": self.not_scaling(), "costlier_than_twin": self.costlier_than_twin(),
                "costlier_than_twin_on_cores": self.costlier_than_twin_on_cores(),
                "estimator_disagreements": [d.as_dict() for d in estimate_pair.disagreements(self.head)],
                "batch_paths": [s.as_dict() for s in batch_paths.sweeps(self.head, self.base)],
                "calibration": kernel_rows.summary(), "unmeasured": self.unmeasured}

    def markdown(self, *, title: str = "Cost per VLEN", head_name: str = "HEAD", base_name: str = "BASE") -> str:
        slower, faster = self.moves()
        out = [f"## {title}", "",
               "Instructions retired per call under Spike (exact, repeatable; no caches or pipelines: "
               "docs/cost.md). Per unit: instructions / elements (MACs for GEMM). "
               "vs twin: over the scalar `*_generic` twin in the same build and VLEN."]
        if self.base:
            pct = f"{self.threshold * 100:g} %"
            out += ["", f"**{head_name} vs {base_name}**: {len(slower)} slower, {len(faster)} faster (beyond {pct})."]
            for what, ms in (("Slower", slower), ("Faster", faster)):
                if ms:
                    out += ["", f"{what}:"] + [f"- {m.describe()}" for m in ms[:40]]
                    if len(ms) > 40:
                        out.append(f"- ... and {len(ms) - 40} more (cost.json)")
            if any(m.on_cores for m in slower + faster):
                out += ["", f"Estimated changes ('est.'): {kernel_rows.summary()}."]
        if self.unmeasured:
            out += ["", "Not measured (one line each; the rest of the table is complete):"]
            out += [f"- {line}" for line in grouped(self.unmeasured)]
        out += batch_paths.markdown(self.head, self.base)
        flat, dear = self.not_scaling(), self.costlier_than_twin()
        if flat:
            out += ["", f"Not cheaper with a longer VLEN ({len(flat)}; a step counts when it saves "
                    f"less than {SCALING_GAIN * 100:g} %):"] + [f"- {x}" for x in flat]
        if dear:
            out += ["", f"Vector code costlier than the scalar twin ({len(dear)}):"] + [f"- {x}" for x in dear]
        dear_est = self.costlier_than_twin_on_cores()
        if dear_est:
            out += ["", f"Vector code estimated costlier than the scalar twin on a real core ({len(dear_est)}; "
                    "rvv-bench's prices, docs/cost.md):"] + [f"- {x}" for x in dear_est]
        split, failed = estimate_pair.disagreements(self.head), estimate_pair.failures(self.head)
        if failed:
            out += ["", f"No {estimate_pair.MCA_LABEL} estimate ({len(failed)}; llvm-mca failed):"] + [f"- {x}" for x in failed]
        if split:
            out += ["", f"The two X60 estimates differ by more than {estimate_pair.DISAGREE:g}x ({len(split)}; "
                    "rvv-bench's prices vs LLVM's model over the executed blocks, docs/calibration.md):"]
            out += [f"- {d.describe()}" for d in split]
        out += ["", *self._table(), *self._estimates_table()]
        return "\n".join(out) + "\n"

    def _estimates_table(self) -> list[str]:
        """Per VLEN a core's prices apply to: estimated cycles per unit on each such core (docs/cost.md)."""
        out: list[str] = []
        for vlen in sorted({k[1] for k in self.head} & cores.vlens()):
            cs = cores.for_vlen(vlen)
            keys = [k for k in self.head if k[1] == vlen]
            missing = sum(1 for k in keys if not self.head[k].get("mix"))
            with_mca = any(estimate_pair.mca_cycles(self.head[k]) for k in keys)
            out += ["", f"### Estimated cycles at VLEN {vlen}: " + ", ".join(c.label for c in cs), "",
                    "Cycles per unit: the call's instruction mix priced with each core's measured reciprocal "
                    "throughputs (rvv-bench; no latency, overlap or memory system: docs/cost.md). vs twin: the "
                    "same estimate of the scalar `*_generic` twin. u: share of the call's instructions the table "
                    "does not price (left out of the figure)."
                    + (f" {estimate_pair.MCA_LABEL}: LLVM's scheduling model of the X60 over the executed basic "
                       "blocks, weighted by their executions (latency and issue width included; "
                       "docs/calibration.md)." if with_mca else "")
                    + (f" {missing} rows have no instruction mix (kept by an older rvvdiff: "
                       "RVVDIFF_COST_CACHE=0 measures them again)." if missing else ""), ""]
            head = ["kernel", "size", "ISA build"] + [c.label for c in cs] + ([estimate_pair.MCA_LABEL] if with_mca else [])
            out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            for case in self.cases():
                for isa in sorted({i for c, v, i in keys if c == case}):
                    r = self.head[(case, vlen, isa)]
                    est = self.estimates(r)
                    if not est:
                        continue
                    twin = self.row(r["twin"], vlen, isa) if r.get("twin") else None
                    t_est = self.estimates(twin)
                    cells = []
                    for c in cs:
                        e = est[c.key]
                        txt = f"{e['cycles'] / r['units']:.3g}"
                        if c.key in t_est and t_est[c.key]["cycles"]:
                            txt += f" (x{e['cycles'] / t_est[c.key]['cycles']:.2f} twin)"
                        share = e["unpriced"] / max(1, r["executed"])
                        if share >= 0.005:
                            txt += f" u{share * 100:.0f}%"
                        cells.append(txt)
                    if with_mca:
                        m, tm = estimate_pair.mca_cycles(r), estimate_pair.mca_cycles(twin)
                        cells.append("" if m is None else f"{m / r['units']:.3g}"
                                     + (f" (x{m / tm:.2f} twin)" if tm else ""))
                    out.append(f"| {r['function']} | {r['size']} | {isa} | " + " | ".join(cells) + " |")
        return out

    def _table(self) -> list[str]:
        vlens = sorted({k[1] for k in [*self.head, *self.base]})
        head = ["kernel", "size", "ISA build"] + [f"VLEN {v}" for v in vlens]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for case in self.cases():
            isas = sorted({i for c, _, i in [*self.head, *self.base] if c == case})
            for isa in isas:
                any_row = next(r for k, r in [*self.head.items(), *self.base.items()] if k[0] == case)
                cells = []
                for v in vlens:
                    h, b = self.row(case, v, isa), self.row(case, v, isa, base=True)
                    if not h and not b:
                        cells.append("")
                        continue
                    txt = f"{self.per_unit(h):.3g}" if h else "-"
                    twin = self.vs_twin(case, v, isa)
                    if twin is not None:
                        txt += f" (x{twin:.2f} twin)"
                    hb = self.head_over_base(case, v, isa)
                    if hb is not None and abs(hb - 1) > 1e-9:
                        txt += f" [{hb:.3f} of base]"
                    cells.append(txt)
                name = batch_paths.label(any_row["function"], [r for k, r in self.head.items() if k[0] == case and k[2] == isa]
                                         or [any_row])
                lines.append(f"| {name} | {any_row['size']} | {isa} | " + " | ".join(cells) + " |")
        return lines

    def html(self, md: str, *, head_name: str = "HEAD", base_name: str = "BASE") -> str:
        """A page: the plots (instructions per unit against VLEN, per case and ISA build; HEAD solid,
        BASE dashed, the scalar twin dotted), then the Markdown report as text."""
        figs = [_plot(self, case) for case in self.cases() if not case.endswith("-generic")]
        return ("<!doctype html><meta charset=utf-8><title>rvvdiff cost</title>"
                "<style>body{font-family:sans-serif;margin:1em}figure{display:inline-block;margin:.5em;"
                "border:1px solid #ccc;padding:.3em}figcaption{font-size:12px}pre{white-space:pre-wrap}</style>"
                f"<h1>Cost per VLEN</h1><p>Solid: {html.escape(head_name)}; dashed: {html.escape(base_name)}; "
                "dotted: the scalar twin. Y: instructions per unit (log scale); X: VLEN.</p>"
                + "".join(f for f in figs if f) + f"<pre>{html.escape(md)}</pre>")


_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


def _plot(t: CostTable, case: str, w: int = 320, h: int = 200) -> str:
    import math
    series: list[tuple[str, str, list[tuple[int, float]]]] = []  # (isa, style, points)
    isas = sorted({i for c, _, i in [*t.head, *t.base] if c == case})
    for isa in isas:
        for base, style in ((False, ""), (True, "6,4")):
            rows = t.base if base else t.head
            pts = sorted((v, r["instret"] / r["units"]) for (c, v, i), r in rows.items() if c == case and i == isa)
            if pts:
                series.append((isa, style, pts))
            twin = next((r.get("twin") for (c, _v, i), r in rows.items() if c == case and i == isa), None)
            tp = sorted((v, r["instret"] / r["units"]) for (c, v, i), r in rows.items() if c == twin and i == isa)
            if tp and not base:
                series.append((isa, "2,3", tp))
    if not series:
        return ""
    xs = sorted({v for _, _, p in series for v, _ in p})
    ys = [y for _, _, p in series for _, y in p if y > 0]
    if not ys:
        return ""
    lo, hi = math.log10(min(ys)) - 0.05, math.log10(max(ys)) + 0.05
    x0, x1 = math.log2(xs[0]), math.log2(xs[-1]) if len(xs) > 1 else math.log2(xs[0]) + 1

    def px(v: int) -> float:
        return 40 + (math.log2(v) - x0) / (x1 - x0 or 1) * (w - 60)

    def py(y: float) -> float:
        return h - 25 - (math.log10(max(y, 1e-9)) - lo) / (hi - lo or 1) * (h - 40)
    parts = [f'<svg width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg" font-size="10">']
    for v in xs:
        parts.append(f'<text x="{px(v):.0f}" y="{h - 8}" text-anchor="middle">{v}</text>')
    for y in (10 ** lo, 10 ** hi):
        parts.append(f'<text x="2" y="{py(y):.0f}">{y:.3g}</text>')
    for isa, style, pts in series:
        colour = _COLOURS[isas.index(isa) % len(_COLOURS)]
        d = " ".join(f"{px(v):.1f},{py(y):.1f}" for v, y in pts)
        dash = f' stroke-dasharray="{style}"' if style else ""
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5"{dash} points="{d}"/>')
    for k, isa in enumerate(isas):
        parts.append(f'<text x="{w - 80}" y="{12 + 11 * k}" fill="{_COLOURS[k % len(_COLOURS)]}">{isa}</text>')
    parts.append("</svg>")
    fn = next((r["function"] for (c, _v, _i), r in [*t.head.items(), *t.base.items()] if c == case), case)
    return f"<figure>{''.join(parts)}<figcaption>{html.escape(fn)} ({html.escape(case)})</figcaption></figure>"


def unmeasured(results: dict[str, dict[str, Any]], prefix: str = "",
               rows: dict[Key, dict[str, Any]] | None = None) -> dict[str, str]:
    """Cost tests of a run's results.json that produced no row: their one-line reason.  With the run's
    ``rows``, a test that passed and left none is one too, so that every test the run selected is
    either a row or here."""
    logged = None if rows is None else {r.get("nodeid") for r in rows.values()}
    out = {}
    for nodeid, r in results.items():
        if "test_cost[" not in nodeid:
            continue
        if r.get("outcome") == "passed":
            if logged is None or nodeid in logged:
                continue
            r = {"outcome": "no row", "reason": "passed but left no row in the cost log"}
        why = (r.get("reason") or r.get("outcome", "")).strip().splitlines()
        out[prefix + nodeid.split("[", 1)[1].rstrip("]")] = f"{r.get('outcome')}: {why[0] if why else ''}"[:600]
    return out


def merge(rows: Iterable[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    return {(r["case"], int(r["vlen"]), r["isa"]): r for r in rows}


def by_reason(unmeasured: dict[str, str]) -> dict[str, list[str]]:
    """The cases not measured grouped by their one-line reason, in the order the reasons first come."""
    by: dict[str, list[str]] = defaultdict(list)
    for case, why in unmeasured.items():
        by[why].append(case)
    return dict(by)


def grouped(unmeasured: dict[str, str]) -> list[str]:
    """One line per reason: a build that fails, or a tree without a kernel, is one line, not one per case."""
    return [f"{cases[0]}: {why}" if len(cases) == 1 else f"{len(cases)} cases ({cases[0]}, ...): {why}"
            for why, cases in by_reason(unmeasured).items()]
