"""``rvvdiff fixes``: every finding has a patch and a report, a patch's standing on a tree is told
right (applies, already in, no longer applies; llama.cpp and ggml layouts), and the check tells a
real fix from one that fixes nothing and from one that breaks the kernel another way.

The end-to-end checks use a planted bug as the "finding": the tree is the mutant
``vec_dot_f16_drops_tail`` (tests/test_planted_bug.py builds it too) and the fix is the mutant
reversed, so they run on any machine in a few minutes at one VLEN and ISA build.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from launch import rvvdiff

from costs import registry
from harness.commands import fixes
from harness.core.config import SPIKE_VLENS
from harness.core.matrix import DEFAULT_ISAS, Matrix, vlens_on
from harness.cost.tables import fix_cost
from harness.ggml import fix_catalogue, known, mutants, patches, source
from harness.jobs import cost_suite_runs, fix_checks, fix_cost_runs

ROOT = Path(__file__).resolve().parent.parent
HEADER_KEYS = ("rvvdiff fix", "finding", "functions", "tests", "cost", "wrong-vlens", "vector-path")
#: The short report of a fix (at most REPORT_LINES lines), for ggml's maintainers; the long analysis is
#: docs/findings/<fix>.md, the upstream issue docs/upstream/<fix>/issue.md (rvvdiff report --upstream).
REPORT_SECTIONS = ("**Affected.**", "**Root cause.**", "**Who hits it.**", "**Fix.**", "## Patch", "## Evidence")
REPORT_LINES = 80
MUTANT = "vec_dot_f16_drops_tail"
SELECTION = ["--vlen", "128", "--isa", "zvfh", "--rvv-stress", "off", "-k", "test_vec_dot and f16 and not unroll"]


# ------------------------------------------------------------------ the catalogue


def test_every_finding_of_the_pinned_tree_has_a_fix_and_every_fix_a_finding() -> None:
    cat = fix_catalogue.catalogue()
    entries = known.load()
    pinned = [e for e in entries if not e.seen_in]
    assert pinned, "known_failures.toml lost its findings"
    lacking = [f"#{e.number} {e.test}" for e in pinned if not e.fix and not e.fix_pending]
    assert not lacking, f"findings of the pinned tree without a fix (or fix_pending, why not yet) = ...: {lacking}"
    unknown = sorted({e.fix for e in entries if e.fix and e.fix not in cat})
    assert not unknown, f"entries name fixes that fixes/ lacks: {unknown}"
    orphans = [n for n in cat if not any(e.fix == n for e in entries)]
    assert not orphans, f"fixes no known-failure entry names: {orphans}"


@pytest.mark.parametrize("name", sorted(fix_catalogue.catalogue()))
def test_each_fix_applies_to_the_pinned_tree_and_has_its_report(name: str) -> None:
    f = fix_catalogue.catalogue()[name]
    missing = [k for k in HEADER_KEYS if not f.meta.get(k)]
    assert not missing, f"{f.patch}: header lacks {missing}"
    assert f.files and all(p.startswith("ggml/") for p in f.files), f"{f.patch}: paths are llama.cpp paths (ggml/...)"
    for fn in (x.strip() for x in f.meta["functions"].split(",")):
        assert re.search(rf"^[+-].*\b{re.escape(fn)}\b|^@@.*\b{re.escape(fn)}\b|\b{re.escape(fn)}\b", f.text, re.M), fn
    assert f.cost_isas and set(f.cost_isas) <= set(DEFAULT_ISAS), f"{f.patch}: cost names ISA builds: {f.cost_isas}"
    wrong = [v.strip() for v in f.meta["wrong-vlens"].split(",")]
    assert wrong == ["all"] or set(wrong) <= {str(v) for v in SPIKE_VLENS}, f"{f.patch}: wrong-vlens: {wrong}"
    assert set(f.cost_with) <= set(fix_catalogue.catalogue()) - {name}, f"{f.patch}: cost-with names no other fix"
    assert set(f.check_with) <= set(fix_catalogue.catalogue()) - {name}, f"{f.patch}: check-with names no other fix"
    s = fix_catalogue.standing(f, source.pinned())
    assert s.state == "applies", s.describe()
    assert all("does not apply" not in e for e in s.entries), s.entries  # the finding is in the pinned tree
    text = f.report.read_text()
    absent = [h for h in REPORT_SECTIONS if h not in text]
    assert not absent, f"{f.report}: lacks {absent}"
    assert len(text.splitlines()) <= REPORT_LINES, f"{f.report}: {len(text.splitlines())} lines"
    cause = re.search(r"^\*\*Root cause\.\*\*(.+?)(?:\n\s*\n)", text, re.M | re.S)
    assert cause and len(cause.group(0).strip().splitlines()) <= 5, f"{f.report}: root cause in more than five lines"
    assert f"harness/data/fixes/{name}.patch" in text, f"{f.report}: does not name its patch"
    added = [ln for ln in f.text.splitlines() if ln.startswith("+") and not ln.startswith("+++") and ln[1:].strip()]
    assert any(ln in text for ln in added), f"{f.report}: shows none of the patch's lines"
    for ref in (f"docs/findings/{name}.md", f"docs/upstream/{name}/issue.md"):
        assert ref in text and (ROOT / ref).is_file(), f"{f.report}: {ref} is not named, or missing"


# ------------------------------------------------------------------ standing on a tree


def _reversed(m: mutants.Mutant, tree: source.GgmlSource, to: Path, *, header: str, edit=None) -> Path:
    """The fix of a mutant: the diff from the mutant tree back to the pinned one (``edit`` alters
    the fixed text first: a bad fix)."""
    pinned = source.pinned()
    body = []
    for rel in m.files:
        new = (pinned.root / rel).read_text()
        fixed = to.parent / "fixed.c"
        fixed.write_text(edit(new) if edit else new)
        cp = subprocess.run(["diff", "-u", "--label", f"a/{rel}", "--label", f"b/{rel}", str(tree.root / rel), str(fixed)],
                            capture_output=True, text=True)
        assert cp.returncode == 1, cp.stderr
        body.append(cp.stdout)
    to.write_text(header + "\n" + "".join(body))
    return to


HEADER = ("rvvdiff fix: {title}\nfinding: planted ({mutant})\nfunctions: ggml_vec_dot_f16\n"
          "tests: cases/test_vec_dot.py::test_vec_dot*[[]f16-*\ncost: zvfh\nwrong-vlens: all\nvector-path: kept\n")


@pytest.fixture(scope="module")
def mutant_tree() -> source.GgmlSource:
    return mutants.apply(mutants.get(MUTANT), source.pinned())


@pytest.fixture()
def fix_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutant_tree: source.GgmlSource) -> Path:
    d = tmp_path / "fixes"
    d.mkdir()
    monkeypatch.setenv("RVVDIFF_FIXES_DIR", str(d))
    _reversed(mutants.get(MUTANT), mutant_tree, d / "f16_tail.patch",
              header=HEADER.format(title="f16 keeps its tail", mutant=MUTANT))
    return d


def test_standing_applies_already_in_or_no_longer_applies(fix_dir: Path, mutant_tree: source.GgmlSource, tmp_path: Path) -> None:
    f = fix_catalogue.select(["f16_tail"])[0]
    assert fix_catalogue.standing(f, mutant_tree).state == "applies"
    assert fix_catalogue.standing(f, source.pinned()).state == "applied"
    moved = tmp_path / "moved"
    subprocess.run(["cp", "-al", str(mutant_tree.root), str(moved)], check=True)
    for rel in f.files:  # the lines the patch touches were rewritten upstream
        p = moved / rel
        text = p.read_text()
        p.unlink()
        minus = [ln[1:] for ln in f.text.splitlines() if ln.startswith("-") and not ln.startswith("---")]
        for ln in minus:
            text = text.replace(ln, ln.replace(" i ", " k ").replace("i +", "k +") + " // rewritten", 1)
        p.write_text(text)
    s = fix_catalogue.standing(f, source.resolve(moved))
    assert s.state == "conflict" and "no longer applies" in s.describe(), s.describe()
    assert "changed or are gone" in s.detail  # no entry names this planted fix


def test_a_ggml_repository_takes_the_same_patch_one_level_up(fix_dir: Path, mutant_tree: source.GgmlSource,
                                                           tmp_path: Path) -> None:
    repo = tmp_path / "ggml"
    subprocess.run(["cp", "-al", str(mutant_tree.ggml), str(repo)], check=True)
    tree = source.resolve(repo)
    assert tree.root == tree.ggml and patches.strip(tree) == 2
    f = fix_catalogue.select(["f16_tail"])[0]
    assert fix_catalogue.standing(f, tree).state == "applies"
    fixed = patches.apply([f], tree, "fix")
    rel = f.files[0]
    assert patches.tree_path(fixed, rel).read_text() == (source.pinned().root / rel).read_text()
    assert (mutant_tree.root / rel).read_text() != (source.pinned().root / rel).read_text()  # the source is untouched
    assert fix_catalogue.standing(f, fixed).state == "applied"


def test_fixes_together_leave_out_the_ones_that_do_not_apply(fix_dir: Path, mutant_tree: source.GgmlSource) -> None:
    other = mutants.get("quant_q4_0_drops_odd_block")
    _reversed(other, mutants.apply(other, source.pinned()), fix_dir / "q4_0_block.patch",
              header=HEADER.format(title="q4_0 keeps its block", mutant=other.name))
    tree, ok, left = fix_checks.combined(fix_catalogue.select([]), mutant_tree)
    assert [f.name for f in ok] == ["f16_tail"] and [f.name for f in left] == ["q4_0_block"]
    assert fix_catalogue.standing(ok[0], tree).state == "applied"


def test_unknown_fix_is_a_clear_error(fix_dir: Path) -> None:
    with pytest.raises(KeyError, match="no fix 'nope'; known: f16_tail"):
        fix_catalogue.select(["nope"])


def test_check_with_applies_the_named_fixes_to_both_trees(fix_dir: Path, mutant_tree: source.GgmlSource,
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A header's ``check-with``: two findings whose tests each show both bugs are checked each on the tree
    with the other's fix (BASE), HEAD adding its own.  The gate itself is stubbed: which trees it gets."""
    (fix_dir / "other.patch").write_text(HEADER.format(title="other", mutant=MUTANT).replace(
        "vector-path: kept\n", "vector-path: kept\ncheck-with: f16_tail\n") + "\n--- a/ggml/x\n+++ b/ggml/x\n")
    fix = fix_catalogue.select(["other"])[0]
    assert fix.check_with == ["f16_tail"]
    applied: list[list[str]] = []

    def apply(ps, src, kind, name=None):
        applied.append([p.name for p in ps])
        return source.GgmlSource(src.root / "+".join(p.name for p in ps), src.ggml, src.label, src.commit)

    seen: dict[str, str] = {}

    def gate(head, base, label, *args, **kwargs):
        seen.update(head=str(head), base=base, label=label)
        return SimpleNamespace(of=lambda kind: [], uncovered=[], changes=[], seconds={}, runs={})

    monkeypatch.setattr(fix_checks.patches, "apply", apply)
    monkeypatch.setattr(fix_checks.gate_runs, "gate", gate)
    monkeypatch.setattr(fix_checks, "write_gate", lambda v, out: None)
    c = fix_checks.verify(fix, mutant_tree, tmp_path / "out", Matrix(), [], full=False, workers="1")
    assert applied == [["f16_tail"], ["f16_tail", "other"]]
    assert seen["base"].endswith("/f16_tail") and seen["head"].endswith("/f16_tail+other")
    assert "(both with f16_tail)" in seen["label"] and c["with"] == ["f16_tail"]


