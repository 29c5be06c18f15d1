"""ggml's own tests, patched so that they catch the RVV findings of the pinned tree.

For each bug class, ``harness/data/ggml-tests/<class>.patch`` changes llama.cpp's
``tests/test-quantize-fns.cpp`` (the test of the CPU backend's quantize / vec_dot functions) so that
it fails on the pinned tree under ``qemu-riscv64`` at the VLENs concerned and passes once the
class's fixes (``harness/data/fixes/<name>.patch``) are applied.  :func:`run_class` checks that:

1. a copy of the pinned tree (``cp -al``, hard links broken for every file a patch changes; the
   cached tree itself is never written), with the test patch and optionally the fixes applied;
2. ggml's / llama.cpp's own CMake with Debian's clang-22 (:mod:`harness.upstream.stock`), GGML_RVV=ON,
   static, LLAMA_BUILD_TESTS=ON, target ``test-quantize-fns`` only;
3. the test run by ``ctest`` (ggml's CMake configured with ``CMAKE_CROSSCOMPILING_EMULATOR`` = the QEMU
   rvvdiff runs, so ctest starts the test under ``qemu-riscv64``; ``QEMU_CPU=rv64,v=true,vlen=<V>,...`` in
   its environment picks the VLEN and extensions) at each VLEN of the class: ctest's exit status 0 is a pass.

The pinned and the fixed variants share one tree copy and one build directory (under
``$RVVDIFF_CACHE/ggmltests`` or ``$RVVDIFF_GGMLTESTS_DIR``): only the patched files change between them,
so the second build recompiles ``quants.c`` and the test and relinks.  A lock file serialises callers.

    rvvdiff ggml-tests odd_block_count          # verdict table (pinned, fixed) and the commands
    rvvdiff ggml-tests --list
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.core import config, settings
from harness.core.config import DATA_DIR, cache_dir
from harness.core.matrix import Point
from harness.core.proc import CommandError, execute, run
from harness.emulators import qemu
from harness.toolchain import cmake_build
from harness.toolchain.cmake_build import CmakeBuild
from harness.upstream import stock

TEST_PATCHES = DATA_DIR / "ggml-tests"
#: Applied on both sides of every run (not part of any series): ctest starts the tests under the emulator
RUNNER_PATCH = TEST_PATCHES / "runner" / "ctest-emulator.patch"
FIX_PATCHES = DATA_DIR / "fixes"
DEFAULT_WORK = "$RVVDIFF_CACHE/ggmltests"  # said in --help; the path is work_dir()

#: CMake options on top of stock.build_argvs' (which turns everything of llama.cpp off): the tests
#: need llama-common (and so llama); executables are linked statically for qemu-riscv64.
TEST_CMAKE: dict[str, str] = {
    "LLAMA_BUILD_TESTS": "ON",
    "LLAMA_BUILD_COMMON": "ON",
    "CMAKE_EXE_LINKER_FLAGS": "-static",
}


@dataclass(frozen=True)
class TestClass:
    """One bug class: the test patch, the fixes that make it pass, where it fails."""

    name: str
    title: str
    #: Fix names (harness/data/fixes/<name>.patch) that make the patched test pass.
    fixes: tuple[str, ...]
    #: VLENs at which the pinned tree fails the patched test.
    vlens: tuple[int, ...]
    target: str = "test-quantize-fns"
    isa: str = "v"
    #: QEMU writes ones into tail/mask-agnostic elements (rvv_ta_all_1s, rvv_ma_all_1s).
    stress: bool = False
    #: False: the unmodified test already fails (no test patch).
    patched: bool = True
    #: The test patch, when it is another class's (default: this class's own, <name>.patch).
    test_patch: str = ""
    #: Types whose "<type> dot product error" line must say FAILED in every pinned run: the class's bug
    #: shows, not only another one the same patch also catches (whose fix is then among ``fixes``).
    must_fail: tuple[str, ...] = ()
    #: Classes this one builds on (harness/data/series.toml's ``needs``): their test patches and fixes are applied
    #: first, on both sides (the class's test patch extends theirs).
    needs: tuple[str, ...] = ()
    #: False: the test cannot reach the fixed code on the pinned tree (ggml's selection never runs it there), so
    #: it passes on both sides; the runs show that the test holds, not the bug.
    reaches: bool = True

    @property
    def patch(self) -> Path | None:
        return TEST_PATCHES / f"{self.test_patch or self.name}.patch" if self.patched else None

    def fix_patches(self) -> list[Path]:
        return [FIX_PATCHES / f"{f}.patch" for f in self.fixes]

    def targets(self, compiler: str = "clang", vlens: Sequence[int] | None = None) -> list[Point]:
        """Where the test runs: at its VLENs (or ``vlens``), in its ISA build and stress mode, built by the stock
        ``compiler``."""
        return [Point(v, self.isa, self.stress, compiler) for v in vlens or self.vlens]

    def base_patches(self) -> list[Path]:
        """The test patches and fixes of the classes this one builds on, transitively, in order."""
        out: list[Path] = []
        for n in self.needs:
            c = CLASSES[n]
            out += [p for p in [*c.base_patches(), *([c.patch] if c.patch else []), *c.fix_patches()] if p not in out]
        return out

    def test_patches(self) -> list[Path]:
        """The test patches a run applies, in order: those of the classes this one builds on, then its own (the test's
        version: harness/upstream/testcmd.py's ``version``)."""
        return [p for p in [*self.base_patches(), *([self.patch] if self.patch else [])] if p.parent == TEST_PATCHES]


CLASSES: dict[str, TestClass] = {c.name: c for c in (
    TestClass("odd_block_count", "vec_dot with an odd number of blocks",
              ("iq4_nl_odd_block_dropped", "mxfp4_odd_block_dropped"), (128, 256, 512, 1024)),
    TestClass("iq_subblock_layout", "i-quant vec_dot at VLEN 512 / 1024: sub-block offsets and sub-scale nibbles",
              ("iq2_xxs_vl512_subblock_offsets", "iq3_xxs_vl1024_subblock_offsets",
               "iq2_s_vl1024_scale_nibbles_swapped"), (512, 1024), needs=("odd_block_count",)),
    TestClass("int16_overflow", "vec_dot of rows with large sub-block sums (int16 partial sums)",
              ("q4_K_int16_subblock_sum",), (256, 512, 1024), needs=("odd_block_count",)),
    # The unmodified test already fails (q3_K, q6_K) when QEMU writes ones into agnostic elements.
    TestClass("tail_agnostic_accumulator", "q3_K / q6_K vec_dot at VLEN 512 / 1024, agnostic elements written as ones",
              ("k_quants_vl512_agnostic_accumulator",), (512, 1024), stress=True, patched=False),
    # The odd-block patch's 4095-value row is not a multiple of VLEN / 8 at any VLEN: with agnostic elements
    # written as ones, the zvfbfwma build's ggml_vec_dot_bf16 returns NaN.  The same patch and stress also
    # catch the odd-block and k-quant findings, so their fixes are in the fixed variant too.
    TestClass("bf16_tail_agnostic", "bf16 vec_dot of 4095 values (zvfbfwma build), agnostic elements written as ones",
              ("vec_dot_bf16_tail_agnostic", "iq4_nl_odd_block_dropped", "mxfp4_odd_block_dropped",
               "k_quants_vl512_agnostic_accumulator"), (128, 256, 512, 1024), isa="zvfbfwma", stress=True,
              test_patch="odd_block_count", must_fail=("bf16",)),
    # Series 4's own test: float vec_dot on 4095 values (no partial block of another class's bug), zvfbfwma build
    # (the bf16 vector dot); the unmodified q3_K / q6_K checks fail at VLEN 512 / 1024 under the same stress.
    TestClass("tail_agnostic", "f32 / f16 / bf16 vec_dot of rows whose last vector is partial (zvfbfwma build), "
              "agnostic elements written as ones",
              ("k_quants_vl512_agnostic_accumulator", "vec_dot_bf16_tail_agnostic", "vec_dot_f16_unroll_tail_agnostic"),
              (128, 256, 512, 1024), isa="zvfbfwma", stress=True, must_fail=("bf16",), needs=("odd_block_count",)),
    # Latent on this tree: the selection never picks these layouts where they are wrong, and the tests go through
    # the public API (mul_mat on CPU_REPACK weights), so they pass on both sides (reaches=False).  zvfh build: the
    # RISC-V selection repacks only with zvfh; VLEN 256 is where it repacks q4_0 / q4_K / q2_K (16x1), VLEN 512
    # where the fixed kernels are wrong and nothing is picked.
    TestClass("repack_vlen512", "mul_mat on CPU_REPACK q4_0 / q4_K weights against a CPU buffer (public API)",
              ("repack_q4_0_8x8_vlen512", "repack_q4_K_16x1_vlen512"), (256, 512), isa="zvfh",
              needs=("odd_block_count",), reaches=False),
    TestClass("generic_gemm_layout", "mul_mat on CPU_REPACK q2_K weights against a CPU buffer (public API)",
              ("repack_q2_K_16x1_generic_gemm_layout",), (256,), isa="zvfh", needs=("repack_vlen512",), reaches=False),
)}


# ------------------------------------------------------------------ patches and the tree copy


def patched_files(patch: Path) -> list[str]:
    """The files (llama.cpp paths) a unified diff changes, as ``patch -p1`` resolves them."""
    out = []
    for line in Path(patch).read_text().splitlines():
        if line.startswith("+++ "):
            path = line[4:].split("\t")[0].strip()
            out.append(path.split("/", 1)[1])
    return out


def all_patches() -> list[Path]:
    """Every test patch and every fix patch a class uses."""
    seen: dict[Path, None] = {RUNNER_PATCH: None}
    for c in CLASSES.values():
        for p in c.base_patches() + ([c.patch] if c.patch else []) + c.fix_patches():
            seen[p] = None
    return list(seen)


def pinned_root() -> Path:
    from harness.ggml import source
    return source.pinned().root


def patch_argv(patch: Path, tree: Path, dry_run: bool = False) -> list[str]:
    return ["patch", "-p1", "--batch", "--forward", "-s", "-d", str(tree), "-i", str(patch)] + (
        ["--dry-run"] if dry_run else [])


def check_applies(patch: Path, tree: Path | None = None) -> str | None:
    """None when ``patch`` applies cleanly to ``tree`` (default: the pinned tree), else patch's output."""
    cp = execute(patch_argv(patch, tree or pinned_root(), dry_run=True), timeout=60).finished("patch --dry-run")
    return None if cp.returncode == 0 and "offset" not in cp.stdout and "fuzz" not in cp.stdout \
        else (cp.stdout + cp.stderr).strip() or f"exit {cp.returncode}"


def _write_replacing(path: Path, data: bytes) -> None:
    """Write through a new inode (temp file + rename): a hard link into the cached tree is broken, never written."""
    tmp = path.with_name(f".{path.name}.ggmltests{os.getpid()}")
    tmp.write_bytes(data)
    os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
    os.replace(tmp, path)


def prepare_tree(tree: Path, patches: Sequence[Path], pinned: Path | None = None) -> list[str]:
    """Make ``tree`` (a ``cp -al`` copy of the pinned tree, created if missing) the pinned tree plus
    ``patches``; every file any known patch touches is reset to the pinned content first.  Files whose
    content does not change are left alone (their mtime too, so builds stay incremental).  Returns the
    files rewritten."""
    pinned = Path(pinned or pinned_root())
    tree = Path(tree)
    if not tree.exists():
        tmp = tree.with_name(tree.name + f".tmp{os.getpid()}")
        run(["cp", "-al", pinned, tmp], timeout=600, what="copying the pinned tree (hard links)")
        os.replace(tmp, tree)
    files = sorted({f for p in [*all_patches(), *patches] for f in patched_files(p)})
    with tempfile.TemporaryDirectory(prefix="ggmltests-") as d:
        stage = Path(d)
        for f in files:
            (stage / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(pinned / f, stage / f)
        for p in patches:
            cp = execute(patch_argv(p, stage), timeout=60).finished("patch")
            if cp.returncode != 0:
                raise RuntimeError(f"{p.name} does not apply to {pinned}: {(cp.stdout + cp.stderr).strip()}")
        changed = []
        for f in files:
            want = (stage / f).read_bytes()
            if not (tree / f).exists() or (tree / f).read_bytes() != want:
                _write_replacing(tree / f, want)
                changed.append(f)
    return changed


def locked(work: Path) -> AbstractContextManager[None]:
    """The lock of a work directory (its tree copy and build directories)."""
    return config.locked(work / ".lock")


# ------------------------------------------------------------------ build and run


def emulator() -> str:
    """The qemu-riscv64 ctest starts the tests under (``$RVVDIFF_QEMU`` or PATH, as rvvdiff's runs)."""
    name = qemu.binary_name()
    return shutil.which(name) or name


def tests_cmake(tree: Path, build_dir: Path, isa: str = "v", compiler: str = "clang") -> CmakeBuild:
    """stock's library build (clang-22, ggml's options) with the tests turned on and QEMU as the cross-compiling
    emulator (ctest runs each test under it).  ``tree`` need not exist yet (``commands`` prints the line before
    the copy is made): it is laid out as the pinned tree."""
    shape = tree if tree.exists() else pinned_root()
    b = stock.cmake_build(shape, isa, compiler, build_dir)
    b = replace(b, source=Path(str(b.source).replace(str(shape), str(tree))))
    return b.with_options({**TEST_CMAKE, "CMAKE_CROSSCOMPILING_EMULATOR": emulator()})


def configure_argv(tree: Path, build_dir: Path, isa: str = "v", compiler: str = "clang") -> list[str]:
    """The configure line of :func:`tests_cmake`."""
    return tests_cmake(tree, build_dir, isa, compiler).configure_argv()


def build_argv(build_dir: Path, target: str, jobs: int = 2, nice: int = 5) -> list[str]:
    return cmake_build.build_argv(build_dir, (target,), jobs=jobs, nice=nice)


def executable(build_dir: Path, target: str) -> Path:
    return Path(build_dir) / "bin" / target


#: ctest's own deadline for one run of the test (it kills the test after it); test-quantize-fns takes 2-3 min
CTEST_TIMEOUT = 1800


def run_argv(c: TestClass, build_dir: Path, vlen: int) -> list[str]:
    """The command that runs the class's test at ``vlen`` through ctest (printed by :func:`commands`;
    :func:`run_test` runs it): ``QEMU_CPU`` gives QEMU the VLEN and the ISA build's extensions; the class's
    stress mode is the tail/mask part only, without ``rvv_vl_half_avl``.  ``--no-tests=error``: a build without the
    test (ctest finds nothing) is a failure, not a pass."""
    cpu = stock.cpu_value(Point(vlen, c.isa, c.stress))
    return ["env", f"QEMU_CPU={cpu}", "ctest", "--test-dir", str(build_dir), "-R", f"^{c.target}$",
            "--no-tests=error", "--output-on-failure", "--timeout", str(CTEST_TIMEOUT)]


def build(tree: Path, build_dir: Path, target: str, isa: str = "v", *, jobs: int = 2,
          timeout: float = 7200, compiler: str = "clang") -> float:
    """Configure (once) and build ``target``; return the seconds configure + build took."""
    why = stock.missing(compiler)
    if why:
        raise stock.StockToolchainError(why)
    build_dir.mkdir(parents=True, exist_ok=True)
    log = build_dir / "ggmltests-build.log"
    t0 = time.monotonic()
    b = tests_cmake(tree, build_dir, isa, compiler)
    try:
        cmake_build.configure(b, what=f"ggml's tests, {compiler}, {isa}", log=log, timeout=timeout, reuse=True)
        cmake_build.build(b, (target,), jobs=jobs, nice=5, timeout=timeout, what=f"building {target}", log=log)
    except CommandError as e:
        how = f"timed out after {timeout:g} s" if e.returncode is None else f"exit {e.returncode}"
        raise stock.StockToolchainError(f"{shlex.join(e.argv[:6])} ... failed ({how}); log {log}") from None
    return time.monotonic() - t0


def build_patched(patches: Sequence[Path], work: Path, isa: str = "zvfh", compiler: str = "clang",
                  target: str = "test-quantize-fns") -> Path:
    """Build ``target`` of the pinned tree with ``patches`` (in order) in ``work`` (its own tree copy and one
    build directory per ISA build and compiler); the executable."""
    with locked(work):
        prepare_tree(work / "tree", patches)
        build_dir = work / f"build-{isa}-{compiler}"
        build(work / "tree", build_dir, target, isa, compiler=compiler)
    return executable(build_dir, target)


@dataclass
class Run:
    vlen: int
    passed: bool
    returncode: int
    seconds: float
    #: The test's lines that say FAILED (at most 12).
    failures: list[str] = field(default_factory=list)


def run_test(c: TestClass, build_dir: Path, vlen: int) -> Run:
    """The class's test run once at ``vlen`` by ctest, as :func:`run_argv` says (under the QEMU rvvdiff runs).
    The failures are the test's lines that say FAILED or assert; else what ctest says went wrong (a crash, its
    timeout), else the last lines."""
    t0 = time.monotonic()
    argv = run_argv(c, build_dir, vlen)
    cp = execute(argv, timeout=CTEST_TIMEOUT + 120)
    if cp.timed_out:
        rc, out = -1, f"ctest did not return within {CTEST_TIMEOUT + 120} s: timed out"
    else:
        rc, out = cp.returncode, cp.stdout + cp.stderr
    lines = [ln.strip() for ln in out.splitlines()]
    fails = [ln for ln in lines if ("FAILED" in ln and not ln.startswith("The following tests FAILED"))
             or "Assert" in ln or "timed out" in ln][:12]
    if rc != 0 and not fails:
        fails = [ln for ln in lines if "***" in ln][:3] or [f"ctest exit status {rc}: " + " | ".join(lines[-3:])]
    return Run(vlen, rc == 0, rc, time.monotonic() - t0, fails)


@dataclass
class Variant:
    name: str  # "pinned" or "fixed"
    patches: list[Path]
    build_seconds: float
    rebuilt: list[str]
    runs: list[Run]


@dataclass
class Result:
    cls: TestClass
    tree: Path
    build_dir: Path
    variants: list[Variant]
    #: the stock toolchain that built the test (stock.py: ``clang`` = clang-22, ``gcc14``)
    compiler: str = "clang"

    def ok(self) -> bool:
        """The pinned tree fails at every VLEN (passes, for a class whose test cannot reach the fixed code), the fixed
        tree passes at every VLEN."""
        by = {v.name: v for v in self.variants}
        before = (lambda r: not r.passed and self.shows(r)) if self.cls.reaches else (lambda r: r.passed)
        return (all(before(r) for r in by["pinned"].runs) if "pinned" in by else True) and \
            (all(r.passed for r in by["fixed"].runs) if "fixed" in by else True)

    def shows(self, run: Run) -> bool:
        """Whether a failing run shows the class's own bug (every type of ``must_fail`` FAILED)."""
        return all(any(re.match(rf"{t} dot product error.*FAILED", f) for f in run.failures)
                   for t in self.cls.must_fail)


def work_dir(work: Path | None = None) -> Path:
    return Path(work or settings.path("GGMLTESTS_DIR") or cache_dir() / "ggmltests")


def run_class(name: str, *, targets: Sequence[Point] = (), fixed: bool = True, pinned: bool = True,
              work: Path | None = None, jobs: int = 2, fixes: Sequence[str] | None = None, base: Sequence[str] = ()
              ) -> Result:
    """Build and run the class's patched test on the pinned tree and/or with its fixes; pass/fail per VLEN.

    test-quantize-fns takes about 2.5 min per run under QEMU (ggml_quantize_init of the i-quants,
    every type quantized): the VLENs run ``jobs`` at a time.  ``targets``: where it runs instead of the class's
    own (:meth:`TestClass.targets`): their VLENs, in one ISA build (another than the class's: GCC 14 has no
    zvfbfwma) and tail/mask stress mode, built by one stock toolchain (``clang`` or ``gcc14``, one build directory
    each); ``fixes``: the fixed variant's fixes in place of the class's (a series applies all of its own, in its
    order); ``base``: fixes applied on both sides, after the test patch (another finding the same run would show,
    fixed elsewhere)."""
    c = CLASSES[name]
    targets = list(targets) or c.targets()
    builds = {(t.isa.name, t.stress, t.compiler) for t in targets}
    if len(builds) != 1:
        raise ValueError(f"{name}: the targets are of {len(builds)} builds or stress modes; the test runs in one")
    isa, stress, compiler = builds.pop()
    c = replace(c, isa=isa, stress=stress, vlens=tuple(t.vlen for t in targets),
                fixes=c.fixes if fixes is None else tuple(fixes))
    work = work_dir(work)
    tree, build_dir = work / "tree", work / (f"build-{c.isa}" + ("" if compiler == "clang" else f"-{compiler}"))
    common = [RUNNER_PATCH, *c.base_patches()] + ([c.patch] if c.patch else []) + [FIX_PATCHES / f"{f}.patch" for f in base]
    todo = ([("pinned", common)] if pinned else []) + ([("fixed", common + c.fix_patches())] if fixed else [])
    variants = []
    with locked(work):
        for vname, patches in todo:
            changed = prepare_tree(tree, patches)
            secs = build(tree, build_dir, c.target, c.isa, jobs=jobs, compiler=compiler)
            with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                runs = list(pool.map(lambda v: run_test(c, build_dir, v), c.vlens))
            variants.append(Variant(vname, patches, secs, changed, runs))
    return Result(c, tree, build_dir, variants, compiler)


# ------------------------------------------------------------------ the report


def commands(name: str, work: Path | None = None) -> list[str]:
    """Shell commands that reproduce the class's verdicts by hand (pinned, then with the fixes)."""
    c = CLASSES[name]
    work = work_dir(work)
    tree, build_dir = work / "tree", work / f"build-{c.isa}"
    pin = pinned_root()
    q = shlex.quote
    lines = [f"rm -rf {q(str(tree))} && cp -r {q(str(pin))} {q(str(tree))}",
             shlex.join(["patch", "-p1", "-d", str(tree), "-i", str(RUNNER_PATCH)])]
    lines += [shlex.join(["patch", "-p1", "-d", str(tree), "-i", str(p)])
              for p in c.base_patches() + ([c.patch] if c.patch else [])]
    lines += [shlex.join(configure_argv(tree, build_dir, c.isa)), shlex.join(build_argv(build_dir, c.target))]
    lines += [shlex.join(run_argv(c, build_dir, v)) + "   # pinned: fails" for v in c.vlens]
    lines += [shlex.join(["patch", "-p1", "-d", str(tree), "-i", str(p)]) for p in c.fix_patches()]
    lines.append(shlex.join(build_argv(build_dir, c.target)))
    lines += [shlex.join(run_argv(c, build_dir, v)) + "   # fixed: passes" for v in c.vlens]
    return lines


def table(res: Result) -> str:
    c = res.cls
    vl = [r.vlen for r in res.variants[0].runs] if res.variants else list(c.vlens)
    head = f"{'tree':<8} {'build':>8} " + " ".join(f"{'VLEN ' + str(v):>10}" for v in vl)
    lines = [f"{c.name}: {c.title}", f"  fixes: {', '.join(c.fixes)}",
             f"  test: {c.target} ({c.isa} build{', QEMU stress' if c.stress else ''})", "", head]
    for v in res.variants:
        lines.append(f"{v.name:<8} {v.build_seconds:>7.0f}s " +
                     " ".join(f"{'pass' if r.passed else 'FAIL':>10}" for r in v.runs))
    for v in res.variants:
        for r in v.runs:
            for f in r.failures:
                lines.append(f"  {v.name} VLEN {r.vlen}: {f}")
    lines.append("")
    lines.append("verdict: " + ("as expected (pinned fails, fixed passes)" if res.ok() else "NOT as expected"))
    return "\n".join(lines)
