"""``rvvdiff bisect`` (harness/commands/bisect.py, harness/jobs/bisect_runs.py): reading a failure report,
the verdict of a step from its results.json, the argument errors, the git bisect driving (with stand-in
steps), and one real bisect over a small history made from the pinned ggml with a planted bug in one commit."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.commands import bisect, cli
from harness.core import config
from harness.ggml import mutants, source
from harness.jobs import bisect_failure, bisect_runs

NODE = "cases/test_quant_dot.py::test_vec_dot_exact[q4_0-vlen128-zvfh]"


def _git(repo: Path, *args: str, date: str = "2026-01-01T00:00:00+00:00") -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    env = {k: v for k, v in env.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
    cp = subprocess.run(["git", "-C", str(repo), "-c", "user.name=rvvdiff", "-c", "user.email=rvvdiff@example.invalid",
                         "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, env=env, check=True)
    return cp.stdout.strip()


def _history(repo: Path, n: int) -> list[str]:
    """A repository of ``n`` commits, each writing its number to ``f``; their hashes, oldest first."""
    repo.mkdir()
    _git(repo, "init", "-q")
    out = []
    for i in range(n):
        (repo / "f").write_text(f"{i}\n")
        _git(repo, "add", "f")
        _git(repo, "commit", "-q", "-m", f"commit {i}", date=f"2026-01-{i + 1:02d}T00:00:00+00:00")
        out.append(_git(repo, "rev-parse", "HEAD"))
    return out


def _case(d: Path, replay: str, test: str = NODE) -> Path:
    d.mkdir(parents=True)
    (d / "case.json").write_text(json.dumps({"test": test, "target": {"vlen": 128, "isa": "zvfh", "stress": True},
                                             "replay": replay}))
    return d


# ------------------------------------------------------------------ the failure to replay

def test_a_report_gives_the_test_its_target_and_the_database_the_run_used(tmp_path: Path) -> None:
    d = _case(tmp_path / "r" / "cases" / "x", f"cd /somewhere && pytest '{NODE}' --vlen 128 --isa zvfh --rvv-stress on "
                                              f"-p no:xdist --example-db /data/db --known-failures ignore")
    f = bisect_failure.from_report(d)
    assert (f.nodeid, f.vlen, f.isa, f.stress, f.example_db) == (NODE, 128, "zvfh", True, Path("/data/db"))
    assert f.target_args() == ["--vlen", "128", "--isa", "zvfh", "--rvv-stress", "on"]
    assert bisect_failure.from_report(d / "case.json").nodeid == NODE  # the file itself will do
    assert bisect_failure.from_report(d, tmp_path / "mine").example_db == tmp_path / "mine"  # --example-db wins


def test_without_example_db_the_run_used_its_directorys_hypothesis_database(tmp_path: Path) -> None:
    d = _case(tmp_path / "x", f"cd '/some where' && pytest '{NODE}' --vlen 128 --isa zvfh -p no:xdist")
    assert bisect_failure.from_report(d).example_db == Path("/some where/.hypothesis/examples")


def test_a_directory_without_case_json_is_refused(tmp_path: Path) -> None:
    with pytest.raises(bisect_failure.BisectError, match="no case.json here"):
        bisect_failure.from_report(tmp_path)


def test_a_test_id_names_its_target_and_must_agree_with_the_options() -> None:
    f = bisect_failure.from_test(NODE.replace("zvfh]", "zvfh-stress]"), {})
    assert (f.vlen, f.isa, f.stress) == (128, "zvfh", True)
    asked = {"vlen": 128, "isa": "zvfh"}
    assert bisect_failure.from_test(NODE, asked).example_db == bisect_failure.ROOT / ".hypothesis" / "examples"
    with pytest.raises(bisect_failure.BisectError, match="--vlen 256 disagrees"):
        bisect_failure.from_test(NODE, {"vlen": 256})
    with pytest.raises(bisect_failure.BisectError, match="not the id of a differential test"):
        bisect_failure.from_test("cases/test_quant_dot.py::test_rvv_vec_dot_coverage", {})


# ------------------------------------------------------------------ a step's verdict

def _results(d: Path, *entries: dict) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "results.json").write_text(json.dumps(list(entries)))
    return d


@pytest.mark.parametrize("outcome,reason,expected", [
    ("passed", "", "good"),
    ("failed", "harness/check/compare.py:82: AssertionError", "bad"),
    ("skipped", "not in this tree: no ggml_vec_dot_q4_0_q8_0", "skip"),
    ("skipped", "ISA build zvfh cannot be expressed for this tree", "skip"),
    ("error", "ISA build zvfh of tree failed", "skip"),
    ("xfailed", "known failure", "bad"),
    ("xpassed", "", "good"),
])
def test_results_json_decides_the_verdict(tmp_path: Path, outcome: str, reason: str, expected: str) -> None:
    d = _results(tmp_path, {"nodeid": "other", "outcome": "failed"},
                 {"nodeid": NODE, "outcome": outcome, "reason": reason})
    v = bisect_runs.verdict(d, NODE, 0 if expected == "good" else 1)
    assert (v.verdict, v.outcome) == (expected, outcome)
    if expected == "skip":
        assert reason in v.reason


def test_a_failure_is_described_by_its_reports_assertion(tmp_path: Path) -> None:
    d = _results(tmp_path, {"nodeid": NODE, "outcome": "failed", "reason": "harness/check/compare.py:82: AssertionError"})
    (d / "cases" / "x").mkdir(parents=True)
    (d / "cases" / "x" / "case.json").write_text(json.dumps(
        {"test": NODE, "failure": "    def f():\n>       raise\n"
                                  "E       AssertionError: got 0.0, but should be 36.0\n"}))
    assert bisect_runs.verdict(d, NODE, 1).reason == "AssertionError: got 0.0, but should be 36.0"


def test_no_results_an_uncollected_test_or_a_timeout_is_a_skip(tmp_path: Path) -> None:
    v = bisect_runs.verdict(tmp_path / "none", NODE, 4)
    assert (v.verdict, v.outcome) == ("skip", "no results") and "not in this tree" in v.reason
    assert bisect_runs.verdict(_results(tmp_path / "r", {"nodeid": "other", "outcome": "passed"}), NODE, 0).outcome == \
        "not collected"
    assert bisect_runs.verdict(tmp_path / "r", NODE, None).outcome == "timeout"


# ------------------------------------------------------------------ argument errors

def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = cli.main(["bisect", *argv])
    return rc, capsys.readouterr().err


def test_argument_errors_say_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shas = _history(tmp_path / "repo", 3)
    repo = str(tmp_path / "repo")
    report = _case(tmp_path / "rep", f"cd /x && pytest '{NODE}'")
    cases = [
        ([str(report), "--repo", str(tmp_path / "plain"), "--good", "a", "--bad", "b"], "no such directory"),
        ([str(report), "--repo", str(report), "--good", "a", "--bad", "b"], "not a git checkout"),
        ([str(report), "--repo", repo, "--good", shas[0], "--bad", "no-such-rev"], "unknown revision"),
        ([str(report), "--repo", repo, "--good", shas[2], "--bad", shas[0]], "is not an ancestor of --bad"),
        ([str(report), "--repo", repo, "--good", "HEAD", "--bad", shas[2]], "are the same commit"),
        ([str(tmp_path), "--repo", repo, "--good", shas[0], "--bad", shas[2]], "no case.json here"),
        (["--repo", repo, "--good", shas[0], "--bad", shas[2]], "give a failure report directory or --test"),
        ([str(report), "--test", NODE, "--repo", repo, "--good", shas[0], "--bad", shas[2]], "one of them"),
        ([str(report), "--vlen", "128", "--repo", repo, "--good", shas[0], "--bad", shas[2]], "go with --test"),
    ]
    for argv, message in cases:
        rc, err = _cli(capsys, *argv)
        assert rc == 2 and message in err, (argv, err)


# ------------------------------------------------------------------ driving git bisect (stand-in steps)

def _fake_steps(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shas: list[str], first_bad: int,
                skipped: set[int]) -> list[str]:
    """Replace the pytest run of each step: commit i is bad from ``first_bad`` on, ``skipped`` cannot be tested."""
    tested: list[str] = []
    monkeypatch.setenv("RVVDIFF_CACHE", str(tmp_path / "cache"))  # the lock of a throw-away repository

    def run_step(self: bisect_runs.Bisect, sha: str, role: str) -> bisect_runs.Step:
        i = shas.index(sha)
        v = "skip" if i in skipped else ("bad" if i >= first_bad else "good")
        tested.append(sha)
        self.slot = Path("/slot")
        step = bisect_runs.Step(sha, f"commit {i}", role, v, v, "", 0.0, "")
        self.steps.append(step)
        self.write()
        return step

    monkeypatch.setattr(bisect_runs.Bisect, "run_step", run_step)
    return tested


def _args(tmp_path: Path, good: str, bad: str) -> list[str]:
    return ["--test", NODE, "--repo", str(tmp_path / "repo"), "--good", good, "--bad", bad,
            "--example-db", str(tmp_path / "db"), "--out", str(tmp_path / "out")]


def test_git_bisect_finds_the_first_bad_commit_and_writes_the_steps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    shas = _history(tmp_path / "repo", 12)
    tested = _fake_steps(monkeypatch, tmp_path, shas, first_bad=8, skipped={6})
    assert bisect.main(_args(tmp_path, shas[1], shas[11])) == 0
    out = capsys.readouterr().out
    assert tested[:2] == [shas[11], shas[1]]  # BAD fails and GOOD passes before the search
    assert f"first bad commit after {len(tested)} steps" in out and shas[8] in out and "commit 8" in out
    assert f"checkout -q --detach --force {shas[7]}" in out  # the replay line at its parent
    doc = json.loads((tmp_path / "out" / "bisect.json").read_text())
    assert doc["status"] == "found" and doc["first_bad"]["commit"] == shas[8]
    assert [s["commit"] for s in doc["steps"]] == tested and doc["first_bad"]["ggml_cpu_files"] == []
    assert "skip" in [s["verdict"] for s in doc["steps"]]  # git's first choice, 6: a neighbour instead
    assert "git bisect start" in doc["git_bisect_log"]
    assert not (tmp_path / "repo" / ".git" / "BISECT_LOG").exists()  # the user's repository is only read


def test_skipped_commits_leave_the_candidates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    shas = _history(tmp_path / "repo", 6)
    _fake_steps(monkeypatch, tmp_path, shas, first_bad=3, skipped={2, 3})
    assert bisect.main(_args(tmp_path, shas[0], shas[5])) == 1
    doc = json.loads((tmp_path / "out" / "bisect.json").read_text())
    # 2 and 3 untested, 4 bad: any of them may be the first bad commit
    assert doc["status"] == "skipped" and set(doc["candidates"]) == {shas[2], shas[3], shas[4]}
    assert "could not be tested" in capsys.readouterr().out


@pytest.mark.parametrize("first_bad,message", [(0, "fails as well"), (9, "passes: nothing to bisect")])
def test_the_ends_are_checked_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str], first_bad: int, message: str) -> None:
    shas = _history(tmp_path / "repo", 4)
    tested = _fake_steps(monkeypatch, tmp_path, shas, first_bad=first_bad, skipped=set())
    assert bisect.main(_args(tmp_path, shas[0], shas[3])) == 1
    assert message in capsys.readouterr().err and len(tested) <= 2
    assert json.loads((tmp_path / "out" / "bisect.json").read_text())["status"] == "stopped"


# ------------------------------------------------------------------ one real bisect

HISTORY = 2  # the recipe of the history below: a new number makes a new one


def _planted_history() -> tuple[Path, list[str]]:
    """The pinned tree's ggml as a standalone ggml repository of four commits: the tree, an
    unrelated change, the planted bug quant_q4_0_drops_odd_block, another unrelated change.
    Made once per pinned tree and patch, at a fixed path (so the bisect slot's build stays warm),
    with fixed dates (so the hashes are the same every time)."""
    try:
        pinned = source.pinned()
    except source.SourceError as e:
        pytest.skip(f"the pinned tree is not available here: {e}")
    mutant = mutants.get("quant_q4_0_drops_odd_block")
    tag = hashlib.sha256(f"{HISTORY}{pinned.content_hash()}{mutant.patch.read_text()}".encode()).hexdigest()[:12]
    repo = config.cache_dir() / "tests" / f"bisect-history-{tag}"
    with config.locked(repo.with_suffix(".lock")):
        if not (repo / ".rvvdiff-done").exists():
            shutil.rmtree(repo, ignore_errors=True)
            shutil.copytree(pinned.ggml, repo)
            # A standalone ggml configures its pkg-config file; llama.cpp's copy of ggml has none.
            (repo / "ggml.pc.in").write_text("Name: ggml\nDescription: rvvdiff's bisect test history\n"
                                             "Version: @GGML_VERSION@\n")
            _git(repo, "init", "-q")
            (repo / ".gitignore").write_text(".rvvdiff-done\n")
            _git(repo, "add", "-A")
            _git(repo, "commit", "-q", "-m", "the pinned ggml", date="2026-01-01T00:00:00+00:00")
            (repo / "NOTES").write_text("an unrelated change\n")
            _git(repo, "add", "NOTES")
            _git(repo, "commit", "-q", "-m", "unrelated: notes", date="2026-01-02T00:00:00+00:00")
            bad = mutants.apply(mutant, pinned)
            for rel in mutant.files:  # ggml/src/... in the llama.cpp tree, src/... here
                inner = Path(rel).relative_to("ggml")
                shutil.copyfile(bad.ggml / inner, repo / inner)
            _git(repo, "commit", "-q", "-am", "ggml-cpu: the planted bug", date="2026-01-03T00:00:00+00:00")
            (repo / "NOTES").write_text("another unrelated change\n")
            _git(repo, "commit", "-q", "-am", "unrelated: more notes", date="2026-01-04T00:00:00+00:00")
            (repo / ".rvvdiff-done").write_text("")
    return repo, _git(repo, "log", "--reverse", "--format=%H").split()


def test_a_real_bisect_finds_the_planted_bug(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo, shas = _planted_history()
    other = tmp_path / "db" / "0123456789abcdef" / "fedcba9876543210"  # another test's saved example
    other.parent.mkdir(parents=True)
    other.write_bytes(b"\x00")
    rc = bisect.main(["--test", NODE, "--repo", str(repo), "--good", shas[0], "--bad", shas[3],
                      "--example-db", str(tmp_path / "db"), "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert rc == 0, out
    doc = json.loads((tmp_path / "out" / "bisect.json").read_text())
    assert doc["first_bad"]["commit"] == shas[2], out
    assert doc["first_bad"]["ggml_cpu_files"] == ["src/ggml-cpu/arch/riscv/quants.c"]
    verdicts = {s["commit"]: s["verdict"] for s in doc["steps"]}
    assert verdicts[shas[3]] == "bad" and verdicts[shas[0]] == "good" and verdicts.get(shas[1], "good") == "good"
    assert "should be" in next(s["reason"] for s in doc["steps"] if s["verdict"] == "bad")
    assert other.exists() and (tmp_path / "out" / "example-db" / other.relative_to(tmp_path / "db")).exists()
