"""Which CPU variant of a distribution's build each emulated CPU gets, and whether that is right (``rvvdiff
dispatch``, tests/test_dispatch.py, docs/dispatch.md).

For every emulated CPU of :func:`cpus` (one without V, then V at each VLEN with the extensions of each vector ISA
build: v, zvfh = v + zfh + zvfh, zvfbfwma = those + zvfbfmin + zvfbfwma), the dispatch build's probe
(harness/toolchain/dispatch_build.py) runs twice under QEMU, ``-cpu`` from harness/emulators/qemu.py's one builder:

1. ``scores``: what the kernel's ``riscv_hwprobe`` says the CPU has, and each variant library's own
   ``ggml_backend_score()``, called as ggml's loader calls it;
2. ``load``: ``ggml_backend_load_all()``, ggml's own log line naming the library it loaded, the CPU device's
   features, and a mul_mat per weight type on that device (exact by construction).

:func:`judge` holds what ggml did against three references: its scores (the loader must load the variant that
scores best), the CPU (the loaded variant's code may use only extensions the CPU has: each variant's extensions
are the compiler's ``__riscv_<ext>`` macros under its flags, the CPU's those ``-cpu`` turns on, and for the ones
``-cpu`` leaves at QEMU's default, hwprobe's answer), and the best variant the CPU could run (a lesser one is a
finding).  Where hwprobe's answer differs from what the emulated CPU executes, the row says so (a note on the
emulator, not a verdict on ggml).  A run killed by SIGILL, a variant scoring above zero on a CPU that
lacks what it uses, a wrong mul_mat, or ggml's ``RISCV_V`` / ``RVV_VLEN`` features disagreeing with the CPU are
findings too.  What the CPU has that the loaded variant does not use is said (:attr:`Row.unused`), not judged:
the variants the tree declares are what a distribution ships.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.config import ISA_BUILDS, NOVECTOR, VLENS, IsaBuild
from harness.core.proc import execute
from harness.emulators.qemu import Qemu, cpu_props, qemu
from harness.toolchain.compilers import glibc_root
from harness.toolchain.dispatch_build import EXTENSIONS, Dispatch, Variant

#: riscv_hwprobe's ``RISCV_HWPROBE_KEY_IMA_EXT_0`` bits of :data:`EXTENSIONS` (linux/arch/riscv/include/uapi/asm/
#: hwprobe.h); an extension without a bit there (zicbop) is not known to the kernel's answer.
HWPROBE_BITS: dict[str, int] = {"v": 2, "zba": 3, "zfh": 27, "zfhmin": 28, "zvfh": 30, "zvfhmin": 31,
                                "zihintpause": 36, "zfbfmin": 52, "zvfbfmin": 53, "zvfbfwma": 54}
#: Seconds one probe run may take under QEMU.
RUN_TIMEOUT = 300.0
#: The exit statuses of a guest killed by SIGILL (QEMU re-raises the guest's signal on itself; a shell says 132).
SIGILL = (-4, 132)


@dataclass(frozen=True)
class Cpu:
    """One emulated CPU: the extensions of an ISA build (:data:`~harness.core.config.NOVECTOR` for a CPU without V)
    at a VLEN (None without V)."""

    isa: IsaBuild
    vlen: int | None

    @property
    def name(self) -> str:
        return "no-V" if self.vlen is None else f"vlen{self.vlen}-{self.isa.name}"

    @property
    def props(self) -> dict[str, bool]:
        return cpu_props(self.isa)


def cpus() -> list[Cpu]:
    """The emulated CPUs of the table: one without V, then every VLEN with each vector ISA build's extensions."""
    return [Cpu(NOVECTOR, None), *(Cpu(isa, vlen) for vlen in VLENS for isa in ISA_BUILDS.values())]


def hwprobe_extensions(value: int) -> tuple[str, ...]:
    """The extensions of :data:`HWPROBE_BITS` set in an ``IMA_EXT_0`` answer."""
    return tuple(e for e, bit in HWPROBE_BITS.items() if value >> bit & 1)


@dataclass(frozen=True)
class ProbeRun:
    """One probe run: its exit status (None: timed out), its output lines, and the command."""

    argv: list[str]
    returncode: int | None
    lines: tuple[str, ...]
    stderr: str

    @property
    def last(self) -> str:
        return self.lines[-1] if self.lines else "(nothing)"

    def ended(self) -> str | None:
        """How it ended when not well: killed by SIGILL, timed out, another exit status; None when it finished."""
        if self.returncode is None:
            return f"timed out after {RUN_TIMEOUT:g} s (last line: {self.last})"
        if self.returncode in SIGILL:
            return f"killed by SIGILL after '{self.last}': the code uses an instruction the CPU lacks"
        if self.returncode != 0 or "done" not in self.lines:
            return f"exit status {self.returncode} after '{self.last}'"
        return None


