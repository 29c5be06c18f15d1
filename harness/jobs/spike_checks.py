"""Every known failure (finding) re-checked on Spike, with a verdict (``rvvdiff spike-check``).

For each entry of known_failures.toml (or the ones named):

1. its reproducer test runs on QEMU with the known failures ignored, so it fails, saves its
   shrunk example and writes its report;
2. the same test runs again on Spike (``--emulator spike``, the same example database, so the
   saved failing example is tried first): the test's own comparison says whether Spike fails;
3. the report's failing call is replayed on QEMU and on Spike (:func:`harness.report.replay.replay_on`)
   to compare the two emulators' outputs byte for byte.

The verdict (:func:`verdict`): reproduced on Spike, bit-identical / different values / Spike stops
the kernel; not reproduced on Spike because the failure needs QEMU's tail/mask stress (Spike has
no such mode: step 2 is skipped and Spike is compared with QEMU without stress); or not reproduced
on Spike (suspect the emulator).

Entries of another tree run on it when it can be had here (a PyPI sdist spec, or
``--tree LABEL=PATH`` for a "<ggml tree of ...>" placeholder); otherwise they are listed as not
checked, with the reason.  The table (:func:`table`) is what docs/findings.md carries.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from harness.core.matrix import from_args
from harness.core.runner import SuiteRun, run_suite
from harness.emulators import registry
from harness.ggml import known
from harness.ggml.source import resolve
from harness.report.failure import load_case
from harness.report.ids import replay_argv
from harness.report.replay import Replay, replay_on, spike_verdict
from harness.toolchain.builds import ensure_built
from harness.toolchain.compilers import selected

_PLACEHOLDER = re.compile(r"<ggml tree of ([^>]+)>")

#: The verdict that fails the check: the test passes on Spike where it fails on QEMU.
SUSPECT = "not reproduced on Spike (suspect"


def reproducer_target(entry: known.Known, trees: dict[str, str]) -> tuple[str, str | None, str | None]:
    """(node id, --ggml-src or None, why it cannot run here or None) from an entry's reproducer."""
    m = _PLACEHOLDER.search(entry.reproducer)
    chosen, rest = from_args(shlex.split(_PLACEHOLDER.sub("TREE", entry.reproducer.split("  (")[0])))
    nodeid = next(a for a in rest if "::" in a)
    src = chosen.tree
    if m:
        label = m.group(1)
        if label not in trees:
            return nodeid, None, f"needs the ggml tree of {label}: pass --tree '{label}=PATH'"
        src = trees[label]
    return nodeid, src, None


def entries(numbers: Sequence[int]) -> list[known.Known]:
    """The entries of known_failures.toml with these numbers (none given: every entry)."""
    return [e for e in known.load() if not numbers or e.number in numbers]


def check_all(chosen: list[known.Known], trees: dict[str, str], max_examples: int, compiler: str = "") -> Iterator[dict]:
    """Each entry's row as its check ends, the runs in one scratch directory removed after the last."""
    with tempfile.TemporaryDirectory(prefix="rvvdiff-spike-check-") as d:
        for e in chosen:
            yield check(e, trees, Path(d), max_examples, compiler)


