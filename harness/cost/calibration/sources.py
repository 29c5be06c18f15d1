"""Where each calibration row's estimates come from: the part of the ``rvvdiff cost`` output that measured
the row, committed beside the data file (harness/data/calibration/<row>.json), and the arithmetic that
turns it into the row's ``estimates`` (harness/data/calibration.toml, docs/calibration.md).

A row's **source** holds, per compiler, the cost rows of BEFORE (``base``) and AFTER (``head``) the
estimates need: the row's kernel (and ``before_kernel``) at the row's VLEN, and the model-shaped case's
slices (``model_case``).  Each kept row is a cost.json row cut to what an estimate reads (instructions,
units, the instruction mix, every core's price, LLVM's model), so an estimator that changes can be rerun
over the same measurements.

:func:`record` is ``rvvdiff calibration record ROW [COST_JSON ...]``: it keeps the part of
each cost.json the row needs (merged into the row's source), computes the row's estimates from the whole
source and writes them into the data file.  :func:`stale` recomputes every row from its committed source
and lists each figure that is not the data file's (tests/test_calibration_sources.py).

No estimator reads a calibration row or its source: the arithmetic here only divides the figures the
estimators left in the cost rows.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.config import DATA_DIR
from harness.core.errors import RvvdiffError
from harness.cost.prices import cores, estimate_pair, per_token, roofline

DATA = DATA_DIR / "calibration.toml"
SOURCES = DATA_DIR / "calibration"
#: The fields of a cost.json row an estimate reads (and the ones that name it).
KEPT = ("case", "name", "size", "function", "impl", "vlen", "isa", "units", "unit", "instret", "mix", "estimates",
        "mca", "path", "path_expected", "traffic")
#: Decimals of a recorded estimate.
DECIMALS = 3


class CalibrationError(RvvdiffError, ValueError):
    """The data file or a row's source is malformed or lacks a figure; the message names the row and the field."""


