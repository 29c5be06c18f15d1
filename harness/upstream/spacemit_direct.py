"""The reproducer of a SpacemiT finding no public op reaches: a C++ program that calls the backend's function directly.

SpacemiT's activation quantizers (spacemit/rvv_kernels.cpp) run only inside the IME GEMMs, its 32-row weight layouts
(spacemit/repack.cpp) only for IME2, and its flash attention's 2- and 4-row kernel only with a TCM: under QEMU no op
of ggml's public API reaches them (harness/upstream/public_base.py's ``SPACEMIT_DIRECT`` says why, per kernel).  The
program of each finding (:data:`PROGRAMS`) includes the backend's own headers by path (``spacemit/rvv_kernels.h``,
``spacemit/repack.h``, ``spacemit/ime.h``), calls the function as the kernel server's adapters do
(harness/server/k_spacemit.cpp, k_spacemit_fa.cpp) on the shrunk case's inputs, checks the result and exits with 1
while it is wrong.  :func:`verify` builds it against the spacemit build's static libraries of each tree (rvvdiff's
builds: harness/toolchain/) and runs it under ``qemu-riscv64`` with the build's environment at every VLEN;
:func:`body_lines` prints the commands a maintainer types.  harness/upstream/direct.py writes the rest of the text.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.core.matrix import ISAS, Point
from harness.core.proc import run
from harness.ggml.source import GgmlSource
from harness.report.failure import Case
from harness.toolchain.builds import Build, ensure_built
from harness.toolchain.compilers import compiler
from harness.upstream import runs, stock
from harness.upstream.c_text import hex_fill, hex_lines, literal
from harness.upstream.issue import _pwd
from harness.upstream.public_base import SPACEMIT_DIRECT

ISA = "spacemit"
#: Guard bytes of 0xff after the memory a repack writes (as rvvdiff's kernel server guards its buffers): enough to
#: count how far a repack writes past it.
GUARD = 4096
#: The includes of a program: ggml-cpu's directory (``spacemit/...``), ggml's sources and public headers.
INCLUDES = ("ggml/src/ggml-cpu", "ggml/src", "ggml/include")


class NoProgram(Exception):
    """The case is not of the form the finding's program writer takes (the message says why)."""


def _quantize(fn: str, fmt: str) -> Callable[[Case], str]:
    """A quantizer on the case's all-zero row: a zero block quantizes to scale 0, sum 0 and int8s 0 (hp: ratios and
    average scale 0 too), so every output byte must be 0."""
    size = {"i8": "q8_blk_size(BLK_LEN, true)", "hp": "q8_hp_blk_size(BLK_LEN, true, true)"}[fmt]

    def write(case: Case) -> str:
        _, blk_len, count_k = (int(v) for v in case.call["ip"])
        if np.count_nonzero(case.arrays["buf0"]):
            raise NoProgram("the program is written for an all-zero row; this case's row is not")
        return f"""// {fn} (SpacemiT, spacemit/rvv_kernels.cpp) on one row of {count_k} zeros: a zero block quantizes to
// scale 0 and int8s 0, with sums (and ratios) 0, so every output byte must be 0. Exit status 1 while any is not.
#include "spacemit/rvv_kernels.h"
#include <riscv_vector.h>
#include <cstdio>

namespace K = spacemit_kernels;
constexpr size_t BLK_LEN = {blk_len}, COUNT_K = {count_k};

int main() {{
    static float a[COUNT_K];  // zeros
    static uint8_t out[COUNT_K / BLK_LEN * K::{size}];
    K::rvv::{fn}(BLK_LEN, a, COUNT_K, out);
    int bad = 0;
    for (size_t i = 0; i < sizeof(out); ++i)
        if (out[i] != 0 && bad++ < 6) printf("byte %zu = 0x%02x, expected 0\\n", i, out[i]);
    printf("VLEN %d: %d of %zu output bytes not 0\\n", (int) __riscv_vlenb() * 8, bad, sizeof(out));
    return bad != 0;
}}
"""
    return write


