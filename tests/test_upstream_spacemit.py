"""``rvvdiff report --upstream`` for SpacemiT's backend: the public forms of one op and of flash attention.

Fast: recorded ``op`` and ``attention`` calls (as the kernel server's adapters take them) become ggml graphs with the
case's shapes, views, types, bytes and bound; their programs include ggml's public headers only and compile as C
and C++ against the tree's headers; crashes and kernels no op reaches say so; the issue names the spacemit build's
options, rvvdiff's additions and the environment, and the runs pass that environment.  Long: the finding
``norm-offset`` made a case and reported, wrong at VLEN 256 under QEMU on the pinned tree and right with a throwaway
fix (RVVDIFF_FIXES_DIR, as tests/test_fixes.py does).
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from launch import pytest_child

from harness.commands import report
from harness.core.config import SPACEMIT
from harness.core.matrix import Point
from harness.ggml import source, tree
from harness.jobs import issue_runs
from harness.report.failure import Case
from harness.upstream import issue as issue_text
from harness.upstream import paragraphs, program, public, public_ops, runs, stock, wording

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = {"ggml.h", "ggml-cpu.h", "ggml-backend.h", "math.h", "stdio.h", "stdlib.h", "string.h"}
F32, F16, I32 = 0, 1, 26  # ggml's type numbers (the pinned tree's enum ggml_type)
IDENTITY, TRANSPOSE = (0, 1, 2, 3), (1, 0, 2, 3)


def _types() -> dict[str, int]:
    return tree.of(source.pinned()).types


def _op(tmp: Path, code: int, srcs: list[tuple[int, tuple, tuple, np.ndarray]], dst: int, out_bytes: int, *,
        par: tuple = (), fp: tuple = (), threads: int = 1, comparison: dict | None = None,
        arrays: dict | None = None, message: str = "") -> Case:
    """A recorded ``op`` call (harness/server/k_ops.cpp's parameters) with its sources' bytes."""
    ip = [code, threads, dst, len(srcs), len(par)]
    for t, ne, perm, _ in srcs:
        ip += [t, *ne, *perm]
    ip += list(par)
    bufs = [{"kind": "IN", "size": x.nbytes, "fill": 165} for *_, x in srcs] + [{"kind": "OUT", "size": out_bytes,
                                                                                    "fill": 165}]
    data = {"test": "cases/test_spacemit_ops.py::test_spacemit_op[x]", "failure": "",
            "target": {"vlen": 256, "isa": "spacemit", "stress": False, "emulator": "qemu", "compiler": "clang"},
            "call": {"kernel": "op", "ip": ip, "fp": list(fp), "buffers": bufs, "server_message": message},
            "comparison": comparison}
    arr = {f"buf{i}": np.frombuffer(x.tobytes(), np.uint8) for i, (*_, x) in enumerate(srcs)}
    return Case(tmp, data, {**arr, **(arrays or {})})


def _includes(src: str) -> set[str]:
    return set(re.findall(r'#include [<"]([^>"]+)[>"]', src))


def test_a_norm_case_is_ggml_norm_with_the_recorded_bound(tmp_path: Path) -> None:
    x = np.array([64.75], np.float32)
    case = _op(tmp_path, 0, [(F32, (1, 1, 1, 1), IDENTITY, x)], F32, 4, fp=(1e-5,),
               comparison={"mode": "bound", "context": "ggml_norm(f32[1, 1, 1, 1]) -> f32, forward_norm_f32"},
               arrays={"expected": np.zeros((1, 1, 1, 1)), "bound": np.full((1, 1, 1, 1), 1.2e-3)})
    pub = public.public_form(case, _types())
    assert isinstance(pub, public_ops.OpGraph) and pub.op == "norm" and pub.function == "ggml_norm"
    assert pub.expected.tolist() == [0.0] and pub.bound.tolist() == [1.2e-3] and not pub.crashed
    src = program.program(pub, "forward_norm_f32")
    assert "ggml_norm(ctx, s0, 1e-05f)" in src and "ggml_backend_graph_compute" in src
    assert _includes(src) <= PUBLIC and "bound[1] = {0.0012}" in src
    assert 'S0_HEX = "' + x.tobytes().hex() + '"' in src


def test_mixed_formats_take_one_ulp_of_the_result_as_their_bound(tmp_path: Path) -> None:
    a, b = np.array([2.0], np.float32), np.array([0.25], np.float16)
    case = _op(tmp_path, 2, [(F32, (1, 1, 1, 1), IDENTITY, a), (F16, (1, 1, 1, 1), IDENTITY, b)], F32, 4,
               comparison={"mode": "ulps", "context": "ggml_add(...)"},
               arrays={"expected": np.array([2.25], np.float32), "allowed": np.array([1.0])})
    pub = public.public_form(case, _types())
    assert pub.bound.tolist() == [2.0 ** -22]  # one ulp of float32 at 2.25
    src = program.program(pub, "forward_binary")
    assert "tensor(ctx, GGML_TYPE_F16, 1, 1, 1, 1, S1_HEX)" in src and "ggml_add(ctx, s0, s1)" in src


def test_views_and_copies_are_built_as_the_adapter_built_them(tmp_path: Path) -> None:
    x = np.arange(2, dtype=np.float32)
    case = _op(tmp_path, 7, [(F32, (2, 1, 1, 1), TRANSPOSE, x)], F32, 8,
               comparison={"mode": "bitwise", "context": "ggml_cpy(...)"}, arrays={"expected": x.reshape(2, 1)})
    pub = public.public_form(case, _types())
    assert pub.sources[0].view_ne == (1, 2, 1, 1) and "ggml_permute(f32 [2, 1, 1, 1], 1, 0, 2, 3)" in pub.what
    src = program.program(pub, "forward_cpy_with_permute")
    assert "ggml_permute(ctx, tensor(ctx, GGML_TYPE_F32, 2, 1, 1, 1, S0_HEX), 1, 0, 2, 3)" in src
    assert "ggml_cpy(ctx, s0, dst)" in src and "clobbered(dst)" in src and "bound[1] = {0}" in src
    rep = _op(tmp_path, 8, [(F16, (1, 1, 1, 1), IDENTITY, np.ones(1, np.float16))], F16, 4, par=(1, 1, 1, 2),
              comparison={"mode": "bitwise", "context": ""}, arrays={"expected": np.ones((2, 1, 1, 1), np.float16)})
    src = program.program(public.public_form(rep, _types()), "forward_repeat_dim1")
    assert "ggml_new_tensor_4d(ctx, s0->type, 1, 1, 1, 2)" in src and "ggml_repeat(ctx, s0, like)" in src


def test_a_crashed_call_has_a_program_whose_run_is_the_verdict(tmp_path: Path) -> None:
    """The f16 concat aborts: no result was recorded, so the expected values are the test's oracle's on the recorded
    inputs (the concatenation, bit for bit), and whether the program dies is the verdict."""
    a, b = np.array([1.5], np.float16), np.array([-2.0], np.float16)
    case = _op(tmp_path, 11, [(F16, (1, 1, 1, 1), IDENTITY, a), (F16, (1, 1, 1, 1), IDENTITY, b)], F16, 4, par=(0,),
               message="op: the kernel aborted (SIGABRT; an assertion in ggml?)")
    pub = public.public_form(case, _types())
    assert pub.crashed and pub.signal == "SIGABRT" and pub.expected.tolist() == [1.5, -2.0] and not pub.bound.any()
    src = program.program(pub, "forward_concat")
    assert "expected[2] = {1.5, -2.0}" in src and "ggml_concat(ctx, s0, s1, 0)" in src
    assert "died of SIGABRT where the test ran" in src.splitlines()[0]
    case.data["call"]["server_message"] = ""  # a report that names no signal and kept no result: nothing to show
    with pytest.raises(public.NoPublicForm, match="no expected values"):
        public.public_form(case, _types())


def test_a_write_past_the_result_is_judged_by_the_guard_and_the_oracle(tmp_path: Path) -> None:
    """The server stopped the call for writing past its result (the transposes under a short vl): the comparison the
    report kept is an earlier call's (16 values for 9 outputs here), so the program takes the oracle's values on the
    recorded inputs, and its guard bytes show the write."""
    x = np.arange(9, dtype=np.float32)
    case = _op(tmp_path, 6, [(F32, (9, 1, 1, 1), TRANSPOSE, x)], F32, 36,
               message="op wrote outside buffer 1 (36 bytes): first clobbered guard byte at offset 36",
               comparison={"mode": "bitwise", "context": ""}, arrays={"expected": np.zeros(16, np.float32)})
    pub = public.public_form(case, _types())
    assert not pub.crashed and pub.expected.tolist() == x.tolist() and not pub.bound.any()
    src = program.program(pub, "rvv_transposed_s32_mn_to_nm")
    assert "int past = clobbered(c);" in src and "return bad != 0 || past != 0;" in src
    v = [runs.Verdict("pinned", "spacemit", vl, vl >= 256, "") for vl in (128, 256)]
    title = issue_text.title_of("forward_concat", v, stress=False, trap=True, crash="SIGABRT")
    assert title == ("forward_concat (RISC-V RVV, SpacemiT backend): crashes (SIGABRT) at VLEN 256, spacemit build, "
                     "with clang")
    v += [runs.Verdict("pinned", "spacemit", vl, None, "not built: GCC 14 cannot make the spacemit build: ...",
                       compiler="gcc14") for vl in (128, 256)]
    title = issue_text.title_of("forward_concat", v, stress=False, trap=True, crash="SIGABRT")
    assert title.endswith("spacemit build with clang; GCC 14 cannot make the spacemit build"), title
    said = issue_text._unmade(v, "gcc14", SPACEMIT)
    assert said.startswith("No GCC 14 commands: GCC 14 cannot make") and "other builds" not in said


def _attention(tmp: Path, fused: int, mask_heads: int, expected: bool) -> Case:
    dk = dv = 4
    ip = [fused, F16, F16, dk, dv, 1, 2, 1, 1, mask_heads, 1]
    arrays = {"buf0": np.zeros(dk * 4, np.uint8), "buf1": np.zeros(2 * dk * 2, np.uint8),
              "buf2": np.zeros(2 * dv * 2, np.uint8), "buf3": np.zeros(2 * 2 * mask_heads, np.uint8)}
    if expected:
        arrays |= {"expected": np.zeros((1, 1, dv)), "bound": np.full((1, 1, dv), 1e-6)}
    data = {"test": "cases/test_spacemit_fa.py::x", "target": {"vlen": 1024, "isa": "spacemit", "emulator": "qemu"},
            "call": {"kernel": "attention", "ip": ip, "fp": [0.5, 0.0, 20.0], "buffers": [{}] * 6,
                     "server_message": "" if expected else "the kernel crashed with SIGSEGV (invalid memory access)"},
            "comparison": {"mode": "bound", "context": "fused"} if expected else None}
    return Case(tmp, data, arrays)


def test_attention_is_ggml_flash_attn_ext_and_its_materialised_side_says_why_not(tmp_path: Path) -> None:
    pub = public.public_form(_attention(tmp_path, 1, 1, True), _types())
    assert isinstance(pub, public_ops.FlashAttn) and pub.k_type == "f16" and pub.softcap == 20.0
    src = program.program(pub, "forward_flash_attn_ext_f16_tiled_vlen1024_vf16")
    assert "ggml_flash_attn_ext(ctx, q, k, v, mask, 0.5f, 0.0f, 20.0f)" in src and "MASK_HEX" in src
    crash = public.public_form(_attention(tmp_path, 1, 0, False), _types())
    assert crash.crashed and crash.signal == "SIGSEGV"
    assert "mask = NULL" in program.program(crash, "f")
    with pytest.raises(public.NoPublicForm, match="materialised"):
        public.public_form(_attention(tmp_path, 0, 1, True), _types())


@pytest.mark.parametrize("kernel,why", [("spacemit_quantize", "IME GEMMs"), ("spacemit_repack", "no QEMU emulates IME"),
                                        ("spacemit_fa", "TCM"), ("spacemit_repack_uncalled", "never calls")])
def test_kernels_no_op_reaches_say_why(tmp_path: Path, kernel: str, why: str) -> None:
    case = Case(tmp_path, {"call": {"kernel": kernel, "ip": [], "buffers": []}}, {})
    with pytest.raises(public.NoPublicForm, match=why):
        public.public_form(case, _types())


def test_weights_in_spacemits_buffer_type_have_no_public_form_under_qemu(tmp_path: Path) -> None:
    case = Case(tmp_path, {"call": {"kernel": "repack_mul_mat", "ip": [2, 32, 16, 1, 1, 2, 1], "buffers": [{}, {}]},
                           "comparison": {"mode": "bound"}}, {"expected": np.zeros(16)})
    with pytest.raises(public.NoPublicForm, match="IME1"):
        public.public_form(case, _types())


def test_every_program_compiles_as_c_and_cpp_against_the_trees_headers(tmp_path: Path) -> None:
    """The programs of every form (an op of each kind, a view, attention with and without a mask, a crash) are valid C
    and C++ for the tree's public headers (the host's gcc, syntax only: the riscv64 runs are the long test's), and
    what each computes reads well in the issue's sentence (harness/upstream/wording.py)."""
    inc = source.pinned().ggml / "include"
    f32 = np.ones(2, np.float32)
    cases = [_op(tmp_path, code, srcs, dst, 8, par=par, fp=fp, comparison={"mode": "bitwise"},
                 arrays={"expected": np.zeros(2, np.float32)})
             for code, srcs, dst, par, fp in [
                 (1, [(F32, (2, 1, 1, 1), IDENTITY, f32)], F32, (), (1e-6,)),
                 (5, [(F32, (2, 1, 1, 1), IDENTITY, f32), (F32, (1, 1, 1, 1), IDENTITY, f32[:1])], F32, (), ()),
                 (6, [(F32, (1, 2, 1, 1), TRANSPOSE, f32)], F32, (), ()),
                 (9, [(F32, (2, 1, 1, 1), IDENTITY, f32)], F32, (), ()),
                 (10, [(F32, (1, 2, 1, 1), IDENTITY, f32), (I32, (2, 1, 1, 1), IDENTITY, np.zeros(2, np.int32))],
                  F32, (), ())]]
    forms = [public.public_form(c, _types()) for c in cases]
    forms += [public.public_form(_attention(tmp_path, 1, m, e), _types()) for m, e in ((1, True), (0, False))]
    for i, pub in enumerate(forms):
        src = program.program(pub, "f")
        assert _includes(src) <= PUBLIC, _includes(src) - PUBLIC
        assert not wording.defects(f"The program ({pub.what}, with the inputs of a shrunk case; ggml's public API "
                                   "only), `repro.c` (50 lines), is attached."), pub.what
        f = tmp_path / f"p{i}.c"
        f.write_text(src)
        # (and as a tree of 2025 compiles it, whose ggml.h asks for the mask's rows padded)
        for lang, cc, pad in (("c", "gcc", []), ("c++", "g++", []), ("c", "gcc", ["-DGGML_KQ_MASK_PAD=64"])):
            r = subprocess.run([cc, "-fsyntax-only", "-Wall", "-Werror", *pad, "-x", lang, "-I", str(inc), str(f)],
                               capture_output=True, text=True)
            assert r.returncode == 0, f"{pub.what} as {lang} {pad}:\n{r.stderr[-2000:]}"


def test_the_issue_names_the_build_its_additions_and_environment() -> None:
    lines = "\n".join(issue_text.build_lines(source.pinned(), Point(256, SPACEMIT, False, "clang")))
    assert "-DGGML_CPU_RISCV64_SPACEMIT=ON" in lines and "-DGGML_CPU_REPACK=OFF" in lines
    assert '"-DCMAKE_CXX_FLAGS=-Xclang -std=gnu++20 -Xclang -target-feature -Xclang +xsmtvdot -include ' \
           '$PWD/spacemit_ime1.h"' in lines  # double quotes: the shell expands $PWD
    assert "env SPACEMIT_CORE_ARCH=0x503C SPACEMIT_MEM_BACKEND=POSIX qemu-riscv64 -cpu rv64,v=true,vlen=256" in lines
    assert [p.name for p in stock.addition_files(SPACEMIT, "clang")] == ["spacemit_ime1.h"]
    assert stock.addition_files(SPACEMIT, "gcc14") == () and stock.addition_options("zvfh", "clang") == {}
    text = " ".join(paragraphs.build_paragraph(SPACEMIT, ["clang"]))
    assert "SPACEMIT_CORE_ARCH=0x503C" in text and "SPACEMIT_MEM_BACKEND=POSIX" in text and "gnu++20" in text
    assert "`spacemit_ime1.h`, attached" in text
    assert paragraphs.build_paragraph(Point(256, "zvfh").isa, ["clang"]) == []
    assert issue_runs.backend_builds("spacemit") == ["spacemit"]
    assert issue_runs.backend_builds("zvfh") == ["v", "zvfh", "zvfbfwma"]


def test_runs_give_the_program_the_builds_environment_and_skip_what_gcc_cannot_make(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.emulators.base import Ran

    seen = {}
    wrong = Ran(["x"], 1, "out[0] = nan\nVLEN 256: 1 of 1 wrong\n", "CPU_RISCV64_SPACEMIT: num_cores: 2\n")
    abort = Ran(["x"], -6, "", "CPU_RISCV64_SPACEMIT: num_cores: 2\n/root/.cache/rvvdiff/src/llama.cpp-0c1e570/ggml/src/"
                "ggml-cpu/spacemit/rvv_kernels.cpp:3100: GGML_ASSERT(x) failed\n#7  0x00007efdfe611ef1 in ?? ()\n"
                "[Inferior 1 (process 30326) detached]\n")

    class Fake:
        label = "QEMU"
        ran = wrong

        def lacking(self, props):
            return []

        def run_program(self, exe, vlen, props, *, timeout, what, env=None):
            seen["env"] = env
            return self.ran

    failing, text = runs.run_program(tmp_path / "x", Point(256, SPACEMIT), Fake())
    assert seen["env"] == {"SPACEMIT_CORE_ARCH": "0x503C", "SPACEMIT_MEM_BACKEND": "POSIX"}
    assert failing and "num_cores" not in text  # the program's verdict, not the backend's start-up lines
    Fake.ran = abort
    trapped, text = runs.run_program(tmp_path / "x", Point(256, SPACEMIT), Fake(), trap=True)
    assert trapped and text == "exit -6 (SIGABRT): ggml/src/ggml-cpu/spacemit/rvv_kernels.cpp:3100: GGML_ASSERT(x) failed"
    Fake.ran = Ran(["x"], -11, "", "CPU_RISCV64_SPACEMIT: num_cores: 2\n")
    assert runs.run_program(tmp_path / "x", Point(1024, SPACEMIT), Fake(), trap=True) == (True, "exit -11 (SIGSEGV)")
    monkeypatch.setattr(runs, "ensure_built", lambda *a, **k: pytest.fail("GCC 14 cannot make the spacemit build"))
    (v,) = runs.verify(tmp_path / "p.c", {"pinned": source.pinned()}, [Point(256, SPACEMIT, False, "gcc14")], tmp_path)
    assert v.failing is None and v.text.startswith("not built: GCC 14 cannot make the spacemit build")
    monkeypatch.setattr(runs.stock, "build_program", lambda *a, **k: pytest.fail("GCC 14 cannot make it either"))
    s = runs.verify_stock(source.pinned(), "pinned", Point(256, SPACEMIT, False, "gcc14"), tmp_path / "p.c", tmp_path)
    assert s.failing is None and s.text.startswith("not built: GCC 14 cannot make the spacemit build")


def _report(args: list[str]) -> tuple[int, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = report.main([*args, "--upstream", "--no-stock", "--cc", "clang", "--vlen", "256"])
    return code, buf.getvalue()


@pytest.mark.long(15)
def test_the_norm_finding_is_wrong_on_the_tree_and_right_with_a_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                     ) -> None:
    """The finding's reproducer made a case; its program, built against the spacemit build and run under QEMU with
    the build's environment, is wrong on the pinned tree; ``--fix`` with a throwaway two-pass fix (a fixes directory
    and a known-failures file of this test's own) runs it on the fixed tree too, where it is right."""
    test = "cases/test_spacemit_ops.py::test_spacemit_op[norm-offset-vlen256-spacemit]"
    pytest_child(test, "--vlen", "256", "--isa", "spacemit", "-p", "no:xdist", "-q", "--runxfail",
                 "--report-dir", str(tmp_path / "r"), code=1)
    (case,) = (tmp_path / "r" / "cases").iterdir()
    code, said = _report([str(case)])
    issue = (case / "upstream" / "issue.md").read_text()
    assert code == 0, said
    assert issue.startswith("### forward_norm_f32 (RISC-V RVV, SpacemiT backend): wrong result at VLEN 256, spacemit")
    assert "| pinned | clang | spacemit | wrong |" in issue and "out[0] = nan, expected 0" in issue
    assert (case / "upstream" / "spacemit_ime1.h").is_file()
    fixes = tmp_path / "fixes"
    fixes.mkdir()
    (fixes / "norm_two_pass.patch").write_text(FIX_HEADER + NORM_FIX)
    known = (ROOT / "harness/data/known_failures.toml").read_text()
    pending = re.search(r'(test = "cases/test_spacemit_ops.py::test_spacemit_op\[\[\]norm-\*"\n(?:.+\n)*?)fix_pending = .+\n',
                        known)
    (tmp_path / "known.toml").write_text(known.replace(pending.group(0), pending.group(1) + 'fix = "norm_two_pass"\n'))
    monkeypatch.setenv("RVVDIFF_FIXES_DIR", str(fixes))
    monkeypatch.setenv("RVVDIFF_KNOWN_FAILURES", str(tmp_path / "known.toml"))
    code, said = _report(["--fix", "norm_two_pass", "--out", str(tmp_path / "up")])
    issue = (tmp_path / "up" / "issue.md").read_text()
    assert code == 0, said
    assert "| pinned | clang | spacemit | wrong |" in issue and "| fixed | clang | spacemit | ok |" in issue


FIX_HEADER = ("rvvdiff fix: norm's variance in two passes (a test's throwaway)\nfinding: SpacemiT norm\n"
              "functions: forward_norm_f32\ntests: cases/test_spacemit_ops.py::test_spacemit_op[[]norm-*\n"
              "cost: spacemit\nwrong-vlens: all\nvector-path: kept\n\n")
#: The variance from the row's copy in the output, centred (the test's fix; not a fix proposed upstream).
NORM_FIX = """--- a/ggml/src/ggml-cpu/spacemit/rvv_kernels.cpp
+++ b/ggml/src/ggml-cpu/spacemit/rvv_kernels.cpp
@@ -2600,7 +2600,10 @@

         float mean_square = __riscv_vfmv_f_s_f32m1_f32(mean_square_v);
-        mean_square /= hidden_size;
-        mean_square = sqrt(mean_square - mean * mean + epsilon);
+        mean_square = 0.f;
+        for (int64_t i = 0; i < hidden_size; i++) {
+            mean_square += (p_output[i] - mean) * (p_output[i] - mean);
+        }
+        mean_square = sqrt(mean_square / hidden_size + epsilon);

         mean_square   = 1.0f / mean_square;
         length        = hidden_size;
"""
