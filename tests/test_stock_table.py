"""The issue table's rows built by the printed commands (harness/upstream/stock_table.py) and how a text says so
(harness/upstream/issue.py): the scratch copy takes only what differs, a row built by the commands is named by its
stock compiler, a trap under Spike with riscv-pk prints the ``spike ... pk`` line, and a missing pk is one line that
says how to get it.  No build here: the verdicts are made up in the shape a run gives."""

from __future__ import annotations

import os
import types

import pytest

from harness.core.matrix import Point
from harness.emulators import spike as spike_mod
from harness.ggml import source
from harness.upstream import issue, runs, stock_table

TRAP_OUT = "exit 255: pc 000000000009509c va/inst 0000000022066487 sr 8000000200006620 / Load access fault!"


def test_sync_copies_what_differs_and_removes_what_is_gone(tmp_path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "ggml" / "src").mkdir(parents=True)
    (src / "ggml" / "src" / "quants.c").write_text("fixed!\n")  # (the size of the old: compared by content)
    (src / "CMakeLists.txt").write_text("same\n")
    (dst / "ggml" / "src").mkdir(parents=True)
    (dst / "ggml" / "src" / "quants.c").write_text("pinned\n")
    (dst / "CMakeLists.txt").write_text("same\n")
    (dst / "stale.c").write_text("gone\n")
    os.utime(dst / "CMakeLists.txt", (1, 1))
    assert stock_table.sync(src, dst) == 2  # quants.c written, stale.c removed
    assert (dst / "ggml" / "src" / "quants.c").read_text() == "fixed!\n"
    assert not (dst / "stale.c").exists()
    assert (dst / "CMakeLists.txt").stat().st_mtime == 1  # untouched: make rebuilds nothing that uses it
    assert stock_table.sync(src, dst) == 0


def _trap_verdicts() -> list[runs.Verdict]:
    out = []
    for t in ("pinned", "fixed"):
        for isa in ("v", "zvfh"):
            for vl in (128, 256, 512, 1024):
                out.append(runs.Verdict(t, isa, vl, False, "ran to the end (exit 0)", "qemu", "clang", by="stock"))
                trapped = t == "pinned" and vl >= 512
                out.append(runs.Verdict(t, isa, vl, trapped, TRAP_OUT if trapped else "ran to the end (exit 0)",
                                        "spike", "clang", by="stock"))
                out.append(runs.Verdict(t, isa, vl, trapped, "exit 135: rvvdiff spike runtime: misaligned"
                                        if trapped else "ran to the end (exit 0)", "spike", "gcc14"))
                out.append(runs.Verdict(t, isa, vl, False, "ran to the end (exit 0)", "qemu", "gcc14"))
    return out


def _text(verdicts: list[runs.Verdict], trap: bool) -> str:
    pinned = source.pinned()
    case = types.SimpleNamespace(data={"ggml": {"label": pinned.label, "commit": pinned.commit},
                                       "comparison": {"name": "C"}})
    pub = types.SimpleNamespace(what="one row times one row, k = 256", function="ggml_vec_dot_iq2_xxs_q8_K_vl512")
    return issue.issue(case, pub, "int main(void) { return 0; }\n", verdicts, recorded=Point(512, "v"), tree=pinned,
                       trap=trap)


def test_a_stock_row_is_named_by_its_compiler_and_its_spike_rows_by_pk() -> None:
    text = _text(_trap_verdicts(), trap=True)
    rows = [ln for ln in text.splitlines() if ln.startswith("| ")]
    assert any(r.startswith("| pinned (spike, pk) | clang-22 |") and "| trap |" in r for r in rows), rows
    assert any(r.startswith("| pinned (spike) | GCC 14 |") for r in rows), rows
    assert not any("zig" in r for r in rows)
    assert "by the commands above with clang-22 (under Spike: `spike ... pk ./repro`" in text
    assert "by rvvdiff with Debian's GCC 14" in text and "zig's clang" not in text
    # the clang commands end with the Spike line at the first VLEN where it traps, and say what it needs
    assert "spike --isa=rv64gcv_zicntr_zvl512b pk ./repro" in text
    assert "riscv-pk, built for rv64gc as its default is:" in text and "`Load access fault!`, exit status 255" in text
    assert "Output at VLEN 512, v build: `exit 255: pc 000000000009509c" in text  # pk's own words, as run
    assert ", whose Spike rows are linked for bare metal" in text


def test_rvvdiff_rows_keep_their_words_and_print_no_pk_line() -> None:
    verdicts = [runs.Verdict(v.tree, v.isa, v.vlen, v.failing, v.text, v.emulator, v.compiler, v.stress)
                for v in _trap_verdicts()]  # (by="rvvdiff")
    text = _text(verdicts, trap=True)
    assert "pk ./repro" not in text and "riscv-pk" not in text
    assert "by rvvdiff with zig's clang" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| pinned (spike) | clang |")]
    assert rows, text


def test_no_pk_says_how_to_get_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(spike_mod, "spike", lambda: spike_mod.Spike("/bin/true", "test"))
    monkeypatch.setenv("RVVDIFF_PK", str(tmp_path / "no-pk"))
    with pytest.raises(spike_mod.SpikeUnavailable, match=r"no riscv-pk \(RVVDIFF_PK=.*no such file\).*riscv-pk"):
        spike_mod.spike_pk()
    pk = tmp_path / "pk"
    pk.write_bytes(b"\x7fELF")
    monkeypatch.setenv("RVVDIFF_PK", str(pk))
    got = spike_mod.spike_pk()
    assert got.command(tmp_path / "repro", 512, {"zvfh": True})[-2:] == [str(pk), str(tmp_path / "repro")]
    assert got.printed("./repro", 512, {}) == ["spike", "--isa=rv64gcv_zicntr_zvl512b", "pk", "./repro"]


def test_report_refuses_an_unknown_stock_table_compiler(capsys) -> None:
    from harness.commands import report
    with pytest.raises(SystemExit):
        report.main(["--fix", "iq4_nl_odd_block_dropped", "--upstream", "--stock-table", "icc"])
    assert "--stock-table icc: use 'all' or a comma list of clang, gcc14" in capsys.readouterr().err
