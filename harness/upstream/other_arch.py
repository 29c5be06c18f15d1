"""The series' regression tests off RISC-V: ggml's test-quantize-fns built and run on x86-64 (the host, natively) and on
aarch64 with FP16 vector arithmetic (cross-built by zig's clang, ``-target aarch64-linux-musl -mcpu=cortex_a76``:
NEON, dot product, FP16 vector arithmetic; run under ``qemu-aarch64 -cpu max``), before and after the fixes (which
change RISC-V code only, so a test that holds everywhere passes on both sides).  Two scopes:

- **one series** (:func:`series_patches`): the series it builds on (``needs``: their tests and fixes), then its own
  test, then its fixes for the side after them: what a maintainer applies when the series is sent alone; its lines
  carry the series' own test version (the one its riscv64 runs carry);
- **the stack** (:func:`stack_patches`): every series' test in order, with or without all of the series' fixes.

ggml is configured by its own CMake (the library alone: ``-DLLAMA_BUILD_TESTS=OFF``, static, ``GGML_NATIVE`` on the
host, off for aarch64) and ``test-quantize-fns.cpp`` of the patched tree compiled and linked against its static
libraries by the same compiler; one build directory per architecture, so a run after another rebuilds only the files
its patches changed.  :func:`run` does one architecture and side; :func:`record_lines` puts the results in the
words of docs/upstream/series/test-runs.json (the architecture and the scope named in every line).

    rvvdiff other-arch --series all --record   # each series with a test alone, both architectures, before and after
    rvvdiff other-arch --record                # the stack
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.core.config import cache_dir
from harness.core.proc import execute
from harness.toolchain import cmake_build
from harness.toolchain.cmake_build import CmakeBuild, configure
from harness.toolchain.compilers import Compiler, zig_binary
from harness.upstream import fix_series, ggml_own_tests, testcmd

ARCHS = ("x86-64", "aarch64")
#: zig's target and CPU for the aarch64 build: cortex_a76 has FP16 vector arithmetic (ggml_vec_dot_f16 accumulates
#: in half precision there) and the dot-product extension (the repacked q4_0 4x4 / q4_K 8x4 layouts).
AARCH64 = ("-target", "aarch64-linux-musl", "-mcpu=cortex_a76")
QEMU_AARCH64 = ("qemu-aarch64", "-cpu", "max")
CMAKE = {"CMAKE_BUILD_TYPE": "Release", "BUILD_SHARED_LIBS": "OFF", "GGML_OPENMP": "OFF", "LLAMA_BUILD_TESTS": "OFF",
         "LLAMA_BUILD_EXAMPLES": "OFF", "LLAMA_BUILD_TOOLS": "OFF", "LLAMA_BUILD_SERVER": "OFF", "LLAMA_CURL": "OFF",
         "LLAMA_BUILD_COMMON": "OFF"}
WORDS = {"x86-64": "x86-64 (the host, natively; GCC, GGML_NATIVE)",
         "aarch64": "aarch64 (zig's clang, -mcpu=cortex_a76: FP16 vector arithmetic; qemu-aarch64 -cpu max)"}
#: How a line names what it ran: every series' test (the stack), or one series' (on top of those it builds on).
STACK_SCOPE = "test-quantize-fns of the stack (every series' test)"
SERIES_SCOPE = "test-quantize-fns of this series alone (on top of the series it builds on)"


@dataclass
class ArchRun:
    arch: str
    fixed: bool
    passed: bool
    #: the test's lines that say FAILED, or how it ended
    failures: list[str]
    #: the repacked layouts ggml picked ("q4_0_4x4", ...)
    layouts: list[str]
    #: the version of the test it ran (harness/upstream/testcmd.py's ``version``), '' when not known
    test: str = ""
    #: the series it ran alone (its name), '' for the stack
    series: str = ""


def stack_tests(every: Sequence) -> list[Path]:
    """Every series' test patch in order: the stacked test (a series without a regression test adds none)."""
    return [p for s in every if (p := s.test_patch())]