def probe_emulator() -> Qemu:
    """QEMU as it runs the dispatch build's programs: against the GCC 14 root's glibc."""
    return dataclasses.replace(qemu(), root=str(glibc_root()))


def run_probe(d: Dispatch, cpu: Cpu, mode: str, emulator: Qemu | None = None) -> ProbeRun:
    """Run the dispatch build's probe in ``mode`` (``scores`` or ``load``) on the emulated ``cpu``."""
    emulator = emulator or probe_emulator()
    # A CPU without V names VLEN 128, which QEMU ignores without V.
    argv = [*emulator.command(d.probe, cpu.vlen or min(VLENS), cpu.props), mode]
    r = execute(argv, timeout=RUN_TIMEOUT, core_dumps=False)
    return ProbeRun(argv, r.returncode, tuple(r.stdout.splitlines()), r.stderr)


@dataclass
class Row:
    """What one emulated CPU got from a dispatch build, and what is wrong with it."""

    cpu: Cpu
    #: hwprobe's IMA_EXT_0 answer (None: no answer).
    hwprobe: int | None
    #: Each variant's own score on this CPU, by variant name (None: its scoring did not finish).
    scores: dict[str, int | None]
    #: The variant ggml loaded (its log line), or None.
    loaded: str | None
    #: The variant the scores say the loader should load (the highest positive score), or None.
    expected: str | None
    #: The variant with the most extensions among those whose extensions the CPU has (the best it could run).
    best: str | None
    #: The loaded library's features (``RISCV_V``, ``RVV_VLEN``, ...).
    features: dict[str, str]
    #: ``type: (wrong elements, largest error)`` of the mul_mats run on the loaded variant.
    matmuls: dict[str, tuple[int, float]]
    #: The extensions the CPU has that the loaded variant's code does not use.
    unused: tuple[str, ...]
    problems: list[str] = field(default_factory=list)
    #: What is said of the emulator, not of ggml (an extension it executes but hwprobe does not report).
    notes: list[str] = field(default_factory=list)
    #: The two probe commands (scores, load), for the reproducer.
    argv: tuple[list[str], ...] = ()

    @property
    def right(self) -> bool:
        return not self.problems


def _variant_name(d: Dispatch, library: str) -> str:
    v = d.variant(library)
    return v.name if v else Path(library).name


def _best(variants: list[Variant], has: set[str]) -> Variant | None:
    runnable = [v for v in variants if v.library is not None and set(v.extensions) <= has]
    return max(runnable, key=lambda v: len(v.extensions), default=None)


