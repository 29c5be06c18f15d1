"""A series' regression test as a maintainer runs it: ggml's ``test-quantize-fns`` built with the stock toolchain
and run under ``qemu-riscv64`` directly, with no rvvdiff and no ctest set-up.

:func:`read_runs` reads back the lines ``rvvdiff series --run-test`` records in docs/upstream/series/test-runs.json
(:func:`harness.upstream.series_runs.run_test` writes them: the test built by each stock compiler, before and after
the series' fixes); :func:`failing` keeps the runs where the test fails without the fixes: per compiler, the ISA
build, the tail/mask policy, the VLENs and what failed.  :func:`configure_line`, :func:`build_line` and
:func:`run_line` are the commands (the configure options are ggml's CMake options of the recorded runs, the
``-cpu`` value the one those runs gave QEMU); :func:`commands` and :func:`where_it_fails` put them in the words of a
commit message, a series page and an issue text.

Every line ends with the version of the test it ran (:func:`stamped`, read back by :func:`stamp_of`): `` [test
<version>]``, the first 12 hex digits of the sha256 of the diffs of the test patches the run applied, in order
(:func:`version`), or `` [test version unknown]`` (:data:`UNKNOWN`) where no record says which; a line from before
lines said it has no stamp and reads as unknown too.  harness/upstream/testversion.py says whether it is the
current test's.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.core.config import ISA_BUILDS, PROJECT_ROOT
from harness.core.matrix import Point
from harness.toolchain.cmake_build import build_argv
from harness.upstream import formatpatch, stock
from harness.upstream.ggml_own_tests import TEST_CMAKE

#: The regression tests' recorded runs (``rvvdiff series --run-test``), per series.
TEST_RUNS = PROJECT_ROOT / "docs" / "upstream" / "series" / "test-runs.json"
#: The test every series adds its check to.
TARGET = "test-quantize-fns"
#: The build directory the printed commands use.
BUILD = "build"
#: The stamp of a line whose test version no record shows.
UNKNOWN = "version unknown"
_STAMP = re.compile(r" \[test ([0-9a-f]{12}|" + UNKNOWN + r")\]$")
_STRESS_WORDS = " with rvv_ta_all_1s / rvv_ma_all_1s"
#: One VLEN's cell of a recorded line, with what failed where the line says it there.
_CELL = re.compile(r"VLEN (\d+) (passes|FAILS)(?: \(((?:[^()]|\([^()]*\))*)\))?")
_LINE = re.compile(r"^(?P<side>pinned tree|with the fixes)(?: \+ (?P<base>[^:]+))?: (?P<cells>.+?); test-quantize-fns "
                   r"built with ggml's CMake by (?P<cc>[^(]+) \((?P<isa>\w+) build\), run by ctest under qemu-riscv64"
                   r"(?P<stress>" + re.escape(_STRESS_WORDS) + r")?(?:; (?P<note>[^.]+))?\.$")


@dataclass(frozen=True)
class TestRun:
    """One recorded line: one side (before / with the fixes) built by one compiler, at every VLEN it ran."""

    fixed: bool
    #: fixes of other series applied on both sides (a stress run whose stress also shows their finding)
    base: tuple[str, ...]
    #: the stock compiler as the texts name it (clang-22, GCC 14) and as the matrix does (clang, gcc14)
    compiler: str
    cc: str
    isa: str
    stress: bool
    #: VLEN -> passed
    vlens: dict[int, bool]
    #: what failed ("iq4_nl dot product error (odd blocks)"), over every VLEN
    failures: tuple[str, ...]
    #: what failed at each failing VLEN (the record says per VLEN where they differ)
    failed_at: dict[int, tuple[str, ...]] = field(default_factory=dict)
    #: why the build is not the one the test asks for ("GCC 14 cannot make the zvfbfwma build: ..."), or ''
    note: str = ""

    @property
    def failing(self) -> list[int]:
        return [v for v, ok in self.vlens.items() if not ok]

    def at(self, vlen: int) -> Point:
        """Where the run ran at ``vlen``: its ISA build, tail/mask policy and compiler."""
        return Point(vlen, self.isa, self.stress, self.cc)


def version(patches: Iterable[Path]) -> str:
    """The version of a test made of ``patches`` (in the order a run applies them): the first 12 hex digits of the
    sha256 of their diffs (the patch files' headers, wording for commit messages, are not part of it)."""
    text = "".join(formatpatch.strip_header(Path(p).read_text()) for p in patches)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def stamped(line: str, test: str) -> str:
    """``line`` (a recorded run) ending with the version of the test it ran (a :func:`version`, or :data:`UNKNOWN`)."""
    return f"{stamp_of(line)[0]} [test {test}]"


def stamp_of(line: str) -> tuple[str, str]:
    """A recorded line without its stamp, and the version it says ('' when it has none)."""
    m = _STAMP.search(line)
    return (line[:m.start()], m.group(1)) if m else (line, "")


def read_runs(lines: list[str]) -> list[TestRun]:
    """The recorded lines of one series (test-runs.json), each as a :class:`TestRun` (lines of another form are
    skipped)."""
    names = {v: k for k, v in stock.NAMES.items()}
    out = []
    for ln in lines:
        m = _LINE.match(stamp_of(ln.strip())[0])
        if not m:
            continue
        cells = [(int(v), ok == "passes", tuple(w.strip() for w in grp.split(";") if w.strip() not in ("", "...")))
                 for v, ok, grp in _CELL.findall(m["cells"])]
        vlens = {v: ok for v, ok, _ in cells}
        said = [w for _, _, w in cells if w]
        # one list after the last cell: what failed at every failing VLEN; else each failing cell says its own
        failed_at = {v: (w if len(said) > 1 else tuple(said[0] if said else ())) for v, ok, w in cells if not ok}
        base = tuple(b.strip() for b in (m["base"] or "").split(",") if b.strip())
        cc = m["cc"].strip()
        out.append(TestRun(m["side"] == "with the fixes", base, cc, names.get(cc, cc), m["isa"], bool(m["stress"]),
                           vlens, tuple(dict.fromkeys(w for ws in failed_at.values() for w in ws)), failed_at=failed_at,
                           note=m["note"] or ""))
    return out


def failing(runs: list[TestRun]) -> list[TestRun]:
    """The runs without the series' fixes where the test fails, one per compiler, in the recorded order."""
    return [r for r in runs if not r.fixed and r.failing]


def configure_line(cc: str, isa: str, tree: Path | None = None) -> list[str]:
    """``cmake`` configuring llama.cpp (named ``llama.cpp``) for the test with compiler ``cc`` (clang, gcc14) in ISA
    build ``isa``: the library options :mod:`harness.upstream.stock` prints and the test build's
    (harness/upstream/ggml_own_tests.py's ``TEST_CMAKE``: the tests need llama-common, and run statically linked
    under qemu-riscv64)."""
    from harness.ggml.source import pinned

    root = Path(tree or pinned().root)
    b = stock.cmake_build(root, isa, cc, Path(BUILD), printed=True).without("CMAKE_EXPORT_COMPILE_COMMANDS")
    return [a.replace(str(root), "llama.cpp") for a in b.with_options(TEST_CMAKE).configure_argv()]


def build_line() -> list[str]:
    return build_argv(Path(BUILD), (TARGET,))


def run_line(at: Point) -> list[str]:
    """The test run under qemu-riscv64 at ``at``: the ``-cpu`` value the recorded runs gave QEMU (the ISA build's
    extensions at the VLEN; with stress, tail- and mask-agnostic elements written as ones, without
    ``rvv_vl_half_avl``)."""
    return ["qemu-riscv64", "-cpu", stock.cpu_value(at), f"{BUILD}/bin/{TARGET}"]


def _vlens(vs: list[int]) -> str:
    return "VLEN " + (" and ".join(map(str, vs)) if len(vs) <= 2 else ", ".join(map(str, vs[:-1])) + f" and {vs[-1]}")


def isa_options(isa: str) -> str:
    """The ISA build's ggml options as the recorded runs gave them (``-DGGML_RVV=ON -DGGML_RV_ZFH=OFF ...``)."""
    return " ".join(f"-D{k}={v}" for k, v in ISA_BUILDS[isa].cmake.items())


def _what_where(failed_at: dict[int, tuple[str, ...]]) -> str:
    """What failed at the failing VLENs: ``VLEN 128 and 512: a; b`` when it is the same at each, else what failed at
    every one of them, then what failed besides at each VLEN (``..., and at VLEN 512 also: c; d``; with nothing in
    common: ``VLEN 128: a, and VLEN 512: c``)."""
    common = [w for w in next(iter(failed_at.values()), ()) if all(w in ws for ws in failed_at.values())]
    head = _vlens(list(failed_at)) + (f": {'; '.join(common)}" if common else "")
    extra = [f"{'at VLEN ' if common else 'VLEN '}{v}{' also' if common else ''}: {'; '.join(w for w in ws if w not in common)}"
             for v, ws in failed_at.items() if any(w not in common for w in ws)]
    return ", and ".join(([head] if common else []) + extra) or head


def where_it_fails(runs: list[TestRun], names: dict[str, str] | None = None, *, what: bool = True,
                   options: bool = True) -> list[str]:
    """One line per build that fails without the fixes, the compilers that fail alike merged: ``clang-22 and GCC 14
    (-DGGML_RVV=ON ...; rvv_ta_all_1s / rvv_ma_all_1s): VLEN 128 and 512: bf16 dot product error (ragged rows)``
    (where the VLENs fail differently: :func:`_what_where`); ``what=False``: the failing VLENs only, without what
    failed; ``options=False``: without the ISA build's options (a fix's commit message: the test's commit has them)."""
    merged: dict[tuple, list[str]] = {}
    for r in failing(runs):
        key = tuple(r.failed_at.items()) if what else tuple(r.failing)
        merged.setdefault((r.isa, r.stress, r.base, key), []).append(r.compiler)
    out = []
    for (isa, stress, base, key), ccs in merged.items():
        how = [isa_options(isa)] * options + (["QEMU's rvv_ta_all_1s / rvv_ma_all_1s"] if stress else []) + (
            [f"with {', '.join((names or {}).get(b, b) for b in base)} applied"] if base else [])
        said = "; ".join(how)
        out.append(f"{' and '.join(ccs)}" + (f" ({said})" if said else "") + ": "
                   + (_what_where(dict(key)) if what else _vlens(list(key))))
    return out


def of_types(runs: list[TestRun], types: set[str]) -> list[TestRun]:
    """``runs`` as far as they concern the quantized or float types ``types`` (a check of test-quantize-fns names its
    type first: ``q3_K dot product error``): each failing VLEN kept only where a check of those types failed there."""
    out = []
    for r in runs:
        failed_at = {v: kept for v, ws in r.failed_at.items() if (kept := tuple(w for w in ws if w.split()[0] in types))}
        out.append(replace(r, vlens={v: v not in failed_at for v in r.vlens}, failed_at=failed_at,
                           failures=tuple(dict.fromkeys(w for ws in failed_at.values() for w in ws))))
    return out


def run_lines(runs: list[TestRun]) -> list[str]:
    """The runs that show the failure, one per build and tail/mask policy at its first failing VLEN."""
    return list(dict.fromkeys(shlex.join(run_line(r.at(r.failing[0]))) for r in failing(runs)))


def build_lines(runs: list[TestRun], width: int = 100) -> list[str]:
    """Configure and build the test for the first compiler that fails (the others differ in their compiler options
    only: :func:`other_compilers`)."""
    first = next(iter(failing(runs)), None)
    if first is None:
        return []
    return [*wrapped(configure_line(first.cc, first.isa), width), *wrapped(build_line(), width)]


def other_compilers(runs: list[TestRun]) -> str:
    """How the configure line of :func:`build_lines` changes for the other compilers that fail ('' if none)."""
    bad = failing(runs)
    seen = {bad[0].cc} if bad else set()
    said = []
    for r in bad:
        if r.cc in seen:
            continue
        seen.add(r.cc)
        opts = stock.toolchain_options(r.cc, True)
        said.append(f"{r.compiler}: " + " ".join(f"-D{k}={v}" for k, v in opts.items() if k.endswith("_COMPILER"))
                    + (f", {isa_options(r.isa)}" if r.isa != bad[0].isa else ""))
    return ("For " + "; for ".join(said) + " instead of the compiler options above.") if said else ""


def wrapped(argv: list[str], width: int = 100) -> list[str]:
    """``argv`` as shell lines of at most ``width`` characters, continued with backslashes."""
    lines, cur = [], ""
    for w in map(shlex.quote, argv):
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur + " \\")
            cur = "  " + w
        else:
            cur = f"{cur} {w}" if cur else w
    return lines + [cur]


