"""``rvvdiff cost --emulator native|ssh:HOST[:DIR]``: measured cost on a board, beside the estimates for it.

The cost suite (costs/) runs on the board at its VLEN: each case's warm call is counted by the board's
hardware counters (harness/cost/measure/board_counters.py: perf_event_open, repeated until stable), and, unless
``--no-estimates``, once more under Spike at the same VLEN, whose instruction mix the per-core tables
price (harness/cost/prices/cores.py).  Printed per case: measured cycles and instructions, Spike's
instructions and the estimate of each core of that VLEN; a case where measured and estimated cycles
differ by more than 1.5x either way is listed.  ``board.json`` in ``--out`` has the rows.  Without
counter access every case is unmeasured and one line says how to allow it.  The exit status is
``rvvdiff cost``'s: 3 when not every selected case was measured on the board or under Spike
(harness/cost/tables/run_tally.py).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from harness.core.errors import RvvdiffError
from harness.core.matrix import Matrix
from harness.core.runner import run_suite
from harness.cost.measure import board_counters
from harness.cost.prices import cores
from harness.cost.tables import run_tally, suite_tables
from harness.emulators import registry
from harness.jobs.cost_suite_runs import Options, finish
from harness.toolchain.compilers import ToolchainError


class BoardCostError(RvvdiffError):
    """A board cost run that could not start or did not complete."""


def _run(spec: str, vlen: int, out: Path, name: str, args: Options,
         workers: str) -> tuple[dict[suite_tables.Key, dict], dict[str, str]]:
    log = out / f"{name}.jsonl"
    log.unlink(missing_ok=True)
    on = args.matrix.merged(Matrix(vlens=(vlen,), isas=args.matrix.isa_builds, emulator=spec))
    argv = ["costs", *on.pytest_args(), "--cost-log", str(log), "-n", workers, "-q",
            "--kernel-timeout", str(args.kernel_timeout), *(["-k", args.k] if args.k else [])]
    run = run_suite(argv, report_dir=out / f"{name}-report", output=out / f"{name}.log", clean=True,
                    echo=f"rvvdiff cost: measuring on {spec}" if name == "board" else "rvvdiff cost: Spike's mix")
    if not run.has_results:
        raise BoardCostError(f"the {name} run did not complete (exit {run.exit}); its log: {run.log}\n"
                             f"  command: {shlex.join(run.argv)}")
    rows = suite_tables.read_rows(log)
    return rows, suite_tables.unmeasured(run.results, f"{name}: ", rows)


def rows(measured: dict[suite_tables.Key, dict], spike: dict[suite_tables.Key, dict]) -> list[dict[str, Any]]:
    """One row per measured case: measured cycles and instructions, Spike's instructions and the estimates."""
    out = []
    for key, m in sorted(measured.items()):
        s = spike.get(key)
        out.append({"case": m["case"], "vlen": m["vlen"], "isa": m["isa"], "function": m.get("function", ""),
                    "measured_cycles": m["cycles"], "measured_instret": m["instret"],
                    "spike_instret": s["instret"] if s else None,
                    "estimates": cores.estimates(int(m["vlen"]), s.get("mix") or {}) if s else {}})
    return out


def table(found: list[dict[str, Any]]) -> list[str]:
    names = sorted({c for r in found for c in r["estimates"]})
    head = ["case", "ISA", "measured cycles", "measured instret", "Spike instret", *(f"est. {n}" for n in names)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in found:
        est = [f"{r['estimates'][n]['cycles']:,.0f}" if n in r["estimates"] else "" for n in names]
        spike = f"{r['spike_instret']:,}" if r["spike_instret"] is not None else "not run"
        lines.append(f"| {r['case']} | {r['isa']} | {r['measured_cycles']:,} | {r['measured_instret']:,} | {spike} | "
                     + " | ".join(est) + " |")
    return lines


def main(args: Options) -> int:
    """``rvvdiff cost --emulator BOARD`` once its options are checked; the command's exit status."""
    try:
        kind = registry.kind(args.emulator)
        board = registry.get(args.emulator)
        vlen = board.probe.vlen  # type: ignore[attr-defined]
    except (ValueError, ToolchainError) as e:
        print(f"rvvdiff cost: {e}")
        return 2
    cap = kind.max_workers() or 1
    workers = str(min(cap, int(args.workers))) if args.workers != "auto" else str(cap)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    measured, missing = _run(args.emulator, vlen, out, "board", args, workers)
    spike: dict[suite_tables.Key, dict] = {}
    if not args.no_estimates and measured:
        spike, missing_spike = _run("spike", vlen, out, "spike", args, args.workers)
        missing.update(missing_spike)
    found = rows(measured, spike)
    (out / "board.json").write_text(json.dumps({"board": board.describe(), "vlen": vlen, "rows": found}, indent=1))
    print(f"rvvdiff cost: {len(found)} cases measured on {board.describe()} at VLEN {vlen}; {out / 'board.json'}")
    for line in table(found):
        print("  " + line)
    far = board_counters.disagreements(found)
    print(f"rvvdiff cost: {len(far)} measured / estimated beyond {board_counters.DISAGREE:g}x:")
    for d in far[:40]:
        print(f"    {d.describe()}")
    estimated = not args.no_estimates and measured  # Spike's run was made
    tally = run_tally.Tally({"board": len(measured), **({"spike": len(spike)} if estimated else {})}, missing)
    print(f"rvvdiff cost: {tally.summary()}")
    for line in tally.reasons():
        print(f"  not measured: {line}")
    return finish(tally, False)
