"""``rvvdiff spike-check``: every known failure (finding) re-checked on Spike, with a verdict.

For each entry of known_failures.toml (or the ones named): its reproducer test runs on QEMU
with the known failures ignored, so it fails and writes its report; the report's failing call
is then replayed on Spike at the same VLEN and ISA build (:func:`harness.report.replay_on`)
and judged by the same comparison.  The verdict is :func:`harness.report.spike_verdict`'s:

* reproduced on Spike, bit-identical / different values (both emulators fail);
* not reproduced on Spike: needs QEMU's tail/mask stress (Spike keeps agnostic elements);
* not reproduced on Spike (suspect the emulator).

Entries of another tree run on it when it can be had here (a PyPI sdist spec, or
``--tree LABEL=PATH`` for a "<ggml tree of ...>" placeholder); otherwise they are listed as not
checked, with the reason.  The table printed (and written with ``--out``) is what
docs/findings.md carries.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import known
from .config import ISA_BUILDS, PROJECT_ROOT
from .report import Replay, load_case, replay_argv, replay_on, spike_verdict

_PLACEHOLDER = re.compile(r"<ggml tree of ([^>]+)>")


def reproducer_target(entry: known.Known, trees: dict[str, str]) -> tuple[str, str | None, str | None]:
    """(node id, --ggml-src or None, why it cannot run here or None) from an entry's reproducer."""
    argv = shlex.split(entry.reproducer.split("  (")[0])
    nodeid = next(a for a in argv if "::" in a)
    src = argv[argv.index("--ggml-src") + 1] if "--ggml-src" in argv else None
    if src is None:
        m = _PLACEHOLDER.search(entry.reproducer)
        if m:
            label = m.group(1)
            if label not in trees:
                return nodeid, None, f"needs the ggml tree of {label}: pass --tree '{label}=PATH'"
            src = trees[label]
    return nodeid, src, None


def check(entry: known.Known, trees: dict[str, str], work: Path, max_examples: int) -> dict:
    nodeid, src, why = reproducer_target(entry, trees)
    row = {"number": entry.number, "test": nodeid, "fix": entry.fix, "emulator": entry.emulator}
    if why:
        return row | {"verdict": f"not checked: {why}"}
    out = work / f"entry{entry.number}"
    argv = replay_argv(nodeid, ggml_src=src, known_failures="ignore",
                       extra=["--report-dir", str(out), "--max-examples", str(max_examples), "-q"])
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, cwd=PROJECT_ROOT,
                       timeout=3600)
    cases = sorted(out.glob("cases/*/case.json"))
    if r.returncode != 1 or not cases:
        tail = (r.stdout + r.stderr).strip().splitlines()[-1:] or ["no output"]
        return row | {"verdict": f"not checked: the reproducer did not fail on QEMU (exit {r.returncode}: {tail[0]})"}
    case = load_case(cases[0])
    from .build import ensure_built
    from .source import resolve
    from .spike import spike
    from .toolchain import qemu

    t = case.data["target"]
    build = ensure_built(resolve(src), ISA_BUILDS[t["isa"]])
    q = replay_on(case, build, t["vlen"], t["stress"], qemu())
    plain = replay_on(case, build, t["vlen"], False, qemu()) if t["stress"] else None
    s = replay_on(case, build, t["vlen"], False, spike())
    return row | {"verdict": spike_verdict(q, s, t["stress"], plain), "vlen": t["vlen"], "isa": t["isa"],
                  "stress": t["stress"], "qemu": _summary(q), "spike": _summary(s),
                  "seconds": round(time.perf_counter() - t0, 1)}


def _summary(r: Replay) -> str:
    state = {True: "fails", False: "passes", None: "not run"}[r.failing]
    first = r.text.strip().splitlines()[0] if r.text.strip() else ""
    return f"{state}: {first[:160]}"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff spike-check", description=__doc__.split("\n\n")[0])
    p.add_argument("entries", nargs="*", type=int, help="entry numbers (default: every entry)")
    p.add_argument("--tree", action="append", default=[], metavar="LABEL=PATH",
                   help="where the tree a reproducer names as <ggml tree of LABEL> is (repeatable)")
    p.add_argument("--max-examples", type=int, default=25, help="Hypothesis examples of each QEMU run (25)")
    p.add_argument("--out", type=Path, help="also write the table (markdown) here")
    a = p.parse_args(argv)
    trees = dict(t.split("=", 1) for t in a.tree)
    entries = [e for e in known.load() if not a.entries or e.number in a.entries]
    rows = []
    with tempfile.TemporaryDirectory(prefix="rvvdiff-spike-check-") as d:
        for e in entries:
            row = check(e, trees, Path(d), a.max_examples)
            rows.append(row)
            print(f"#{row['number']:<3} {row['test']}\n     {row['verdict']}"
                  + (f"\n     QEMU {row['qemu']}\n     Spike {row['spike']}" if "qemu" in row else ""), flush=True)
    lines = ["| entry | reproducer test | Spike verdict |", "|---|---|---|"]
    lines += [f"| {r['number']} | `{r['test']}` | {r['verdict']} |" for r in rows]
    if a.out:
        a.out.write_text("\n".join(lines) + "\n")
    print("\n".join(["", *lines]))
    return 0 if all("not reproduced on Spike (suspect" not in r["verdict"] for r in rows) else 1
