"""`rvvdiff repro`: replay a failure report, optionally as a standalone C reproducer."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from harness.core.matrix import ISAS, add_options
from harness.emulators import registry
from harness.ggml.source import resolve
from harness.report.failure import load_case
from harness.report.replay import replay_on, side_by_side, spike_verdict
from harness.report.reproducer import c_reproducer, upstream_reproducer
from harness.toolchain.builds import ensure_built, link_objects
from harness.toolchain.compilers import SERVER_DIR, ToolchainError, compiler


def main_repro(argv: list[str]) -> int:
    """``rvvdiff repro``: replay a failure report outside pytest."""
    p = argparse.ArgumentParser(prog="rvvdiff repro", description=main_repro.__doc__)
    p.add_argument("report", type=Path, help="a directory under <report-dir>/cases/ (or its case.json)")
    # Each replays at another target than the recorded one: spike replays on both emulators and prints them side by
    # side with a verdict; a board (native, ssh:HOST[:DIR]) replays at its own VLEN under its own tail/mask policy.
    add_options(p, "tree", "vlens", "isas", "compilers", "emulator", one=True, prefix="replay at another target: ",
                default_words=dict.fromkeys(("tree", "vlens", "isas", "compilers", "emulator"), "the recorded one"))
    p.add_argument("--c", action="store_true", help="also write and print the standalone C++ reproducer (and, for a "
                   "vec_dot that ggml's API reaches, a ggml-only C program for an upstream report)")
    a = p.parse_args(argv)
    case = load_case(a.report.resolve())
    t = case.data["target"]
    vlen, isa = a.vlen or t["vlen"], ISAS[a.isa or t["isa"]]
    on = a.emulator or t.get("emulator", registry.DEFAULT)
    src_path = a.ggml_src or case.data["ggml"]["root"]
    src = resolve(None if (not a.ggml_src and case.data["ggml"]["label"].startswith("pinned")) else src_path)
    try:
        emulator = registry.get(on)
        # Spike is judged beside QEMU; QEMU and a board replay alone.
        reference = registry.get(registry.DEFAULT) if on != registry.DEFAULT and not registry.is_board(on) else emulator
        build = ensure_built(src, isa, a.cc or t.get("compiler"))  # an older report: the setting's compiler
    except ToolchainError as e:
        print(f"rvvdiff repro: {e}")
        return 2
    if registry.is_board(on) and vlen != emulator.probe.vlen:
        print(f"rvvdiff repro: {emulator.where()} has VLEN {emulator.probe.vlen} and the case is at VLEN {vlen}: "
              f"give --vlen {emulator.probe.vlen} to replay it at the board's VLEN, or replay under QEMU (--emulator qemu)")
        return 2
    print(f"replaying {case.data['test']}\n  kernel {case.call['kernel']} ip={case.call['ip']} fp={case.call['fp']}\n"
          f"  on {src.describe()}, built by {build.compiler}")
    if emulator is not reference:
        # The default emulator (QEMU) as recorded (a VLEN beyond its own is "not run", with the reason),
        # QEMU without stress for a stress report (what Spike, without such a mode, should match), then Spike.
        runs = [replay_on(case, build, vlen, t["stress"], reference), replay_on(case, build, vlen, False, emulator)]
        if t["stress"]:
            runs.insert(1, replay_on(case, build, vlen, False, reference))
        labels = ([f"{reference.label}, tail/mask stress (as recorded)", f"{reference.label}, no stress",
                   f"{emulator.label} (no stress mode)"] if t["stress"] else [reference.label, emulator.label])
        for label, r in zip(labels, runs):
            state = {True: "FAILS", False: "passes", None: "not run"}[r.failing]
            print(f"\n== {label}: {state}" + (f"\n  {shlex.join(r.argv)}" if r.argv else ""))
            print("  " + r.text.replace("\n", "\n  "))
        print()
        for line in side_by_side(case, runs[0], runs[-1]) + (side_by_side(case, runs[1], runs[2]) if t["stress"] else []):
            print(line)
        print(f"\nverdict: {spike_verdict(runs[0], runs[-1], t['stress'], runs[1] if t['stress'] else None)}")
        if runs[-1].failing is None:
            return 2
        failing = bool(runs[-1].failing)
        server_argv = runs[-1].argv
    else:
        # A board has one tail/mask policy, its own (its probe says which): a stress case replays under it.
        r = replay_on(case, build, vlen, t["stress"] and not registry.is_board(on), emulator)
        if r.failing is None:
            print(f"rvvdiff repro: not replayed: {r.text}" + (emulator.replay_hint if vlen not in emulator.vlens else ""))
            return 2
        print(f"  {shlex.join(r.argv)}\n{r.text}")
        failing, server_argv = bool(r.failing), r.argv
    if a.c:
        prog = c_reproducer(case, case.dir / "repro.cpp")
        exe = case.dir / f"repro{emulator.suffix}"
        cc = compiler(build.compiler)
        objs = link_objects(build)
        extra = emulator.link_args(build)
        build_cmd = [cc.cxx, "-O1", "-g", *build.cflags, "-I", str(SERVER_DIR), str(prog), *map(str, objs),
                     *map(str, build.libs), "-static", "-lm", "-lpthread", *extra, "-o", str(exe)]
        run_cmd = server_argv[:-1] + [str(exe)] if server_argv else [str(exe)]
        print(f"\nstandalone reproducer: {prog}\nbuild:\n  {shlex.join(build_cmd)}\nrun:\n  {shlex.join(run_cmd)}")
        debug = emulator.debug_hint(run_cmd, exe)
        if debug:
            print(debug)
        up = upstream_reproducer(case, case.dir / "repro_ggml.c")
        if up is not None:
            public = [f for f in build.cflags if f.startswith("-I") and f.rstrip("/").endswith("/include")]
            up_exe = case.dir / f"repro_ggml{emulator.suffix}"
            up_cmd = [cc.cxx, "-O1", *[f for f in build.cflags if f.startswith(("-march", "-mabi"))], *public, str(up),
                      *map(str, build.libs), "-static", "-lm", "-lpthread", *extra, "-o", str(up_exe)]
            print(f"\nggml-only reproducer: {up}\n  (for an upstream report: only ggml's headers and libraries)\n"
                  f"build:\n  {shlex.join(up_cmd)}\nrun:\n  {shlex.join(run_cmd[:-1] + [str(up_exe)])}")
    print("STILL FAILS" + (f" {emulator.named_as}" if emulator.named_as else "") if failing else "PASSES now")
    return 1 if failing else 0
