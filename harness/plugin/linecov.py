"""``--rvv-coverage``: the kernel servers log the code they execute, and the run ends with RVV line coverage.

Off by default.  :func:`configure` gives the session's pool of servers (harness/emulators/pool.py) its log
directory ``<report-dir>/coverage/raw`` (the controlling process clears ``<report-dir>/coverage`` first);
:func:`finish` stops the pool's servers, so QEMU closes its logs and Spike prints its PC histograms, and in the controlling
process maps every target's PCs to lines (harness/report/coverage.py), writes the tracefiles, the
matrix and the HTML view into ``<report-dir>/coverage/`` and appends the matrix to ``summary.md``,
and returns the lines of the terminal summary (the plugin's session keeps them).
It changes no outcome: whatever goes wrong is one line in the terminal summary.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from harness.emulators import executed
from harness.emulators.pool import Pool
from harness.report import coverage


def configure(config: pytest.Config, report_dir: Path, pool: Pool) -> None:
    pool.log_dir = None
    if not config.getoption("rvv_coverage"):
        return
    out = report_dir / "coverage"
    if getattr(config, "workerinput", None) is None:
        shutil.rmtree(out, ignore_errors=True)
    pool.log_dir = out / "raw"


def finish(config: pytest.Config, report_dir: Path, pool: Pool, emulator_logs: bool) -> list[str]:
    """Stop the pool's servers (their logs complete); in the controlling process, write the
    coverage and return the terminal summary's lines on it (none without --rvv-coverage)."""
    if not config.getoption("rvv_coverage"):
        return []
    pool.shutdown()
    if getattr(config, "workerinput", None) is not None:
        return []
    lines: list[str] = []
    if not emulator_logs:
        lines.append(f"--rvv-coverage: {config.getoption('emulator')} logs no executed instructions here; "
                     "line coverage is measured under QEMU and Spike only (not measured)")
        return lines
    t0 = time.perf_counter()
    out = report_dir / "coverage"
    try:
        cov = coverage.measure(executed.collect(out / "raw"))
        coverage.write(cov, out)
    except Exception as e:  # an optional report: it must not cost the run its results
        lines.append(f"RVV line coverage not written: {type(e).__name__}: {e}")
        return lines
    logged = sum(f.stat().st_size for f in (out / "raw").glob("*/*") if f.suffix in (".log", ".pcs"))
    shutil.rmtree(out / "raw", ignore_errors=True)
    summary = report_dir / "summary.md"
    if summary.exists() and cov.targets:
        try:
            with open(summary, "a") as f:
                f.write("\n## RVV line coverage (--rvv-coverage)\n\n" + "\n".join(
                    [*[f"- {t}" for t in coverage.totals(cov)], "", *coverage.matrix_md(cov, only_run=True)]) + "\n")
        except OSError as e:
            cov.problems.append(f"cannot append the coverage matrix to {summary}: {e.strerror or e}")
    took = time.perf_counter() - t0
    if not cov.targets and not cov.problems:
        lines.append("RVV line coverage: no kernel server ran, nothing measured")
    for t in coverage.totals(cov):
        lines.append(f"RVV line coverage {t}")
    if cov.targets:
        lines.append(f"RVV line coverage: {out}/index.html, merged.info, coverage.md ({took:.1f} s to map and write; "
                     f"the execution logs took {logged / 1e6:.1f} MB on disk until now)")
    return lines + cov.problems