# ------------------------------------------------------------------ the check, end to end


def _check(fix_dir: Path, tree: source.GgmlSource, out: Path, *extra: str) -> tuple[int, dict]:
    cp = rvvdiff("fixes", "check", "--ggml-src", tree.root, "--out", out, "--workers", "1", *extra, *SELECTION,
                 code=None, timeout=3600, env={"RVVDIFF_FIXES_DIR": str(fix_dir)})
    data = json.loads((out / "fixes.json").read_text()) if (out / "fixes.json").is_file() else {}
    assert data, cp.stdout[-3000:] + cp.stderr[-3000:]
    return cp.returncode, data


@pytest.mark.long(7)
def test_check_verifies_the_fix_names_the_finding_fixed_and_measures_its_cost(
        fix_dir: Path, mutant_tree: source.GgmlSource, tmp_path: Path) -> None:
    code, data = _check(fix_dir, mutant_tree, tmp_path / "out")
    c = data["checks"]["f16_tail"]
    assert c["result"] == "verified", c
    assert "cases/test_vec_dot.py::test_vec_dot[f16-vlen128-zvfh]" in c["fixed"]
    assert c["changes"] == ["ggml_vec_dot_f16"]
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "**verified**" in summary
    if not any(case.function == "ggml_vec_dot_f16" for case in registry.CASES):  # the cost suite lacks the kernel
        assert code == 3 and "no case of the cost suite" in data["cost_errors"]["f16_tail"], data["cost_errors"]
        return
    assert code == 0, data.get("cost_errors")
    rows = data["cost"]["f16_tail"]["rows"]
    # Spike at the selection's VLEN and build, every cost case reaching ggml_vec_dot_f16 on both trees (the
    # planted bug's loop happens to retire more instructions than the fix's); the header's wrong-vlens is
    # "all", so nothing is listed as costlier where the replaced code was right
    assert rows and all(r["vlen"] == 128 and r["isa"] == "zvfh" and r["fixed"] > 0 and r["replaced"] > 0 for r in rows)
    assert {"vec_dot-f16-n4096", "vec_dot-f16-n4109"} <= {r["case"] for r in rows}
    assert all(r["fixed_over_replaced"] == round(r["fixed"] / r["replaced"], 4) and r["replaced_wrong"] for r in rows)
    assert any(r["fixed"] != r["replaced"] for r in rows if r["function"] == "ggml_vec_dot_f16")
    assert not data["cost"]["f16_tail"]["costlier_where_right"]
    assert "fixed / replaced" in summary and "## Cost" in summary


