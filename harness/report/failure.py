"""The failure report a failing differential test leaves, in ``--report-dir``::

    <report-dir>/cases/<test id>/case.json    what ran and what was expected (kernel, VLEN, ISA build,
                                               stress, ggml source and commit, emulator command, comparison)
    <report-dir>/cases/<test id>/inputs.npz   the minimal case: every buffer of the failing call,
                                               the failing outputs and the expected values
    <report-dir>/cases/<test id>/README.md    the short version a person reads first

It is written by the process that ran the test (an xdist worker) as soon as the test fails, so a
later crash of that worker loses nothing.  After shrinking, Hypothesis runs the minimal failing
example last: the call and the comparison recorded then are the minimal case.  ``rvvdiff repro
<dir>`` replays it (harness/jobs/repro_runs.py, harness/report/replay.py), ``--c`` as a standalone
program (harness/report/reproducer.py).
"""

from __future__ import annotations

import json
import math
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.matrix import Point
from harness.emulators import protocol as P
from harness.emulators import registry
from harness.report.ids import slug


def clear(report_dir: Path) -> None:
    """Remove the previous run's reports (a run's report directory describes that run only)."""
    shutil.rmtree(report_dir / "cases", ignore_errors=True)
    for name in ("summary.md", "summary.html", "results.json"):
        (report_dir / name).unlink(missing_ok=True)


