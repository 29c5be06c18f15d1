"""harness/cost/measure/spike_runs.py's two runs, without Spike: the histograms of runs A and B are given, and what
measure() makes of them is checked (one more repetition, or the third against the second where the first call
leaves state that sends the next one down another path, or a clear failure)."""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.cost.measure import spike_count, spike_runs
from harness.cost.prices import memory_system
from harness.emulators import protocol as P

#: The call's instructions per address: start-up (0x10), the call (0x20, 0x24) and what runs after the
#: calls (0x40, an allocator's path that depends on the heap's state).
START = {0x10: 7}
CALL = {0x20: 100, 0x24: 50}


def _fake(monkeypatch: pytest.MonkeyPatch, after: dict[int, dict[int, int]]) -> list[int]:
    """measure() on fakes: run with ``repeat`` calls executes START, CALL ``repeat`` times, then after[repeat]."""
    seen: list[int] = []

    def run(argv, stream, timeout, what, exe, emu):
        repeat = stream.count(b"R")
        seen.append(repeat)
        stats = "".join(f"{name}\tRead Misses:           {(10 if name == 'D$' else 4) * repeat + 1}\n"
                        f"{name}\tWritebacks:            {repeat}\n" for name in ("I$", "D$", "L2$"))
        stats = stats if "--dc" in " ".join(argv) else ""  # Spike's cache statistics, with its cache model only
        hist: Counter[int] = Counter(START)
        for _ in range(repeat):
            hist.update(CALL)
        hist.update(after[repeat])
        ok = P.Response(P.Status.OK, 0, "cost.instret=150\ncost.cycles=150", [])
        return [ok, ok], dict(hist), stats

    monkeypatch.setattr(spike_runs, "_run", run)
    monkeypatch.setattr(spike_runs, "_cached", lambda *a, **k: None)
    monkeypatch.setattr(spike_runs, "_keep", lambda *a, **k: None)
    monkeypatch.setattr(spike_runs, "_cache_key", lambda *a: None)
    monkeypatch.setattr(spike_runs, "_started", lambda argv, exe, timeout: argv)
    monkeypatch.setattr(spike_runs, "spike_argv", lambda *a: ["spike"])
    monkeypatch.setattr(spike_runs, "image", lambda exe: SimpleNamespace(function_of=lambda pc: (pc, "_int_malloc")))
    monkeypatch.setattr(spike_runs, "tally", lambda img, diff, instret, cycles: dict(diff))
    monkeypatch.setattr(spike_runs.mca, "tools", lambda: None)
    monkeypatch.setattr(spike_runs.P, "encode_call", lambda k, ip, fp, bufs, repeat=1, measure=False: b"R" * repeat)
    monkeypatch.setattr(spike_runs.P, "encode_hello", lambda: b"")
    monkeypatch.setattr(spike_runs.P, "encode_quit", lambda: b"")
    return seen


def _measure() -> object:
    emu = SimpleNamespace(server_binary=lambda build: Path("/nonexistent/server"))
    build = SimpleNamespace(isa=SimpleNamespace(name="zvfh", qemu={}))
    return spike_runs.measure(emu, build, 256, ("k", [], [], []), timeout=10, what="k")[1]


def test_one_more_repetition_is_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _fake(monkeypatch, {1: {0x40: 3}, 2: {0x40: 3}})
    assert _measure() == CALL and seen == [1, 2]


def test_state_left_by_the_first_call_is_measured_past(monkeypatch: pytest.MonkeyPatch) -> None:
    """After one call the allocator's path takes 3 instructions fewer (glibc's heap after large frees); from the
    second call on it is steady: the third repetition against the second is the call."""
    seen = _fake(monkeypatch, {1: {0x40: 6}, 2: {0x40: 3}, 3: {0x40: 3}})
    assert _measure() == CALL and seen == [1, 2, 2, 3]


def test_a_call_that_never_settles_is_a_failure_that_says_where(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(monkeypatch, {1: {0x40: 9}, 2: {0x40: 6}, 3: {0x40: 3}})
    with pytest.raises(spike_count.CostError, match=r"fewer instructions than run A at 1 addresses, 3 in all \(in "
                                             r"_int_malloc\), both after one call and after two"):
        _measure()


def test_a_calls_traffic_is_two_runs_more_through_the_cores_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _fake(monkeypatch, {1: {}, 2: {}})
    argvs: list[list[str]] = []
    run = spike_runs._run
    monkeypatch.setattr(spike_runs, "_run", lambda argv, *a: (argvs.append(argv), run(argv, *a))[1])
    emu = SimpleNamespace(server_binary=lambda build: Path("/nonexistent/server"))
    build = SimpleNamespace(isa=SimpleNamespace(name="zvfh", qemu={}))
    x60 = memory_system.systems()["spacemit_x60"]
    t = spike_runs.measure_traffic(emu, build, 256, ("k", [], [], []), x60, timeout=10)
    assert seen == [1, 2] and all(a[:4] == ["spike", "--dc=128:4:64", "--ic=128:4:64", "--l2=512:16:64"] for a in argvs)
    assert (t.l1d_misses, t.l1d_writebacks, t.l1i_misses, t.l2_misses, t.l2_writebacks) == (10, 1, 4, 4, 1)
    assert t.dram_bytes == 5 * 64
    with pytest.raises(spike_count.CostError, match="no published caches"):
        spike_runs.measure_traffic(emu, build, 256, ("k", [], [], []), memory_system.systems()["tt_asc_x"], timeout=10)


def test_a_runs_answers_are_read_before_spikes_cache_statistics(monkeypatch: pytest.MonkeyPatch) -> None:
    def frame(msg: bytes) -> bytes:
        return P.RESPONSE_HEADER.pack(P.RESPONSE_MAGIC, int(P.Status.OK), 7, len(msg)) + msg + struct.pack("<I", 0)

    stats = "D$\tRead Misses:           12\nD$\tMiss Rate:             1.000%\n"
    done = SimpleNamespace(timed_out=False, returncode=0, stdout=frame(b"hello") + frame(b"k") + stats.encode(),
                           stderr=b"")
    monkeypatch.setattr(spike_runs, "execute", lambda *a, **k: done)
    emu = SimpleNamespace(signal_of=lambda rc: rc, explain=lambda exe, text: text)
    responses, hist, got = spike_runs._run(["spike"], b"", 10, "k", Path("/nonexistent"), emu)
    assert [r.message for r in responses] == ["hello", "k"] and not hist and got == stats