def test_check_fails_a_fix_that_breaks_the_kernel_another_way(fix_dir: Path, mutant_tree: source.GgmlSource,
                                                              tmp_path: Path) -> None:
    (fix_dir / "f16_tail.patch").unlink()
    _reversed(mutants.get(MUTANT), mutant_tree, fix_dir / "f16_bad.patch",
              header=HEADER.format(title="f16 fixed wrong", mutant=MUTANT),
              edit=lambda text: text.replace("vsum = __riscv_vfwmacc_vv_f32m2_tu(vsum, ax, ay, vl);",
                                             "vsum = __riscv_vfwnmsac_vv_f32m2_tu(vsum, ax, ay, vl);"))
    assert "+                vsum = __riscv_vfwnmsac_vv_f32m2_tu" in (fix_dir / "f16_bad.patch").read_text()
    code, data = _check(fix_dir, mutant_tree, tmp_path / "out", "--no-cost")
    c = data["checks"]["f16_bad"]
    assert code == 1 and c["result"] == "failed", c
    assert any(p.startswith(("regression", "finding test still fails")) for p in c["problems"]), c["problems"]


@pytest.mark.long(5)
def test_check_does_not_verify_a_fix_that_fixes_nothing(fix_dir: Path, mutant_tree: source.GgmlSource,
                                                        tmp_path: Path) -> None:
    """A change in the buggy function that keeps the bug: the finding's tests still fail."""
    m = mutants.get(MUTANT)
    (fix_dir / "f16_tail.patch").unlink()
    rel = m.files[0]
    buggy = (mutant_tree.root / rel).read_text()
    fixed = tmp_path / "same.c"
    fixed.write_text(buggy.replace("int vl = __riscv_vsetvlmax_e32m2();", "long vl = __riscv_vsetvlmax_e32m2();"))
    assert fixed.read_text() != buggy
    cp = subprocess.run(["diff", "-u", "--label", f"a/{rel}", "--label", f"b/{rel}", str(mutant_tree.root / rel), str(fixed)],
                        capture_output=True, text=True)
    (fix_dir / "f16_noop.patch").write_text(HEADER.format(title="nothing", mutant=MUTANT) + "\n" + cp.stdout)
    code, data = _check(fix_dir, mutant_tree, tmp_path / "out", "--no-cost")
    c = data["checks"]["f16_noop"]
    assert code == 1 and c["result"] == "failed", c
    assert any(p.startswith("finding test still fails") for p in c["problems"]), c["problems"]


