"""harness/check/compare.py's messages, pinned: the bitwise and ULP checks on arrays of any shape and
element type (1-byte integers, float16, bfloat16), numpy.testing's summary (mismatch count, largest
absolute / relative / ULP differences, index tuples), NaNs; the element-wise bound check (every element
within its own bound, the worst one named and checked, and how many exceed their bound when it fails)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from harness.check import compare
from harness.check.compare import assert_all_within, assert_bitwise_equal, assert_within_ulps

KW = {"context": "ctx", "derivation": "gamma(k+1) sum|ab|"}


def _message(check, *args, **kwargs) -> str:
    with pytest.raises(AssertionError) as e:
        check(*args, **kwargs)
    return str(e.value)


def test_a_2d_mismatch_is_reported_by_index_tuples() -> None:
    """A (3, 4) float32 result: the summary and the elements name [row, column] (flat indices used
    to index past the end: IndexError)."""
    expected = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = expected.copy()
    got[2, 3], got[0, 1] = 12.0, 1.5
    assert _message(assert_bitwise_equal, got, expected, name="C", context="ctx") == (
        "C: not bit for bit equal [ctx]\n"
        "  Mismatched elements: 2 / 12 (16.7%)\n"
        "  Max absolute difference among violations: 1 at [2, 3]\n"
        "  Max relative difference among violations: 0.5 at [0, 1]\n"
        "  Max ULP difference among violations: 4194304 at [0, 1]\n"
        "  [0, 1] C=1.5 (0x3fc00000), but should be 1.0 (0x3f800000)\n"
        "  [2, 3] C=12.0 (0x41400000), but should be 11.0 (0x41300000)")


def test_beyond_the_elements_shown_the_next_indices_are_listed() -> None:
    got = np.zeros((2, 3, 4), np.float32)
    expected = np.ones((2, 3, 4), np.float32)
    message = _message(assert_bitwise_equal, got, expected, name="Y", context="ctx", show=2)
    assert message.splitlines()[1:2] == ["  Mismatched elements: 24 / 24 (100%)"]
    assert message.splitlines()[-3:] == [
        "  [0, 0, 0] Y=0.0 (0x00000000), but should be 1.0 (0x3f800000)",
        "  [0, 0, 1] Y=0.0 (0x00000000), but should be 1.0 (0x3f800000)",
        "  ... and 22 more, at [0, 0, 2], [0, 0, 3], [0, 1, 0], [0, 1, 1], [0, 1, 2], [0, 1, 3], [0, 2, 0], "
        "[0, 2, 1], [0, 2, 2], [0, 2, 3] ..."]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_one_byte_elements_compare_as_they_are(dtype) -> None:
    """Quants (int8) and raw block bytes (uint8) need no widening; integers have no ULP line."""
    expected = np.array([[1, 2, 3], [4, 5, 6]], dtype)
    got = expected.copy()
    got[1, 0] = 2
    assert _message(assert_bitwise_equal, got, expected, name="qs", context="ctx") == (
        "qs: not bit for bit equal [ctx]\n"
        "  Mismatched elements: 1 / 6 (16.7%)\n"
        "  Max absolute difference among violations: 2 at [1, 0]\n"
        "  Max relative difference among violations: 0.5 at [1, 0]\n"
        "  [1, 0] qs=2, but should be 4")
    assert_bitwise_equal(expected, expected.copy(), name="qs", context="ctx")


def test_an_integer_difference_is_exact_across_the_whole_range() -> None:
    got, expected = np.array([-128], np.int8), np.array([127], np.int8)
    assert "Max absolute difference among violations: 255 at [0]" in _message(
        assert_bitwise_equal, got, expected, name="qs", context="ctx")


@pytest.mark.parametrize(("dtype", "bits"), [(np.float16, ("0x4000", "0x4200")), (ml_dtypes.bfloat16, ("0x4000", "0x4040"))])
def test_half_precision_elements_show_their_16_bits(dtype, bits) -> None:
    expected = np.array([[1.0, 3.0]], dtype)
    got = np.array([[1.0, 2.0]], dtype)
    ulps = {np.float16: 512, ml_dtypes.bfloat16: 64}[dtype]
    assert _message(assert_bitwise_equal, got, expected, name="y", context="ctx") == (
        "y: not bit for bit equal [ctx]\n"
        "  Mismatched elements: 1 / 2 (50%)\n"
        "  Max absolute difference among violations: 1 at [0, 1]\n"
        "  Max relative difference among violations: 0.333333 at [0, 1]\n"
        f"  Max ULP difference among violations: {ulps} at [0, 1]\n"
        f"  [0, 1] y=2.0 ({bits[0]}), but should be 3.0 ({bits[1]})")


def test_any_nan_matches_any_nan_and_a_lone_nan_is_counted_apart() -> None:
    quiet, payload = np.array([np.nan], np.float32), np.array([0x7FC00123], np.uint32).view(np.float32)
    assert_bitwise_equal(quiet, payload, name="y", context="ctx")
    got = np.array([np.nan, 2.0, 4.0], np.float32)
    expected = np.array([1.0, 2.0, 5.0], np.float32)
    assert _message(assert_bitwise_equal, got, expected, name="y", context="ctx") == (
        "y: not bit for bit equal [ctx]\n"
        "  Mismatched elements: 2 / 3 (66.7%)\n"
        "  Max absolute difference among violations: 1 at [2]\n"
        "  Max relative difference among violations: 0.2 at [2]\n"
        "  Max ULP difference among violations: 2097152 at [2]\n"
        "  NaN on one side only: 1 of them\n"
        "  [0] y=nan (0x7fc00000), but should be 1.0 (0x3f800000)\n"
        "  [2] y=4.0 (0x40800000), but should be 5.0 (0x40a00000)")


def test_a_signed_zero_differs_by_its_bits_only() -> None:
    message = _message(assert_bitwise_equal, np.array([-0.0], np.float32), np.array([0.0], np.float32), name="y",
                       context="ctx")
    assert "Max ULP difference among violations: 0 at [0]" in message
    assert message.endswith("[0] y=-0.0 (0x80000000), but should be 0.0 (0x00000000)")


def test_shapes_and_element_sizes_must_agree() -> None:
    with pytest.raises(AssertionError, match=r"^y.shape=\(3,\), but should be \(1, 3\) \[ctx\]$"):
        assert_bitwise_equal(np.zeros(3), np.zeros((1, 3)), name="y", context="ctx")
    with pytest.raises(TypeError, match="float32 and float64 elements have different sizes"):
        assert_bitwise_equal(np.zeros(3, np.float32), np.zeros(3), name="y", context="ctx")


def test_inputs_are_shown_beside_the_failing_elements() -> None:
    x = np.array([[0.5, 1.5]], np.float32)
    message = _message(assert_bitwise_equal, np.array([[1, 1]], np.float16), np.array([[0, 2]], np.float16), name="f(x)",
                       context="ctx", inputs=x)
    assert message.splitlines()[-2:] == ["  [0, 0] input 0.5 (0x3f000000): f(x)=1.0 (0x3c00), but should be 0.0 (0x0000)",
                                         "  [0, 1] input 1.5 (0x3fc00000): f(x)=1.0 (0x3c00), but should be 2.0 (0x4000)"]


def test_ulp_errors_are_summarised_and_the_worst_shown_by_index_tuples() -> None:
    """The first elements beyond the bound, then the worst one if not among them, then the rest."""
    got = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    expected = np.array([[1.0, 2.0], [3.0, 4.0]])
    ulps = np.array([[0.0, 3.0], [5.0, 8.0]])
    message = _message(assert_within_ulps, got, expected, ulps, 2.0, name="f(x)", show=1, **KW)
    assert message == ("f(x): elements beyond their ULP bound [ctx]\n"
                       "  bound: gamma(k+1) sum|ab|\n"
                       "  Mismatched elements: 3 / 4 (75%)\n"
                       "  Max absolute difference among violations: 0 at [0, 1]\n"
                       "  Max relative difference among violations: 0 at [0, 1]\n"
                       "  Max ULP difference among violations: 8 at [1, 1]\n"
                       "  [0, 1] f(x)=2.0 (0x40000000), but should be 2.0 within 2 ULP (error 3 ULP)\n"
                       "  [1, 1] f(x)=4.0 (0x40800000), but should be 4.0 within 2 ULP (error 8 ULP)\n"
                       "  ... and 1 more, at [1, 0]")
    assert assert_within_ulps(got, expected, np.ones((2, 2)), np.full((2, 2), 2.0), name="f(x)", **KW) == 0.5


@pytest.mark.parametrize("name", [n for n in compare.__all__ if not isinstance(getattr(compare, n), type)])
def test_every_helper_hides_its_frame_from_the_traceback(name) -> None:
    """A failure opens on the test's line, not inside the helper (the exception class it raises aside)."""
    assert "__tracebackhide__" in getattr(compare, name).__code__.co_varnames


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
    target = SimpleNamespace(vlen=512, isa=SimpleNamespace(name="zvfh", cmake={}, qemu={}), stress=False,
                             compiler="clang")
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
