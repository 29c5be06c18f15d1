"""Sources and builds: validation, mutant trees, build failures, concurrent builders."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness import config, mutants, source
from harness.build import BuildError, build_dir, ensure_built

DATA = Path(__file__).parent / "data"


def test_pinned_tree_is_verified_and_described() -> None:
    s = source.pinned()
    assert s.pinned and s.commit == source.PINNED_COMMIT
    assert s.version == "0.25.3"
    assert (s.root / ".rvvdiff-extracted").read_text().startswith(source.PINNED_SDIST)
    for rel in source.RVV_SOURCES:
        assert (s.ggml / rel).is_file()


def test_resolve_accepts_the_ggml_folder_of_a_llama_checkout() -> None:
    s = source.pinned()
    r = source.resolve(s.ggml)
    assert r.root == s.root and r.ggml == s.ggml


@pytest.mark.parametrize("make, message", [
    (lambda p: p, "not a llama.cpp or ggml checkout"),
    (lambda p: (p / "ggml/src/ggml-cpu").mkdir(parents=True), "no RISC-V Vector sources"),
])
def test_resolve_rejects_unusable_trees(tmp_path: Path, make, message: str) -> None:
    make(tmp_path)
    with pytest.raises(source.SourceError, match=message):
        source.resolve(tmp_path)


def test_mutant_tree_leaves_the_original_untouched() -> None:
    s = source.pinned()
    before = (s.cpu_dir / "vec.cpp").read_bytes()
    m = mutants.apply(mutants.Mutant("harmless", DATA / "harmless.patch"), s)
    assert (s.cpu_dir / "vec.cpp").read_bytes() == before
    assert b"a harmless change" in (m.cpu_dir / "vec.cpp").read_bytes()
    assert m.content_hash() != s.content_hash()


def test_failed_build_names_the_command_and_the_compiler_error() -> None:
    tree = mutants.apply(mutants.Mutant("syntax_error", DATA / "syntax_error.patch"), source.pinned())
    with pytest.raises(BuildError) as e:
        ensure_built(tree, config.ISA_BUILDS["zvfh"])
    msg = str(e.value)
    assert "compiling ggml (zvfh) exited with code" in msg
    assert "argv: cmake --build" in msg
    assert "vec.cpp:4" in msg and "error:" in msg
    assert "rvvdiff-build.log" in msg


_BUILD = """
import sys
from harness import config, mutants, source
from harness.build import ensure_built
tree = mutants.apply(mutants.Mutant("harmless", mutants.Path(sys.argv[1])), source.pinned())
print(ensure_built(tree, config.ISA_BUILDS["v"]).server)
"""


def test_concurrent_builders_build_once() -> None:
    """Two processes (as two xdist workers would) ask for the same new build at once."""
    tree = mutants.apply(mutants.Mutant("harmless", DATA / "harmless.patch"), source.pinned())
    d = build_dir(tree, config.ISA_BUILDS["v"])
    log = d / "rvvdiff-build.log"
    builds_before = log.read_text().count("=== build of") if log.exists() else 0
    stamp = d / "rvvdiff-stamp.json"
    if stamp.exists():
        stamp.unlink()  # force a (cheap, incremental) rebuild of the libraries
    procs = [subprocess.Popen([sys.executable, "-c", _BUILD, str(DATA / "harmless.patch")],
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=3600)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1] and Path(outs[0]).exists()
    assert log.read_text().count("=== build of") == builds_before + 1
