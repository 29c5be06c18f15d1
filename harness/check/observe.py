"""Per-test observations (worst error/bound ratio, kernel calls, ...).

Comparisons and the kernel call path record figures while a test runs;
the pytest plugin moves them into the test's report (``user_properties``), so
they reach the controlling process under pytest-xdist and the summary.  The
last kernel call and comparison are also kept (not sent anywhere) for the
failure report the worker writes.

The figures go into an :class:`Observation`.  Its owner is the pytest plugin's session
(harness/plugin/session.py): it makes one, attaches it for the run (:func:`attach`), empties it before
each test and takes its figures after.  The module-level functions below are what comparisons
and the differential test modules call: they write to the attached observation (outside a
pytest run, to one nobody reads).  The attached observations are the one thing of a run this process
keeps outside the run's session: they are how code that is handed no session finds the run's.
"""

from __future__ import annotations

#: Metrics that add up over a test's examples; the others keep their maximum.
SUMMED = frozenset({"calls", "kernel_s", "request_s", "emulated_s", "identical"})


class Observation:
    """What the running test observed: numeric metrics and notes (for its report), and the latest
    objects kept under a key (the last kernel call, the last comparison: for its failure report).

    ``owner``: the run's state it belongs to (the plugin's session), so that code handed nothing
    reaches the run in progress through the attached observation."""

    def __init__(self, owner: object = None) -> None:
        self.owner = owner
        self.figures: dict[str, float | str] = {}
        self.kept: dict[str, object] = {}

    def record(self, metric: str, value: float) -> None:
        old = self.figures.get(metric)
        if not isinstance(old, (int, float)):
            self.figures[metric] = value
        elif metric in SUMMED:
            self.figures[metric] = old + value
        else:
            self.figures[metric] = max(old, value)

    def peek(self, metric: str) -> float:
        """The current value of a numeric metric (0 if none yet)."""
        v = self.figures.get(metric, 0.0)
        return float(v) if isinstance(v, (int, float)) else 0.0

    def note(self, key: str, text: str) -> None:
        """A fact about what ran (e.g. ``path=rvv``); distinct values seen in one test are joined."""
        old = self.figures.get(key)
        if old is None:
            self.figures[key] = text
        elif isinstance(old, str) and text not in old.split(" | "):
            self.figures[key] = f"{old} | {text}"

    def keep(self, key: str, obj: object) -> None:
        """Keep the latest object under ``key`` for the failure report: after shrinking, Hypothesis
        runs the minimal failing example last, so what is kept when a test fails belongs to it."""
        self.kept[key] = obj

    def take(self) -> dict[str, float | str]:
        """The figures so far; the observation starts afresh."""
        out = dict(self.figures)
        self.figures.clear()
        return out

    def take_kept(self) -> dict[str, object]:
        """The objects kept so far; none are kept afterwards."""
        out = dict(self.kept)
        self.kept.clear()
        return out


#: The attached observations, the current one last; the first stands for "no pytest run" and is never detached.
_ATTACHED: list[Observation] = [Observation()]


def attach(observation: Observation) -> None:
    """Make ``observation`` the one the functions below write to (its owner's run begins)."""
    _ATTACHED.append(observation)


def detach(observation: Observation) -> None:
    """Its owner's run is over: the observation attached before it is current again."""
    if observation in _ATTACHED[1:]:
        _ATTACHED.remove(observation)


def current() -> Observation:
    return _ATTACHED[-1]


def record(metric: str, value: float) -> None:
    current().record(metric, value)


def peek(metric: str) -> float:
    """The current value of a numeric metric of the running test (0 if none yet)."""
    return current().peek(metric)


def note(key: str, text: str) -> None:
    """A fact about what ran (e.g. ``path=rvv``); distinct values seen in one test are joined."""
    current().note(key, text)


def keep(key: str, obj: object) -> None:
    """Keep the latest object under ``key`` (the last kernel call, the last comparison) for the
    failure report (:meth:`Observation.keep`)."""
    current().keep(key, obj)


def peek_kept(key: str) -> object | None:
    return current().kept.get(key)


def take_kept() -> dict[str, object]:
    return current().take_kept()


def take() -> dict[str, float | str]:
    """Return the observations of the test that just ran and start afresh."""
    return current().take()
