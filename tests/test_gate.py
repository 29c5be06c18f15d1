"""The PR gate (harness/commands/gate.py, harness/report/gate_verdict.py, harness/ggml/changes.py,
harness/plugin/budget.py, harness/ggml/gitrev.py).

* the diff: a changed kernel is found by name, file and line; a comment, another
  architecture's branch or a build file is not a changed function;
* the reach: which tests a change reaches (a vec_dot reaches its own tests, the graph tests
  that call it, and no other type's);
* the classification of results into the four lists, on synthetic results;
* ``--changes`` / ``--changed-only`` / ``--plan`` in a real collection;
* the base of a git checkout: a revision, the merge-base, materialised outside the checkout;
* end to end on real builds: a planted regression next to a pre-existing bug of the pinned tree
  (exit 1: regression listed, the bug pre-existing with its known-failures entry), and the same
  pair reversed (exit 0: the fix named, the bug still pre-existing).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT
from launch import pytest_child, rvvdiff

from harness.ggml import changes, gitrev, mutants, source
from harness.report import gate_summary, gate_verdict
from harness.report.ids import slug

SKIP_DIRS = ("ggml-cuda", "ggml-vulkan", "ggml-sycl", "ggml-metal", "ggml-opencl", "ggml-cann", "ggml-hexagon",
             "ggml-musa", "ggml-webgpu", "ggml-zdnn", "ggml-rpc", "ggml-blas", "ggml-hip")


def _copy(tmp_path: Path, name: str = "ggml") -> tuple[source.GgmlSource, Path]:
    src = source.pinned()
    root = tmp_path / name
    shutil.copytree(src.ggml, root, ignore=shutil.ignore_patterns(*SKIP_DIRS))
    return src, root


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def _q4_0_body(root: Path) -> Path:
    return root / "src/ggml-cpu/arch/riscv/quants.c"


def test_diff_finds_changed_kernels_and_ignores_comments_other_arches_and_layout(tmp_path: Path) -> None:
    _, base_root = _copy(tmp_path, "base")
    base = source.resolve(base_root)
    _, head_root = _copy(tmp_path, "head")
    quants = _q4_0_body(head_root)
    text = quants.read_text()
    at = text.index("void ggml_vec_dot_q4_0_q8_0(")
    body = text.index("{", at) + 1
    # a comment and a blank line: no change
    quants.write_text(text[:body] + "\n    // a remark\n\n" + text[body:])
    # another architecture's file: outside the reader, not a changed function
    x86 = head_root / "src/ggml-cpu/arch/x86/quants.c"
    if x86.is_file():
        x86.write_text(x86.read_text() + "\nint rvvdiff_unrelated(void) { return 1; }\n")
    d = changes.diff(base, source.resolve(head_root))
    assert d.changes == [], [c.describe() for c in d.changes]
    if x86.is_file():
        assert "src/ggml-cpu/arch/x86/quants.c" in d.outside
    # a code change in the RVV kernel: changed, RVV, in every ISA build, at its line
    _, head_root = _copy(tmp_path, "head2")  # (a tree's reading is cached per path and content)
    quants = _q4_0_body(head_root)
    text = quants.read_text()
    body = text.index("{", text.index("void ggml_vec_dot_q4_0_q8_0(")) + 1
    quants.write_text(text[:body] + "\n    (void) 0;\n" + text[body:])
    d = changes.diff(base, source.resolve(head_root))
    assert [(c.name, c.what, c.kind, c.rvv) for c in d.changes] == [("ggml_vec_dot_q4_0_q8_0", "function", "changed", True)]
    c = d.changes[0]
    assert c.file == "src/ggml-cpu/arch/riscv/quants.c" and c.builds == ("v", "zvfh", "zvfbfwma")
    assert quants.read_text().split("\n")[c.line - 1].lstrip().startswith("void ggml_vec_dot_q4_0_q8_0(")
    assert changes.Diff.from_json(json.loads(json.dumps(d.to_json()))).changes == d.changes


def test_a_vec_h_change_reaches_its_kernel_and_the_graph_tests_that_call_it(tmp_path: Path) -> None:
    _, base_root = _copy(tmp_path, "base")
    _, head_root = _copy(tmp_path, "head")
    vec_h = head_root / "src/ggml-cpu/vec.h"
    text = vec_h.read_text()
    at = text.index("ggml_vec_mad_f32(")
    body = text.index("{", at) + 1
    vec_h.write_text(text[:body] + "\n    (void) 0;\n" + text[body:])
    head = source.resolve(head_root)
    d = changes.diff(source.resolve(base_root), head)
    assert [c.name for c in d.changes] == ["ggml_vec_mad_f32"] and d.changes[0].rvv
    reach = changes.Reach(head)
    assert reach.covers(["ggml_vec_mad_f32"], d.names) == ["ggml_vec_mad_f32"]
    assert reach.covers(["ggml_vec_dot_q4_0_q8_0", "GGML_TYPE_Q4_0"], d.names) == []
    # the one-chunk flash attention accumulates V rows with ggml_vec_mad_f32: it reaches the
    # change, but through a kernel another test owns, so only the vec_ops test owns it
    fa = ["ggml_flash_attn_ext", "ggml_compute_forward_flash_attn_ext_f16_one_chunk"]
    assert reach.covers(fa, d.names) == ["ggml_vec_mad_f32"]
    kernels = set(reach.roots(["ggml_vec_mad_f32"]))
    assert reach.owns(fa, kernels, d.names) == []
    assert reach.owns(["ggml_vec_mad_f32"], set(reach.roots(fa)), d.names) == ["ggml_vec_mad_f32"]


def test_an_alias_macro_links_a_generic_twin_to_its_name(tmp_path: Path) -> None:
    src = source.pinned()
    reach = changes.Reach(src)
    # every quantized dot's generic twin is reachable from the entry point the tests call
    assert "ggml_vec_dot_q4_0_q8_0_generic" in reach.reachable(reach.roots(["ggml_vec_dot_q4_0_q8_0"]))
    assert reach.roots(["ggml_mul_mat"]) == ("ggml_compute_forward_mul_mat",)


# ------------------------------------------------------------------ classification


def _run(name: str, results: dict[str, tuple[str, str]], cases: dict[str, dict] | None = None,
         tmp: Path = Path("/nonexistent")) -> gate_verdict.Run:
    r = gate_verdict.Run(name, f"/trees/{name}", tmp / name, tmp / f"db-{name}")
    r.results = {n: {"nodeid": n, "outcome": o, "reason": why} for n, (o, why) in results.items()}
    for n, case in (cases or {}).items():
        d = r.report_dir / "cases" / slug(n)
        d.mkdir(parents=True)
        (d / "case.json").write_text(json.dumps(case))
    return r


def _id(kernel: str, vlen: int = 256) -> str:
    return f"cases/test_quant_dot.py::test_vec_dot[{kernel}-vlen{vlen}-zvfh]"


def _bound(name: str) -> dict:
    return {"comparison": {"mode": "bound", "name": name}}


def test_classification_into_the_four_lists(tmp_path: Path) -> None:
    head = _run("head", {
        _id("q4_0"): ("failed", "AssertionError: 3 of 8 elements fail"),        # base passes: regression
        _id("q9_0"): ("failed", "AssertionError: 1 of 1 elements fail"),        # base lacks it: new kernel
        _id("mxfp4"): ("failed", "AssertionError: 1 of 1 elements fail"),       # same comparison: pre-existing
        _id("q6_K"): ("failed", "KernelFailure: kernel crashed (SIGSEGV)"),     # base fails otherwise: regression
        _id("q5_0"): ("passed", ""),                                           # base fails, head passes: fixed
        _id("q8_0"): ("passed", ""),                                           # base fails, replay fails: pre-existing
        _id("q2_K"): ("passed", ""),                                           # passes on both: not listed
        _id("iq2_s"): ("skipped", "not in this tree: ggml_vec_dot_iq2_s_q8_K"),  # absent on head: not listed
    }, {_id("q4_0"): _bound("dot"), _id("q9_0"): _bound("dot"), _id("mxfp4"): _bound("dot mxfp4"),
        _id("q6_K"): {"comparison": None}}, tmp_path)
    base = _run("base", {
        _id("q4_0"): ("passed", ""),
        _id("q9_0"): ("skipped", "not in this tree: GGML_TYPE_Q9_0"),
        _id("mxfp4"): ("failed", "AssertionError: 2 of 5 elements fail"),
        _id("q6_K"): ("failed", "AssertionError: 1 of 1 elements fail"),
        _id("q5_0"): ("failed", "AssertionError: 1 of 1 elements fail"),
        _id("q8_0"): ("failed", "AssertionError: 1 of 1 elements fail"),
        _id("q2_K"): ("passed", ""),
    }, {_id("mxfp4"): _bound("dot mxfp4"), _id("q6_K"): _bound("dot q6_K"), _id("q5_0"): _bound("dot"),
        _id("q8_0"): _bound("dot")}, tmp_path)
    again = _run("head-replay", {_id("q5_0"): ("passed", ""), _id("q8_0"): ("failed", "AssertionError: x")},
                 None, tmp_path)
    lines = gate_verdict.classify(head, base, again, [], [])
    got = {(ln.list, ln.kernel) for ln in lines}
    assert got == {("regression", "q4_0"), ("new kernel failing", "q9_0"), ("pre-existing", "mxfp4"),
                   ("regression", "q6_K"), ("fixed", "q5_0"), ("pre-existing", "q8_0")}, got
    # the element a comparison found worst is not part of how it failed
    assert gate_verdict.failure_kind(head.results[_id("mxfp4")], {"comparison": {"mode": "bound", "name": "s[2, 5]"}}) == \
        gate_verdict.failure_kind(base.results[_id("mxfp4")], {"comparison": {"mode": "bound", "name": "s[3, 0]"}})
    reg = next(ln for ln in lines if ln.kernel == "q6_K")
    assert "another way" in reg.why and "KernelFailure" in reg.why
    assert all(set(ln.replay) == {"head", "base"} and "--example-db" in ln.replay["head"] for ln in lines)
    assert next(ln for ln in lines if ln.kernel == "q4_0").vlen == 256


def test_a_build_error_on_head_is_a_regression_and_base_that_cannot_build_means_new() -> None:
    head = _run("head", {_id("q4_0"): ("error", "BuildError: ..."), _id("q8_0"): ("failed", "AssertionError: x")})
    base = _run("base", {_id("q4_0"): ("passed", ""),
                         _id("q8_0"): ("skipped", "ISA build zvfh of t failed: see the first test")})
    lines = {ln.kernel: ln for ln in gate_verdict.classify(head, base, None, [], [])}
    assert lines["q4_0"].list == "regression" and "build" in lines["q4_0"].why
    assert lines["q8_0"].list == "new kernel failing" and "cannot run" in lines["q8_0"].why
    # BASE's build error next to a wrong result on HEAD (the test that happened to carry the error)
    head = _run("head", {_id("q4_0"): ("failed", "AssertionError: x"), _id("q5_0"): ("passed", ""),
                         _id("q6_K"): ("error", "BuildError: y")})
    base = _run("base", {_id("q4_0"): ("error", "BuildError: ..."), _id("q5_0"): ("error", "BuildError: ..."),
                         _id("q6_K"): ("error", "BuildError: z")})
    again = _run("head-replay", {_id("q5_0"): ("passed", "")})
    lines = {ln.kernel: ln.list for ln in gate_verdict.classify(head, base, again, [], [])}
    assert lines == {"q4_0": "new kernel failing", "q5_0": "fixed", "q6_K": "pre-existing"}, lines
    # the build itself: broken on BASE, built on HEAD (its tests ran there): one "fixed" line
    v = _id("q4_0").replace("zvfh", "v")
    head = _run("head", {v: ("failed", "AssertionError: x")})
    base = _run("base", {v: ("error", "building ISA build 'v' of t failed (log): first error: vec.h:1: error: x")})
    lines = {(ln.list, ln.nodeid) for ln in gate_verdict.classify(head, base, None, [], [])}
    assert lines == {("new kernel failing", v), ("fixed", "ISA build v")}, lines


def test_verdict_blocks_exactly_on_regressions_new_kernels_and_uncovered_changes() -> None:
    def verdict(lists: list[str], uncovered: list[str]) -> gate_verdict.GateVerdict:
        lines = [gate_verdict.Line(k, _id("q4_0"), "test_vec_dot", "q4_0", 256, "zvfh", False, "why", {}) for k in lists]
        return gate_verdict.GateVerdict("h", "b", lines, [], {}, {}, uncovered, [], [], [], {}, {})

    assert not verdict([], []).blocking
    assert not verdict(["pre-existing", "fixed"], []).blocking
    assert verdict(["regression"], []).blocking
    assert verdict(["new kernel failing"], []).blocking
    assert verdict([], ["ggml_vec_dot_q4_0_q8_0"]).blocking
    md = gate_summary.summary_md(verdict(["fixed"], []))
    assert md.index("## Regressions") < md.index("## New kernels") < md.index("## Pre-existing") < md.index("## Fixed")


# ------------------------------------------------------------------ budgets in a real collection


def test_changes_select_and_budget_the_tests_that_reach_them(tmp_path: Path) -> None:
    diff = changes.Diff("b", "h", [changes.Change("ggml_vec_dot_q4_0_q8_0", "function", "changed",
                                                  "src/ggml-cpu/arch/riscv/quants.c", 1, True, ("zvfh",)),
                                   changes.Change("ggml_vec_nothing_tests", "function", "added",
                                                  "src/ggml-cpu/vec.h", 1, True, ("zvfh",))])
    f = tmp_path / "changes.json"
    f.write_text(json.dumps(diff.to_json()))
    cp = pytest_child("cases/test_quant_dot.py", "cases/test_vec_dot.py", "cases/test_flash_attn.py", "--collect-only",
                      "-q", "--vlen", "128",
                      "--isa", "zvfh", "--changes", str(f), "--changed-only", "--report-dir", str(tmp_path / "r"),
                      "-k", "not exact")
    ids = [ln for ln in cp.stdout.splitlines() if "::" in ln]
    assert ids and all("q4_0" in i for i in ids), ids
    assert any("test_flash_attn[chunk-q4_0" in i for i in ids)
    cov = json.loads((tmp_path / "r" / "covers.json").read_text())
    # coverage is the whole collection's, before -k narrowed it
    assert any("test_vec_dot_exact[q4_0" in n for n in cov["covers"])
    # the quantized-dot tests own the change; flash attention with q4_0 K reaches it through them
    assert set(cov["owns"]) == {n for n in cov["covers"] if "test_quant_dot" in n}
    assert cov["uncovered"] == ["ggml_vec_nothing_tests"]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"tests": {"cases/test_vec_dot.py::test_vec_dot[f32-vlen128-zvfh]": "replay"}}))
    cp = pytest_child("cases/test_vec_dot.py", "--collect-only", "-q", "--vlen", "128", "--isa", "zvfh",
                      "--plan", str(plan), "--report-dir", str(tmp_path / "r2"), code=None)
    assert [ln for ln in cp.stdout.splitlines() if "::" in ln] == ["cases/test_vec_dot.py::test_vec_dot[f32-vlen128-zvfh]"]
    plan.write_text(json.dumps({"tests": {"x": "lavish"}}))
    cp = pytest_child("cases/test_vec_dot.py", "--collect-only", "-q", "--plan", str(plan), code=None)
    assert cp.returncode != 0 and "unknown budget" in cp.stderr + cp.stdout


# ------------------------------------------------------------------ BASE from git


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}).stdout.strip()


def test_base_is_a_revision_or_the_merge_base_materialised_outside_the_checkout(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RVVDIFF_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GITHUB_BASE_REF", raising=False)
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "master")
    (repo / "f.c").write_text("int a;\n")
    _git(repo, "add", "f.c")
    _git(repo, "commit", "-qm", "one")
    first = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-qb", "feature")
    (repo / "f.c").write_text("int b;\n")
    _git(repo, "commit", "-qam", "two")
    path, how = gitrev.resolve_base(repo, None, None)
    assert "merge-base of HEAD with master" in how and (Path(path) / "f.c").read_text() == "int a;\n"
    assert not Path(path).is_relative_to(repo) and _git(repo, "worktree", "list").count("\n") == 0
    path2, how2 = gitrev.resolve_base(repo, "feature", None)
    assert path2 == path and (Path(path) / "f.c").read_text() == "int b;\n"  # the slot is reused
    with pytest.raises(gitrev.RevisionError, match="neither a directory nor a revision"):
        gitrev.resolve_base(repo, "no-such-rev", None)
    with pytest.raises(gitrev.RevisionError, match="not a git checkout"):
        gitrev.resolve_base(tmp_path / "cache", None, None)
    assert gitrev.commit(repo, "master") == first


# ------------------------------------------------------------------ end to end


SELECT = ["--vlen", "128", "--isa", "zvfh", "--rvv-stress", "off", "-n", "2",
          "-k", "test_vec_dot_exact and (q4_0 or mxfp4)"]


def _gate(head: Path, base: Path, out: Path) -> tuple[int, dict]:
    # --no-cost: the cost step is tested on fabricated rows (tests/test_gate_cost.py), not under Spike here
    cp = rvvdiff("gate", head, "--base", base, "--out", out, *SELECT, "--no-cost", code=None, timeout=1800)
    assert (out / "gate" / "gate.json").is_file(), cp.stdout[-4000:] + cp.stderr[-4000:]
    return cp.returncode, json.loads((out / "gate" / "gate.json").read_text())


def _lists(v: dict) -> set[tuple[str, str]]:
    return {(ln["list"], ln["kernel"]) for ln in v["lines"]}


def test_planted_regression_blocks_and_the_pinned_bug_is_pre_existing(tmp_path: Path) -> None:
    pinned = source.pinned()
    broken = mutants.apply(mutants.get("quant_q4_0_drops_odd_block"), pinned)
    code, v = _gate(broken.root, pinned.root, tmp_path / "out")
    assert code == 1 and v["blocking"]
    assert _lists(v) == {("regression", "q4_0"), ("pre-existing", "mxfp4")}, v["lines"]
    pre = next(ln for ln in v["lines"] if ln["kernel"] == "mxfp4")
    assert pre["known"] and "mxfp4" in pre["known"][0]
    assert [c["name"] for c in v["changes"]] == ["ggml_vec_dot_q4_0_q8_0"] and not v["uncovered"]
    assert "regression: 1" in (tmp_path / "out/gate/summary.md").read_text()


def test_planted_fix_passes_and_is_named(tmp_path: Path) -> None:
    pinned = source.pinned()
    broken = mutants.apply(mutants.get("quant_q4_0_drops_odd_block"), pinned)
    code, v = _gate(pinned.root, broken.root, tmp_path / "out")
    assert code == 0 and not v["blocking"]
    assert _lists(v) == {("fixed", "q4_0"), ("pre-existing", "mxfp4")}, v["lines"]
    fixed = next(ln for ln in v["lines"] if ln["list"] == "fixed")
    assert "BASE's example included" in fixed["why"]


def test_the_github_workflow_runs_the_gate_against_the_merge_base() -> None:
    """ci/github/rvvdiff.yml: full history for the merge-base, the gate per VLEN x ISA x compiler shard, the
    reports uploaded, one verdict job; the options it passes are ones the gate accepts."""
    yaml = pytest.importorskip("yaml")  # PyYAML comes with gguf
    wf = yaml.safe_load((ROOT / "ci/github/rvvdiff.yml").read_text())
    job = wf["jobs"]["rvvdiff"]
    assert job["strategy"]["matrix"] == {"vlen": [128, 256, 512, 1024], "isa": ["v", "zvfh", "zvfbfwma", "spacemit"],
                                         "cc": ["clang", "gcc14"], "exclude": [{"isa": "zvfbfwma", "cc": "gcc14"},
                                                                               {"isa": "spacemit", "cc": "gcc14"}]}
    steps = {s.get("name", ""): s for s in job["steps"]}
    head = next(s for s in job["steps"] if s.get("with", {}).get("path") == "llama.cpp")
    assert head["with"]["fetch-depth"] == 0
    run = next(s["run"] for n, s in steps.items() if n.startswith("rvvdiff gate"))
    assert run.startswith("rvvdiff/ci/gate.sh llama.cpp ")
    args = run.split()[2:]
    assert args == ["--lines-defer", "--vlen", "${{", "matrix.vlen", "}}", "--isa", "${{", "matrix.isa", "}}",
                    "--cc", "${{", "matrix.cc", "}}"]
    lines = wf["jobs"]["lines"]
    assert lines["needs"] == "rvvdiff" and any("linegate merge" in st.get("run", "") for st in lines["steps"])
    uploaded = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    assert "rvvdiff/reports/gate" in uploaded["with"]["path"]
    assert wf["jobs"]["verdict"]["needs"] == ["rvvdiff", "lines"]


def test_a_change_whose_tests_never_ran_to_a_verdict_is_uncovered() -> None:
    cov = {"changes": [{"name": "ggml_vec_dot_q1_0_q8_0", "rvv": True, "kind": "added"},
                       {"name": "ggml_vec_dot_q4_0_q8_0", "rvv": True, "kind": "changed"},
                       {"name": "ggml_compute_forward_foo", "rvv": False, "kind": "changed"}],
           "covers": {_id("q1_0"): ["ggml_vec_dot_q1_0_q8_0"], _id("q1_0", 512): ["ggml_vec_dot_q1_0_q8_0"],
                      _id("q4_0"): ["ggml_vec_dot_q4_0_q8_0"], _id("x"): ["ggml_compute_forward_foo"]}}
    results = {_id("q1_0"): {"outcome": "error"}, _id("q1_0", 512): {"outcome": "skipped"},
               _id("q4_0"): {"outcome": "failed"}, _id("x"): {"outcome": "skipped"}}
    assert gate_verdict.untested(cov, results) == ["ggml_vec_dot_q1_0_q8_0"]
    # deselected (not in the results at all): not this rule's business
    assert gate_verdict.untested(cov, {_id("q4_0"): {"outcome": "passed"}}) == []


# ------------------------------------------------------------------ --lines (harness/report/linegate.py)

def test_changed_lines_no_target_executed_are_listed_by_function(tmp_path: Path) -> None:
    from harness.ggml.source import GgmlSource
    from harness.report import linegate
    from harness.report.coverage import TargetLines

    def tree(name: str, body: list[str]) -> GgmlSource:
        f = tmp_path / name / "ggml" / "src" / "ggml-cpu" / "arch" / "riscv" / "quants.c"
        f.parent.mkdir(parents=True)
        f.write_text("\n".join(body) + "\n")
        return GgmlSource(tmp_path / name, tmp_path / name / "ggml", name, name)

    base = tree("base", ["int f(int n) {", "    return n;", "}", "// end"])
    head = tree("head", ["int f(int n) {", "    if (n > 4096) n = 0;  // new", "    return n + 1;", "}",
                         "// a comment", "// end"])
    changed = linegate.changed_lines(base, head)
    assert changed == {"ggml-cpu/arch/riscv/quants.c": {2, 3, 5}}
    src = str(head.ggml / "src" / "ggml-cpu" / "arch" / "riscv" / "quants.c")
    t = TargetLines("vlen128-zvfh", 128, "zvfh", False, {(src, 1, "f"), (src, 2, "f"), (src, 3, "f")},
                    {(src, 1, "f"), (src, 3, "f")})
    v = linegate.judge(changed, [t])
    assert [x[:2] for x in v.uncovered] == [("ggml-cpu/arch/riscv/quants.c", 2)]
    assert [x[:2] for x in v.covered] == [("ggml-cpu/arch/riscv/quants.c", 3)]
    assert v.not_compiled == [("ggml-cpu/arch/riscv/quants.c", 5)]  # a comment: no target has code for it
    assert v.describe() == ["ggml-cpu/arch/riscv/quants.c:2 (f)"] and v.describe(("f",)) == []
    # another target executing line 2 covers it
    t2 = TargetLines("vlen1024-zvfh", 1024, "zvfh", False, {(src, 2, "f")}, {(src, 2, "f")})
    assert linegate.judge(changed, [t, t2]).uncovered == []


def test_lines_are_judged_over_the_union_of_the_shards(tmp_path: Path) -> None:
    """A line one shard compiles but does not run, and another shard runs, is covered; a line every shard that
    compiles it leaves unrun blocks; the merge CLI exits 1 on it and 0 once its function is allowed."""
    import json as _json

    from harness.commands import cli
    from harness.report import linegate

    q = "ggml-cpu/arch/riscv/quants.c"
    s128 = {"targets": 1, "covered": [[q, 10, "f"]], "uncovered": [[q, 20, "f_vl1024"], [q, 30, "g"]],
            "not_compiled": [[q, 40]]}
    s1024 = {"targets": 1, "covered": [[q, 10, "f"], [q, 20, "f_vl1024"]], "uncovered": [[q, 30, "g"]],
             "not_compiled": [[q, 40]]}
    v = linegate.merge([s128, s1024])
    assert [x[1] for x in v.covered] == [10, 20] and v.uncovered == [(q, 30, "g")] and v.not_compiled == [(q, 40)]
    for i, rec in enumerate((s128, s1024)):
        (tmp_path / f"shard{i}" / "head" / "coverage").mkdir(parents=True)
        (tmp_path / f"shard{i}" / "head" / "coverage" / "gate-lines.json").write_text(_json.dumps(rec))
    assert cli.main(["linegate", "merge", str(tmp_path)]) == 1
    assert cli.main(["linegate", "merge", str(tmp_path), "--allow-uncovered", "g"]) == 0
    assert cli.main(["linegate", "merge", str(tmp_path / "none")]) == 2


def test_a_spacemit_change_is_read_and_selects_the_spacemit_tests_that_own_it(tmp_path: Path) -> None:
    """ggml-cpu/spacemit/ is read like the other RVV sources: a changed kernel there is an RVV change, and the
    SpacemiT family's tests whose kernel it is own it (the PR gate runs them at the thorough budget)."""
    _, base_root = _copy(tmp_path, "base")
    _, head_root = _copy(tmp_path, "head")
    kernels = head_root / "src/ggml-cpu/spacemit/rvv_kernels.cpp"
    text = kernels.read_text()
    body = text.index("{", text.index("void forward_rms_norm_f32(")) + 1
    kernels.write_text(text[:body] + "\n    (void) 0;\n" + text[body:])
    d = changes.diff(source.resolve(base_root), source.resolve(head_root))
    assert [(c.name, c.file, c.rvv) for c in d.changes] == [
        ("forward_rms_norm_f32", "src/ggml-cpu/spacemit/rvv_kernels.cpp", True)]
    f = tmp_path / "changes.json"
    f.write_text(json.dumps(d.to_json()))
    cp = pytest_child("cases/test_spacemit_ops.py", "cases/test_vec_ops.py", "--collect-only", "-q", "--vlen", "256",
                      "--isa", "zvfh,spacemit", "--changes", str(f), "--changed-only", "--report-dir", str(tmp_path / "r"))
    ids = [ln for ln in cp.stdout.splitlines() if "::" in ln]
    assert ids and all("rms_norm" in i and "spacemit" in i for i in ids), ids
    cov = json.loads((tmp_path / "r" / "covers.json").read_text())
    assert set(cov["owns"]) == set(ids) and cov["uncovered"] == []
