"""Any ggml tree: the C reader (harness/ggml/csource.py), the generated server bindings
(harness/toolchain/bindings.py), the tree inventory (harness/ggml/tree.py), and a real older tree that lacks
types and layouts the pinned one has (llama.cpp vendored by llama-cpp-python 0.3.20, ggml 0.9.11,
March 2026: no Q1_0 or Q2_0)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from launch import pytest_child

from harness.ggml import csource, known, source, tree
from harness.toolchain import bindings

OLD_TREE = "llama-cpp-python==0.3.20"


# ------------------------------------------------------------------ the reader

SAMPLE = textwrap.dedent("""\
    #include "x.h"
    /* a comment with a { brace */
    #if defined(__riscv_v_intrinsic)
    static NOINLINE void f_vl128(int n) { if (n) { g("}"); } }
    void f(int n) {
        const int vlen = __riscv_vlenb() * 8;
        switch (__riscv_vlenb() * 8) {
            case 128: f_vl128(n); break;
            default: f_vl256(n); break;
        }
    }
    #elif defined(__AVX2__)
    void f(int n) { avx(n); }
    #else
    void f(int n) { scalar(n); }
    #endif
    #if __has_include(<foo.h>)
    void h(void) {}
    #endif
    #if defined(__riscv_zvfh) && __riscv_v_intrinsic >= 12000
    namespace ns {
    template <> int repack<block_q4_0, 1, 16>(struct t * x, const void * d, size_t n) { return 0; }
    }
    #endif
    enum ggml_type { GGML_TYPE_F32 = 0, GGML_TYPE_F16 = 1, /* GGML_TYPE_Q4_2 = 4, removed */
                     GGML_TYPE_Q8_0 = 8, GGML_TYPE_X, GGML_TYPE_COUNT };
    void declared_only(int a, float (*cb)(int));
    """)


def _file(tmp_path: Path) -> csource.CFile:
    p = tmp_path / "sample.c"
    p.write_text(SAMPLE)
    return csource.CFile.read(p)


def test_functions_follow_the_build_and_keep_their_conditions(tmp_path: Path) -> None:
    f = _file(tmp_path)
    rvv = f.functions(csource.rvv_macros(["zfh", "zvfh"]))
    assert set(rvv) == {"f_vl128", "f", "repack<block_q4_0, 1, 16>"}
    assert "g(" in rvv["f_vl128"].body and rvv["f_vl128"].noinline and rvv["f_vl128"].static
    assert rvv["repack<block_q4_0, 1, 16>"].conditions == ("defined(__riscv_zvfh) && __riscv_v_intrinsic >= 12000",)
    scalar = f.functions({})
    assert "scalar(n)" in scalar["f"].body and "f_vl128" not in scalar
    every = f.functions(None)  # every branch: the first definition of a name is kept
    assert every["f"].conditions == ("defined(__riscv_v_intrinsic)",)


def test_what_the_reader_cannot_evaluate_is_a_note_with_file_and_line(tmp_path: Path) -> None:
    f = _file(tmp_path)
    funcs = f.functions(csource.rvv_macros())
    assert "h" not in funcs
    assert [n.line for n in f.notes] == [17] and "__has_include" in f.notes[0].message
    assert str(f.notes[0]).startswith(f"{tmp_path / 'sample.c'}:17:")


def test_fingerprint_ignores_comments_and_layout_not_code(tmp_path: Path) -> None:
    a = tmp_path / "a.c"
    a.write_text("void k(int n) {\n  return n + 1; // one\n}\n")
    b = tmp_path / "b.c"
    b.write_text("/* moved */\nvoid k(int n)\n{ return n + 1;\n}\n")
    c = tmp_path / "c.c"
    c.write_text("void k(int n) { return n + 2; }\n")
    fp = [csource.CFile.read(p).functions()["k"].fingerprint for p in (a, b, c)]
    assert fp[0] == fp[1] != fp[2]


def test_fingerprint_reads_inline_assembly(tmp_path: Path) -> None:
    """An instruction of inline assembly is code (a string literal the reading blanks): changing it changes the
    fingerprint; its layout and the comments around it do not.  The fingerprint without it is what entries written
    before assembly was read list: it stays the same, and the known-failures reader matches either."""
    src = 'void t(long *a) {{\n  __asm__ volatile(\n    "{i}  t3, t0, %[s] \\n\\t"  // the advance\n    : : [s] "r"(a));\n}}\n'
    files = []
    for k, text in enumerate((src.format(i="mul"), src.format(i="mul").replace("// the advance", "/* x */"),
                              src.format(i="add"))):
        files.append(tmp_path / f"t{k}.c")
        files[-1].write_text(text)
    fs = [csource.CFile.read(p).functions()["t"] for p in files]
    assert fs[0].fingerprint == fs[1].fingerprint != fs[2].fingerprint
    assert fs[0].fingerprint_without_asm == fs[2].fingerprint_without_asm != fs[0].fingerprint
    assert "mul  t3, t0" in fs[0].assembly() and fs[0].assembly() != fs[2].assembly()
    plain = tmp_path / "p.c"
    plain.write_text("int p(int n) { return n; }\n")
    f = csource.CFile.read(plain).functions()["p"]
    assert f.assembly() == "" and f.fingerprint == f.fingerprint_without_asm
    listed = frozenset({fs[0].fingerprint_without_asm})
    assert known.FunctionState("t", "t.c", fs[2].fingerprint, listed, fs[2].fingerprint_without_asm).known
    assert not known.FunctionState("t", "t.c", fs[2].fingerprint, frozenset({fs[0].fingerprint}),
                                   fs[2].fingerprint_without_asm).known


def test_enum_declarations_and_dispatch(tmp_path: Path) -> None:
    f = _file(tmp_path)
    assert f.enum("ggml_type") == {"GGML_TYPE_F32": 0, "GGML_TYPE_F16": 1, "GGML_TYPE_Q8_0": 8, "GGML_TYPE_X": 9,
                                   "GGML_TYPE_COUNT": 10}
    assert {"declared_only", "f", "f_vl128"} <= f.declared()
    body = f.functions(csource.rvv_macros())["f"].body
    assert csource.vlen_dispatch(body, ["f_vl128", "f_vl256"]) == {128: "f_vl128", 256: "f_vl256", 512: "f_vl256",
                                                                   1024: "f_vl256"}
    assert csource.vlen_dispatch(body, ["other"]) is None
    chain = "int v = __riscv_vlenb() * 8;\nif (v >= 256) { a_vl256(n); } else { a_vl128(n); }"
    assert csource.vlen_dispatch(chain, ["a_vl128", "a_vl256"]) == {128: "a_vl128", 256: "a_vl256", 512: "a_vl256",
                                                                    1024: "a_vl256"}
    with pytest.raises(ValueError, match="switch or an if chain"):
        csource.vlen_dispatch("table[i](n); a_vl128(n);", ["a_vl128"])


@pytest.mark.parametrize("expr,value", [("defined(A) && !defined(B)", 1), ("A > 2 || B", 0), ("(A + 1) * 2 == 6", 1),
                                        ("UNKNOWN", 0), ("defined A", 1)])
def test_if_expressions(expr: str, value: int) -> None:
    assert csource.evaluate(expr, {"A": 2}) == value


# ------------------------------------------------------------------ a tree's inventory and bindings

def _pinned() -> source.GgmlSource:
    try:
        return source.pinned()
    except source.SourceError as e:
        pytest.skip(f"the pinned tree is not available here: {e}")


def test_pinned_inventory_and_bindings() -> None:
    src = _pinned()
    inv = tree.of(src)
    assert inv.type_id("bf16") == 30 and inv.type_id("q2_0") == 42 and inv.has("ggml_vec_dot_q2_0_q8_0")
    with pytest.raises(tree.NotInTree, match="q9_9"):
        inv.type_id("q9_9")
    files = bindings.render(src)
    assert "X(GGML_TYPE_Q2_0, ggml_vec_dot_q2_0_q8_0_generic)" in files[bindings.HEADER]
    assert "#define RVVDIFF_HAS_ggml_cpu_get_rvv_vlen 1" in files[bindings.HEADER]
    layouts = re.findall(r'\{"(\w+)"', files["rvvdiff_repack_layouts.inc"])
    assert layouts == ["q4_0_8x8", "q4_0_16x1", "q4_K_16x1", "iq4_nl_16x1", "q8_0_16x1", "q2_K_16x1"]


def _old_tree() -> source.GgmlSource:
    try:
        return source.resolve(OLD_TREE)
    except source.SourceError as e:
        pytest.fail(f"{OLD_TREE} could not be fetched from PyPI: {e}")


def test_an_older_tree_lacks_names_and_its_bindings_leave_them_out() -> None:
    old = _old_tree()
    inv = tree.of(old)
    assert "q1_0" not in inv.types and "q2_0" not in inv.types and "nvfp4" in inv.types
    assert inv.has("ggml_vec_dot_q4_0_q8_0")
    header = bindings.render(old)[bindings.HEADER]
    assert "GGML_TYPE_Q2_0" not in header and "X(GGML_TYPE_Q4_0, ggml_vec_dot_q4_0_q8_0_generic)" in header


def test_an_older_tree_runs_and_skips_what_it_lacks_as_not_in_this_tree() -> None:
    """The real older tree builds, the kernels it has run and pass, the types it lacks are
    skipped with the missing names (never failures or errors)."""
    _old_tree()
    r = pytest_child("cases/test_quant_dot.py::test_vec_dot[q1_0-vlen128-zvfh]",
                     "cases/test_quant_dot.py::test_vec_dot[q4_0-vlen128-zvfh]", "--ggml-src", OLD_TREE,
                     "--vlen", "128", "--isa", "zvfh", "-p", "no:xdist", "-rs", "--max-examples", "5")
    out = r.stdout + r.stderr
    assert re.search(r"SKIPPED \[\d+\] .*not in this tree: GGML_TYPE_Q1_0, ggml_vec_dot_q1_0_q8_0", out), out[-4000:]
    assert re.search(r"\b1 passed, 1 skipped\b", out), out[-4000:]


@pytest.mark.long(3)
def test_the_spacemit_backend_of_an_older_tree_builds_and_its_norms_run() -> None:
    """The older tree's SpacemiT backend (before its 2026-05 rewrite: ime.cpp and ime1_kernels.cpp) is built as its
    era's document builds it (RISCV64_SPACEMIT_IME_SPEC passed, no zba); its norms run, meeting the known failures
    of ime.cpp's code (harness/data/known_failures.toml), and the kernels it lacks are not in this tree."""
    _old_tree()
    r = pytest_child("cases/test_spacemit_ops.py", "--ggml-src", OLD_TREE, "--isa", "spacemit", "--vlen", "256",
                     "--rvv-stress", "both", "-p", "no:xdist", "-rs")
    out = r.stdout + r.stderr
    assert re.search(r"\b1 passed, \d+ skipped, 9 xfailed\b", out), out[-4000:]
    assert "not in this tree: forward_binary" in out, out[-4000:]


