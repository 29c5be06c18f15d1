"""Nothing committed under docs/ names the machine it was made on: no home directory, no absolute path into rvvdiff's
cache (the documented default ``~/.cache/rvvdiff`` names none), and the writer of the upstream runs' records keeps it
so (harness/upstream/record.py's ``unlocal``)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from harness.upstream import record

ROOT = Path(__file__).resolve().parent.parent
#: A home directory, a work directory of the machine (``/work/``: checkouts, runs, mirrors), or the cache reached
#: by any path but ``~``.
MACHINE = re.compile(r"/root/|/home/\w|(?<![\w.])/work/|(?<!~)/\.cache/rvvdiff/")


def _committed_docs() -> list[Path]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "docs"], capture_output=True, text=True, check=True)
    return [ROOT / p for p in out.stdout.split()]


def test_no_committed_doc_names_the_machine() -> None:
    bad = [f"{p.relative_to(ROOT)}:{i}: {ln.strip()[:100]}" for p in _committed_docs() if p.is_file()
           for i, ln in enumerate(p.read_text(errors="replace").splitlines(), 1) if MACHINE.search(ln)]
    assert not bad, "\n".join(bad[:20])


def test_the_check_sees_a_machine_path() -> None:
    assert MACHINE.search('"root": "/root/.cache/rvvdiff/src/llama.cpp-0c1e570"')
    assert MACHINE.search("log /home/ada/.cache/rvvdiff/stock/x/rvvdiff-stock.log")
    assert MACHINE.search("cd /work/main && pytest cases")
    assert not MACHINE.search("kept in `~/.cache/rvvdiff/cost/`")
    assert not MACHINE.search("see harness/work/x and https://example.org/work/y")


def test_a_record_names_trees_by_label_and_commit(tmp_path: Path) -> None:
    """What record.dump writes: the tree's path left out, paths into the cache named by what they held, logs dropped."""
    rec = {"data": {"ggml": {"root": "/root/.cache/rvvdiff/src/llama.cpp-0c1e570", "label": "pinned llama.cpp",
                             "commit": "0c1e570"}},
           "verdicts": [{"text": "not built: compiler gcc14 rejects -march=x, the flags the CMake of ggml 0.25.3 at "
                                 "/root/.cache/rvvdiff/fixes/iq4_nl_odd_block_dropped-f6721fb46da7 gives ggml-cpu"},
                        {"text": "failed (exit 2): error; log /home/ada/.cache/rvvdiff/stock/c1-zvfbfwma-gcc14/x.log"},
                        {"text": "ggml 0.25.3 at /root/.cache/rvvdiff/src/llama.cpp-0c1e570"}]}
    got = record.unlocal(rec)
    assert got["data"]["ggml"] == {"label": "pinned llama.cpp", "commit": "0c1e570"}
    texts = [v["text"] for v in got["verdicts"]]
    assert texts == ["not built: compiler gcc14 rejects -march=x, the flags the CMake of ggml 0.25.3 (the tree with "
                     "the fix) gives ggml-cpu", "failed (exit 2): error", "ggml 0.25.3 (llama.cpp 0c1e570)"]
    assert not MACHINE.search(str(got))
