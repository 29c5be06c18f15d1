"""What a test observed (harness/check/observe.py): figures that add up or keep their maximum, notes,
kept objects, and the one observation the module functions write to (the attached one)."""

from __future__ import annotations

from harness.check import observe
from harness.check.observe import Observation


def test_summed_metrics_add_up_and_the_others_keep_their_maximum() -> None:
    o = Observation()
    for v in (1, 2, 3):
        o.record("calls", v)
    o.record("error/bound", 0.5)
    o.record("error/bound", 0.25)
    assert o.peek("calls") == 6 and o.peek("error/bound") == 0.5 and o.peek("never") == 0.0
    assert o.take() == {"calls": 6, "error/bound": 0.5}
    assert o.take() == {}  # taken: the next test starts afresh


def test_distinct_notes_are_joined_once_each() -> None:
    o = Observation()
    for text in ("rvv", "scalar", "rvv"):
        o.note("path", text)
    assert o.take() == {"path": "rvv | scalar"}


def test_kept_objects_are_the_latest_and_are_taken_once() -> None:
    o = Observation()
    o.keep("call", 1)
    o.keep("call", 2)
    assert o.take_kept() == {"call": 2}
    assert o.take_kept() == {}


def test_the_module_functions_write_to_the_attached_observation_until_it_is_detached() -> None:
    outer = observe.current()  # this run's session's
    mine = Observation()
    observe.attach(mine)
    try:
        observe.record("calls", 2)
        observe.note("path", "rvv")
        observe.keep("comparison", "c")
        assert observe.peek("calls") == 2 and observe.peek_kept("comparison") == "c"
        assert mine.figures == {"calls": 2, "path": "rvv"} and mine.kept == {"comparison": "c"}
    finally:
        observe.detach(mine)
    assert observe.current() is outer
    observe.detach(mine)  # twice: nothing more happens
    assert observe.current() is outer