#: llama.cpp's own RISC-V CI, as the pinned tree's .github/workflows/build-riscv.yml runs it.
UPSTREAM_CI = ("llama.cpp's RISC-V CI (.github/workflows/build-riscv.yml) builds natively with GCC 14 and ggml's "
               "default options on an ubuntu-24.04-riscv runner and runs `ctest -L main`; the runner's VLEN and tail "
               "policy are its hardware's, which the workflow does not name")


def _config(r: TestRun) -> str:
    """How a run's build and policy read in a sentence: ``clang-22``, ``GCC 14 with rvv_ta_all_1s / rvv_ma_all_1s``."""
    return f"{r.compiler}{_STRESS_WORDS if r.stress else ''}"


def _unseen(ci: TestRun, others: list[TestRun]) -> list[str]:
    """The checks that fail in ``others`` at a VLEN where ``ci`` ran and did not fail them, each with its VLENs and the
    builds that show it (none when ``ci`` shows everything the others do)."""
    missed: dict[str, dict[int, list[str]]] = {}
    for o in others:
        for v, ws in o.failed_at.items():
            for w in ws:
                if v in ci.vlens and w not in ci.failed_at.get(v, ()):
                    missed.setdefault(w, {}).setdefault(v, []).append(_config(o))
    return [f"\"{w}\" at {_vlens(sorted(at))}, as {' and '.join(dict.fromkeys(c for cs in at.values() for c in cs))}"
            " do" for w, at in missed.items()]


