"""What can be tested: the VLENs, the ISA builds, and where the harness keeps its cache (the axes over them and
their options: harness/core/matrix.py)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.core import settings

#: VLENs QEMU can emulate and ggml's RVV kernels are written for (bits).
VLENS: tuple[int, ...] = (128, 256, 512, 1024)
#: VLENs on Spike (--emulator spike): QEMU's, plus 2048 and 4096, which QEMU refuses.
SPIKE_VLENS: tuple[int, ...] = VLENS + (2048, 4096)


@dataclass(frozen=True)
class IsaBuild:
    """One way of compiling ggml for riscv64, and the emulated CPU that matches it.

    The emulated CPU has exactly the extensions the build was compiled for: a
    build that strays into an extension it did not declare dies with SIGILL
    instead of passing by accident.
    """

    name: str
    summary: str
    cmake: dict[str, str]
    #: QEMU ``-cpu`` properties for the extensions (VLEN and stress knobs are added per server).
    qemu: dict[str, bool] = field(default_factory=dict)
    #: The extensions the -march that the tree's CMake gives ggml-cpu must name for this build;
    #: the ``qemu`` properties set to False are the ones it must not name (harness/toolchain/builds.py checks both).
    march: tuple[str, ...] = ()
    #: Which CPU backend's kernels the build is for: ``cpu`` (ggml-cpu's own, the kernel families of cases/) or
    #: ``spacemit`` (ggml-cpu/spacemit/, the SpacemiT family): a test runs at the targets of its backend only.
    backend: str = "cpu"
    #: The environment the build's programs need under an emulator (the SpacemiT backend reads its core type
    #: from ``SPACEMIT_CORE_ARCH`` when /proc/cpuinfo lists none, and stops at start-up without it).
    env: dict[str, str] = field(default_factory=dict)
    #: The matrix extension the build is compiled for, by its ISA name (``xsmtvdot``: SpacemiT's IME1), and the
    #: environment that turns the build's matrix paths on when the emulator runs that extension (Spike with
    #: rvvdiff's library: harness/emulators/spike.py's ``for_build``); without it the build runs as ``env`` says.
    matrix: str = ""
    matrix_env: dict[str, str] = field(default_factory=dict)
    #: The CPU variant of a distribution's dispatch build (:data:`DISPATCH`) whose own shared library the kernel
    #: server links (``riscv64_v``); empty: the build's own static ggml (every other ISA build).
    variant: str = ""
    #: The static ISA build compiled from the same code as this one (``v`` for the ``riscv64_v`` variant: the same
    #: ``-march`` extensions, ggml linked in instead of loaded); empty: none.  A test at this build makes each
    #: kernel call on the twin too and fails when the output bytes differ (harness/plugin/targets.py's ``Target.call``,
    #: :func:`static_twin`).
    twin: str = ""
    #: Options of ``cmake`` wanted ON where a tree's CMake has them, but not needed: a tree without them still
    #: makes the build (SpacemiT's backend before 2026-05 had no GGML_RV_ZBA; its document did not ask for zba).
    optional: tuple[str, ...] = ()
    #: Variables a tree's CMake may read without setting them, the builder's choice in that tree's documentation:
    #: passed only to a tree that reads and never sets them (:func:`harness.toolchain.cmake.plan_options`).
    user_cmake: dict[str, str] = field(default_factory=dict)

    @property
    def extensions(self) -> list[str]:
        return [k for k, on in self.qemu.items() if on]

    @property
    def vector(self) -> bool:
        """The build has the vector extension (every build but rv64gc): the tree's RVV code is in it."""
        return self.qemu.get("v", False)


_OFF = {"zfh": False, "zfhmin": False, "zvfh": False, "zvfhmin": False, "zvfbfmin": False,
        "zvfbfwma": False, "zfbfmin": False}

