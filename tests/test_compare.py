"""harness/check/compare.py's element-wise bound check: every element within its own bound, the
worst one named and checked, and how many exceed their bound (and what share) when it fails."""

from __future__ import annotations

import numpy as np
import pytest

from harness.check.compare import assert_all_within

KW = {"context": "ctx", "derivation": "gamma(k+1) sum|ab|"}


def test_all_within_returns_the_worst_ratio() -> None:
    got = np.array([[1.0, 2.0], [3.0, 4.5]], np.float32)
    expected = np.array([[1.0, 2.0], [3.0, 4.0]])
    bound = np.array([[0.0, 1.0], [1.0, 1.0]])
    assert assert_all_within(got, expected, bound, name="C", **KW) == 0.5


def test_equal_infinities_and_nans_are_exact() -> None:
    got = np.array([np.inf, np.nan, 1.0])
    assert assert_all_within(got, got.copy(), np.zeros(3), name="C", **KW) == 0.0


def test_the_worst_element_is_named_with_the_count_and_share_beyond() -> None:
    got = np.array([[1.0, 2.5], [3.0, 7.0]], np.float32)
    expected = np.array([[1.0, 2.0], [3.0, 4.0]])
    bound = np.full((2, 2), 0.25)
    with pytest.raises(AssertionError) as e:
        assert_all_within(got, expected, bound, name="C", **KW)
    assert str(e.value) == ("C[1, 1]=7.0, but should be 4.0 within 0.25 [ctx]\n"
                            "  |error|=3 is 12 x the bound (gamma(k+1) sum|ab|)\n"
                            "  2 of 4 elements (50%) beyond their bound")


def test_an_error_where_the_bound_is_zero_fails_even_when_small() -> None:
    got = np.array([0.0, 1e-30, 0.9])
    with pytest.raises(AssertionError, match=r"^C\[1\]=1e-30, but should be 0.0 within 0 \[ctx\]"):
        assert_all_within(got, np.zeros(3), np.array([0.0, 0.0, 1.0]), name="C", **KW)


def test_a_nan_is_beyond_any_bound_and_the_index_is_named_by_the_caller() -> None:
    got = np.zeros((1, 2, 3))
    got[0, 1, 2] = np.nan
    with pytest.raises(AssertionError) as e:
        assert_all_within(got, np.zeros((1, 2, 3)), np.ones((1, 2, 3)), name="out", **KW,
                          index=lambda at: f"query {at[0]}, head {at[1]}, {at[2]}")
    assert str(e.value) == ("out[query 0, head 1, 2]=nan, but should be 0.0 [ctx]\n"
                            "  1 of 6 elements (16.7%) beyond their bound")


def test_a_crashed_call_leaves_the_oracles_value_in_its_failure_report(tmp_path) -> None:
    """note_expected before a kernel call: when the call crashes (no comparison follows), the failure
    report still holds the expected value and its bound, marked as a crash (rvvdiff report --upstream
    writes its trap program from them); a comparison recorded after a call that returns replaces it."""
    from types import SimpleNamespace

    from harness.check import observe
    from harness.check.compare import assert_within_bound, note_expected
    from harness.report.failure import load_case, write_failure

    observe.take_kept()
    observe.keep("comparison", {"stale": True})  # from an earlier call: must not survive the next one
    note_expected(32.0, 0.0, name="f(x, y)", context="ctx", derivation="exact")
    target = SimpleNamespace(vlen=512, isa=SimpleNamespace(name="zvfh", cmake={}, qemu={}), stress=False)
    source = SimpleNamespace(root=tmp_path, label="t", commit="c", version="0")
    d = write_failure(tmp_path / "r", nodeid="t::crash", longrepr="crashed", kept=observe.take_kept(),
                      target=target, source=source, replay="pytest t")
    case = load_case(d)
    assert case.data["comparison"]["crashed"] is True and case.data["comparison"]["name"] == "f(x, y)"
    assert float(case.arrays["expected"]) == 32.0 and float(case.arrays["bound"]) == 0.0 and "got" not in case.arrays

    note_expected(32.0, 1.0, **KW, name="f(x, y)")
    assert_within_bound(32.5, 32.0, 1.0, name="f(x, y)", **KW)
    d = write_failure(tmp_path / "r2", nodeid="t::ok", longrepr="", kept=observe.take_kept(), target=target,
                      source=source, replay="pytest t")
    assert "crashed" not in load_case(d).data["comparison"] and float(load_case(d).arrays["got"]) == 32.5