def in_upstream_ci(runs: list[TestRun]) -> str:
    """Whether the regression test fails before the fixes in a configuration like upstream's CI (:data:`UPSTREAM_CI`:
    GCC 14, the default tail/mask policy, no other series' fix applied), as far as the recorded runs show: yes, at
    which VLENs, and which checks that fail elsewhere it does not show; no, and why (the fixed code is not reached,
    only agnostic elements written with ones show it, or only another compiler's code does); where else it fails."""
    before = [r for r in runs if not r.fixed]
    like_ci = [r for r in before if r.cc == "gcc14" and not r.stress and not r.base]
    if not before:
        return "not known: no recorded run"
    bad = failing(before)
    if not bad:
        return "no: it passes before and after the fixes on this tree (the fixed code is not reached)"
    if any(r.failing for r in like_ci):
        r = next(r for r in like_ci if r.failing)
        unseen = _unseen(r, [o for o in bad if o is not r])
        return (f"yes: built by GCC 14, it fails under QEMU's default tail policy at {_vlens(r.failing)}"
                + (f"; there it does not fail {'; '.join(unseen)}, so a CI configured like upstream's does not see "
                   + ("that check's bug" if len(unseen) == 1 else "those checks' bugs") if unseen else ""))
    head = (f"no: built by GCC 14 it passes under QEMU's default policy at {_vlens(sorted(like_ci[0].vlens))}, so a CI "
            "configured like upstream's does not see the bug" if like_ci
            else "not recorded: no run built by GCC 14 under the default policy")
    elsewhere = [f"{_config(r)} at {_vlens(r.failing)}" for r in bad]
    plain = list(dict.fromkeys(r.compiler for r in bad if not r.stress))
    note = ("; only agnostic elements written with ones make it fail, which no known core does" if not plain else
            f"; under the default policy only {' and '.join(plain)}'s code fails" if like_ci else "")
    return f"{head}; it fails with {'; '.join(elsewhere)}{note}"