ISA_BUILDS: dict[str, IsaBuild] = {
    b.name: b
    for b in (
        IsaBuild(
            "v",
            "RVV without zfh/zvfh: the fallback paths of FP16 kernels",
            {"GGML_RVV": "ON", "GGML_RV_ZFH": "OFF", "GGML_RV_ZVFH": "OFF", "GGML_RV_ZVFBFWMA": "OFF"},
            {"v": True, **_OFF},
            ("v",),
        ),
        IsaBuild(
            "zvfh",
            "ggml's default riscv64 build: v + zfh + zvfh",
            {"GGML_RVV": "ON", "GGML_RV_ZFH": "ON", "GGML_RV_ZVFH": "ON", "GGML_RV_ZVFBFWMA": "OFF"},
            {"v": True, **_OFF, "zfh": True, "zfhmin": True, "zvfh": True, "zvfhmin": True},
            ("v", "zfh", "zvfh"),
        ),
        IsaBuild(
            "zvfbfwma",
            "v + zfh + zvfh + zvfbfwma: the BF16 vector kernels exist",
            {"GGML_RVV": "ON", "GGML_RV_ZFH": "ON", "GGML_RV_ZVFH": "ON", "GGML_RV_ZVFBFWMA": "ON"},
            {"v": True, **_OFF, "zfh": True, "zfhmin": True, "zvfh": True, "zvfhmin": True,
             "zfbfmin": True, "zvfbfmin": True, "zvfbfwma": True},
            ("v", "zfh", "zvfh", "zvfbfwma"),
        ),
    )
}

#: SpacemiT's own backend (not in ``ISA_BUILDS``, the builds of ggml-cpu's own kernels; ``--isa all`` has it:
#: harness/core/matrix.py) (ggml-cpu/spacemit/: its RVV kernels for norms, binary ops, copies, flash
#: attention and activation quantizers, its weight layouts, its IME matrix kernels), built as SpacemiT's
#: docs/build-riscv64-spacemit.md builds it for the K1 and the A100: GGML_CPU_RISCV64_SPACEMIT with
#: CPU_REPACK off and RVV + zfh + zvfh + zba + zicbop + zihintpause.  What rvvdiff adds for a compiler (the C++
#: standard, IME1's mnemonics) is harness/toolchain/additions.py's.  Under QEMU the core type is the X60's
#: (0x503C): its RVV kernels run, its IME paths stay off (no QEMU emulates IME).  Under Spike with rvvdiff's IME1
#: library (docs/ime.md) it is the A60's (0xA03C, the K1's cores 0-3): the IME1 GEMMs of MUL_MAT / MUL_MAT_ID run.
#: Trees before 2026-05 (ggml 7cca0d50 to 81a56c6f: ime.cpp and ime1_kernels.cpp only, IME1 always on) have no
#: FindSMTIME probe: SpacemiT's document of that era has the builder pass -DRISCV64_SPACEMIT_IME_SPEC=
#: RISCV64_SPACEMIT_IME1 and no zba, and the trees of 2025 have no zihintpause option; rvvdiff does the same there
#: (``user_cmake``; ``optional``: the hint and address extensions where the tree's CMake has them).
#: Its memory pool takes posix_memalign (``SPACEMIT_MEM_BACKEND=POSIX``, one of the backend's settings) instead of
#: 512 MiB transparent-huge-page chunks mapped per weight buffer and unmapped when it is freed: the same kernels on
#: the same bytes, without clearing half a GiB per request in Spike's runtime (1 s of a 1.5 s call measured).
SPACEMIT = IsaBuild(
    "spacemit",
    "SpacemiT's backend (GGML_CPU_RISCV64_SPACEMIT): v + zfh + zvfh (+ zba where the tree has it), its own RVV and "
    "IME kernels",
    {"GGML_RVV": "ON", "GGML_RV_ZFH": "ON", "GGML_RV_ZVFH": "ON", "GGML_RV_ZVFBFWMA": "OFF",
     "GGML_CPU_RISCV64_SPACEMIT": "ON", "GGML_CPU_REPACK": "OFF", "GGML_RV_ZBA": "ON", "GGML_RV_ZICBOP": "ON",
     "GGML_RV_ZIHINTPAUSE": "ON"},
    {"v": True, **_OFF, "zfh": True, "zfhmin": True, "zvfh": True, "zvfhmin": True},
    ("v", "zfh", "zvfh"),
    backend="spacemit",
    env={"SPACEMIT_CORE_ARCH": "0x503C", "SPACEMIT_MEM_BACKEND": "POSIX"},
    matrix="xsmtvdot",
    # SPIKE_ONLINE_CPUS: the K1's eight cores, as the Spike runtime reports them online (harness/server/spike/rt.c); the
    # backend before 2026-05 gives its IME work to hardware_concurrency() / 2 cores, none on Spike's one hart.
    matrix_env={"SPACEMIT_CORE_ARCH": "0xA03C", "SPIKE_ONLINE_CPUS": "8"},
    optional=("GGML_RV_ZBA", "GGML_RV_ZICBOP", "GGML_RV_ZIHINTPAUSE"),
    user_cmake={"RISCV64_SPACEMIT_IME_SPEC": "RISCV64_SPACEMIT_IME1"},
)
#: The build without V (``-march=rv64gc...``): what boards without the vector extension run (the
#: VisionFive 2's U74), ggml's generic C throughout.  Not part of ``all`` (``ISA_BUILDS`` are the vector
#: builds the kernel families test); the model family builds it as the reference of its differential pair.
NOVECTOR = IsaBuild(
    "rv64gc",
    "no vector extension: ggml's generic C, as boards without V run it",
    {"GGML_RVV": "OFF", "GGML_RV_ZFH": "OFF", "GGML_RV_ZVFH": "OFF", "GGML_RV_ZVFBFWMA": "OFF"},
    {"v": False, **_OFF},
    (),
)

