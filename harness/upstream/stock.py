"""Building ggml and a small C program for riscv64 with a stock toolchain, and running it under QEMU.

Reports meant for ggml maintainers print commands they can run without rvvdiff: Debian
bookworm's clang-22 (bookworm-security) with the GNU cross sysroot, Debian stable's GCC 14
(``riscv64-linux-gnu-gcc-14``, the compiler of upstream's riscv64 CI), or rvvdiff's own zig
(harness/toolchain/compilers.py), configuring ggml with ggml's own CMake, linking a program
statically and running it under ``qemu-riscv64`` (the ``-cpu`` value and the run are
:mod:`harness.emulators.qemu`'s, as for the kernel servers).  Verified on Debian bookworm, see
docs/upstream-toolchain.md.  Why not the older compilers: bookworm's GCC 12 cross compiler
has no RVV intrinsics (no ``riscv_vector.h``, ``__riscv_v_intrinsic`` undefined), and
bookworm's clang-19 rejects ggml's inline assembly (``vsetivli zero, 16, e8, m1`` without
ta/ma; with ``-fno-integrated-as``, binutils 2.40 does not know zvfh).

:func:`build_commands`, :func:`link_command` and :func:`run_command` return shell command
lines (for a report); :func:`build_program`, :func:`run_exe` and :func:`run_program` run them.
For GCC 14 the printed lines name the plain ``riscv64-linux-gnu-gcc-14`` a maintainer has from
Debian's package, while rvvdiff runs the same commands with the gcc14 root's wrappers
(``COMPILERS["gcc14"]`` of harness/toolchain/compilers.py): ``printed=True`` gives the former.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.core.config import COMMON_CMAKE, IsaBuild
from harness.core.errors import RvvdiffError
from harness.core.matrix import ISAS, Point
from harness.core.proc import CommandError, run
from harness.emulators import qemu
from harness.emulators.base import Ran
from harness.toolchain import additions
from harness.toolchain.cmake import march_mismatch
from harness.toolchain.cmake_build import CmakeBuild, build, configure

#: The stock clang: Debian bookworm's clang-22 (from bookworm-security).
CLANG_VERSION = 22
CLANG = f"clang-{CLANG_VERSION}"
#: The stock compiler of each compiler of the matrix (harness/core/matrix.py's ``COMPILER_NAMES``), as the texts
#: for maintainers name it.
NAMES: dict[str, str] = {"clang": CLANG, "gcc14": "GCC 14"}
CLANGXX = f"clang++-{CLANG_VERSION}"
TARGET = "riscv64-linux-gnu"
SYSROOT = Path("/usr") / TARGET

#: What the clang toolchain needs, as (Debian package, file or program that proves it is installed).
CLANG_PACKAGES: tuple[tuple[str, str], ...] = (
    (CLANG, CLANG),
    ("libc6-dev-riscv64-cross", str(SYSROOT / "include" / "stdio.h")),
    ("libstdc++-12-dev-riscv64-cross", str(SYSROOT / "include" / "c++" / "12" / "vector")),
    ("binutils-riscv64-linux-gnu", f"{TARGET}-ld"),
)
#: The stock GCC: Debian stable's GCC 14 cross compiler, as upstream's riscv64 CI builds with.
GCC = f"{TARGET}-gcc-14"
GXX = f"{TARGET}-g++-14"
#: The Debian (stable) packages of the GCC toolchain, as the printed commands need them.
GCC_PACKAGES: tuple[str, ...] = ("gcc-14-riscv64-linux-gnu", "g++-14-riscv64-linux-gnu", "libc6-dev-riscv64-cross",
                                 "libstdc++-14-dev-riscv64-cross")
#: Needed by every toolchain.
COMMON_PACKAGES: tuple[tuple[str, str], ...] = (
    ("cmake", "cmake"),
    ("qemu-user", "qemu-riscv64"),
)
APT_INSTALL = "apt-get install -y " + " ".join(p for p, _ in CLANG_PACKAGES)
GCC_APT_INSTALL = "apt-get install -y " + " ".join(GCC_PACKAGES)
#: The stock toolchains, each as a report names it: the matrix's compilers' counterparts, and zig as it is.
LABELS = {"clang": "clang", "gcc14": "GCC 14", "zig": "zig"}
TOOLCHAINS: tuple[str, ...] = tuple(LABELS)

#: The public-API program the end-to-end check links: a 1x1 ggml_mul_mat of a q4_0 row (256
#: values) by a q8_0 row, whose inputs quantize exactly, so the result is the integer
#: :data:`TINY_EXPECTED`; it prints ggml_cpu_get_rvv_vlen() and the CPU device's extra buffer types.
TINY_PROGRAM = r"""/* rvvdiff stock-toolchain check: a 1x1 ggml_mul_mat of a q4_0 row by a q8_0 row through
 * ggml's public API; the inputs quantize exactly (scales 1), so the result is an integer. */