def series_tests(series, every: Sequence) -> list[Path]:
    """The test patches a run of ``series`` alone applies, in order (the tests of the series it builds on, then its
    own): those its riscv64 runs apply (its class's ``test_patches``), so both carry one test version."""
    cls = ggml_own_tests.CLASSES.get(series.test)
    if cls:
        return cls.test_patches()
    return [p for s in [*fix_series.stack(series, list(every)), series] if (p := s.test_patch())]


def series_patches(series, every: Sequence, fixed: bool) -> list[Path]:
    """What a maintainer applies for ``series`` alone: each series it builds on (its test, then its fixes), then its
    own test, then, when ``fixed``, its own fixes."""
    under = [p for s in fix_series.stack(series, list(every)) for p in [s.test_patch(), *(fx.patch for fx in s.fixes)]
             if p]
    own = [series.test_patch(), *((fx.patch for fx in series.fixes) if fixed else ())]
    return [*under, *(p for p in own if p)]


def is_record(line: str) -> bool:
    """Whether a recorded line is one of :func:`record_lines` (a run off RISC-V)."""
    return line.startswith(tuple(WORDS.values()))


def is_stack(line: str) -> bool:
    """Whether a recorded line off RISC-V is of the stacked test (else of its series alone)."""
    return is_record(line) and STACK_SCOPE in line


def stack_patches(every: list, fixed: bool) -> list[Path]:
    """Every series' test patch in order, with all of the series' fixes after each test when ``fixed``."""
    return [p for s in every for p in [s.test_patch(), *((fx.patch for fx in s.fixes) if fixed else ())] if p]


def _aarch64(work: Path) -> Compiler:
    """zig's cc / c++ (and ar / ranlib) for aarch64 with :data:`AARCH64`, as scripts CMake can be given."""
    tools = {}
    for name, tool in (("cc", "cc"), ("cxx", "c++"), ("ar", "ar"), ("ranlib", "ranlib")):
        f = work / f"zig-aarch64-{name}"
        f.write_text(f'#!/bin/sh\nexec "{zig_binary()}" {tool} {" ".join(AARCH64) if name in ("cc", "cxx") else ""} "$@"\n')
        f.chmod(0o755)
        tools[name] = str(f)
    return Compiler(**tools, identity=f"zig's clang {' '.join(AARCH64)}", name="zig-aarch64")


def build(arch: str, tree: Path, build_dir: Path) -> Path:
    """ggml of ``tree`` built for ``arch`` and test-quantize-fns.cpp linked against it; the executable."""
    if arch == "aarch64":
        cc = _aarch64(build_dir.parent)
        cmake = CmakeBuild(tree, build_dir, {**CMAKE, "GGML_NATIVE": "OFF"}, compiler=cc, processor="aarch64",
                           generator="Ninja")
        cxx, link = cc.cxx, ["-static"]
    else:
        cmake = CmakeBuild(tree, build_dir, {**CMAKE, "GGML_NATIVE": "ON"}, generator="Ninja")
        cxx, link = shutil.which("c++") or "c++", []
    configure(cmake, what=f"ggml for {arch}", reuse=True)
    cmake_build.build(cmake, ("ggml",), what=f"building ggml for {arch}")
    libs = [str(build_dir / "ggml" / "src" / f"libggml{x}.a") for x in ("", "-cpu", "-base")]
    exe = build_dir / "test-quantize-fns"
    execute([cxx, "-std=c++17", "-O2", f"-I{tree / 'ggml' / 'include'}",
             str(tree / "tests" / "test-quantize-fns.cpp"), *libs, "-lpthread", "-lm", *link, "-o", str(exe)],
            timeout=1800).check("compiling test-quantize-fns")
    return exe


