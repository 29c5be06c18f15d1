"""Where the suite's time goes, per representative kernel and VLEN (``rvvdiff bench``).

It runs the real differential tests (one pytest-xdist-free process, so times
are not shared with other workers) with ``--bench-log``: for every Hypothesis
example the plugin records Hypothesis's own split (data generation, test
execution) and the harness's (time in kernel-server requests, time inside
the kernel as the server measured it); after each test it times that test's
last kernel call repeated inside the server, the physical floor.  Derived per
test (:func:`summarize`):

* examples/s end to end (generation + execution);
* generation, oracle + comparison (execution minus requests), request
  overhead (encoding, pipe transfer, QEMU's dispatch: request minus kernel),
  kernel time;
* the ratio of end-to-end time per example to the pure kernel time of its
  calls (1.0 would be a harness that costs nothing).

Output (:func:`run`): ``bench.json`` and ``bench.md`` in the output directory.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from harness.core.matrix import AXIS, Matrix
from harness.core.runner import SuiteRun, run_suite
from harness.report.ids import parse_id

#: One representative test per family (node id prefixes; the VLEN / ISA part is appended by the plugin).
REPRESENTATIVES = [
    "cases/test_conversions.py::test_convert[fp16_to_fp32-",
    "cases/test_vec_dot.py::test_vec_dot[f16-",
    "cases/test_vec_ops.py::test_vec_op[silu_f32-",
    "cases/test_quant_dot.py::test_vec_dot[q4_0-",
    "cases/test_quant_dot.py::test_vec_dot[q4_K-",
    "cases/test_mul_mat.py::test_mul_mat[f16-",
    "cases/test_repack_gemm.py::test_mul_mat[q8_0_16x1-",
    "cases/test_flash_attn.py::test_flash_attn[tiled-f32-",
    "cases/test_flash_attn.py::test_flash_attn[chunk-f16-",
]


def collect(args: list[str]) -> list[str]:
    """The ids of the tests of ``cases/`` that pytest collects with ``args``."""
    cp = run_suite(["cases", "--collect-only", "-q", *args], output="capture", timeout=600).check_timeout()
    return [line.strip() for line in cp.stdout.splitlines() if "::" in line]


def tests(chosen: Matrix, prefixes: list[str] | None) -> list[str]:
    """The ids the bench runs: those collected at ``chosen`` that start with a prefix (none: one test per family)."""
    prefixes = prefixes or REPRESENTATIVES
    return [i for i in collect(chosen.pytest_args()) if any(i.startswith(pre) for pre in prefixes)]


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bench log's rows (one per example, one "pure" per test) summed per test into its derived figures."""
    per: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(float))
    for r in rows:
        p = per[r["nodeid"]]
        if r["kind"] == "pure":
            p["pure"] = r
            continue
        p["examples"] += 1
        for k in ("generate_s", "execute_s", "request_s", "kernel_s", "calls"):
            p[k] += r.get(k, 0.0)
    out = []
    for nodeid, p in per.items():
        n = p["examples"]
        if not n:
            continue
        tid = parse_id(nodeid)
        wall = p["generate_s"] + p["execute_s"]
        pure = p.get("pure") or {}
        out.append({
            "test": nodeid, "row": tid.row if tid else nodeid, "vlen": tid.vlen if tid else None,
            "isa": tid.isa if tid else None, "examples": int(n), "calls": int(p["calls"]),
            "examples_per_s": n / wall if wall else None,
            "ms_per_example": 1e3 * wall / n,
            "generation_ms": 1e3 * p["generate_s"] / n,
            "oracle_compare_ms": 1e3 * (p["execute_s"] - p["request_s"]) / n,
            "request_overhead_ms": 1e3 * (p["request_s"] - p["kernel_s"]) / n,
            "kernel_ms": 1e3 * p["kernel_s"] / n,
            "overhead_per_call_ms": 1e3 * (p["request_s"] - p["kernel_s"]) / max(p["calls"], 1),
            "end_to_end_over_kernel": wall / p["kernel_s"] if p["kernel_s"] else None,
            "largest_call_bytes": pure.get("bytes"),
            "largest_call_single_ms": 1e3 * pure["single_s"] if pure else None,
            "largest_call_repeated_ms": 1e3 * pure["repeated_s"] if pure else None,
        })
    return sorted(out, key=lambda r: (r["row"], r["vlen"] or 0))


def _f(v: float | None, fmt: str) -> str:
    return "" if v is None else format(v, fmt)


def markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = ["# rvvdiff bench", "", *[f"- {k}: {v}" for k, v in meta.items()], "",
             "| test | VLEN | examples | ex/s | ms/ex | gen | oracle+cmp | request overhead | kernel | "
             "overhead / call | end-to-end / kernel | largest call: once / repeated (ms) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(
            f"| `{r['row']}` | {r['vlen']} | {r['examples']} | {_f(r['examples_per_s'], '.1f')} | "
            f"{r['ms_per_example']:.2f} | {r['generation_ms']:.2f} | {r['oracle_compare_ms']:.2f} | "
            f"{r['request_overhead_ms']:.2f} | {r['kernel_ms']:.2f} | {r['overhead_per_call_ms']:.3f} | "
            f"{_f(r['end_to_end_over_kernel'], '.1f')} | {_f(r['largest_call_single_ms'], '.3f')} / "
            f"{_f(r['largest_call_repeated_ms'], '.3f')} |")
    lines += ["", "Milliseconds per example unless stated. gen: Hypothesis data generation; oracle+cmp: the test's "
              "own Python (oracle, comparison, encoding) outside kernel requests; request overhead: request time "
              "minus the time the server measured inside the kernel (pipe transfer, guards, QEMU dispatch); "
              "kernel: time inside the kernel, measured by the server. The last column times the test's largest "
              "call once (as the example ran it) and again repeated inside the server: the physical floor."]
    return "\n".join(lines) + "\n"


def run(ids: list[str], chosen: Matrix, max_examples: int, out: Path) -> tuple[SuiteRun, str | None]:
    """Run ``ids`` with the bench log and write bench.json and bench.md into ``out``: the suite's run and the
    markdown (None when the suite did not run: an exit status other than 0 or 1)."""
    common = chosen.pytest_args()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "examples.jsonl"
    log.unlink(missing_ok=True)
    cp = run_suite([*ids, *common, "--max-examples", str(max_examples), "--bench-log", str(log), "-p", "no:xdist",
                    "-q", "-p", "no:cacheprovider"], report_dir=out / "run", output="capture",
                   env={**os.environ, "PYTHONHASHSEED": "0"})
    if cp.exit not in (0, 1):
        return cp, None
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    results = summarize(rows)
    meta = {"machine": f"{os.uname().nodename}, {os.cpu_count()} cores", "isa": AXIS["isas"].write(chosen.isa_builds),
            "vlen": AXIS["vlens"].write(chosen.vlens) if chosen.vlens else "all",
            **({"compilers": AXIS["compilers"].write(chosen.compilers)} if chosen.compilers else {}),
            "max_examples": max_examples, "tests": len(ids), "wall_s": round(cp.seconds, 1),
            "pytest": cp.last_line()}
    (out / "bench.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    md = markdown(results, meta)
    (out / "bench.md").write_text(md)
    return cp, md