# ------------------------------------------------------------------ uncovered: a tree with a new kernel

NEW_VEC_DOT = """
#if defined(__riscv_v)
void ggml_vec_dot_q9_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx,
                            const void * GGML_RESTRICT vy, size_t by, int nrc) {
    size_t vl = __riscv_vsetvl_e8m1(n);
    *s = (float) vl;
}
#endif
"""

NEW_VEC_OP = """
#if defined(__riscv_v_intrinsic)
inline static void ggml_vec_twice_f32(const int n, float * y) {
    for (int i = 0, avl; i < n; i += avl) {
        avl = __riscv_vsetvl_e32m8(n - i);
        __riscv_vse32_v_f32m8(&y[i], __riscv_vfadd_vv_f32m8(__riscv_vle32_v_f32m8(&y[i], avl),
                                                            __riscv_vle32_v_f32m8(&y[i], avl), avl), avl);
    }
}
#endif
"""


def test_a_kernel_added_to_a_tree_is_uncovered_by_name_and_line(tmp_path: Path) -> None:
    """A tree whose quants.c gains an RVV vec_dot of a type rvvdiff does not know, and whose vec.h
    gains an RVV function no test covers: the coverage scans name both with file:line (the test
    cases/test_coverage.py then fails), and the pinned tree itself has nothing uncovered."""
    import shutil

    from cases import families

    src = _pinned()
    for s in families.scans(tree.of(src)):
        assert not s.uncovered, (s.family, s.uncovered)
    root = tmp_path / "ggml"
    shutil.copytree(src.ggml, root, ignore=shutil.ignore_patterns("ggml-cuda", "ggml-vulkan", "ggml-sycl",
                                                                  "ggml-metal", "ggml-opencl", "ggml-cann"))
    quants = root / "src/ggml-cpu/arch/riscv/quants.c"
    quants.write_text(quants.read_text() + NEW_VEC_DOT)
    vec_h = root / "src/ggml-cpu/vec.h"
    text = vec_h.read_text()
    at = text.rindex("#ifdef __cplusplus")  # before the closing extern "C" block
    vec_h.write_text(text[:at] + NEW_VEC_OP + text[at:])
    found = {s.family: s for s in families.scans(tree.of(source.resolve(root)))}
    dots = {u.name: u.where for u in found["quant_dot"].uncovered}
    assert list(dots) == ["ggml_vec_dot_q9_0_q8_0"], found["quant_dot"]
    assert dots["ggml_vec_dot_q9_0_q8_0"].endswith(f"arch/riscv/quants.c:{quants.read_text().count(chr(10)) - 5}")
    ops = [u.name for u in found["vec_ops"].uncovered]
    assert ops == ["ggml_vec_twice_f32"], found["vec_ops"]


def test_a_scan_that_breaks_is_reported_as_broken_not_as_covered(monkeypatch: pytest.MonkeyPatch) -> None:
    from cases import coverage, families

    def broken(inv: tree.Tree) -> coverage.Scan:
        raise ValueError("cannot read")

    families.scans(tree.of(_pinned()))  # registers the families
    monkeypatch.setitem(coverage._SCANS, "quant_dot", broken)
    found = {s.family: s for s in families.scans(tree.of(_pinned()))}
    assert found["quant_dot"].error == "the quant_dot scan failed: ValueError: cannot read"
    assert not found["vec_ops"].error
