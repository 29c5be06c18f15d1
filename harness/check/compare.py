"""Comparing what a kernel returned with what the oracle expects.

Two kinds of check, named by what they guarantee:

* :func:`assert_bitwise_equal` -- the result must be bit for bit the expected
  one (conversions, integer parts, raw quantized bytes, exact-by-construction
  inputs).  NaNs match any NaN: payloads are not specified by ggml and differ
  between the RISC-V instructions (canonical NaN) and the C reference (payload
  kept).
* :func:`assert_same_outputs` -- one kernel call's output buffers are byte for byte those of the same call on
  another build of the same code (a distribution's dispatch variant and its static twin); :class:`OutputsDiffer`
  otherwise, which no known failure excuses (harness/plugin/session.py).
* :func:`assert_within_bound` -- ``|got - expected| <= bound`` where the bound
  is derived from the kernel's arithmetic; the observed error is recorded as a
  fraction of the bound, so reports show how close each kernel comes to it.
  :func:`assert_all_within` applies it to every element of an array, each
  with its own bound (a matrix, an attention output), and
  :func:`assert_within_ulps` to errors measured in ULPs.

Every helper takes arrays of any shape and any dtype the kernels produce (1-, 2-, 4- and 8-byte
integers and floats, float16 and ml_dtypes' bfloat16), so a caller passes its outputs as they
are: no flattening, no widening.  Messages follow ``name=actual, but should be expected
[context]`` and, in the manner of numpy.testing, give the mismatch count (``Mismatched elements:
n / N (p%)``), the largest absolute, relative and ULP differences among the mismatches, and the
first mismatching elements by their index tuples (``[1, 3]``).  The messages are pinned by
tests/test_compare.py.  Every helper hides its own frame from pytest's traceback
(``__tracebackhide__``), so a failure opens on the test's line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np

from harness.check import observe

__all__ = ["OutputsDiffer", "assert_all_within", "assert_bitwise_equal", "assert_same_outputs", "assert_within_bound",
           "assert_within_ulps", "note_expected"]

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _is_float(dtype: np.dtype) -> bool:
    """A floating-point format, NumPy's or ml_dtypes' (bfloat16's kind is ``V``)."""
    try:
        ml_dtypes.finfo(dtype)
    except ValueError:
        return False
    return True


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(_UINT[a.dtype.itemsize])


def _fmt(v: np.generic) -> str:
    """An element as a message shows it: a float with its bits, an integer as it is."""
    if _is_float(v.dtype):
        width = v.dtype.itemsize * 2
        return f"{float(v)!r} (0x{int(np.asarray(v).view(_UINT[v.dtype.itemsize])):0{width}x})"
    return repr(v.item())


def _index(idx: tuple[int, ...]) -> str:
    return ", ".join(map(str, idx))


def _at(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The index tuple of the element at C-order position ``flat``."""
    return tuple(int(i) for i in np.unravel_index(int(flat), shape))


def _ulp_steps(a: np.ndarray) -> np.ndarray:
    """Floats mapped to their rank among the format's values (one step per representable value, +-0
    both 0), as float64: the ULP distance of two elements is the difference of their ranks."""
    bits = _bits(a).astype(np.uint64)
    sign = np.uint64(1) << np.uint64(8 * a.dtype.itemsize - 1)
    mag = (bits & (sign - np.uint64(1))).astype(np.float64)
    return np.where((bits & sign) != 0, -mag, mag)


def _num(v: float) -> str:
    return str(int(v)) if np.isfinite(v) and v == int(v) and abs(v) < 2**53 else f"{v:.6g}"


def _summary(bad: np.ndarray, got: np.ndarray, expected: np.ndarray, ulps: np.ndarray | None = None) -> list[str]:
    """numpy.testing's summary of the mismatching elements (``bad``: their C-order positions): how many
    of all, and the largest absolute, relative and ULP differences among them with where each is.
    ``ulps`` (one per element, from an oracle that knows the format) replaces the ULP distance of the
    bits; elements with a NaN on one side only are counted apart."""
    size = got.size
    lines = [f"Mismatched elements: {bad.size} / {size} ({100 * bad.size / size:.3g}%)"]
    g, e = got.reshape(-1)[bad], expected.reshape(-1)[bad]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        g64, e64 = g.astype(np.float64), e.astype(np.float64)  # exact for every difference of <= 4-byte integers
        nan = np.isnan(g64) | np.isnan(e64)
        diff = np.abs(g64 - e64)
        rel = np.where(e64 != 0, diff / np.abs(e64), np.where(diff == 0, 0.0, np.inf))
    kinds = [("absolute", diff), ("relative", rel)]
    if ulps is not None:
        kinds.append(("ULP", np.asarray(ulps, np.float64).reshape(-1)[bad]))
    elif _is_float(got.dtype) and got.dtype == expected.dtype:
        kinds.append(("ULP", np.abs(_ulp_steps(g) - _ulp_steps(e))))
    if not nan.all():
        for what, d in kinds:
            w = int(np.argmax(np.where(nan, -np.inf, d)))
            lines.append(f"Max {what} difference among violations: {_num(float(d[w]))} "
                         f"at [{_index(_at(bad[w], got.shape))}]")
    if nan.any():
        lines.append(f"NaN on one side only: {int(nan.sum())} of them")
    return lines


def _more(rest: np.ndarray, shape: tuple[int, ...]) -> list[str]:
    """The line after the elements listed: how many more (``rest``, C-order positions), and where the next ten are."""
    if rest.size == 0:
        return []
    where = ", ".join(f"[{_index(_at(i, shape))}]" for i in rest[:10])
    return [f"... and {rest.size} more, at {where}" + (" ..." if rest.size > 10 else "")]


def assert_bitwise_equal(got: np.ndarray, expected: np.ndarray, *, name: str, context: str,
                         inputs: np.ndarray | None = None, show: int = 5) -> None:
    """Every element of ``got`` has the bits of ``expected`` (arrays of one shape and one element size;
    any NaN matches any NaN).  ``inputs`` (one per element, of the same shape), when given, are shown
    beside the failing elements."""
    __tracebackhide__ = True
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape:
        raise AssertionError(f"{name}.shape={got.shape}, but should be {expected.shape} [{context}]")
    if got.dtype.itemsize != expected.dtype.itemsize:
        raise TypeError(f"assert_bitwise_equal({name}): {got.dtype} and {expected.dtype} elements have different sizes, "
                        "so their bits cannot be compared; give the oracle's values in the kernel's format")
    observe.keep("comparison", {"mode": "bitwise", "name": name, "context": context, "got": got, "expected": expected})
    eq = _bits(got) == _bits(expected)
    if _is_float(got.dtype) or _is_float(expected.dtype):
        with np.errstate(invalid="ignore"):
            eq |= np.isnan(got.astype(np.float64)) & np.isnan(expected.astype(np.float64))
    bad = np.flatnonzero(~eq)
    observe.record("mismatches", int(bad.size))
    if bad.size == 0:
        return
    lines = [f"{name}: not bit for bit equal [{context}]", *_summary(bad, got, expected)]
    for i in bad[:show]:
        at = _at(i, got.shape)
        src = f"input {_fmt(inputs[at])}: " if inputs is not None else ""
        lines.append(f"[{_index(at)}] {src}{name}={_fmt(got[at])}, but should be {_fmt(expected[at])}")
    lines += _more(bad[show:], got.shape)
    raise AssertionError("\n  ".join(lines))


def note_expected(expected: float, bound: float, *, name: str, context: str, derivation: str) -> None:
    """What the oracle expects of the kernel call about to run, kept for the failure report: a call that
    crashes (a trap only one emulator or one hart raises) then still leaves the expected value and its
    bound (``rvvdiff report --upstream`` writes its program from them).  The comparison recorded after a
    call that returns replaces it."""
    __tracebackhide__ = True
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
    __tracebackhide__ = True
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
    __tracebackhide__ = True
    got, expected, bound = np.asarray(got), np.asarray(expected), np.asarray(bound)
    g, e = got.astype(np.float64), np.asarray(expected, np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        err = np.abs(g - e)
        ratio = np.where(bound > 0, err / np.where(bound > 0, bound, 1.0), np.where(err == 0, 0.0, np.inf))
        same = (g == e) | (np.isnan(g) & np.isnan(e))
    ratio = np.where(same, 0.0, np.where(np.isnan(ratio), np.inf, ratio))
    if ratio.size == 0:
        return 0.0
    worst = _at(int(np.argmax(ratio)), ratio.shape)
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
    element, of ``got``'s shape), when given, are shown beside the failing elements.
    """
    __tracebackhide__ = True
    got, expected = np.asarray(got), np.asarray(expected)
    ulps = np.asarray(ulps, np.float64).reshape(got.shape)
    allowed = np.broadcast_to(np.asarray(allowed, np.float64), ulps.shape)
    observe.keep("comparison", {"mode": "ulps", "name": name, "context": context, "got": got,
                                "expected": expected, "ulps": ulps.reshape(-1), "allowed": allowed.reshape(-1),
                                "derivation": derivation})
    if ulps.size == 0:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(allowed > 0, ulps / allowed, np.where(ulps == 0, 0.0, np.inf))
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    w = _at(int(np.argmax(ulps)), ulps.shape)
    observe.record("ulp", float(ulps[w]))
    observe.record("ulp_bound", float(allowed[w]))
    worst = float(ratio.max())
    observe.record("error/bound", worst)
    bad = np.flatnonzero(ratio > 1)
    if bad.size == 0:
        return worst
    top = int(np.argmax(ratio))
    order = list(bad[:show]) + [i for i in [top] if i not in bad[:show]]
    lines = [f"{name}: elements beyond their ULP bound [{context}]", f"bound: {derivation}",
             *_summary(bad, got, expected, ulps)]
    for i in order:
        at = _at(i, got.shape)
        src = f"input {_fmt(inputs[at])}: " if inputs is not None else ""
        lines.append(f"[{_index(at)}] {src}{name}={_fmt(got[at])}, but should be {float(expected[at])!r} "
                     f"within {allowed[at]:.4g} ULP (error {ulps[at]:.4g} ULP)")
    lines += _more(bad[show:][bad[show:] != top], got.shape)
    raise AssertionError("\n  ".join(lines))


class OutputsDiffer(AssertionError):
    """Two builds of the same code returned different output bytes for one kernel call (:func:`assert_same_outputs`).

    Not a disagreement with an oracle, so a known failure (an entry about the oracle's verdict) does not excuse it:
    the plugin reports a test that raised it as failed even where the test is an expected failure."""

    def __init__(self, message: str, *, kernel: str, buffer: int, index: int, builds: tuple[str, str]) -> None:
        super().__init__(message)
        self.kernel, self.buffer, self.index, self.builds = kernel, buffer, index, builds


def assert_same_outputs(got: Sequence[bytes], twin: Sequence[bytes], *, kernel: str, builds: tuple[str, str],
                        context: str) -> None:
    """Every output buffer of one call of ``kernel`` on ``builds[0]`` (``got``) has the bytes of the same call on
    ``builds[1]`` (``twin``); records ``identical`` (one call) when it does, else raises :class:`OutputsDiffer` naming
    the kernel, the buffer (counting output and in/out buffers), the first differing byte, both values and both builds.
    The buffers' element type is not known here: the 4-byte word around that byte is also shown as float32 when the
    buffer is made of such words."""
    __tracebackhide__ = True
    a, b = builds
    if len(got) != len(twin):
        raise OutputsDiffer(f"{kernel}: {len(got)} output buffers on {a}, {len(twin)} on {b} [{context}]",
                            kernel=kernel, buffer=min(len(got), len(twin)), index=-1, builds=builds)
    for i, (x, y) in enumerate(zip(got, twin, strict=True)):
        if x == y:
            continue
        if len(x) != len(y):
            raise OutputsDiffer(f"{kernel}: output buffer {i} is {len(x)} bytes on {a}, {len(y)} on {b} [{context}]",
                                kernel=kernel, buffer=i, index=-1, builds=builds)
        xs, ys = np.frombuffer(x, np.uint8), np.frombuffer(y, np.uint8)
        bad = np.flatnonzero(xs != ys)
        at = int(bad[0])
        lines = [f"{kernel}: output buffer {i} differs between {a} and {b} [{context}]",
                 f"{bad.size} of {xs.size} bytes differ; the first at byte {at}: 0x{xs[at]:02x} on {a}, "
                 f"0x{ys[at]:02x} on {b}"]
        if xs.size % 4 == 0:
            w = at // 4
            fx, fy = (np.frombuffer(v, np.float32)[w:w + 1] for v in (x, y))
            lines.append(f"word {w} (bytes {4 * w}-{4 * w + 3}) as float32: {_fmt(fx[0])} on {a}, {_fmt(fy[0])} on {b}")
        raise OutputsDiffer("\n  ".join(lines), kernel=kernel, buffer=i, index=at, builds=builds)
    observe.record("identical", 1)
