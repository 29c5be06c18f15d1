"""Known failures follow the bug: an entry applies to a tree by its function's fingerprint (or the
tree named by ``ggml``), checked on a small synthetic tree; the real list is current on the pinned
tree."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.core import config
from harness.core.matrix import DEFAULT_ISAS
from harness.ggml import known, source
from harness.ggml.source import GgmlSource
from harness.ggml.tree import of as inventory

VEC_H = """\
#pragma once
#if defined(__riscv_v_intrinsic)
#define TOY_SIMD
#endif
"""

VEC_CPP = """\
#include "vec.h"

// the toy kernel: the RVV branch is read, the others are not
void toy_dot(int n, float * s, const float * x, const float * y) {
#if defined(TOY_SIMD)
    float sum = 0;  // RVV path
    for (int i = 0; i < n; ++i) {
        sum += x[i] * y[i];
    }
    *s = sum;
#else
    *s = 0;
#endif
}

static void toy_helper(int n) {
    (void) n;
}
"""


def make_tree(root: Path, vec_cpp: str = VEC_CPP) -> GgmlSource:
    cpu = root / "src" / "ggml-cpu"
    (cpu / "arch" / "riscv").mkdir(parents=True, exist_ok=True)
    (root / "include").mkdir(exist_ok=True)
    (root / "include" / "ggml.h").write_text("#pragma once\n")
    (root / "CMakeLists.txt").write_text(
        "set(GGML_VERSION_MAJOR 0)\nset(GGML_VERSION_MINOR 9)\nset(GGML_VERSION_PATCH 4)\n")
    for rel in ("arch/riscv/quants.c", "arch/riscv/repack.cpp"):
        (cpu / rel).write_text("\n")
    (cpu / "vec.h").write_text(VEC_H)
    (cpu / "vec.cpp").write_text(vec_cpp)
    return GgmlSource(root, root, "synthetic tree", "abc1234def")


def entry(**fields: object) -> str:
    lines = ["[[known]]"]
    base = {"test": "*::test_toy*", "reason": "toy bug", "reproducer": "pytest -k toy"}
    for k, v in {**base, **fields}.items():
        if isinstance(v, list):
            lines.append(f"{k} = [" + ", ".join(f'"{x}"' for x in v) + "]")
        else:
            lines.append(f'{k} = "{v}"')
    return "\n".join(lines) + "\n"


def load(tmp_path: Path, *entries: str) -> list[known.Known]:
    p = tmp_path / "known.toml"
    p.write_text("\n".join(entries))
    return known.load(p)


@pytest.fixture
def tree(tmp_path: Path) -> GgmlSource:
    return make_tree(tmp_path / "ggml")


def toy_entry(tree: GgmlSource, **more: object) -> str:
    fp = known.fingerprint(tree, "src/ggml-cpu/vec.cpp", "toy_dot")
    assert fp is not None and len(fp) == 16
    return entry(function="toy_dot", file="src/ggml-cpu/vec.cpp", fingerprint=[fp], **more)


def edit(tree: GgmlSource, old: str, new: str) -> None:
    p = tree.ggml / "src" / "ggml-cpu" / "vec.cpp"
    text = p.read_text()
    assert old in text
    before = p.stat().st_mtime_ns
    p.write_text(text.replace(old, new))
    # Files are read again when their mtime changes; an edit within the clock's tick must count too.
    os.utime(p, ns=(before + 10**9, before + 10**9))


def test_entry_applies_when_the_fingerprint_matches(tree: GgmlSource, tmp_path: Path) -> None:
    (k,) = load(tmp_path, toy_entry(tree))
    v = k.judge(tree)
    assert v.applies and v.state == "fingerprint"
    assert [(s.name, s.known) for s in v.functions] == [("toy_dot", True)]


def test_entry_does_not_apply_once_the_function_changed(tree: GgmlSource, tmp_path: Path) -> None:
    (k,) = load(tmp_path, toy_entry(tree))
    edit(tree, "sum += x[i] * y[i];", "sum += x[i] * y[i] * 2;")
    v = k.judge(tree)
    assert not v.applies and v.state == "changed"
    assert "toy_dot changed" in v.why


@pytest.mark.parametrize("old, new", [
    ("// RVV path", "// the RVV path, reworded"),                         # a comment
    ("    float sum = 0;", "\n\n        float   sum =  0;"),              # whitespace
    ("    *s = 0;", "    *s = -1; /* another architecture's code */"),   # a branch RVV does not compile
    ("    (void) n;", "    (void) n; (void) 0;"),                         # another function
])
def test_entry_still_applies_after_changes_that_are_not_the_rvv_code(tree: GgmlSource, tmp_path: Path,
                                                                      old: str, new: str) -> None:
    (k,) = load(tmp_path, toy_entry(tree))
    edit(tree, old, new)
    assert k.judge(tree).state == "fingerprint"


def test_the_rvv_branch_is_read_through_the_header_that_enables_it(tree: GgmlSource) -> None:
    # vec.h defines TOY_SIMD in an RVV build, as simd-mappings.h defines GGML_SIMD: the fingerprint is
    # of the TOY_SIMD branch, so a change there is a change of the function.
    before = known.fingerprint(tree, "src/ggml-cpu/vec.cpp", "toy_dot")
    f = known.definitions(tree.ggml / "src/ggml-cpu/vec.cpp")["toy_dot"]
    assert "sum += x[i] * y[i]" in f.body and "*s = 0" not in f.body
    edit(tree, "float sum = 0;", "float sum = 1;")
    assert known.fingerprint(tree, "src/ggml-cpu/vec.cpp", "toy_dot") != before


def test_several_functions_and_several_versions(tree: GgmlSource, tmp_path: Path) -> None:
    cpu = "src/ggml-cpu/vec.cpp"
    fp_dot, fp_helper = (known.fingerprint(tree, cpu, n) for n in ("toy_dot", "toy_helper"))
    (k,) = load(tmp_path, entry(function=["toy_dot", "toy_helper"], file=[cpu, cpu], fingerprint=[fp_dot, fp_helper]))
    assert k.judge(tree).state == "fingerprint"
    edit(tree, "(void) n;", "(void) n; (void) 1;")
    v = k.judge(tree)
    assert v.state == "changed" and "toy_helper changed" in v.why and "toy_dot" not in v.why
    # The changed helper, listed as a second version with the bug, applies again.
    new = known.fingerprint(tree, cpu, "toy_helper")
    (k,) = load(tmp_path, entry(function=["toy_dot", "toy_helper"], file=cpu, fingerprint=[fp_dot, fp_helper, new]))
    assert k.judge(tree).state == "fingerprint"


def test_trees_named_by_ggml(tree: GgmlSource, tmp_path: Path) -> None:
    for listed, applies in ((["abc12"], True), (["ggml-0.9.4"], True), (["*"], True),
                            (["fff0"], False), (["ggml-0.9.5"], False)):
        (k,) = load(tmp_path, entry(ggml=listed))
        v = k.judge(tree)
        assert v.applies is applies, listed
        assert v.state == ("listed" if applies else "unlisted")
    # A tree named explicitly gets the entry even where the function changed.
    (k,) = load(tmp_path, toy_entry(tree, ggml=["abc1234"]))
    edit(tree, "sum += x[i] * y[i];", "sum -= x[i] * y[i];")
    assert k.judge(tree).state == "listed"


def test_missing_function_or_file_does_not_apply(tree: GgmlSource, tmp_path: Path) -> None:
    fp = known.fingerprint(tree, "src/ggml-cpu/vec.cpp", "toy_dot")
    (gone, other_file, no_file) = load(
        tmp_path,
        entry(function="toy_gone", file="src/ggml-cpu/vec.cpp", fingerprint=[fp]),
        entry(function="toy_dot", file="src/ggml-cpu/vec.h", fingerprint=[fp]),
        entry(function="toy_dot", file="src/ggml-cpu/arch/riscv/nothing.c", fingerprint=[fp]))
    for k, why in ((gone, "toy_gone not in this tree's src/ggml-cpu/vec.cpp"),
                   (other_file, "toy_dot not in this tree's src/ggml-cpu/vec.h"),
                   (no_file, "src/ggml-cpu/arch/riscv/nothing.c not in this tree")):
        v = k.judge(tree)
        assert not v.applies and v.state == "missing" and why in v.why


def test_a_function_the_rvv_build_does_not_compile_is_named_so(tree: GgmlSource, tmp_path: Path) -> None:
    edit(tree, "static void toy_helper", "#if defined(__x86_64__)\nstatic void toy_helper")
    edit(tree, "    (void) n;\n}\n", "    (void) n;\n}\n#endif\n")
    (k,) = load(tmp_path, entry(function="toy_helper", file="src/ggml-cpu/vec.cpp", fingerprint=["0" * 16]))
    v = k.judge(tree)
    assert v.state == "missing" and "not compiled by an RVV" in v.why and "__x86_64__" in v.why


class _Item(SimpleNamespace):
    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.markers.append(marker)


def _config(cc: dict[str, tuple[str, ...]] | None = None) -> SimpleNamespace:
    """A config of a full run (every VLEN, ISA build and stress mode on QEMU) with ``--cc`` ``cc``."""
    full = {"vlen": config.VLENS, "isa": DEFAULT_ISAS, "rvv_stress": (False, True), "emulator": "qemu",
            "cc": cc}
    return SimpleNamespace(getoption=full.__getitem__)


def _target_item(nodeid: str, compiler: str) -> _Item:
    return _Item(nodeid=nodeid, markers=[], callspec=SimpleNamespace(params={"target": SimpleNamespace(compiler=compiler)}))


def test_an_entry_with_a_compiler_marks_only_that_compilers_tests(tree: GgmlSource, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.plugin import marks as plugin

    fp = known.fingerprint(tree, "src/ggml-cpu/vec.cpp", "toy_dot")
    p = tmp_path / "known.toml"
    p.write_text(entry(test="t.py::test_a[[]x-vlen512-zvfh]", function="toy_dot", file="src/ggml-cpu/vec.cpp",
                       fingerprint=[fp], compiler="gcc14")
                 + entry(test="t.py::test_b[[]x-vlen512-zvfh]", function="toy_dot", file="src/ggml-cpu/vec.cpp",
                         fingerprint=[fp], compiler=["clang"]))
    monkeypatch.setenv("RVVDIFF_KNOWN_FAILURES", str(p))
    every = DEFAULT_ISAS
    items = [_target_item(f"t.py::test_{n}[x-vlen512-zvfh-{c}]", c) for n in "ab" for c in ("clang", "gcc14")]
    _, unused = plugin.mark_known_failures(_config({"clang": every, "gcc14": every}), tree, items)  # type: ignore[arg-type]
    # The glob matches the id without its compiler; the entry applies only to its compiler's target.
    assert [len(it.markers) for it in items] == [0, 1, 1, 0]
    assert unused == []
    # A clang-only run: the gcc14 entry neither marks nor is stale, the clang one (matching nothing here) is.
    items = [_target_item("t.py::test_c[x-vlen512-zvfh]", "clang")]
    _, unused = plugin.mark_known_failures(_config({"clang": every}), tree, items)  # type: ignore[arg-type]
    assert [k.test for k in unused] == ["t.py::test_b[[]x-vlen512-zvfh]"]
    # gcc14 limited to zvfh: its entries are not judged stale (its run is not the whole matrix).
    _, unused = plugin.mark_known_failures(_config({"gcc14": ("zvfh",)}), tree, items)  # type: ignore[arg-type]
    assert unused == []


def test_an_entry_of_rvv_code_does_not_mark_the_build_without_vector(tree: GgmlSource, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """rv64gc compiles none of the RVV code: an entry of a function with an RVV branch leaves its tests
    alone there (they are judged afresh); an entry of code without one marks them too."""
    from harness.plugin import marks as plugin

    fps = {f: known.fingerprint(tree, "src/ggml-cpu/vec.cpp", f) for f in ("toy_dot", "toy_helper")}
    assert not known.same_without_vector(tree, "src/ggml-cpu/vec.cpp", "toy_dot")
    assert known.same_without_vector(tree, "src/ggml-cpu/vec.cpp", "toy_helper")
    p = tmp_path / "known.toml"
    p.write_text("".join(entry(test=f"t.py::test_{f}*", function=f, file="src/ggml-cpu/vec.cpp", fingerprint=[fp])
                         for f, fp in fps.items()))
    monkeypatch.setenv("RVVDIFF_KNOWN_FAILURES", str(p))
    items = []
    for isa in (config.ISA_BUILDS["zvfh"], config.NOVECTOR):
        for f in fps:
            target = SimpleNamespace(compiler="gcc14", isa=isa)
            items.append(_Item(nodeid=f"t.py::test_{f}[x-vlen512-{isa.name}]", markers=[],
                               callspec=SimpleNamespace(params={"target": target})))
    plugin.mark_known_failures(_config({"gcc14": tuple(config.ISA_BUILDS)}), tree, items)  # type: ignore[arg-type]
    # zvfh: both entries; rv64gc: only the one of code without an RVV branch
    assert [len(it.markers) for it in items] == [1, 1, 0, 1]


def test_matches_strips_the_compiler_component(tmp_path: Path) -> None:
    p = tmp_path / "known.toml"
    p.write_text(entry(test="t.py::f[[]x-vlen512-zvfh]", ggml=["*"], compiler="gcc14"))
    (k,) = known.load(p)
    assert k.compilers == ("gcc14",)
    # an id of a run of several compilers names its own, whatever the run's
    assert k.matches("t.py::f[x-vlen512-zvfh-gcc14]", "qemu", "clang")
    assert not k.matches("t.py::f[x-vlen512-zvfh-clang]", "qemu", "gcc14")
    # an id of a run of one compiler names none: the run's compiler decides
    assert k.matches("t.py::f[x-vlen512-zvfh]", "qemu", "gcc14") and not k.matches("t.py::f[x-vlen512-zvfh]", "qemu", "clang")
    # no compiler (a test without a build) is not a GCC-only entry's
    assert not k.matches("t.py::f[x-vlen512-zvfh]", "qemu", "")


def test_plugin_marks_only_applicable_entries_and_notes_changed_ones(tree: GgmlSource, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.plugin import marks as plugin

    fp = known.fingerprint(tree, "src/ggml-cpu/vec.cpp", "toy_dot")
    p = tmp_path / "known.toml"
    p.write_text(entry(test="t.py::test_a*", function="toy_dot", file="src/ggml-cpu/vec.cpp", fingerprint=[fp])
                 + entry(test="t.py::test_b*", function="toy_dot", file="src/ggml-cpu/vec.cpp",
                         fingerprint=["0123456789abcdef"])
                 + entry(test="t.py::test_c*", function="toy_gone", file="src/ggml-cpu/vec.cpp", fingerprint=[fp]))
    monkeypatch.setenv("RVVDIFF_KNOWN_FAILURES", str(p))
    cfg = _config()
    items = [_Item(nodeid=f"t.py::test_{n}[x]", markers=[]) for n in "abc"]
    changed, unused = plugin.mark_known_failures(cfg, tree, items)  # type: ignore[arg-type]
    assert [len(it.markers) for it in items] == [1, 0, 0]
    assert items[0].markers[0].kwargs["strict"] is True
    # Neither the changed nor the missing entry is stale; the changed one is noted.
    assert unused == []
    assert [v.entry.test for v in changed] == ["t.py::test_b*"]


@pytest.mark.parametrize("text, message", [
    (entry(function="toy_dot", file="src/ggml-cpu/vec.cpp", fingerprint=["0123456789abcdef"], fingerprints="x"),
     "entry 1 (test = '*::test_toy*'): unknown key 'fingerprints' (did you mean 'fingerprint'?)"),
    ('[[known]]\ntest = "a"\nreason = "r"\nfunction = "f"\nfile = "f.c"\nfingerprint = ["0123456789abcdef"]\n',
     "entry 1 (test = 'a'): lacks reproducer"),
    (entry() + entry(function="toy_dot", file="src/ggml-cpu/vec.cpp", ggml=["*"]),
     "entry 1 (test = '*::test_toy*'): says nowhere which trees"),
    (entry(ggml=["*"]) + entry(function="toy_dot", file="src/ggml-cpu/vec.cpp"),
     "entry 2 (test = '*::test_toy*'): has function, file but lacks fingerprint"),
    (entry(function="toy_dot", file="src/ggml-cpu/vec.cpp", fingerprint=["95D71924"]),
     "fingerprint '95D71924' is not 16 lowercase hex digits"),
    (entry(function=["a", "b"], file=["x.c", "y.c", "z.c"], fingerprint=["0123456789abcdef"]),
     "3 files for 2 functions"),
    (entry(function="a", file="/abs/vec.cpp", fingerprint=["0123456789abcdef"]),
     "file '/abs/vec.cpp' must be a path inside the tree's ggml directory"),
    ('[[known]\ntest = "a"\n', "not valid TOML"),
    ('known = "x"\n', "'known' must be an array of tables"),
    ('[[knwon]]\ntest = "a"\n', "unknown top-level key 'knwon'"),
    (entry(ggml=["*"], compiler="gcc12"), "compiler 'gcc12' is not one of clang, gcc14"),
    (entry(ggml=["*"], compiler=[]), "compiler must be a non-empty string or a list of them"),
])
def test_bad_files_give_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "known.toml"
    p.write_text(text)
    with pytest.raises(known.KnownFailuresError) as e:
        known.load(p)
    assert message in str(e.value) and str(p) in str(e.value)


def test_a_missing_file_named_by_the_environment_is_an_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RVVDIFF_KNOWN_FAILURES", str(tmp_path / "nope.toml"))
    with pytest.raises(known.KnownFailuresError, match="no such known-failures file"):
        known.load()


def test_cli_prints_an_entry_that_applies_and_judges_a_tree(tree: GgmlSource, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from harness.commands import cli

    assert cli.main(["known", "--ggml-src", str(tree.root), "--fingerprint", "src/ggml-cpu/vec.cpp",
                     "toy_dot", "toy_helper"]) == 0
    printed = capsys.readouterr().out
    lines = [line for line in printed.splitlines() if not line.startswith("#")]
    assert lines[0] == 'function = ["toy_dot", "toy_helper"]'
    p = tmp_path / "known.toml"
    p.write_text('[[known]]\ntest = "*"\nreason = "r"\nreproducer = "x"\n' + "\n".join(lines) + "\n")
    (k,) = known.load(p)
    assert k.judge(tree).state == "fingerprint"

    edit(tree, "(void) n;", "(void) n + 1;")
    assert known.main(str(tree.root), None, p) == 0
    out = capsys.readouterr().out
    assert "does not apply: toy_helper changed" in out and "(NOT listed)" in out
    assert "1 entries, 0 apply to this tree: 1 function changed" in out

    assert cli.main(["known", "--ggml-src", str(tree.root), "--fingerprint", "src/ggml-cpu/vec.cpp", "toy_dto"]) == 2
    err = capsys.readouterr().err
    assert "toy_dto not in this tree's src/ggml-cpu/vec.cpp; close names: toy_dot" in err


def _pinned_fetched() -> bool:
    return (config.cache_dir() / "src" / f"llama.cpp-{source.PINNED_COMMIT}" / ".rvvdiff-extracted").exists()


@pytest.mark.skipif(not _pinned_fetched(), reason="the pinned tree is not fetched (`rvvdiff setup` fetches it)")
def test_every_real_entry_applies_to_the_pinned_tree_by_its_fingerprint() -> None:
    """Entries of the pinned tree's findings are current there; those of older trees say where
    the bug was seen (seen_in)."""
    entries = known.load(known.KNOWN_FILE)
    assert entries
    pinned = source.pinned()
    stale = [f"{v.entry.number}. {v.entry.test}: {v.why}" for v in known.judge(entries, pinned)
             if v.state != "fingerprint" and not v.entry.seen_in]
    assert not stale, ("entries of known_failures.toml whose fingerprints are not current on the pinned tree "
                       "(`rvvdiff known` shows them):\n" + "\n".join(stale))
    assert all(k.functions for k in entries), "every entry names its buggy function(s)"


def test_fingerprints_are_read_once_per_file(tree: GgmlSource) -> None:
    path = tree.ggml / "src/ggml-cpu/vec.cpp"
    known.definitions(path)
    hits = known._compiled.cache_info().hits
    for _ in range(3):
        known.fingerprint(tree, "src/ggml-cpu/vec.cpp", "toy_dot")
    assert known._compiled.cache_info().hits == hits + 3


def test_module_docstring_names_the_macros() -> None:
    assert known.FINGERPRINT_BUILD == "zvfbfwma"
    assert known.FINGERPRINT_MACROS["__riscv_zvfbfwma"] == 1 and known.FINGERPRINT_MACROS["__riscv_v"] == 1000000
    assert "widest" in textwrap.dedent(known.__doc__ or "")


def test_an_entry_can_be_limited_to_one_emulator(tree: GgmlSource, tmp_path: Path) -> None:
    """``emulator = "spike"``: a kernel relying on what the specification leaves to the hart fails on
    the emulator that chose the failing side only (misaligned vector accesses trap on Spike)."""
    (k,) = load(tmp_path, toy_entry(tree, emulator="spike"))
    assert k.judge(tree).applies
    assert k.matches("cases/x.py::test_toy[a]", "spike", "clang") and not k.matches("cases/x.py::test_toy[a]", "qemu", "clang")
    (any_emulator,) = load(tmp_path, toy_entry(tree))
    assert any_emulator.matches("cases/x.py::test_toy[a]", "spike", "clang")
    assert any_emulator.matches("cases/x.py::test_toy[a]", "qemu", "gcc14")
    with pytest.raises(known.KnownFailuresError, match='"qemu" or "spike"'):
        load(tmp_path, toy_entry(tree, emulator="gem5"))


def test_a_missing_project_file_is_an_error_not_an_empty_list(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An install without its package data must not run the suite as if nothing were known to fail."""
    monkeypatch.delenv("RVVDIFF_KNOWN_FAILURES", raising=False)
    monkeypatch.setattr(known, "KNOWN_FILE", tmp_path / "known_failures.toml")
    with pytest.raises(known.KnownFailuresError, match="missing from this install.*--known-failures ignore"):
        known.load()


