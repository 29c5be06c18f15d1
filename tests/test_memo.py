"""The on-disk memo of the C reader (harness/core/memo.py): a reading is kept and reused, a change to its
input or to the reader's code reads afresh, and a damaged file costs a recomputation, never a wrong answer."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.core.memo import DiskMemo, code_digest
from harness.ggml import cpreproc, csource


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RVVDIFF_CACHE", str(tmp_path))
    return tmp_path


def test_kept_and_reused(cache: Path) -> None:
    m = DiskMemo("t", "code1")
    calls: list[int] = []

    def compute() -> dict[str, int]:
        calls.append(1)
        return {"a": 1}

    k = m.key("x", b"y")
    assert m.through(k, compute, dict) == {"a": 1}
    assert m.through(k, compute, dict) == {"a": 1}
    assert len(calls) == 1
    assert m.key("x", b"y") != m.key("xy")  # parts are delimited, not concatenated
    assert DiskMemo("t", "code2").key("x", b"y") != k  # other code, other key


def test_damaged_file_recomputed(cache: Path) -> None:
    m = DiskMemo("t", "c")
    k = m.key("damaged")
    m.put(k, [1, 2])
    path = next((cache / "memo" / "t").rglob("*.pickle"))
    path.write_bytes(b"not a pickle")
    assert m.get(k) is None
    assert m.through(k, lambda: [3], list) == [3]
    assert m.get(k) == [3]


def test_code_digest_follows_the_code(tmp_path: Path) -> None:
    f = tmp_path / "reader.py"
    f.write_text("a = 1\n")
    before = code_digest([f])
    f.write_text("a = 2\n")
    assert code_digest([f]) != before


def test_preprocess_read_once_per_input(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = cpreproc._preprocess

    def counting(text: str, macros, path: Path) -> cpreproc.Preprocessed:
        calls.append(text)
        return real(text, macros, path)

    monkeypatch.setattr(cpreproc, "_preprocess", counting)
    text = "#if A\nint f(void) { return 1; }\n#else\nint g(void) { return 2; }\n#endif\n"
    on = cpreproc.preprocess(text, {"A": 1}, Path("x.c"))
    again = cpreproc.preprocess(text, {"A": 1}, Path("x.c"))
    off = cpreproc.preprocess(text, {"A": 0}, Path("x.c"))
    assert len(calls) == 2  # the second reading with A=1 came from the memo
    assert again.text == on.text and again.digest == on.digest
    assert "f(void)" in on.text and "g(void)" not in on.text
    assert "g(void)" in off.text and "f(void)" not in off.text
    # what is read from the preprocessed text is kept too, and is the same
    assert [f.name for f in csource._definitions(again, Path("x.c"))] == ["f"]
    assert [f.name for f in csource._definitions(off, Path("x.c"))] == ["g"]
    # a reader that rewrites the preprocessed text keeps the digest (dataclasses.replace): the text decides
    opened = replace(on, text=on.text.replace("int f(void)", "int h(void)"))
    assert opened.digest == on.digest
    assert [f.name for f in csource._definitions(opened, Path("x.c"))] == ["h"]
    cpreproc.preprocess(text + "\n", {"A": 1}, Path("x.c"))
    assert len(calls) == 3  # another text: read afresh