_REPACK_HEAD = """#define GGML_COMMON_DECL_CPP
#include "ggml-common.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "spacemit/ime.h"
#include "spacemit/repack.h"
#include <riscv_vector.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// repack.cpp's explicit specialisation (repack.h declares the template only).
namespace ggml::cpu::riscv64_spacemit {{
template <> int repack<{block}, 32, 32>(ggml_tensor *, const void *, size_t);
}}
{data}
static void unhex(unsigned char * p, const char * h) {{  // h: hex bytes, "hh*N" = N bytes hh
    unsigned v;  int n, len;
    while (sscanf(h, " %2x%n", &v, &len) == 1) {{
        h += len; n = 1;
        if (*h == '*' && sscanf(h + 1, "%d%n", &n, &len) == 1) h += 1 + len;
        while (n-- > 0) *p++ = (unsigned char) v;
    }}
}}

int main() {{
    ggml_init_params p = {{ggml_tensor_overhead(), nullptr, true}};
    ggml_context * ctx = ggml_init(p);
    ggml_tensor * t = ggml_new_tensor_3d(ctx, {type}, {ne0}, {ne1}, {ne2});
    static unsigned char src[{nbytes}];
    unhex(src, SRC_HEX);
    // what SpacemiT's buffer type allocates for the tensor, then {guard} guard bytes of 0xff
    const size_t alloc = ggml_backend_buft_get_alloc_size(ggml_backend_cpu_riscv64_spacemit_buffer_type(), t);
    unsigned char * dst = (unsigned char *) malloc(alloc + {guard});
    memset(dst, 0xff, alloc + {guard});
    t->data = dst;
    const int ret = ggml::cpu::riscv64_spacemit::repack<{block}, 32, 32>(t, src, sizeof(src));
"""


def _hex_src(case: Case) -> tuple[str, int]:
    src = case.arrays["buf0"].tobytes()
    return hex_lines("SRC_HEX", src), len(src)


def _q6_K_zero_subblock(case: Case) -> str:
    """repack<block_q6_K, 32, 32> (IME2's q6_K weights requantized to q8_0 sub-blocks of 32) on the case's tensor:
    each group of 32 rows is 8 interleaved blocks per super-block of 32 fp16 scales d and 32 x 32 int8s; a sub-block
    of d = 0 holds zeros, so its int8s must be 0."""
    _, _, _, ne0, ne1, ne2 = (int(v) for v in case.call["ip"])
    data, n = _hex_src(case)
    head = _REPACK_HEAD.format(block="block_q6_K", type="GGML_TYPE_Q6_K", ne0=ne0, ne1=ne1, ne2=ne2, nbytes=n,
                               guard=GUARD, data=data)
    return f"""// repack<block_q6_K, 32, 32> (SpacemiT, spacemit/repack.cpp: repack_q6_k_to_q8_0_32_bl_ref, the q6_K weights of
// the IME2 GEMM) on a q6_K tensor [{ne0}, {ne1}, {ne2}] with zero sub-blocks: each interleaved block is 32 fp16
// scales d, then 32 x 32 int8s; a sub-block of d = 0 holds zeros, its int8s must be 0. Exit 1 while one is not.
{head}    int bad = 0, zero = 0;
    const size_t blocks = ({ne1} * {ne2} + 31) / 32 * ({ne0} / 256) * 8;
    for (size_t b = 0; b < blocks; ++b) {{
        const unsigned char * blk = dst + b * (32 * 2 + 32 * 32);
        for (int r = 0; r < 32; ++r) {{
            if (blk[2 * r] != 0 || blk[2 * r + 1] != 0) continue;  // d != 0
            ++zero;
            const signed char * q = (const signed char *) blk + 64 + 32 * r;
            for (int j = 0; j < 32; ++j)
                if (q[j] != 0 && bad++ < 4)
                    printf("block %zu row %d: d = 0, int8 %d = %d, expected 0\\n", b, r, j, q[j]);
        }}
    }}
    printf("VLEN %d: repack returned %d; %d int8s not 0 in the %d sub-blocks of d = 0\\n",
           (int) __riscv_vlenb() * 8, ret, bad, zero);
    return bad != 0;
}}
"""


