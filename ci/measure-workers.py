#!/usr/bin/env python3
"""Wall time, emulator starts and peak emulator processes / memory of one pytest run, at each -n.

    .venv/bin/python ci/measure-workers.py -n 2,4,16 -- cases/test_vec_dot.py cases/test_conversions.py \\
        --vlen all --isa all --max-examples 3

Runs ``pytest -n N <args>`` once per N (from this checkout), samples the emulator processes
(qemu-riscv64, spike) every 50 ms with ps, and prints one Markdown row per N: wall, emulator
starts and time inside kernels (from rvvdiff's own summary line), peak emulator processes and
their peak summed RSS.  The figures of docs/performance.md come from it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EMULATORS = ("qemu-riscv64", "spike")


def sample(stop: threading.Event, peak: dict[str, float]) -> None:
    while not stop.is_set():
        out = subprocess.run(["ps", "-eo", "rss=,comm="], capture_output=True, text=True).stdout
        rss = [int(line.split()[0]) for line in out.splitlines()
               if line.split()[-1:] and line.split()[-1].startswith(EMULATORS)]
        peak["procs"] = max(peak["procs"], len(rss))
        peak["rss_kb"] = max(peak["rss_kb"], sum(rss))
        stop.wait(0.05)


def run(n: str, args: list[str]) -> dict[str, object]:
    peak = {"procs": 0.0, "rss_kb": 0.0}
    stop = threading.Event()
    t = threading.Thread(target=sample, args=(stop, peak), daemon=True)
    t.start()
    t0 = time.perf_counter()
    cp = subprocess.run([sys.executable, "-m", "pytest", "-n", n, "-p", "no:cacheprovider", *args],
                        cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    stop.set()
    t.join()
    m = re.search(r"inside kernels ([\d.]+) s\); (\d+) emulator starts", cp.stdout)
    last = cp.stdout.strip().splitlines()[-1] if cp.stdout.strip() else cp.stderr[-200:]
    return {"n": n, "wall": wall, "starts": m and int(m.group(2)), "kernels": m and float(m.group(1)),
            "procs": int(peak["procs"]), "rss_mb": peak["rss_kb"] / 1024, "result": last.strip("= ")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", default="2,4,16", help="comma list of -n values (default 2,4,16)")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- then pytest's arguments")
    a = ap.parse_args()
    args = a.args[1:] if a.args[:1] == ["--"] else a.args
    print("| workers | wall | emulator starts | peak emulator processes | peak emulator RSS | time inside kernels "
          "| result |\n|---|---|---|---|---|---|---|")
    for n in a.n.split(","):
        r = run(n, args)
        print(f"| `-n {r['n']}` | {r['wall']:.1f} s | {r['starts']} | {r['procs']} | {r['rss_mb']:.0f} MB "
              f"| {r['kernels']} s | {r['result']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