#: A distribution's build (harness/toolchain/dispatch_build.py; docs/dispatch.md): not one ISA build but every CPU
#: variant the tree's CMake declares for riscv64 (``riscv64_0``, ``riscv64_v`` in the pinned tree), each a shared
#: ``libggml-cpu-<variant>.so`` that ggml loads by score at run time (``GGML_BACKEND_DL``, ``GGML_CPU_ALL_VARIANTS``,
#: shared libraries, OpenMP as the tree defaults it), as distributions and release archives build ggml.  Its emulated
#: CPU is no one CPU (``qemu`` is empty): the dispatch runs (harness/jobs/dispatch_runs.py) try it on many.
DISPATCH = IsaBuild(
    "dispatch",
    "a distribution's build: shared libraries, every riscv64 CPU variant, the one a CPU scores best loaded at run time",
    {"BUILD_SHARED_LIBS": "ON", "GGML_BACKEND_DL": "ON", "GGML_CPU_ALL_VARIANTS": "ON", "GGML_OPENMP": "ON"},
)

#: The RVV variant of a distribution's dispatch build (:data:`DISPATCH`) as an ISA build of the kernel families: the
#: kernel server linked against that build's own ``libggml-cpu-riscv64_v.so`` and ``libggml-base.so`` (its adapters
#: compiled with the variant's flags: ``-march`` with V alone, no zfh, zvfh, zvfbfwma, zicbop or zihintpause), run
#: under QEMU against the GCC 14 root's glibc on a CPU with exactly V; test ids end in ``-riscv64_v``
#: (harness/toolchain/builds.py's ``ensure_built``, docs/dispatch.md).  Selected by name only, not part of ``all``.
#: The build has OpenMP, as distributions do; its idle threads sleep (``OMP_WAIT_POLICY=PASSIVE``) instead of
#: spinning between a server's calls, which under QEMU would burn the cores the other servers run on.
DISPATCH_V = IsaBuild(
    "riscv64_v",
    "the riscv64_v variant's own library of a distribution's build (GGML_CPU_ALL_VARIANTS): V alone, no zfh / zvfh",
    dict(DISPATCH.cmake),
    {"v": True, **_OFF},
    ("v",),
    env={"OMP_WAIT_POLICY": "PASSIVE"},
    variant="riscv64_v",
    twin="v",
)

#: The variant ``riscv64_v_zvfh`` that docs/upstream/proposals/riscv64-zvfh-variant.md proposes for a distribution's
#: build (harness/data/proposals/riscv64_zvfh_variant.patch: ``-march=rv64gc_v_zfh_zvfh``, loaded where
#: ``riscv_hwprobe`` reports Zfh and Zvfh) as an ISA build of the kernel families, built as :data:`DISPATCH_V` is,
#: on a CPU with exactly V, Zfh and Zvfh; its static twin is ``zvfh``, the same extensions.  No released tree declares
#: the variant: on one that does not, the build is unavailable and its tests are skipped with the reason.  Selected
#: by name only, with the proposal's tree (``--ggml-src $(rvvdiff proposal riscv64_zvfh_variant)``).
DISPATCH_V_ZVFH = IsaBuild(
    "riscv64_v_zvfh",
    "the riscv64_v_zvfh variant a proposal adds to a distribution's build: V + zfh + zvfh (harness/data/proposals/)",
    dict(DISPATCH.cmake),
    {"v": True, **_OFF, "zfh": True, "zfhmin": True, "zvfh": True, "zvfhmin": True},
    ("v", "zfh", "zvfh"),
    env={"OMP_WAIT_POLICY": "PASSIVE"},
    variant="riscv64_v_zvfh",
    twin="zvfh",
)

#: The dispatch variants the kernel families test, by name.
DISPATCH_VARIANTS: dict[str, IsaBuild] = {b.name: b for b in (DISPATCH_V, DISPATCH_V_ZVFH)}