def _expert_padding(case: Case) -> str:
    """repack<block_q8_0, 32, 32> on a 3-d q8_0 tensor (MUL_MAT_ID's experts) whose ne1 is not a multiple of 32,
    into the memory the buffer type allocates for it: nothing may be written past it."""
    _, _, _, ne0, ne1, ne2 = (int(v) for v in case.call["ip"])
    data, n = _hex_src(case)
    head = _REPACK_HEAD.format(block="block_q8_0", type="GGML_TYPE_Q8_0", ne0=ne0, ne1=ne1, ne2=ne2, nbytes=n,
                               guard=GUARD, data=data)
    return f"""// repack<block_q8_0, 32, 32> (SpacemiT, spacemit/repack.cpp, IME2's q8_0 weights) on q8_0 [{ne0}, {ne1}, {ne2}]
// (experts of MUL_MAT_ID, ne1 not a multiple of 32) into the memory SpacemiT's buffer type allocates for it, followed
// by {GUARD} guard bytes of 0xff: the repack must not write past the allocation. Exit status 1 while it does.
{head}    int past = 0, first = -1;
    for (int i = 0; i < {GUARD}; ++i)
        if (dst[alloc + i] != 0xff && past++ == 0) first = i;
    printf("VLEN %d: repack returned %d; allocation %zu bytes, %d guard bytes after it changed "
           "(expected none; the first at +%d)\\n", (int) __riscv_vlenb() * 8, ret, alloc, past, first);
    return past != 0;
}}
"""


def _flash_attention(case: Case) -> str:
    """SpacemiT's one-chunk flash attention (VLEN 1024) with a block of TCM, as ime.cpp calls it on a board with
    SpacemiT's TCM runtime, on the case's Q, K, V and mask: the node ``ggml_flash_attn_ext`` builds, computed by the
    kernel alone on one thread; every output checked against the oracle's value within its bound."""
    ip, fp = [int(v) for v in case.call["ip"]], [float(v) for v in case.call["fp"]]
    kernel, tcm, tk, tv, dk, dv, n_q, n_kv, h, h_kv, mh, _threads = ip
    if kernel != 0 or tk != 1 or tv != 1 or case.arrays["buf4"].size:
        raise NoProgram("the program is written for the one-chunk kernel on f16 K / V without sinks")
    if "expected" not in case.arrays or "bound" not in case.arrays:
        raise NoProgram("the report kept no expected values and bounds")
    exp = case.arrays["expected"].reshape(-1).astype(np.float64)
    bnd = case.arrays["bound"].reshape(-1).astype(np.float64)
    names = ("Q_HEX", "K_HEX", "V_HEX", "MASK_HEX")
    data = [hex_lines(n, case.arrays[f"buf{i}"].tobytes()) for i, n in enumerate(names)]
    nl = "\n"
    return f"""// forward_flash_attn_ext_f16_one_chunk_vlen1024_vf16 (SpacemiT, spacemit/rvv_kernels.cpp, VLEN 1024) with
// {tcm} bytes of TCM, as spacemit/ime.cpp calls it with the TCM runtime's block (its 2- and 4-row kernel runs then only):
// decode, {h} query heads over {h_kv} K/V head, n_kv = {n_kv}, DK = {dk}, DV = {dv}, a mask of {mh} head, scale {fp[0]:g},
// max_bias {fp[1]:g}, softcap {fp[2]:g}. The node is ggml_flash_attn_ext's; the kernel computes its {n_q * h} rows on one
// thread. Exit status 1 while an output is beyond its bound of the exact value.
#include "ggml.h"
#include "ggml-cpu-impl.h"
#include "spacemit/rvv_kernels.h"
#include <riscv_vector.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
{nl.join(data)}
static const double expected[{exp.size}] = {{{", ".join(literal(v) for v in exp)}}};
static const double bound[{bnd.size}] = {{{", ".join(literal(v) for v in bnd)}}};

static ggml_tensor * tensor(ggml_context * ctx, ggml_type t, int64_t ne0, int64_t ne1, int64_t ne2, const char * h) {{
    ggml_tensor * x = ggml_new_tensor_3d(ctx, t, ne0, ne1, ne2);  // h: hex bytes, "hh*N" = N bytes hh
{hex_fill()}}}

int main() {{
    if (__riscv_vlenb() != 128) {{ printf("the kernel is written for VLEN 1024\\n"); return 2; }}
    ggml_init_params p = {{1u << 20, nullptr, false}};
    ggml_context * ctx = ggml_init(p);
    ggml_tensor * q = tensor(ctx, GGML_TYPE_F32, {dk}, {n_q}, {h}, Q_HEX);
    ggml_tensor * k = tensor(ctx, GGML_TYPE_F16, {dk}, {n_kv}, {h_kv}, K_HEX);
    ggml_tensor * v = tensor(ctx, GGML_TYPE_F16, {dv}, {n_kv}, {h_kv}, V_HEX);
    ggml_tensor * mask = tensor(ctx, GGML_TYPE_F16, {n_kv}, {n_q}, {mh}, MASK_HEX);
    ggml_tensor * out = ggml_flash_attn_ext(ctx, q, k, v, mask, {literal(fp[0])}f, {literal(fp[1])}f, {literal(fp[2])}f);
    static unsigned char tcm[{tcm}];  // the thread's TCM block
    ggml_compute_params params = {{0, 1, 0, nullptr, nullptr, false}};
    spacemit_kernels::rvv::forward_flash_attn_ext_f16_one_chunk_vlen1024_vf16(&params, out, 0, {n_q * h}, tcm, sizeof(tcm));
    int bad = 0;
    for (int i = 0; i < {exp.size}; ++i) {{
        const double got = ((const float *) out->data)[i];
        if (!(std::fabs(got - expected[i]) <= bound[i]) && bad++ < 4)
            printf("out[%d] (head %d) = %.6g, expected %.6g (bound %.2g)\\n", i, i / {dv}, got, expected[i], bound[i]);
    }}
    printf("VLEN %d: %d of {exp.size} outputs wrong\\n", (int) __riscv_vlenb() * 8, bad);
    return bad != 0;
}}
"""