def jsonable(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist() if v.size <= 64 else f"<array {v.dtype} shape {v.shape}; see inputs.npz>"
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return f if math.isfinite(f) else repr(f)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    return v


def _worst(comp: dict[str, Any]) -> dict[str, Any]:
    """Index, got, expected and error of the worst element of a recorded comparison."""
    got = np.asarray(comp["got"]).reshape(-1)
    exp = np.asarray(comp["expected"]).reshape(-1)
    if got.size == 0 or got.shape != exp.shape:
        return {}
    if comp["mode"] == "ulps":
        ratio = np.asarray(comp["ulps"]) / np.maximum(np.asarray(comp["allowed"]), 1e-300)
        i = int(np.nanargmax(np.where(np.isnan(ratio), np.inf, ratio)))
        return {"index": i, "got": got[i], "expected": exp[i], "error_ulps": comp["ulps"][i],
                "bound_ulps": comp["allowed"][i]}
    with np.errstate(invalid="ignore", over="ignore"):
        g, e = got.astype(np.float64), exp.astype(np.float64)
        diff = np.abs(g - e)
        same = (g == e) | (np.isnan(g) & np.isnan(e))
    score = np.where(same, -1.0, np.where(np.isnan(diff), np.inf, diff))
    i = int(np.argmax(score))
    out = {"index": i, "got": got[i], "expected": exp[i], "abs_error": diff[i]}
    if comp["mode"] == "bound":
        b = np.asarray(comp["bound"], np.float64).reshape(-1)
        out["bound"] = float(b[i] if b.size > 1 else b[0])
        out["error/bound"] = diff[i] / out["bound"] if out["bound"] > 0 else math.inf
    return out


def write_failure(report_dir: Path, *, nodeid: str, longrepr: str, kept: dict[str, Any], target: Any,
                  source: Any, replay: str, emulator: str = registry.DEFAULT) -> Path:
    """Write the report of one failed test; returns its directory."""
    d = report_dir / "cases" / slug(nodeid)
    d.mkdir(parents=True, exist_ok=True)
    call = kept.get("call") or {}
    # A call that returned is judged by its comparison; one that crashed leaves what the oracle expected.
    comp = kept.get("comparison") or kept.get("oracle")
    arrays: dict[str, np.ndarray] = {}
    bufs = []
    for i, b in enumerate(call.get("bufs", [])):
        bufs.append({"kind": P.Kind(b.kind).name, "size": b.size, "fill": b.fill})
        if b.kind != P.Kind.OUT:
            arrays[f"buf{i}"] = np.frombuffer(b.data, np.uint8)
    for i, o in enumerate(call.get("outputs") or []):
        arrays[f"out{i}"] = np.frombuffer(o, np.uint8)
    comparison = None
    if comp is not None:
        arrays["expected"] = np.asarray(comp["expected"])
        for k in ("got", "bound", "ulps", "allowed"):
            if k in comp:
                arrays[k] = np.asarray(comp[k])
        comparison = {k: v for k, v in comp.items() if k not in ("got", "expected", "ulps", "allowed")
                      and not (k == "bound" and np.asarray(v).size > 1)}
        comparison["expected_dtype"] = str(np.asarray(comp["expected"]).dtype)
        if "got" in comp:
            comparison["worst"] = jsonable(_worst(comp))
            comparison["got_dtype"] = str(np.asarray(comp["got"]).dtype)
        else:
            comparison["crashed"] = True  # the call returned nothing: only the oracle's side is known
    np.savez_compressed(d / "inputs.npz", **arrays)
    blob = re.search(r"@reproduce_failure\(([^)]*)\)", longrepr)
    case = {
        "test": nodeid,
        "target": {"vlen": target.vlen, "isa": target.isa.name, "stress": target.stress, "emulator": emulator,
                   "compiler": target.compiler,
                   "isa_cmake": target.isa.cmake, "qemu_props": target.isa.qemu},
        "ggml": {"root": str(source.root), "label": source.label, "commit": source.commit,
                 "version": source.version},
        "call": {"kernel": call.get("kernel"), "ip": call.get("ip", []), "fp": jsonable(call.get("fp", [])),
                 "buffers": bufs, "qemu_argv": call.get("argv"), "server_message": call.get("message", "")},
        "comparison": jsonable(comparison),
        "hypothesis_reproduce_failure": blob.group(0) if blob else None,
        "replay": replay,
        "repro": f"rvvdiff repro {shlex.quote(str(d))}",
        "failure": longrepr[-6000:],
    }
    (d / "case.json").write_text(json.dumps(case, indent=2))
    worst = (comparison or {}).get("worst") or {}
    lines = [f"# {nodeid}", "",
             f"- kernel call: `{call.get('kernel')}` ip={call.get('ip')} fp={call.get('fp')}",
             f"- target: VLEN {target.vlen}, ISA build {target.isa.name} by {target.compiler}"
             + (", tail/mask stress" if target.stress else "")
             + (f", {registry.kind(emulator).named_as}" if registry.kind(emulator).named_as else ""),
             f"- ggml: {source.label}, commit {source.commit} (ggml {source.version})"]
    if comparison:
        lines.append(f"- comparison: {comparison['mode']} `{comparison['name']}` [{comparison['context']}]")
        if worst:
            lines.append(f"- worst element: {worst}")
    lines += ["", "Replay in pytest:", "", f"    {replay}", "", "Replay outside pytest (and write a C reproducer):",
              "", f"    rvvdiff repro {shlex.quote(str(d))} --c", "", "Failure:", "", "```", longrepr[-3000:], "```", ""]
    (d / "README.md").write_text("\n".join(lines))
    return d


@dataclass
class Case:
    dir: Path
    data: dict[str, Any]
    arrays: dict[str, np.ndarray]

    @property
    def call(self) -> dict[str, Any]:
        return self.data["call"]

    @property
    def point(self) -> Point:
        """Where the call failed: the recorded VLEN, ISA build, stress mode, compiler and emulator."""
        return Point.of_record(self.data["target"])

    def buffers(self) -> list[P.Buf]:
        out = []
        for i, b in enumerate(self.call["buffers"]):
            kind = P.Kind[b["kind"]]
            data = self.arrays[f"buf{i}"].tobytes() if kind != P.Kind.OUT else b""
            out.append(P.Buf(kind, b["size"], data, b["fill"]))
        return out

    def recorded_outputs(self) -> list[bytes]:
        return [self.arrays[k].tobytes() for k in sorted((k for k in self.arrays if re.fullmatch(r"out\d+", k)),
                                                         key=lambda k: int(k[3:]))]


def load_case(path: Path) -> Case:
    d = path if path.is_dir() else path.parent
    if not (d / "case.json").exists():
        raise FileNotFoundError(f"{d}: no case.json here; give a directory under <report-dir>/cases/")
    with np.load(d / "inputs.npz") as z:
        arrays = {k: z[k] for k in z.files}
    return Case(d, json.loads((d / "case.json").read_text()), arrays)