#include "ggml.h"
#include "ggml-cpu.h"
#include "ggml-backend.h"
#include <stdio.h>

#define K 256

int main(void) {
    static float a[K], b[K];
    long expect = 0;
    for (int i = 0; i < K; i++) {
        a[i] = (float)(i % 16 - 8);                              /* q4_0: d = 1 */
        b[i] = i % 32 == 0 ? 127.0f : (float)((i * 5) % 17 - 8); /* q8_0: d = 1 */
        expect += (long)a[i] * (long)b[i];
    }
    ggml_cpu_init();
    struct ggml_init_params ip = { 1 << 20, NULL, false };
    struct ggml_context * ctx = ggml_init(ip);
    struct ggml_tensor * ta = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, K, 1);
    struct ggml_tensor * tb = ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, K, 1);
    ggml_quantize_chunk(GGML_TYPE_Q4_0, a, ta->data, 0, 1, K, NULL);
    ggml_quantize_chunk(GGML_TYPE_Q8_0, b, tb->data, 0, 1, K, NULL);
    struct ggml_tensor * tc = ggml_mul_mat(ctx, ta, tb);
    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, tc);
    ggml_backend_t be = ggml_backend_cpu_init();
    if (be == NULL || ggml_backend_graph_compute(be, gf) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "graph compute failed\n");
        return 2;
    }
    float got = ((float *) tc->data)[0];
    ggml_backend_reg_t reg = ggml_backend_cpu_reg();
    ggml_backend_dev_get_extra_bufts_t get_extra = (ggml_backend_dev_get_extra_bufts_t)
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    printf("rvv_vlen_bytes %d\n", ggml_cpu_get_rvv_vlen());
    printf("mul_mat_q4_0_q8_0 %.1f expected %ld\n", got, expect);
    printf("extra_bufts");
    if (get_extra) {
        for (ggml_backend_buffer_type_t * p = get_extra(ggml_backend_reg_dev_get(reg, 0)); p && *p; p++) {
            printf(" %s", ggml_backend_buft_name(*p));
        }
    }
    printf("\n");
    ggml_backend_free(be);
    ggml_free(ctx);
    return got == (float) expect ? 0 : 1;
}
"""
TINY_EXPECTED = sum((i % 16 - 8) * (127 if i % 32 == 0 else (i * 5) % 17 - 8) for i in range(256))


class StockToolchainError(RvvdiffError, RuntimeError):
    """The stock toolchain is missing or a step failed; the message is one line that says what to do."""


def missing(toolchain: str) -> str | None:
    """None when ``toolchain`` and QEMU are installed, else one line naming what is missing and how to install it."""
    _check_toolchain(toolchain)
    wanted = (CLANG_PACKAGES if toolchain == "clang" else ()) + COMMON_PACKAGES
    absent = [(pkg, proof) for pkg, proof in wanted
              if not (Path(proof).exists() if proof.startswith("/") else shutil.which(proof))]
    if toolchain == "gcc14":
        try:
            _gcc14_tools()
        except RvvdiffError as e:
            return str(e)
    if toolchain == "zig":
        try:
            import ziglang  # type: ignore[import-untyped]  # noqa: F401
        except ImportError:
            return "the zig toolchain needs the ziglang package: run ci/setup.sh (or pip install ziglang==0.17.1)"
    if not absent:
        return None
    pkgs = " ".join(p for p, _ in absent)
    what = ", ".join(f"{proof} (package {pkg})" for pkg, proof in absent)
    hint = "ci/setup.sh --stock, or as root: " + (
        "apt-get install -y -t bookworm-backports qemu-user" if pkgs == "qemu-user" else f"apt-get install -y {pkgs}")
    if "clang-" in pkgs:
        hint += f" ({CLANG} comes from bookworm-security)"
    if "qemu-user" in pkgs and pkgs != "qemu-user":
        hint += "; qemu-user 10 from bookworm-backports"
    return f"stock {toolchain} toolchain incomplete: missing {what}; install with {hint}"


def _check_toolchain(toolchain: str) -> None:
    if toolchain not in TOOLCHAINS:
        raise ValueError(f"toolchain {toolchain!r}: use one of {', '.join(TOOLCHAINS)}")


def _isa(isa: str | IsaBuild) -> IsaBuild:
    if isinstance(isa, IsaBuild):
        return isa
    try:
        return ISAS[isa]
    except KeyError:
        raise ValueError(f"ISA build {isa!r}: use one of {', '.join(ISAS)}") from None


# ------------------------------------------------------------------ where things are


@dataclass(frozen=True)
class Layout:
    """Where CMake is pointed for a tree and where the static libraries come out."""

    #: The directory given to ``cmake -S``.
    source: Path
    #: ggml's own directory (include/, src/).
    ggml: Path
    #: The libraries' directory relative to the build directory.
    libdir: str
    #: Whether the CMake project is llama.cpp's (then its LLAMA_* options are turned off).
    llama: bool


def layout(tree: Path) -> Layout:
    """ggml's own CMake project when it can be configured alone, else the llama.cpp root.

    A llama.cpp tree's ``ggml/`` cannot be configured alone when it lacks ``ggml.pc.in`` (the pinned
    tree: "CMake Error: File .../ggml/ggml.pc.in does not exist", configure_file at CMakeLists.txt:351):
    then the llama.cpp root is configured with everything of llama.cpp off.
    """
    tree = Path(tree)
    if (tree / "ggml" / "CMakeLists.txt").is_file():
        if (tree / "ggml" / "ggml.pc.in").is_file():
            return Layout(tree / "ggml", tree / "ggml", "src", False)
        return Layout(tree, tree / "ggml", "ggml/src", True)
    if (tree / "include" / "ggml.h").is_file() and (tree / "CMakeLists.txt").is_file():
        return Layout(tree, tree, "src", False)
    raise ValueError(f"{tree} is neither a llama.cpp tree (ggml/CMakeLists.txt) nor a ggml tree (include/ggml.h)")


#: The targets of the library build.
LIBRARIES = ("ggml-cpu", "ggml-base")


def libraries(tree: Path, build_dir: Path) -> list[Path]:
    """The static libraries the program links, in link order."""
    d = Path(build_dir) / layout(tree).libdir
    return [d / "libggml-cpu.a", d / "libggml-base.a"]


def _zig_tools() -> tuple[str, str, str, str]:
    """The wrapper scripts rvvdiff writes around zig (cc, c++, ar, ranlib); with RVVDIFF_CC/RVVDIFF_CXX
    set, the compiler the harness itself builds with (harness/toolchain/compilers.py)."""
    from harness.toolchain.compilers import compiler
    cc = compiler()
    return cc.cc, cc.cxx, cc.ar, cc.ranlib


def _gcc14_tools() -> tuple[str, str, str, str]:
    """The gcc14 root's wrappers (cc, c++, ar, ranlib) that run Debian's GCC 14 here (harness/toolchain/compilers.py);
    a :class:`harness.toolchain.compilers.ToolchainError` names the set-up command when it is not installed."""
    from harness.toolchain.compilers import compiler
    cc = compiler("gcc14")
    return cc.cc, cc.cxx, cc.ar, cc.ranlib


# ------------------------------------------------------------------ the command lines


def cmake_options(tree: Path, isa: str | IsaBuild) -> dict[str, str]:
    """ggml's options for an ISA build: rvvdiff's common options and the build's own (LLAMA_* only
    when the llama.cpp root is configured)."""
    lay = layout(tree)
    opts = {k: v for k, v in COMMON_CMAKE.items() if lay.llama or not k.startswith("LLAMA_")}
    return {**opts, **_isa(isa).cmake, "CMAKE_EXPORT_COMPILE_COMMANDS": "ON"}


def toolchain_options(toolchain: str, printed: bool) -> dict[str, str]:
    _check_toolchain(toolchain)
    cross = {"CMAKE_SYSTEM_NAME": "Linux", "CMAKE_SYSTEM_PROCESSOR": "riscv64"}
    if toolchain == "clang":
        return {**cross, "CMAKE_C_COMPILER": CLANG, "CMAKE_CXX_COMPILER": CLANGXX,
                "CMAKE_C_COMPILER_TARGET": TARGET, "CMAKE_CXX_COMPILER_TARGET": TARGET}
    if toolchain == "gcc14" and printed:  # CMake finds riscv64-linux-gnu-ar by the compiler's prefix
        return {**cross, "CMAKE_C_COMPILER": GCC, "CMAKE_CXX_COMPILER": GXX}
    cc, cxx, ar, ranlib = _gcc14_tools() if toolchain == "gcc14" else _zig_tools()
    return {**cross, "CMAKE_C_COMPILER": cc, "CMAKE_CXX_COMPILER": cxx, "CMAKE_AR": ar, "CMAKE_RANLIB": ranlib}


#: Where a printed command finds the files of rvvdiff's additions: beside the program, in the directory the commands
#: run in (``$PWD``, which the shell expands: :func:`harness.upstream.issue.build_lines` double-quotes such words).
PRINTED_DIR = "$PWD"


def addition_options(isa: str | IsaBuild, toolchain: str, printed: bool = False) -> dict[str, str]:
    """CMAKE_C_FLAGS / CMAKE_CXX_FLAGS with what rvvdiff adds to ``isa``'s build for clang (harness/toolchain/
    additions.py: the SpacemiT backend's C++20, IME1's mnemonics; none for GCC 14, which cannot make that build);
    ``printed``: the header named ``$PWD/<its name>``, given beside the program (:func:`addition_files`)."""
    if toolchain == "gcc14":
        return {}
    kw = {"named": lambda p: f"{PRINTED_DIR}/{p.name}"} if printed else {}
    return additions.cmake_flags(_isa(isa), "clang", **kw)


def addition_files(isa: str | IsaBuild, toolchain: str) -> tuple[Path, ...]:
    """The files :func:`addition_options` names (a printed command needs them beside the program)."""
    return () if toolchain == "gcc14" else additions.files(_isa(isa), "clang")


def cmake_build(tree: Path, isa: str | IsaBuild, toolchain: str, build_dir: Path, *, printed: bool = False) -> CmakeBuild:
    """ggml of ``tree`` configured for ISA build ``isa`` with ``toolchain`` in ``build_dir``, the compilers named in
    options (``printed``: as a maintainer types them, see :func:`build_commands`), with rvvdiff's additions for the
    build (:func:`addition_options`)."""
    return CmakeBuild(layout(tree).source, Path(build_dir), {**toolchain_options(toolchain, printed),
                                                             **cmake_options(tree, isa),
                                                             **addition_options(isa, toolchain, printed)})


def build_argvs(tree: Path, isa: str | IsaBuild, toolchain: str, build_dir: Path, jobs: int = 2,
                nice: int | None = None, *, printed: bool = False) -> list[list[str]]:
    """The configure and build commands as argument lists (see :func:`build_commands`)."""
    b = cmake_build(tree, isa, toolchain, build_dir, printed=printed)
    return [b.configure_argv(), b.build_argv(LIBRARIES, jobs=jobs, nice=nice)]


def build_commands(tree: Path, isa: str | IsaBuild, toolchain: str, build_dir: Path, jobs: int = 2,
                   nice: int | None = None, *, printed: bool = False) -> list[str]:
    """Shell command lines that configure ggml of ``tree`` for ISA build ``isa`` with ``toolchain``
    ("clang": Debian's clang-22 and the GNU cross sysroot; "gcc14": Debian's GCC 14 cross compiler,
    the gcc14 root's wrappers, or with ``printed`` the plain ``riscv64-linux-gnu-gcc-14``; "zig":
    rvvdiff's zig wrapper) in ``build_dir`` and build its static libraries libggml-cpu.a and libggml-base.a."""
    return [shlex.join(a) for a in build_argvs(tree, isa, toolchain, build_dir, jobs, nice, printed=printed)]


def link_argv(program: Path, exe: Path, *, tree: Path, build_dir: Path, toolchain: str,
              printed: bool = False) -> list[str]:
    """The command that compiles ``program`` and links it statically with the libraries of ``build_dir``
    (``printed``: as :func:`build_argvs`)."""
    _check_toolchain(toolchain)
    inc = layout(tree).ggml / "include"
    libs = [str(p) for p in libraries(tree, build_dir)]
    if toolchain == "clang":
        head = [CLANGXX, f"--target={TARGET}", "-x", "c"]
    elif toolchain == "gcc14":
        head = [GXX if printed else _gcc14_tools()[1], "-x", "c"]
    else:
        head = [_zig_tools()[1], "-x", "c"]
    tail = ["-x", "none", *libs, "-static", "-lm", "-lpthread"]
    return [*head, "-O2", "-I", str(inc), str(program), *tail, "-o", str(exe)]


def link_command(program: Path, exe: Path, *, tree: Path, build_dir: Path, toolchain: str,
                 printed: bool = False) -> str:
    """Shell command line: compile the C file ``program`` and link ``exe`` statically with ggml's
    libraries from ``build_dir`` (the C++ driver links the C++ runtime ggml-cpu needs)."""
    return shlex.join(link_argv(program, exe, tree=tree, build_dir=build_dir, toolchain=toolchain, printed=printed))


def cpu_value(at: Point, half_avl: bool = False) -> str:
    """QEMU's ``-cpu`` value (or ``QEMU_CPU``) the printed commands give a point: its ISA build's extensions at its
    VLEN, and with its stress mode the tail/mask part (``half_avl``: also rvvdiff's ``rvv_vl_half_avl``)."""
    return qemu.cpu(at, half_avl)


def run_argv(exe: Path, at: Point, *, half_avl: bool = False, program: str = "qemu-riscv64") -> list[str]:
    """The command of :func:`run_command` as an argument list (``env NAME=VALUE ...`` first when the ISA build's
    programs need an environment: the SpacemiT backend's core type and memory pool, ``IsaBuild.env``)."""
    env = ["env", *(f"{k}={v}" for k, v in at.isa.env.items())] if at.isa.env else []
    return [*env, program, "-cpu", cpu_value(at, half_avl), str(exe)]


def run_command(exe: Path, at: Point, *, half_avl: bool = False, program: str = "qemu-riscv64") -> str:
    """Shell command line running the static ``exe`` under qemu-riscv64 (``program``) at ``at``'s VLEN with its ISA
    build's extensions; with its stress mode, tail/mask-agnostic elements written as all ones (``rvv_ta_all_1s``,
    ``rvv_ma_all_1s``); ``half_avl``: also rvvdiff's ``rvv_vl_half_avl``."""
    return shlex.join(run_argv(exe, at, half_avl=half_avl, program=program))


# ------------------------------------------------------------------ running them


def ggml_cpu_march(build_dir: Path) -> str | None:
    """The -march CMake gave ggml-cpu's sources (from compile_commands.json), if any."""
    f = Path(build_dir) / "compile_commands.json"
    if not f.is_file():
        return None
    for e in json.loads(f.read_text()):
        if "ggml-cpu" in e.get("file", "") and "/arch/riscv/" in e["file"]:
            m = re.search(r"-march=(\S+)", e.get("command") or " ".join(e.get("arguments", [])))
            if m:
                return m.group(1)
    return None


@contextmanager
def _step(what: str, log_file: Path | None = None) -> Iterator[None]:
    """A step of a stock build: its command's failure as one :class:`StockToolchainError` line (the first error)."""
    try:
        yield
    except CommandError as e:
        status = "timed out" if e.returncode is None else f"failed (exit {e.returncode})"
        err = next((ln.strip() for ln in (e.stderr + "\n" + e.stdout).splitlines()
                    if re.search(r"error|Error", ln)), "")
        where = f"; log {log_file}" if log_file else ""
        raise StockToolchainError(f"{what} {status}: {err or shlex.join(e.argv)}{where}") from e


def build_libraries(tree: Path, isa: str | IsaBuild, toolchain: str, build_dir: Path, *,
                    jobs: int = 2, nice: int = 5, timeout: float = 3600) -> float:
    """Configure and build ggml's libraries (see :func:`build_commands`); return the seconds the
    build step took.  Checks that ggml-cpu got the -march of the ISA build."""
    why = missing(toolchain)
    if why:
        raise StockToolchainError(why)
    b = _isa(isa)
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    log_file = build_dir / "rvvdiff-stock.log"
    cmake = cmake_build(tree, b, toolchain, build_dir)
    with _step(f"CMake configure of ggml ({toolchain}, {b.name})", log_file):
        configure(cmake, what=f"ggml, {toolchain}, {b.name}", log=log_file, timeout=600)
    march = ggml_cpu_march(build_dir)
    if march is None:
        raise StockToolchainError(f"no -march for ggml-cpu's RVV sources in {build_dir}/compile_commands.json")
    bad = march_mismatch(b, march)
    if bad:
        raise StockToolchainError(f"{bad} (ISA build {b.name}, {build_dir})")
    t0 = time.monotonic()
    what = f"building ggml's libraries ({toolchain}, {b.name})"
    with _step(what, log_file):
        build(cmake, LIBRARIES, jobs=jobs, nice=nice, timeout=timeout, what=what, log=log_file)
    return time.monotonic() - t0


def build_program(tree: Path, isa: str | IsaBuild, toolchain: str, build_dir: Path,
                  program: Path | None = None, exe: Path | None = None, *, jobs: int = 2,
                  nice: int = 5, timeout: float = 3600) -> Path:
    """Build ggml's libraries and link ``program`` (default: :data:`TINY_PROGRAM`, written into
    ``build_dir``) statically; return the executable's path."""
    build_dir = Path(build_dir)
    build_libraries(tree, isa, toolchain, build_dir, jobs=jobs, nice=nice, timeout=timeout)
    if program is None:
        program = build_dir / "rvvdiff-tiny.c"
        if not program.is_file() or program.read_text() != TINY_PROGRAM:
            program.write_text(TINY_PROGRAM)
    exe = Path(exe) if exe is not None else build_dir / (Path(program).stem + ".riscv64")
    tmp = exe.with_name(exe.name + f".tmp{os.getpid()}")
    what = f"linking {program} ({toolchain})"
    with _step(what, build_dir / "rvvdiff-stock.log"):
        run(link_argv(Path(program), tmp, tree=tree, build_dir=build_dir, toolchain=toolchain), timeout=600, what=what,
            log_file=build_dir / "rvvdiff-stock.log")
    tmp.replace(exe)
    return exe


def run_exe(exe: Path, at: Point, *, half_avl: bool = False, args: Sequence[str] = (), timeout: float = 300) -> Ran:
    """Run ``exe`` (with ``args``) under QEMU as :func:`run_command` says (the qemu-riscv64 rvvdiff runs:
    ``$RVVDIFF_QEMU`` or PATH); its exit status is for the caller to judge."""
    return qemu.qemu().run_program(exe, at.vlen, qemu.cpu_props(at.isa, at.stress, half_avl), args=args,
                                   timeout=timeout, what=f"{Path(exe).name} under QEMU", env=at.isa.env or None)


def run_program(exe: Path, at: Point, *, half_avl: bool = False, timeout: float = 300) -> str:
    """Run ``exe`` under QEMU (see :func:`run_command`); return its standard output, or raise
    :class:`StockToolchainError` when it does not exit with 0."""
    r = run_exe(exe, at, half_avl=half_avl, timeout=timeout)
    if r.returncode != 0:
        status = "timed out" if r.returncode is None else f"exited with {r.returncode}"
        sigill = r.returncode in (-signal.SIGILL, 128 + signal.SIGILL)  # (killed by it; a shell says 132)
        sig = " (SIGILL: the program used an extension the emulated CPU lacks)" if sigill else ""
        raise StockToolchainError(f"{shlex.join(r.argv)} {status}{sig}: {r.stderr.strip()[-300:]}")
    return r.stdout