@dataclass(frozen=True)
class SpacemitProgram:
    """A finding's program: its writer (from the shrunk case), the public-form reason's kernel and what it does."""

    write: Callable[[Case], str]
    #: the kernel of public_base.py's ``SPACEMIT_DIRECT`` whose reason says why no public op reaches it
    kernel: str
    what: str
    #: the VLENs the function is written for (None: every one)
    vlens: tuple[int, ...] | None = None
    #: what the title says where the program is wrong ('': a wrong result)
    wrong: str = ""


_REPACK_WHAT = ("it includes spacemit/repack.h and ime.h by path and runs the layout's repack, as SpacemiT's buffer "
                "type does, into the memory the buffer type allocates for the tensor")
PROGRAMS: dict[str, SpacemitProgram] = {
    "spacemit_quantize_ref_zero_block": SpacemitProgram(
        _quantize("quantize_a_row_i8", "i8"), "spacemit_quantize",
        "it includes spacemit/rvv_kernels.h by path and quantizes one row of zeros"),
    "spacemit_quantize_hp_ref_zero_block": SpacemitProgram(
        _quantize("quantize_a_row_i8_hp", "hp"), "spacemit_quantize",
        "it includes spacemit/rvv_kernels.h by path and quantizes one row of zeros"),
    "spacemit_repack_q6_K_zero_subblock": SpacemitProgram(_q6_K_zero_subblock, "spacemit_repack", _REPACK_WHAT),
    "spacemit_repack_expert_row_padding": SpacemitProgram(_expert_padding, "spacemit_repack", _REPACK_WHAT,
                                                          wrong="a write past the allocation"),
    "spacemit_fa_mrow_max_init": SpacemitProgram(
        _flash_attention, "spacemit_fa", "it includes spacemit/rvv_kernels.h by path and gives the kernel a block of "
        "memory as its TCM, as ime.cpp gives the TCM runtime's", (1024,)),
    "spacemit_fa_mrow_alibi_slope": SpacemitProgram(
        _flash_attention, "spacemit_fa", "it includes spacemit/rvv_kernels.h by path and gives the kernel a block of "
        "memory as its TCM, as ime.cpp gives the TCM runtime's", (1024,)),
}


