"""The pytest plugin as a user meets it: options, usage errors, test ids, crashes inside a session."""

from __future__ import annotations

import pytest
from helpers import CRASHING, run_diff_test
from launch import Code, Run, pytest_in

from harness.check import observe
from harness.plugin import session, targets


def run(pytester: pytest.Pytester, *args: str, code: Code = 0) -> Run:
    return run_diff_test(pytester, *args, code=code)


@pytest.mark.parametrize("option, message", [
    (["--vlen", "300"], "--vlen '300': '300' is not allowed; use 'all' or a comma list of "
                        "128, 256, 512, 1024, 2048, 4096 (VLENs rvvdiff can emulate: 2048 and 4096 on Spike only)"),
    (["--vlen", "128,abc"], "'abc' is not allowed"),
    (["--isa", "zve32f"], "--isa 'zve32f': 'zve32f' is not allowed; use 'all' or a comma list of v, zvfh, "
                          "zvfbfwma, spacemit, rv64gc, riscv64_v, riscv64_v_zvfh (ISA builds; 'all' is v, zvfh, "
                          "zvfbfwma, spacemit)"),
    (["--rvv-stress", "sometimes"], "--rvv-stress 'sometimes': use off, on or both"),
    (["--max-examples", "0"], "--max-examples '0': expected a positive number"),
])
def test_bad_options_are_usage_errors(pytester: pytest.Pytester, option: list[str], message: str) -> None:
    r = run(pytester, *option, code=pytest.ExitCode.USAGE_ERROR)
    assert message in r.stderr


def test_missing_tree_is_a_usage_error(pytester: pytest.Pytester) -> None:
    r = run(pytester, "--ggml-src", "/nonexistent/llama.cpp", code=pytest.ExitCode.USAGE_ERROR)
    assert "--ggml-src /nonexistent/llama.cpp: no such directory" in r.stderr


def test_tree_without_rvv_sources_is_a_usage_error(pytester: pytest.Pytester) -> None:
    tree = pytester.mkdir("old-llama")
    (tree / "ggml" / "src" / "ggml-cpu").mkdir(parents=True)
    (tree / "CMakeLists.txt").write_text("")
    r = run(pytester, "--ggml-src", str(tree), code=pytest.ExitCode.USAGE_ERROR)
    assert "this tree has no RISC-V Vector sources" in r.stderr


def test_ids_name_vlen_and_isa_build(pytester: pytest.Pytester) -> None:
    r = run(pytester, "--vlen", "128,1024", "--isa", "zvfh,v", "--rvv-stress", "both", "--collect-only", "-q")
    out = r.stdout
    for vlen in (128, 1024):
        for isa in ("zvfh", "v"):
            assert f"test_dot[vlen{vlen}-{isa}]" in out
            assert f"test_dot[vlen{vlen}-{isa}-stress]" in out
    assert "8 tests collected" in out


def test_header_and_summary(pytester: pytest.Pytester) -> None:
    r = run(pytester, "--vlen", "256", "--isa", "zvfh")
    r.assert_outcomes(passed=1)
    out = r.stdout
    assert "rvvdiff: ggml source: pinned llama.cpp" in out and "commit 0c1e570" in out
    assert "rvvdiff: emulator: " in out and "zvfbfwma" in out
    assert "rvvdiff: compiler: zig" in out
    assert "1 differential tests, 1 kernel calls" in out


@pytest.mark.parametrize("options, examples", [([], 25), (["--thorough"], 200), (["--thorough", "--max-examples", "7"], 7)])
def test_example_budget(pytester: pytest.Pytester, options: list[str], examples: int) -> None:
    pytester.makepyfile(test_budget=f"""
from hypothesis import settings

def test_budget():
    assert settings().max_examples == {examples}
""")
    r = pytest_in(pytester, "--vlen", "128", "--isa", "zvfh", *options)
    r.assert_outcomes(passed=1)
    assert f"examples per test: {examples}" in r.stdout



def test_crash_and_hang_fail_their_case_and_the_session_goes_on(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_crash=CRASHING)
    r = pytest_in(pytester, "--vlen", "512", "--isa", "zvfh", "--kernel-timeout", "3", code=1)
    r.assert_outcomes(failed=2, passed=1)
    out = r.stdout
    assert "selftest_segv: the kernel crashed with SIGSEGV" in out
    assert "selftest_hang did not finish within 3 s and was killed" in out