# ------------------------------------------------------------------ the cost step, on made-up measurements


def test_cost_compares_fixed_with_replaced_and_twin_and_lists_costlier_where_the_code_was_right(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``fixes cost`` on canned ``rvvdiff cost`` output: the ratios, the twin run, the VLENs where a fix
    may cost more (its ``wrong-vlens``) and where it may not."""
    patch = tmp_path / "t_fix.patch"
    patch.write_text("rvvdiff fix: t\nfinding: none\nfunctions: ggml_vec_dot_t\ntests: x\ncost: v, zvfh\n"
                     "wrong-vlens: 512\ncost-k: quant_dot\nvector-path: kept\n\n--- a/ggml/x\n+++ b/ggml/x\n")
    fix = fix_catalogue.Fix("t_fix", patch)
    calls: list[cost_suite_runs.Options] = []

    def row(case: str, vlen: int, instret: int, twin: str | None) -> dict:
        return {"case": case, "function": "ggml_vec_dot_t" + ("_generic" if twin is None else ""), "vlen": vlen,
                "isa": "zvfh", "instret": instret, "twin": twin, "impl": "rvv" if twin else "generic"}

    def fake_cost(run: cost_suite_runs.Options) -> int:
        calls.append(run)
        run.out.mkdir(parents=True)
        if not run.changed_only:  # the twins, on the patched tree
            head, base = [row("t-k4096-generic", v, 4000, None) for v in (256, 512)], []
        else:
            head = [row("t-k4096", 256, 1010, "t-k4096-generic"), row("t-k4096", 512, 2000, "t-k4096-generic")]
            base = [row("t-k4096", 256, 1000, "t-k4096-generic"), row("t-k4096", 512, 1000, "t-k4096-generic")]
        (run.out / "cost.json").write_text(json.dumps({"head": head, "base": base, "unmeasured": {}, "seconds": 2.0}))
        return 0

    monkeypatch.setattr(cost_suite_runs, "measure", fake_cost)
    monkeypatch.setattr(fix_cost_runs.patches, "apply", lambda ps, src, kind, name=None: src)
    c = fix_cost_runs.cost(fix, source.pinned(), tmp_path / "out", "2", vlens=(256, 512), isas=("zvfh", "zvfbfwma"), k="t")
    assert calls[0].matrix.isa_builds == ("zvfh",) and calls[0].changed_only and calls[0].base
    assert calls[0].k == "(quant_dot) and (t)"
    assert calls[1].k == "t-k4096-generic" and not calls[1].base
    assert c["commands"][0] == (f"rvvdiff cost --vlen 256,512 --isa zvfh --ggml-src {source.pinned().root} "
                                f"--base {source.pinned().root} --changed-only -n 2 -k '(quant_dot) and (t)' "
                                f"--out {tmp_path / 'out' / 'cost'}")
    by = {r["vlen"]: r for r in c["rows"]}
    assert by[256]["fixed_over_replaced"] == 1.01 and by[256]["fixed_over_twin"] == round(1010 / 4000, 4)
    assert by[512]["fixed_over_replaced"] == 2.0 and by[512]["replaced_wrong"] and not by[256]["replaced_wrong"]
    assert c["costlier_where_right"] == ["t-k4096 at VLEN 256, zvfh: x1.010 (1000 -> 1010 instructions)"]
    md = "\n".join(fix_cost.cost_md("t_fix", c))
    assert "| fixed / replaced | 1.010 | 2.000 |" in md and "VLEN 512*" in md and "costlier than the replaced" in md
    with pytest.raises(fix_cost_runs.CostStepError, match="not in the selection"):
        fix_cost_runs.cost(fix, source.pinned(), tmp_path / "out2", "2", vlens=(256,), isas=("zvfbfwma",))

    def nothing(run: cost_suite_runs.Options) -> int:  # rvvdiff cost's selection holds no case: said before any run
        raise cost_suite_runs.CostSelectionError("no case of the cost suite (costs/) reaches the change between BASE and "
                                            "HEAD (--vlen 256): nothing to measure")
    monkeypatch.setattr(cost_suite_runs, "measure", nothing)
    with pytest.raises(fix_cost_runs.CostStepError, match=r"^t_fix \(ggml_vec_dot_t; zvfh\): no case of the cost suite "):
        fix_cost_runs.cost(fix, source.pinned(), tmp_path / "out3", "2", vlens=(256,), isas=("zvfh",))


def test_the_command_hands_its_matrix_and_k_to_the_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """--vlen / --isa / --rvv-stress are the matrix's options, parsed once; the cost step measures its VLENs
    (every one Spike runs when none is given) and ISA builds; -k selects the gate's tests or the cost cases."""
    seen: dict = {}
    monkeypatch.setattr(fixes.fix_checks, "run", lambda *a, **kw: seen.update(given=a[4], pytest_args=a[5], **kw) or 0)
    monkeypatch.setattr(fixes, "resolve", lambda tree: tree)
    assert fixes.main(["cost", "-k", "x", "--vlen", "128,4096", "--isa", "zvfh", "--rvv-stress", "off"]) == 0
    assert (seen["given"].vlens, seen["given"].isa_builds, seen["given"].stress) == ((128, 4096), ("zvfh",), (False,))
    assert seen["k"] == "x" and seen["pytest_args"] == ["-k", "x"]
    assert fixes.main(["cost"]) == 0 and vlens_on("spike", seen["given"].vlens) == SPIKE_VLENS
