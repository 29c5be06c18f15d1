"""Per-test observations (worst error/bound ratio, kernel calls, ...).

Comparisons and the kernel call path record figures here while a test runs;
the pytest plugin moves them into the test's report (``user_properties``), so
they reach the controlling process under pytest-xdist and the summary.  The
last kernel call and comparison are also kept (not sent anywhere) for the
failure report the worker writes.
"""

from __future__ import annotations

_current: dict[str, float | str] = {}
_kept: dict[str, object] = {}

#: Metrics that add up over a test's examples; the others keep their maximum.
SUMMED = frozenset({"calls", "kernel_s", "request_s"})


def record(metric: str, value: float) -> None:
    old = _current.get(metric)
    if not isinstance(old, (int, float)):
        _current[metric] = value
    elif metric in SUMMED:
        _current[metric] = old + value
    else:
        _current[metric] = max(old, value)


def peek(metric: str) -> float:
    """The current value of a numeric metric of the running test (0 if none yet)."""
    v = _current.get(metric, 0.0)
    return float(v) if isinstance(v, (int, float)) else 0.0


def note(key: str, text: str) -> None:
    """A fact about what ran (e.g. ``path=rvv``); distinct values seen in one test are joined."""
    old = _current.get(key)
    if old is None:
        _current[key] = text
    elif isinstance(old, str) and text not in old.split(" | "):
        _current[key] = f"{old} | {text}"


def keep(key: str, obj: object) -> None:
    """Keep the latest object under ``key`` (the last kernel call, the last comparison) for the
    failure report: after shrinking, Hypothesis runs the minimal failing example last, so
    what is kept when a test fails belongs to that example."""
    _kept[key] = obj


def peek_kept(key: str) -> object | None:
    return _kept.get(key)


def take_kept() -> dict[str, object]:
    out = dict(_kept)
    _kept.clear()
    return out


def take() -> dict[str, float | str]:
    """Return the observations of the test that just ran and start afresh."""
    out = dict(_current)
    _current.clear()
    return out