def test_known_failure_entry_that_matches_nothing_warns(pytester: pytest.Pytester, monkeypatch) -> None:
    known = pytester.path / "known.toml"
    known.write_text('[[known]]\ntest = "*::test_nothing_like_this*"\nggml = ["*"]\nreason = "r"\nreproducer = "x"\n')
    monkeypatch.setenv("RVVDIFF_KNOWN_FAILURES", str(known))
    r = run(pytester, "--vlen", "128", "--isa", "zvfh")  # a narrow selection: no verdict on entries
    assert "matched no collected test" not in r.stdout
    r = run(pytester, "--vlen", "all", "--isa", "all", "--rvv-stress", "both", "--collect-only")
    assert "known failure '*::test_nothing_like_this*' matched no collected test" in r.stdout


def test_known_failure_is_a_strict_xfail(pytester: pytest.Pytester, monkeypatch) -> None:
    pytester.makepyfile(test_kf="""
def test_known(target):
    assert False, "the listed bug"
def test_fixed(target):
    pass
""")
    known = pytester.path / "known.toml"
    known.write_text('[[known]]\ntest = "*::test_known*"\nggml = ["0c1e570"]\nreason = "bug A"\nreproducer = "x"\n'
                     '[[known]]\ntest = "*::test_fixed*"\nggml = ["ggml-0.25.3"]\nreason = "bug B"\nreproducer = "y"\n')
    monkeypatch.setenv("RVVDIFF_KNOWN_FAILURES", str(known))
    r = pytest_in(pytester, "--vlen", "128", "--isa", "zvfh", "-rxX", code=1)
    r.assert_outcomes(xfailed=1, failed=1)  # a listed failure that passes fails the run (strict)
    assert "known failure: bug A" in r.stdout


@pytest.mark.parametrize("entry, other", [("gcc14", "clang"), ("clang", "gcc14")])
def test_a_one_compiler_entry_never_marks_another_compilers_run(pytester: pytest.Pytester, monkeypatch,
                                                                entry: str, other: str) -> None:
    """Known failures are keyed by the full target, compiler included: an entry of one compiler marks that
    compiler's tests only, in a run of it alone (ids name no compiler) and in a run of both (ids do)."""
    pytester.makepyfile(test_kf="""
def test_known(target):
    assert False, "the listed bug"
""")
    known = pytester.path / "known.toml"
    known.write_text(f'[[known]]\ntest = "*::test_known*"\nggml = ["*"]\nreason = "bug A"\nreproducer = "x"\n'
                     f'compiler = "{entry}"\n')
    monkeypatch.setenv("RVVDIFF_KNOWN_FAILURES", str(known))
    base = ("--vlen", "128", "--isa", "zvfh", "-rxX")
    pytest_in(pytester, *base, "--cc", other, code=1).assert_outcomes(failed=1)
    pytest_in(pytester, *base, "--cc", entry).assert_outcomes(xfailed=1)
    r = pytest_in(pytester, *base, "--cc", f"{other},{entry}", code=1)
    r.assert_outcomes(xfailed=1, failed=1)
    assert f"XFAIL test_kf.py::test_known[vlen128-zvfh-{entry}]" in r.stdout


def test_a_run_has_one_session_registered_in_its_stash_and_current_until_it_ends(
        pytester: pytest.Pytester, request: pytest.FixtureRequest) -> None:
    """The plugin's state is one object per run (harness/plugin/session.py): registered as a plugin,
    reached through config.stash, the session of the differential tests (targets.session()) and the
    owner of the observation comparisons write to; an inner run (pytester, in this process) ends with
    the outer one current again."""
    outer = session.of(request.config)
    assert targets.session() is outer and observe.current() is outer.observation
    config = pytester.parseconfigure("--vlen", "128", "--isa", "zvfh")
    inner = session.of(config)
    assert inner is not outer and config.pluginmanager.get_plugin(session.NAME) is inner
    assert targets.session() is inner and observe.current() is inner.observation
    assert inner.live_limit is None  # not an xdist worker under target scheduling
    config._ensure_unconfigure()
    assert targets.session() is outer and observe.current() is outer.observation