def static_twin(isa: IsaBuild | str) -> str | None:
    """The name of the static ISA build compiled from the same code as ``isa`` (its :attr:`IsaBuild.twin`: ``v`` for
    the ``riscv64_v`` variant of a distribution's build), or None when it has none.  Whether a compiler's two builds
    can be held to the same bytes is the compiler's (harness/toolchain/compilers.py's ``twin_gap``)."""
    build = isa if isinstance(isa, IsaBuild) else _BY_NAME.get(isa)
    if build is None or not build.twin:
        return None
    if build.twin not in ISA_BUILDS:
        raise ValueError(f"ISA build {build.name}: its static twin {build.twin!r} is no ISA build")
    return build.twin


#: The ISA builds :func:`static_twin` knows by name.
_BY_NAME: dict[str, IsaBuild] = {b.name: b for b in (*ISA_BUILDS.values(), SPACEMIT, NOVECTOR, DISPATCH,
                                                      *DISPATCH_VARIANTS.values())}

#: Options every build shares: static libraries, no OpenMP, the RVV-relevant
#: features on, nothing of llama.cpp beyond ggml.  These, with an ISA build's
#: ``cmake``, are what the harness *wants*; harness/toolchain/builds.py passes only those
#: the tree's CMake declares (plus CMake's own variables, :data:`CMAKE_OWN`).
COMMON_CMAKE: dict[str, str] = {
    "CMAKE_BUILD_TYPE": "Release",
    "BUILD_SHARED_LIBS": "OFF",
    "GGML_NATIVE": "OFF",
    "GGML_OPENMP": "OFF",
    "GGML_LLAMAFILE": "ON",
    "GGML_CPU_REPACK": "ON",
    "GGML_BUILD_TESTS": "OFF",
    "GGML_BUILD_EXAMPLES": "OFF",
    "LLAMA_BUILD_TESTS": "OFF",
    "LLAMA_BUILD_EXAMPLES": "OFF",
    "LLAMA_BUILD_TOOLS": "OFF",
    "LLAMA_BUILD_SERVER": "OFF",
    "LLAMA_BUILD_COMMON": "OFF",
    "LLAMA_CURL": "OFF",
}

#: Variables CMake itself reads: always passed, whatever the tree declares.
CMAKE_OWN: frozenset[str] = frozenset({"CMAKE_BUILD_TYPE", "BUILD_SHARED_LIBS"})

#: The stress property with which vsetvl grants only half of the requested AVL when it can.
HALF_AVL = "rvv_vl_half_avl"
#: QEMU properties of the tail/mask stress mode: tail- and mask-agnostic
#: elements are overwritten with all ones (as real chips may do) and vsetvl
#: grants only half of the requested AVL when it can (:data:`HALF_AVL`; ggml's own
#: tests run without it, harness/emulators/qemu.py's ``cpu_props`` leaves it out on request).
STRESS_PROPS: dict[str, bool] = {"rvv_ta_all_1s": True, "rvv_ma_all_1s": True, HALF_AVL: True}


#: The directory holding rvvdiff's packages (harness/, cases/, costs/): a checkout (pytest's rootdir
#: there, with reports/ and docs/), or the site-packages of an installed wheel.  The suite's test ids
#: (``cases/test_vec_dot.py::...``) are relative to it wherever it is (harness/report/ids.py).
PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: Whether PROJECT_ROOT is a checkout (its pyproject.toml beside the packages), not an installed wheel.
IS_CHECKOUT = (PROJECT_ROOT / "pyproject.toml").is_file()
#: How a command line rvvdiff prints starts a program of its environment: ``.venv/bin/`` from the
#: checkout's root (ci/setup.sh's environment), else the running environment's own bin/.
VENV_BIN = ".venv/bin/" if IS_CHECKOUT else f"{Path(sys.executable).parent}/"


def work_dir() -> Path:
    """Where the commands write by default (reports/, and docs/ for the maintainers' commands): the
    checkout, or for an installed wheel the current directory."""
    return PROJECT_ROOT if IS_CHECKOUT else Path.cwd()
#: The project's data, installed with the package: the known failures, the fixes of the findings, the mutants.
DATA_DIR = Path(__file__).resolve().parents[1] / "data"


def cache_dir() -> Path:
    """The harness's cache: ``$RVVDIFF_CACHE``, else ``$XDG_CACHE_HOME/rvvdiff``, else ``~/.cache/rvvdiff``."""
    p = settings.path("CACHE")
    if p is None:
        p = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rvvdiff"
    p.mkdir(parents=True, exist_ok=True)
    return p


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path`` (created if needed).

    Used around downloads and builds, so that several pytest-xdist workers
    starting at once do the work once and the others wait for it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