def judge(d: Dispatch, cpu: Cpu, scores_run: ProbeRun, load_run: ProbeRun) -> Row:
    """The row of ``cpu``: what ggml did (the two runs) held against its scores, the CPU and the best variant."""
    problems: list[str] = []
    notes: list[str] = []
    hw = next((ln.split() for ln in scores_run.lines if ln.startswith("hwprobe ")), None)
    hwprobe = int(hw[2], 16) if hw and hw[1] == "0" else None
    # What the CPU executes: the extensions -cpu turns on, and those it leaves at QEMU's default that hwprobe reports.
    told = set(hwprobe_extensions(hwprobe)) if hwprobe is not None else set()
    has = {e for e, on in cpu.props.items() if on} | {e for e in told if e not in cpu.props}
    if hwprobe is None:
        notes.append(f"riscv_hwprobe gave no answer ({' '.join(hw) if hw else 'no hwprobe line'})")
    else:
        unsaid = sorted(e for e in has & set(HWPROBE_BITS) if e not in told)
        if unsaid:
            notes.append(f"hwprobe does not report {', '.join(unsaid)}, which the emulated CPU executes")
        claimed = sorted(told - has)
        if claimed:
            notes.append(f"hwprobe reports {', '.join(claimed)}, which the emulated CPU lacks")
    scores: dict[str, int | None] = {v.name: None for v in d.variants if v.library is not None}
    for ln in scores_run.lines:
        if ln.startswith("score "):
            _, lib, n = ln.split()
            scores[_variant_name(d, lib)] = int(n)
    if scores_run.ended():
        problems.append(f"scoring the variants {scores_run.ended()}")
    by_name = {v.name: v for v in d.variants}
    for name, s in scores.items():
        lacking = sorted(set(by_name[name].extensions) - has)
        if s and lacking:
            problems.append(f"{name} scores {s} on a CPU without {', '.join(lacking)}, which its code uses")
    positive = {n: s for n, s in scores.items() if s}
    expected = max(positive, key=lambda n: positive[n]) if positive else None
    if positive and sorted(positive.values()).count(max(positive.values())) > 1:
        problems.append(f"variants tie at score {max(positive.values())}: the loader takes whichever it lists first")
    m = next((re.search(r"loaded CPU backend from (\S+)", ln) for ln in load_run.lines
              if "loaded CPU backend from" in ln), None)
    loaded = _variant_name(d, m.group(1)) if m else None
    features = dict(ln.split()[1:3] for ln in load_run.lines if ln.startswith("feature ") and len(ln.split()) >= 3)
    matmuls = {p[1]: (int(p[2]), float(p[3])) for p in (ln.split() for ln in load_run.lines if ln.startswith("matmul "))}
    best = _best(list(d.variants), has)
    if load_run.ended():
        problems.append(f"ggml's load and mul_mats {load_run.ended()}")
    if loaded is None:
        problems.append("ggml loaded no CPU variant (no 'loaded CPU backend from' line)")
    else:
        lv = by_name.get(loaded)
        if loaded != expected:
            problems.append(f"ggml loaded {loaded} where the scores say {expected}")
        lacking = sorted(set(lv.extensions) - has) if lv else []
        if lacking:
            problems.append(f"ggml loaded {loaded}, whose code uses {', '.join(lacking)}, which the CPU lacks")
        if best is not None and loaded != best.name and lv is not None and len(best.extensions) > len(lv.extensions):
            problems.append(f"a lesser variant: {loaded} where {best.name} (with "
                            f"{', '.join(sorted(set(best.extensions) - set(lv.extensions)))}) runs on this CPU")
        if lv is not None and ("RISCV_V" in features) != ("v" in lv.extensions):
            problems.append(f"the loaded {loaded} says RISCV_V={'1' if 'RISCV_V' in features else 'absent'} but its "
                            f"code is compiled {'with' if 'v' in lv.extensions else 'without'} V")
        if "RVV_VLEN" in features and cpu.vlen is not None and int(features["RVV_VLEN"]) * 8 != cpu.vlen:
            problems.append(f"ggml reads VLEN {int(features['RVV_VLEN']) * 8} on a CPU of VLEN {cpu.vlen}")
    for t, (bad, err) in matmuls.items():
        if bad:
            problems.append(f"mul_mat of {t} weights: {bad} wrong elements (largest error {err:g}; exact by construction)")
    used = set(by_name[loaded].extensions) if loaded in by_name else set()
    unused = tuple(e for e in EXTENSIONS if e in has and e not in used)
    return Row(cpu, hwprobe, scores, loaded, expected, best.name if best else None, features, matmuls, unused,
               problems, notes, (scores_run.argv, load_run.argv))


def table_rows(d: Dispatch, only: list[Cpu] | None = None) -> list[Row]:
    """Every emulated CPU's row (or ``only`` those), one probe run after another."""
    emulator = probe_emulator()
    return [judge(d, c, run_probe(d, c, "scores", emulator), run_probe(d, c, "load", emulator)) for c in only or cpus()]


def variants_table(d: Dispatch) -> list[str]:
    """The build's variants as a markdown table: flags, the extensions their code may use, built or why not."""
    out = ["| variant | CMake features | flags | extensions its code may use | built |", "|---|---|---|---|---|"]
    for v in d.variants:
        built = v.library.name if v.library else f"no: {v.error.splitlines()[0] if v.error else 'no library'}"
        out.append(f"| {v.name} | {' '.join(v.features) or '-'} | `{' '.join(v.flags) or '(none)'}` | "
                   f"{', '.join(v.extensions) or '-'} | {built} |")
    return out


def markdown(d: Dispatch, rows: list[Row]) -> list[str]:
    """The table of emulated CPUs against the variant loaded, and whether that is right."""
    out = [f"{d.describe()}:", "", *variants_table(d), "",
           "| emulated CPU | hwprobe says | scores | loaded | right | what the CPU has that it does not use "
           "| mul_mat F32 / F16 / Q8_0 |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        hw = ", ".join(hwprobe_extensions(r.hwprobe)) if r.hwprobe is not None else "no answer"
        scores = ", ".join(f"{n} {'-' if s is None else s}" for n, s in r.scores.items())
        mm = " / ".join("ok" if bad == 0 else f"{bad} wrong" for bad, _ in r.matmuls.values()) or "not run"
        verdict = ("yes" if r.right else "**no**: " + "; ".join(r.problems)) + "".join(f" ({n})" for n in r.notes)
        out.append(f"| {r.cpu.name} | {hw or '-'} | {scores} | {r.loaded or '-'} | {verdict} | "
                   f"{', '.join(r.unused) or '-'} | {mm} |")
    return out


def reproducer(row: Row) -> str:
    """The commands that show a row's outcome (the probe's two runs)."""
    return "\n".join(shlex.join(a) for a in row.argv)