def run(arch: str, every: list, fixed: bool, work: Path | None = None, series=None) -> ArchRun:
    """Build and run for ``arch`` (before the fixes, or with them) the stacked test, or ``series``' alone."""
    work = Path(work or cache_dir() / "other-arch")
    side = ("fixed" if fixed else "pinned") + (f"-{series.name}" if series else "")
    test = testcmd.version(series_tests(series, every) if series else stack_tests(every))
    patches = series_patches(series, every, fixed) if series else stack_patches(every, fixed)
    with ggml_own_tests.locked(work):
        tree = work / "tree"
        ggml_own_tests.prepare_tree(tree, patches)
        exe = build(arch, tree, work / f"build-{arch}")
        argv = [*(QEMU_AARCH64 if arch == "aarch64" else ()), str(exe), "-v"]
        cp = execute(argv, timeout=3600)
    out = (cp.stdout + cp.stderr).splitlines()
    (work / f"{arch}-{side}.log").write_text("\n".join(out) + "\n")
    fails = [ln.strip() for ln in out if "FAILED" in ln][:12]
    if cp.returncode != 0 and not fails:
        fails = [f"exit status {cp.returncode}: " + " | ".join(out[-3:])]
    layouts = sorted({ln.split(" with ")[-1].strip() for ln in out if ln.startswith("repack: repack tensor")})
    return ArchRun(arch, fixed, cp.returncode == 0, fails, layouts, test, series.name if series else "")


def record_lines(runs: list[ArchRun]) -> list[str]:
    """One line per run, naming the architecture and the scope (:data:`STACK_SCOPE`: what test-runs.json records for
    every series; :data:`SERIES_SCOPE`: for the series run alone) and ending with the version of the test it ran."""
    out = []
    for r in runs:
        side = "with the fixes" if r.fixed else "pinned tree"
        what = "passes" if r.passed else "FAILS (" + "; ".join(f.split(":")[0].strip() for f in r.failures) + ")"
        line = (f"{WORDS[r.arch]}, {side}: {what}; {SERIES_SCOPE if r.series else STACK_SCOPE}, repacked "
                f"layouts picked: {', '.join(r.layouts) or 'none'}.")
        out.append(testcmd.stamped(line, r.test or testcmd.UNKNOWN))
    return out


def _verdicts(lines: list[str]) -> str:
    """``x86-64: passes; aarch64: FAILS`` over ``lines`` of one scope, '' when none."""
    said = {a: [ln for ln in lines if ln.startswith(WORDS[a])] for a in ARCHS}
    return "; ".join(f"{a}: " + ("passes" if all(": passes;" in ln for ln in said[a]) else "FAILS")
                     for a in ARCHS if said[a])


def summary(lines: list[str]) -> str:
    """What the series page says of its recorded runs off RISC-V (lines of :func:`record_lines`), '' when none: its
    own test first (or that it has no such run yet), then the stacked test."""
    own = _verdicts([ln for ln in lines if is_record(ln) and not is_stack(ln)])
    stacked = _verdicts([ln for ln in lines if is_stack(ln)])
    if not own and not stacked:
        return ""
    where = ("built and run on x86-64 natively and on aarch64 with FP16 vector arithmetic (zig's clang, "
             "-mcpu=cortex_a76, qemu-aarch64 -cpu max), before and after the fixes")
    out = (f"Off RISC-V, this series' test alone (on top of the series it builds on) {where}: {own}." if own else
           "Off RISC-V, this series' test alone has no recorded run yet (`rvvdiff other-arch --series NAME --record`).")
    return out + (f" The stacked test (every series' check), {where.replace('built', 'also built')}: {stacked}."
                  if stacked else "")


def record(every: Sequence, runs: list[ArchRun], lines: list[str]) -> None:
    """Record ``lines`` (:func:`record_lines` of ``runs``) in docs/upstream/series/test-runs.json, in place of the
    lines of the same architectures and scope: a stack's run for every series, a series' own run for that series."""
    data = json.loads(testcmd.TEST_RUNS.read_text()) if testcmd.TEST_RUNS.is_file() else {}
    for s in every:
        mine = [(r, ln) for r, ln in zip(runs, lines) if r.series in ("", s.name)]
        if not mine:
            continue
        kept = [ln for ln in data.get(s.name, []) if not any(
            ln.startswith(WORDS[r.arch]) and is_stack(ln) == (not r.series) for r, _ in mine)]
        data[s.name] = kept + [ln for _, ln in mine]
    testcmd.TEST_RUNS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