def check(entry: known.Known, trees: dict[str, str], work: Path, max_examples: int, compiler: str = "") -> dict:
    """Check one entry on Spike, with the builds of ``compiler`` ("": the setting's)."""
    nodeid, src, why = reproducer_target(entry, trees)
    row = {"number": entry.number, "test": nodeid, "fix": entry.fix, "emulator": entry.emulator}
    if not entry.for_compiler(compiler or selected()):
        why = f"the entry is for builds of {', '.join(entry.compilers)} only (--cc)"
    if why:
        return row | {"verdict": f"not checked: {why}"}
    out = work / f"entry{entry.number}"
    db = str(out / "examples")

    def pytest(report_dir: Path, emulator: str = registry.DEFAULT) -> SuiteRun:
        argv = replay_argv(nodeid, ggml_src=src, known_failures="ignore", example_db=db, compiler=compiler,
                           emulator=emulator, extra=["--max-examples", str(max_examples), "-q", "--runxfail"])
        return run_suite(argv, report_dir=report_dir, output="capture", timeout=3600).check_timeout()

    t0 = time.perf_counter()
    if entry.emulator == "spike":  # a finding of Spike's: it must fail there; QEMU performs what Spike traps on
        s_run, q_run = pytest(out / "spike", "spike"), pytest(out / "qemu")
        if s_run.exit != 1:
            return row | {"verdict": f"NOT reproduced: the test passes on Spike (exit {s_run.exit})"}
        other = ("fails too, through another finding in the same tests" if q_run.exit == 1 else
                 "passes" if q_run.exit == 0 else f"did not run (exit {q_run.exit})")
        return row | {"verdict": f"found on Spike: the test fails there; on QEMU it {other}",
                      "seconds": round(time.perf_counter() - t0, 1)}
    r = pytest(out / "qemu")
    cases = sorted((out / "qemu").glob("cases/*/case.json"))
    if r.exit != 1 or not cases:
        tail = (r.stdout + r.stderr).strip().splitlines()[-1:] or ["no output"]
        return row | {"verdict": f"not checked: the reproducer did not fail on QEMU (exit {r.exit}: {tail[0]})"}
    case = load_case(cases[0])
    at = case.point
    spike_test = None if at.stress else pytest(out / "spike", "spike")
    build = ensure_built(resolve(src), at.isa, at.compiler)
    qemu, spike = registry.get("qemu"), registry.get("spike")
    unstressed = dataclasses.replace(at, stress=False)
    q = replay_on(case, build, at, qemu)
    plain = replay_on(case, build, unstressed, qemu) if at.stress else None
    s = replay_on(case, build, unstressed, spike)
    return row | {"verdict": verdict(q, s, at.stress, plain, spike_test), "vlen": at.vlen, "isa": at.isa.name,
                  "stress": at.stress, "qemu": _summary(q), "spike": _summary(s),
                  "spike_test": None if spike_test is None else ("fails" if spike_test.exit == 1 else
                                                                f"passes (exit {spike_test.exit})"),
                  "seconds": round(time.perf_counter() - t0, 1)}


def verdict(q: Replay, s: Replay, stress: bool, plain: Replay | None,
            spike_test: SuiteRun | None) -> str:
    """The test's own run on Spike decides whether it reproduces (a replayed call can only be re-judged
    when its comparison was recorded element by element); the replays say how the outputs compare."""
    if spike_test is None:  # a stress failure: Spike has no stress mode
        return spike_verdict(q, s, stress, plain)
    if s.failing is None:  # e.g. the failing case runs on several threads
        return f"not checked on Spike: its failing case cannot run there ({s.text.split(' [')[0]})"
    if spike_test.exit not in (0, 1):
        tail = (spike_test.stdout + spike_test.stderr).strip().splitlines()[-1:] or ["no output"]
        return f"not checked on Spike: the test did not run there (exit {spike_test.exit}: {tail[0]})"
    if spike_test.exit == 0:
        return "not reproduced on Spike (suspect the emulator: shrink the case and read the specification)"
    # Both fail (the test's verdict, not the re-judged call's): how the recorded call's outputs compare.
    return spike_verdict(dataclasses.replace(q, failing=True), dataclasses.replace(s, failing=True), stress)


def _summary(r: Replay) -> str:
    state = {True: "fails", False: "passes", None: "not run"}[r.failing]
    first = r.text.strip().splitlines()[0] if r.text.strip() else ""
    return f"{state}: {first[:160]}"


def row_text(row: dict) -> str:
    """An entry's row as the command prints it when its check ends: test, verdict, the two replays."""
    return (f"#{row['number']:<3} {row['test']}\n     {row['verdict']}"
            + (f"\n     QEMU {row['qemu']}\n     Spike {row['spike']}" if "qemu" in row else ""))


def table(rows: list[dict]) -> list[str]:
    """The verdict table (markdown lines) docs/findings.md carries."""
    lines = ["| entry | reproducer test | Spike verdict |", "|---|---|---|"]
    return lines + [f"| {r['number']} | `{r['test']}` | {r['verdict']} |" for r in rows]


def suspects(rows: list[dict]) -> list[dict]:
    """The rows whose test passes on Spike where it fails on QEMU (the check fails on them)."""
    return [r for r in rows if SUSPECT in r["verdict"]]