def why(fix: str) -> str:
    """Why no public program reaches the finding's function (public_base.py's reason for its kernel)."""
    return SPACEMIT_DIRECT[PROGRAMS[fix].kernel]


#: The extensions of SpacemiT's document for the K1 and A100 (the pinned tree's -march without its hints): what
#: the build promises (``ISAS[ISA].march``: v, zfh, zvfh; trees before 2026-05 have no zba option) and zba.
PROGRAM_EXTENSIONS = (*ISAS[ISA].march, "zba")


def _flags() -> list[str]:
    """The program's own flags, rvvdiff's and the printed command's alike: C++20, -O2, the document's -march."""
    exts = PROGRAM_EXTENSIONS
    return ["-std=gnu++20", "-O2", "-march=rv64gc" + exts[0] + "".join(f"_{e}" for e in exts[1:])]


def compile_argv(build: Build, src: Path, exe: Path) -> list[str]:
    """rvvdiff's command: the build's compiler, the tree's include directories, its static libraries."""
    root = build.source.root
    return [compiler(build.compiler).cxx, *_flags(), *[f"-I{root}/{d}" for d in INCLUDES], str(src),
            *map(str, build.libs), "-static", "-lm", "-lpthread", "-o", str(exe)]


def printed_argv(tree: GgmlSource, exe: str = "repro") -> list[str]:
    """The same command as a maintainer types it after ggml's CMake build in ``rv`` (clang; the tree named
    ``llama.cpp`` by :func:`body_lines`)."""
    libs = [str(p) for p in stock.libraries(Path(tree.root), Path("rv"))]
    return [stock.CLANGXX, f"--target={stock.TARGET}", *_flags(), *[f"-I{tree.root}/{d}" for d in INCLUDES],
            "repro.cpp", *libs, "-static", "-lm", "-lpthread", "-o", exe]


def verify(fix: str, source: str, trees: dict[str, GgmlSource], compilers: list[str], vlens: tuple[int, ...],
           work: Path) -> list[runs.Verdict]:
    """The program built against the spacemit build of each tree by each compiler and run under QEMU at each VLEN
    (those the function is written for) with the build's environment (harness/upstream/runs.py)."""
    work.mkdir(parents=True, exist_ok=True)
    src = work / "repro.cpp"
    src.write_text(source)
    only = PROGRAMS[fix].vlens
    targets = [Point(vl, ISA, False, cc) for cc in compilers for vl in vlens if only is None or vl in only]

    def make(label: str, tree: GgmlSource, at: Point) -> Path:
        build = ensure_built(tree, at.isa, at.compiler)
        exe = work / f"repro-{label}-{at.compiler}"
        run(compile_argv(build, src, exe), timeout=600, what=f"compiling {src.name} against {label}'s spacemit build")
        return exe

    return runs.verify(src, trees, targets, work, make=make)


def body_lines(tree: GgmlSource, vlen: int) -> list[str]:
    """The build and run commands of the text (ggml's CMake for the spacemit build, the program, one run at
    ``vlen``), the tree named ``llama.cpp``."""
    cmake = stock.cmake_build(Path(tree.root), ISA, "clang", Path("rv"), printed=True).without(
        "CMAKE_EXPORT_COMPILE_COMMANDS")
    run_ = [*stock.run_argv(Path("repro"), Point(vlen, ISA, False, "clang"))[:-1], "./repro"]
    argvs = (cmake.configure_argv(), cmake.build_argv(stock.LIBRARIES, jobs=2), printed_argv(tree), run_)
    return [_pwd(shlex.join([a.replace(str(tree.root), "llama.cpp") for a in argv])) for argv in argvs]