def source_path(name: str, root: Path = SOURCES) -> Path:
    """``llama.cpp #18784`` -> harness/data/calibration/llama.cpp-18784.json."""
    return root / (re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-") + ".json")


# ------------------------------------------------------------------ the arithmetic


def _pick(cost: Mapping[str, Any], side: str, fn: str, vlen: int) -> dict[str, Any] | None:
    """The row of ``fn``'s call at ``vlen`` on one side (a model-shaped slice is no kernel's call)."""
    return next((r for r in cost.get(side, []) if r["function"] == fn and int(r["vlen"]) == vlen
                 and not str(r.get("name", "")).startswith(per_token.CASE_PREFIX)), None)


def cost_ratios(cost: Mapping[str, Any], function: str, vlen: int = 256, core: str = estimate_pair.X60_KEY,
                before_function: str | None = None) -> dict:
    """BEFORE / AFTER estimated cycles per unit of ``function`` in a ``rvvdiff cost --base`` run's cost.json,
    per estimator (and the instruction ratio), at ``vlen``.  With ``before_function``: one tree's two paths
    (the function the change stops calling on BEFORE's side, ``function`` on AFTER's), both from HEAD."""
    h = _pick(cost, "head", function, vlen)
    b = _pick(cost, "head", before_function, vlen) if before_function else _pick(cost, "base", function, vlen)
    if h is None or b is None:
        raise CalibrationError(f"{function} at VLEN {vlen}: not in the cost run's rows"
                               + (f" (with {before_function})" if before_function else " of both trees"))
    hu, bu = h["units"], b["units"]
    out = {"instructions": (b["instret"] / bu) / (h["instret"] / hu)}
    te, be = h.get("estimates", {}).get(core), b.get("estimates", {}).get(core)
    if te and be:
        out["table"] = (be["cycles"] / bu) / (te["cycles"] / hu)
    hm, bm = estimate_pair.mca_cycles(h), estimate_pair.mca_cycles(b)
    if hm and bm:
        out["mca"] = (bm / bu) / (hm / hu)
    return out


def model_ratios(cost: Mapping[str, Any], spec_text: str, vlen: int = 256) -> dict[str, dict[str, float]]:
    """A ``rvvdiff cost --base BEFORE --ggml-src AFTER --model SPEC`` run's ratios per batch, as a row's
    ``model_case`` ``estimates`` (``{"b1": {"table": ...}}``)."""
    spec = per_token.parse_spec(spec_text)[0]
    head = per_token.results(spec, per_token.rows_by_slice(cost.get("head", []), spec, vlen))
    base = per_token.results(spec, per_token.rows_by_slice(cost.get("base", []), spec, vlen))
    return {f"b{h.batch}": {e: round(v, DECIMALS) for e, v in per_token.ratio(b, h).items()}
            for b, h in zip(base, head)}


def _roofed(got: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """:func:`roofline.ratios`' result as a row writes it: ``{table = x, mca = x, bound_table = "...", ...}``."""
    out: dict[str, Any] = {e: round(v["x"], DECIMALS) for e, v in got.items()}
    return out | {f"bound_{e}": v["bound"] for e, v in got.items()}


def kernel_roofline(cost: Mapping[str, Any], raw: Mapping[str, Any]) -> dict[str, Any]:
    """The roofline estimate of a row's kernel (harness/cost/prices/roofline.py ``call``) at the row's ``threads``:
    BEFORE's time per unit over AFTER's, per estimator, and the roof that bound each side; {} without the rows'
    traffic or the row's threads."""
    vlen, fn, before_fn, threads = int(raw["vlen"]), raw["kernel"], raw.get("before_kernel") or None, raw.get("threads")
    h = _pick(cost, "head", fn, vlen)
    b = _pick(cost, "head", before_fn, vlen) if before_fn else _pick(cost, "base", fn, vlen)
    if not threads or h is None or b is None:
        return {}
    side = {name: {e: roofline.call(r, e, threads=int(threads)) for e in roofline.ROOFED} for name, r in
            (("before", b), ("after", h))}
    return _roofed(roofline.ratios(side["before"], side["after"], b["units"], h["units"]))


def model_roofline(cost: Mapping[str, Any], spec_text: str, threads: int, vlen: int = 256) -> dict[str, Any]:
    """A model-shaped case's roofline estimate per batch (harness/cost/prices/roofline.py ``token``) on ``threads``
    cores: ``{"b32": {table = x, ..., bound_table = "..."}}``; batches without both trees' traffic left out."""
    spec = per_token.parse_spec(spec_text)[0]
    head = per_token.results(spec, per_token.rows_by_slice(cost.get("head", []), spec, vlen))
    base = per_token.results(spec, per_token.rows_by_slice(cost.get("base", []), spec, vlen))
    out = {}
    for b, h in zip(base, head):
        got = roofline.ratios({e: roofline.token(b, e, threads=threads) for e in roofline.ROOFED},
                              {e: roofline.token(h, e, threads=threads) for e in roofline.ROOFED})
        if got:
            out[f"b{h.batch}"] = _roofed(got)
    return out


def model_cases(raw: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    got = raw.get("model_case") or []
    return [got] if isinstance(got, Mapping) else list(got)


def estimates_of(raw: Mapping[str, Any], source: Mapping[str, Any]) -> dict[str, Any]:
    """The row's estimate fields its source gives: ``estimates`` / ``estimates_<cc>`` (the kernel's ratios,
    clang's builds without a suffix) and ``model_case``: per case of the row, in its order, ``{"spec": ...,
    "estimates": ...}`` with the compilers the source measured that case with."""
    out: dict[str, Any] = {}
    vlen = int(raw["vlen"])
    runs = source.get("per_compiler", {})
    for cc, run in runs.items():
        try:
            r = cost_ratios(run, raw["kernel"], vlen, before_function=raw.get("before_kernel") or None)
        except CalibrationError:
            continue
        out[_field(cc)] = {e: round(r[e], DECIMALS) for e in ("table", "mca", "instructions") if e in r}
        if cc == "clang" and (priced := other_cores(run, raw)):
            out["priced"] = priced
        if cc == "clang" and (roofed := kernel_roofline(run, raw)):
            out["roofline"] = roofed
    cases = []
    for case in model_cases(raw):
        got: dict[str, Any] = {"spec": case["spec"]}
        name = per_token.case_name(per_token.parse_spec(case["spec"])[0])
        for cc, run in runs.items():
            if any(r.get("name") == name for side in ("head", "base") for r in run.get(side, [])):
                got[_field(cc)] = model_ratios(run, case["spec"], vlen)
                if cc == "clang" and raw.get("threads") and (
                        roofed := model_roofline(run, case["spec"], int(raw["threads"]), vlen)):
                    got["roofline"] = roofed
        cases.append(got)
    if cases:
        out["model_case"] = cases
    return out


def other_cores(run: Mapping[str, Any], raw: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Every other priced core's ratio at the row's VLEN (the X60's is ``table``): ``{core: {"x": BEFORE / AFTER
    cycles per unit, "unpriced_before": share of BEFORE's instructions its table cannot price, "unpriced_after":
    AFTER's}}`` (a core whose table times no vector load or store leaves those out of its cycles)."""
    out = {}
    vlen, fn, before = int(raw["vlen"]), raw["kernel"], raw.get("before_kernel") or None
    for core in cores.for_vlen(vlen):
        if core.key == estimate_pair.X60_KEY:
            continue
        try:
            r = cost_ratios(run, fn, vlen, core.key, before)
        except CalibrationError:
            continue
        if "table" not in r:
            continue
        rows = _pick(run, "head", before, vlen) if before else _pick(run, "base", fn, vlen), _pick(run, "head", fn, vlen)
        share = [(x or {}).get("estimates", {}).get(core.key, {}).get("unpriced", 0) / max(1, (x or {}).get("instret", 1))
                 for x in rows]
        out[core.key] = {"x": round(r["table"], DECIMALS), "unpriced_before": round(share[0], DECIMALS),
                         "unpriced_after": round(share[1], DECIMALS)}
    return out


def _field(cc: str) -> str:
    return "estimates" if cc == "clang" else f"estimates_{cc}"


# ------------------------------------------------------------------ keeping a cost run's part


def keep(cost: Mapping[str, Any], raw: Mapping[str, Any], cc: str = "clang") -> dict[str, dict[str, list]]:
    """The part of a cost.json the row needs, per compiler: ``{cc: {"head": [...], "base": [...]}}`` (a
    multi-compiler cost.json keeps each of its compilers; a one-compiler one is ``cc``'s)."""
    runs = cost["per_compiler"] if "per_compiler" in cost else {cc: cost}
    vlen = int(raw["vlen"])
    functions = {raw["kernel"], raw.get("before_kernel") or raw["kernel"]}
    names = {per_token.case_name(per_token.parse_spec(c["spec"])[0]) for c in model_cases(raw)}
    out: dict[str, dict[str, list]] = {}
    for name, run in runs.items():
        sides = {side: [{k: r[k] for k in KEPT if k in r} for r in run.get(side) or []
                        if int(r["vlen"]) == vlen and (r.get("function") in functions or r.get("name") in names)]
                 for side in ("head", "base")}
        if any(sides.values()):
            out[name] = sides
    return out


def _key(r: Mapping[str, Any]) -> tuple:
    return (r.get("case"), r.get("function"), r.get("size"), r.get("vlen"), r.get("isa"))


def merge(source: Mapping[str, Any], kept: Mapping[str, Mapping[str, list]]) -> dict[str, Any]:
    """``source`` with ``kept``'s rows added; a row measured again replaces the one it repeats."""
    runs = {cc: {s: list(v) for s, v in run.items()} for cc, run in source.get("per_compiler", {}).items()}
    for cc, sides in kept.items():
        for side, rows in sides.items():
            have = runs.setdefault(cc, {}).setdefault(side, [])
            new = {_key(r) for r in rows}
            have[:] = [r for r in have if _key(r) not in new] + list(rows)
    return {**source, "per_compiler": runs}


# ------------------------------------------------------------------ the data file


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise CalibrationError(f"cannot write {v!r} into the data file")


def dump(header: str, rows: list[Mapping[str, Any]]) -> str:
    """The data file: ``header`` (its comment lines) and each row, one field a line, in the row's order (a
    list of model cases one case a line)."""
    out = [header.rstrip("\n")]
    for r in rows:
        out += ["", "[[row]]"]
        for k, v in r.items():
            if isinstance(v, list) and v and all(isinstance(x, Mapping) for x in v):
                out += [f"{k} = ["] + [f"  {_value(x)}," for x in v] + ["]"]
            else:
                out.append(f"{k} = {_value(v)}")
    return "\n".join(out) + "\n"


def read(path: Path = DATA) -> tuple[str, list[dict[str, Any]]]:
    text = path.read_text()
    try:
        rows = tomllib.loads(text).get("row", [])
    except tomllib.TOMLDecodeError as e:
        raise CalibrationError(f"{path}: not TOML: {e}") from None
    return text.split("[[row]]", 1)[0], rows


def load_source(name: str, root: Path = SOURCES) -> dict[str, Any]:
    p = source_path(name, root)
    return json.loads(p.read_text()) if p.is_file() else {}


def record(name: str, costs: list[Path], cc: str = "clang", data: Path = DATA, root: Path = SOURCES) -> dict[str, Any]:
    """Keep what row ``name`` needs of each cost.json in ``costs`` (its source), then write the row's estimates
    computed from the whole source into the data file; returns the fields written."""
    header, rows = read(data)
    raw = next((r for r in rows if r.get("name") == name), None)
    if raw is None:
        raise CalibrationError(f"{data}: no row named {name!r} (rows: {', '.join(r.get('name', '?') for r in rows)})")
    source = load_source(name, root) or {"row": name}
    for p in costs:
        kept = keep(json.loads(p.read_text()), raw, cc)
        if not kept:
            raise CalibrationError(f"{p}: no row of {raw['kernel']} or of the row's model cases at VLEN {raw['vlen']}")
        source = merge(source, kept)
    if costs:
        root.mkdir(parents=True, exist_ok=True)
        source_path(name, root).write_text(json.dumps(source, indent=0, sort_keys=True) + "\n")
    if not source.get("per_compiler"):
        raise CalibrationError(f"{name}: no cost output committed ({source_path(name, root)}); give COST_JSON")
    new = estimates_of(raw, source)
    raw.update({k: v for k, v in new.items() if k != "model_case"})
    for case, got in zip(model_cases(raw), new.get("model_case", [])):
        case.update({k: v for k, v in got.items() if k != "spec"})  # type: ignore[attr-defined]
    done = set(new) - {"model_case"} | ({"model_case"} if any(len(c) > 1 for c in new.get("model_case", [])) else set())
    if "unsourced" in raw and not (left := [k for k in raw["unsourced"] if k not in done]):
        del raw["unsourced"]
    elif "unsourced" in raw:
        raw["unsourced"] = left
    data.write_text(dump(header, rows))
    return new


def stale(data: Path = DATA, root: Path = SOURCES) -> list[str]:
    """Each figure of the data file its row's committed source does not reproduce (or has none for), one line
    each: ``row: field: in the file ..., from the source ...``.  A figure the row lists in ``unsourced``
    (``estimates_gcc14``, ``model_case``: every case's) is said to have no committed output and is skipped."""
    out = []
    for raw in read(data)[1]:
        name, skip = raw.get("name", "?"), set(raw.get("unsourced", []))
        source = load_source(name, root)
        got = estimates_of(raw, source) if source else {}
        for k in [k for k in raw if (k.startswith("estimates") or k in ("priced", "roofline")) and k not in skip]:
            if got.get(k) != raw[k]:
                out.append(f"{name}: {k}: in the file {raw[k]}, from {source_path(name, root).name} "
                           f"{got.get(k, 'nothing')}")
        if "model_case" in skip:
            continue
        for have, new in zip(model_cases(raw), got.get("model_case", [{}] * len(model_cases(raw)))):
            for k in [k for k in have if k.startswith("estimates") or k == "roofline"]:
                if new.get(k) != have[k]:
                    out.append(f"{name}: model_case {have['spec']}: {k}: in the file {have[k]}, from "
                               f"{source_path(name, root).name} {new.get(k, 'nothing')}")
    return out
