"""Comparing what a kernel returned with what the oracle expects.

Two kinds of check, named by what they guarantee:

* :func:`assert_bitwise_equal` -- the result must be bit for bit the expected
  one (conversions, integer parts, exact-by-construction inputs).  NaNs match
  any NaN: payloads are not specified by ggml and differ between the RISC-V
  instructions (canonical NaN) and the C reference (payload kept).
* :func:`assert_within_bound` -- ``|got - expected| <= bound`` where the bound
  is derived from the kernel's arithmetic; the observed error is recorded as a
  fraction of the bound, so reports show how close each kernel comes to it.
  :func:`assert_all_within` applies it to every element of an array, each
  with its own bound (a matrix, an attention output).

Messages follow ``name=actual, but should be expected [context]`` and give
the mismatch count, the first indices and the worst element, in the manner
of numpy.testing.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from harness.check import observe

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(_UINT[a.dtype.itemsize])


def _fmt(v: np.generic) -> str:
    if v.dtype.kind == "f" or v.dtype.name == "bfloat16":
        width = v.dtype.itemsize * 2
        return f"{float(v)!r} (0x{int(np.asarray(v).view(_UINT[v.dtype.itemsize])):0{width}x})"
    return repr(v.item())


def assert_bitwise_equal(got: np.ndarray, expected: np.ndarray, *, name: str, context: str,
                         inputs: np.ndarray | None = None, show: int = 5) -> None:
    """Every element of ``got`` has the bits of ``expected`` (any NaN matches any NaN)."""
    if got.shape != expected.shape:
        raise AssertionError(f"{name}.shape={got.shape}, but should be {expected.shape} [{context}]")
    observe.keep("comparison", {"mode": "bitwise", "name": name, "context": context, "got": got, "expected": expected})
    eq = _bits(got) == _bits(expected)
    if got.dtype.kind == "f" or got.dtype.name == "bfloat16":
        with np.errstate(invalid="ignore"):
            g64, e64 = got.astype(np.float64), expected.astype(np.float64)
        eq |= np.isnan(g64) & np.isnan(e64)
    bad = np.flatnonzero(~eq)
    observe.record("mismatches", int(bad.size))
    if bad.size == 0:
        return
    lines = [f"{name}: {bad.size} of {got.size} elements differ (bitwise comparison) [{context}]"]
    for i in bad[:show]:
        src = f"input {_fmt(inputs[i])}: " if inputs is not None else ""
        lines.append(f"  [{i}] {src}{name}={_fmt(got[i])}, but should be {_fmt(expected[i])}")
    if bad.size > show:
        lines.append(f"  ... and {bad.size - show} more (indices {bad[show:show + 10].tolist()}...)")
    raise AssertionError("\n".join(lines))


def note_expected(expected: float, bound: float, *, name: str, context: str, derivation: str) -> None:
    """What the oracle expects of the kernel call about to run, kept for the failure report: a call that
    crashes (a trap only one emulator or one hart raises) then still leaves the expected value and its
    bound (``rvvdiff report --upstream`` writes its program from them).  The comparison recorded after a
    call that returns replaces it."""
    observe.keep("comparison", None)
    observe.keep("oracle", {"mode": "bound", "name": name, "context": context, "expected": np.float64(expected),
                            "bound": float(bound), "derivation": derivation})


def assert_within_bound(got: float, expected: float, bound: float, *, name: str, context: str,
                        derivation: str) -> float:
    """``|got - expected| <= bound``; return and record the ratio error / bound.

    ``expected`` is a float64 oracle value; ``derivation`` names where the
    bound comes from and is part of the failure message.  A NaN on either side
    fails unless both are NaN; infinities must match exactly.
    """
    g, e = float(got), float(expected)
    observe.keep("comparison", {"mode": "bound", "name": name, "context": context, "got": np.asarray(got),
                                "expected": np.float64(e), "bound": float(bound), "derivation": derivation})
    if np.isnan(e) or np.isnan(g) or np.isinf(e) or np.isinf(g):
        if (np.isnan(e) and np.isnan(g)) or g == e:
            observe.record("error/bound", 0.0)
            return 0.0
        raise AssertionError(f"{name}={g!r}, but should be {e!r} [{context}]")
    err = abs(g - e)
    ratio = err / bound if bound > 0 else (0.0 if err == 0 else float("inf"))
    observe.record("error/bound", ratio)
    if err > bound:
        raise AssertionError(
            f"{name}={g!r}, but should be {e!r} within {bound:.6g} [{context}]\n"
            f"  |error|={err:.6g} is {ratio:.3g} x the bound ({derivation})")
    return ratio


def _index(idx: tuple[int, ...]) -> str:
    return ", ".join(map(str, idx))


def assert_all_within(got: np.ndarray, expected: np.ndarray, bound: np.ndarray, *, name: str, context: str,
                      derivation: str, index: Callable[[tuple[int, ...]], str] = _index) -> float:
    """Every element of ``got`` within its own ``bound`` of ``expected`` (arrays of one shape); return
    the worst ratio error / bound.

    The element with the largest error / bound is checked by :func:`assert_within_bound` (so its
    ratio is recorded and its failure message is the one raised), named ``name[index(i, j, ...)]``
    (default ``name[i, j]``).  An element equal to its expected value (both infinite, both NaN) is
    exact; a NaN on one side, or any error where the bound is 0, is infinitely far.  When the worst
    fails, the message adds how many elements exceed their bound and what share of all.
    """
    got, expected, bound = np.asarray(got), np.asarray(expected), np.asarray(bound)
    g, e = got.astype(np.float64), np.asarray(expected, np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        err = np.abs(g - e)
        ratio = np.where(bound > 0, err / np.where(bound > 0, bound, 1.0), np.where(err == 0, 0.0, np.inf))
        same = (g == e) | (np.isnan(g) & np.isnan(e))
    ratio = np.where(same, 0.0, np.where(np.isnan(ratio), np.inf, ratio))
    if ratio.size == 0:
        return 0.0
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(ratio)), ratio.shape))
    beyond = int(np.count_nonzero(ratio > 1))
    try:
        return assert_within_bound(float(got[worst]), float(expected[worst]), float(bound[worst]),
                                   name=f"{name}[{index(worst)}]", context=context, derivation=derivation)
    except AssertionError as failed:
        # The report keeps every element (a reproducer checks them all), the worst one first in its name.
        observe.keep("comparison", {"mode": "bound", "name": f"{name}[{index(worst)}]", "context": context,
                                    "got": got, "expected": e, "bound": np.broadcast_to(bound, got.shape).astype(float),
                                    "derivation": derivation})
        raise AssertionError(f"{failed}\n  {beyond} of {ratio.size} elements ({100 * beyond / ratio.size:.3g}%) "
                             "beyond their bound") from None


def assert_within_ulps(got: np.ndarray, expected: np.ndarray, ulps: np.ndarray, allowed: np.ndarray | float, *,
                       name: str, context: str, derivation: str, inputs: np.ndarray | None = None,
                       show: int = 5) -> float:
    """Elementwise ``ulps <= allowed``; return and record the worst ratio error / bound.

    ``ulps`` is each element's observed error in ULPs of its format at the
    float64 reference ``expected``, and ``allowed`` the bound per element (or
    one for all): both come from the oracle, which knows the format and the
    special cases (a NaN or an infinity that does not match is an infinite
    error there).  Records ``ulp`` (the worst error) and ``ulp_bound`` (the
    bound of that element) besides ``error/bound``.  ``inputs`` (one per
    element), when given, are shown beside the failing elements.
    """
    ulps = np.asarray(ulps, np.float64).reshape(-1)
    allowed = np.broadcast_to(np.asarray(allowed, np.float64), ulps.shape).reshape(-1)
    observe.keep("comparison", {"mode": "ulps", "name": name, "context": context, "got": np.asarray(got),
                                "expected": np.asarray(expected), "ulps": ulps, "allowed": allowed,
                                "derivation": derivation})
    if ulps.size == 0:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(allowed > 0, ulps / allowed, np.where(ulps == 0, 0.0, np.inf))
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    w = int(np.argmax(ulps))
    observe.record("ulp", float(ulps[w]))
    observe.record("ulp_bound", float(allowed[w]))
    worst = float(ratio.max())
    observe.record("error/bound", worst)
    bad = np.flatnonzero(ratio > 1)
    if bad.size == 0:
        return worst
    got, expected = np.asarray(got).reshape(-1), np.asarray(expected).reshape(-1)
    order = list(bad[:show]) + [i for i in [int(np.argmax(ratio))] if i not in bad[:show]]
    lines = [f"{name}: {bad.size} of {got.size} elements beyond their ULP bound [{context}]",
             f"  bound: {derivation}"]
    for i in order:
        src = f"input {_fmt(inputs.reshape(-1)[i])}: " if inputs is not None else ""
        lines.append(f"  [{i}] {src}{name}={_fmt(got[i])}, but should be {float(expected[i])!r} "
                     f"within {allowed[i]:.4g} ULP (error {ulps[i]:.4g} ULP)")
    if bad.size > show:
        lines.append(f"  ... and {bad.size - show} more (indices {bad[show:show + 10].tolist()}...)")
    raise AssertionError("\n".join(lines))