def test_the_project_file_is_package_data() -> None:
    assert known.KNOWN_FILE.is_file() and known.KNOWN_FILE.parent.name == "data", known.KNOWN_FILE


IME_CPP = """\
#include "ime.h"

class tensor_traits_common : public tensor_traits_base {
    void forward_norm_f32(int n, float * y) {
        for (int i = 0; i < n; ++i) {
            y[i] = 0;
        }
    }
};

template <typename B> class tensor_traits : public tensor_traits_base {
  public:
    void forward_mul_mat(int n) { (void) n; }
};
"""


def test_member_functions_get_entries_and_answer_tree_needs(tree: GgmlSource, tmp_path: Path) -> None:
    """SpacemiT's backend before 2026-05 has its norms as members of a class in ime.cpp: a known-failure entry names
    them there (a top-level definition of the name comes first where both exist), and a test's ``tree_needs`` of
    ``file:function`` is answered from that file alone."""
    (tree.cpu_dir / "spacemit").mkdir()
    (tree.cpu_dir / "spacemit" / "ime.cpp").write_text(IME_CPP)
    rel = "src/ggml-cpu/spacemit/ime.cpp"
    fp = known.fingerprint(tree, rel, "forward_norm_f32")
    assert fp is not None and fp != known.fingerprint(tree, rel, "forward_mul_mat")
    (k,) = load(tmp_path, entry(function="forward_norm_f32", file=rel, fingerprint=[fp]))
    assert known.judge([k], tree)[0].applies
    inv = inventory(tree)
    assert inv.has(f"{rel}:forward_mul_mat") and inv.has(rel)
    assert inv.missing([f"{rel}:forward_mul_mat_id", "src/ggml-cpu/spacemit/ime_env.cpp", "toy_dot"]) == \
        [f"{rel}:forward_mul_mat_id", "src/ggml-cpu/spacemit/ime_env.cpp"]
