"""Where a run's worker time goes, per family: the table the terminal summary ends with and ``time.json``.

A family is a test module (``cases/test_flash_attn.py`` -> ``flash_attn``).  For each, from the reports the
controlling process received (every outcome, known failures and skips included):

* ``worker_s``: the summed durations of its tests' set-up, call and teardown, on whichever worker ran them;
* ``setup_s``: of which set-up: the builds (kernel servers, llama.cpp's tools) and server starts a test's
  fixtures made;
* ``request_s`` / ``kernel_s``: the time the test's kernel-server requests took, and of that the time the
  server measured inside the kernels (``harness/check/observe.py``'s summed metrics);
* ``emulated_s``: the time the emulator ran outside the kernel server's requests: llama.cpp's own tools (the
  model family: the tree's kernels inside a whole model, timed by the run) and the traced probes of the path
  checks (a logging QEMU per probe, ``Target.trace``);
* ``harness_s``: the rest of the calls: Hypothesis's generation and shrinking, the oracles and comparisons,
  and whatever else runs in the worker's Python.

The share that counts is the emulated work (inside kernels, the tools' runs and the traced probes) against the
worker time.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

COLUMNS = ("tests", "worker_s", "setup_s", "request_s", "kernel_s", "emulated_s", "harness_s")


def family(nodeid: str) -> str:
    """The family of a test id: its module's name without ``test_`` (the module's path for a module outside
    that pattern)."""
    module = nodeid.split("::", 1)[0]
    name = module.rsplit("/", 1)[-1].removesuffix(".py")
    return name.removeprefix("test_") if name.startswith("test_") else module


def _props(report: Any) -> dict[str, Any]:
    return dict(getattr(report, "user_properties", ()) or ())


def table(reports: list[Any]) -> dict[str, dict[str, float]]:
    """Per family, the :data:`COLUMNS` summed over ``reports`` (test reports of every phase)."""
    rows: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(COLUMNS, 0.0))
    for r in reports:
        when, nodeid = getattr(r, "when", None), getattr(r, "nodeid", "")
        if when not in ("setup", "call", "teardown") or not nodeid:
            continue
        row = rows[family(nodeid)]
        d = float(getattr(r, "duration", 0.0) or 0.0)
        row["worker_s"] += d
        if when == "setup":
            row["setup_s"] += d
        elif when == "call":
            row["tests"] += 1
            p = _props(r)
            row["request_s"] += float(p.get("rvvdiff.request_s", 0.0))
            row["kernel_s"] += float(p.get("rvvdiff.kernel_s", 0.0))
            row["emulated_s"] += float(p.get("rvvdiff.emulated_s", 0.0))
            row["harness_s"] += d - float(p.get("rvvdiff.request_s", 0.0)) - float(p.get("rvvdiff.emulated_s", 0.0))
    return dict(rows)


def totals(rows: dict[str, dict[str, float]]) -> dict[str, float]:
    return {c: sum(r[c] for r in rows.values()) for c in COLUMNS}


def share(row: dict[str, float]) -> float:
    """The emulated work's share of the worker time (0 when nothing ran)."""
    return (row["kernel_s"] + row["emulated_s"]) / row["worker_s"] if row["worker_s"] else 0.0


def lines(rows: dict[str, dict[str, float]]) -> list[str]:
    """The table as terminal lines, the families by worker time, the whole run last."""
    head = (f"  {'family':<22} {'tests':>6} {'worker s':>9} {'set-up s':>9} {'requests':>9} {'kernels':>9} "
            f"{'other emu':>9} {'harness':>9} {'emulated':>8}")
    out = ["worker time per family (set-up: builds and starts; other emu: llama.cpp's tools and traced probes under "
           "the emulator; emulated: those and the time inside kernels):", head]
    for name, r in [*sorted(rows.items(), key=lambda kv: -kv[1]["worker_s"]), ("(all)", totals(rows))]:
        out.append(f"  {name:<22} {int(r['tests']):>6} {r['worker_s']:>9.1f} {r['setup_s']:>9.1f} {r['request_s']:>9.1f} "
                   f"{r['kernel_s']:>9.1f} {r['emulated_s']:>9.1f} {r['harness_s']:>9.1f} {share(r):>7.0%}")
    return out


def write(path: Path, rows: dict[str, dict[str, float]], wall_s: float) -> None:
    """``time.json``: the rows, the totals and the run's wall time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"wall_s": round(wall_s, 1), "families": rows, "all": totals(rows)}, indent=1,
                               sort_keys=True) + "\n")
