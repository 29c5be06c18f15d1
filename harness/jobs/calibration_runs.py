"""A calibration row measured again, by one command: the ``rvvdiff cost`` runs its committed source holds, redone
on the row's two trees, and recorded (harness/cost/calibration/sources.py).

``rvvdiff calibration measure ROW --ggml-git DIR [--cc clang,gcc14] [--dry-run]`` exports BEFORE and
AFTER (the row's ``before`` / ``after`` commits of ggml-org/ggml) from the git directory ``DIR`` with ``git
archive``, and runs, per compiler:

* the row's kernel (and ``before_kernel``) cases at the row's VLEN and ISA build: the cost cases whose rows the
  source keeps for that compiler, ``-k CASE-vlenV`` each, on both trees (on AFTER alone where the source
  measured the row's two paths on AFTER);
* each model-shaped case of the row (``--model SPEC -k model``), where the source holds it for that compiler;

each run's arguments written by ``rvvdiff cost``'s own options (harness/jobs/cost_suite_runs.py ``Options``), then
records the runs' cost.json files as ``rvvdiff calibration record ROW COST_JSON ...`` does.  A row with
``after_lmul`` (a tiling of tinyBLAS_RVV a pull request measured beside the one ggml kept) is measured on AFTER's
tree with its one switch line set (:func:`with_lmul`), a row with ``before_edit`` on BEFORE's tree with its one
string replaced (:func:`edited`: #22768's VLEN-128 kernel forced at VLEN 256).  A compiler
given with ``--cc`` that the source does not hold yet gets the kernel cases clang's runs name.  ``--dry-run``
prints the commands and runs none.  Why: an estimator's change that needs more of a measurement than a row's
source kept (the scalar classes of the instruction mix) is priced on every row by measuring it again, the same
way, not by hand.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.config import cache_dir
from harness.core.matrix import ISAS, Matrix
from harness.core.proc import execute
from harness.cost.calibration import sources
from harness.cost.prices import per_token
from harness.jobs.cost_suite_runs import Options


def _cases(run: Mapping[str, Any], side: str) -> list[str]:
    """The kernel cases (not model-shaped slices) a source's run holds on one side, in their order."""
    out: list[str] = []
    for r in run.get(side, []):
        if not str(r.get("name", "")).startswith(per_token.CASE_PREFIX) and r["case"] not in out:
            out.append(r["case"])
    return out


def _specs(raw: Mapping[str, Any], run: Mapping[str, Any]) -> list[str]:
    names = {r.get("name") for side in ("head", "base") for r in run.get(side, [])}
    return [c["spec"] for c in sources.model_cases(raw)
            if per_token.case_name(per_token.parse_spec(c["spec"])[0]) in names]


def row(name: str) -> dict[str, Any]:
    """Row ``name`` of the data file, as written there."""
    raw = next((r for r in sources.read()[1] if r["name"] == name), None)
    if raw is None:
        raise sources.CalibrationError(f"{name}: no such row in {sources.DATA}")
    return raw


def plan(name: str, compilers: list[str] | None, trees: tuple[Path, Path], out: Path) -> list[tuple[str, list[str]]]:
    """(compiler, ``rvvdiff cost`` arguments) of each run that measures row ``name`` again."""
    raw = row(name)
    runs = sources.load_source(name).get("per_compiler", {})
    if not runs:
        raise sources.CalibrationError(f"{name}: no committed source to measure again ({sources.source_path(name)})")
    before, after = trees
    vlen, first = int(raw["vlen"]), next(iter(runs.values()))
    isa = next(r["isa"] for side in ("head", "base") for r in first.get(side, []))
    out_runs: list[tuple[str, list[str]]] = []
    for cc in compilers or list(runs):
        run = runs.get(cc) or {"head": [r for r in first.get("head", []) if "model" not in r["case"]],
                               "base": [r for r in first.get("base", []) if "model" not in r["case"]]}
        on = Matrix(vlens=(vlen,), isas=(isa,), compilers={cc: tuple(ISAS)}, tree=str(after))
        kernels = _cases(run, "head")
        if kernels:
            on_both = bool(_cases(run, "base"))
            out_runs.append((cc, Options(on, base=str(before) if on_both else None, workers="1",
                                         k=" or ".join(f"{c}-vlen{vlen}" for c in kernels),
                                         out=out / f"{cc}-kernel").argv()))
        for i, spec in enumerate(_specs(raw, run)):
            out_runs.append((cc, Options(on, base=str(before), workers="1", k="model", model=spec,
                                         out=out / f"{cc}-model{i}").argv()))
    return out_runs


def export(git_dir: Path, commit: str) -> Path:
    """The tree of ``commit`` (kept under the cache: an exported tree is never changed)."""
    dest = cache_dir() / "calibration-trees" / commit
    if (dest / "CMakeLists.txt").is_file():
        return dest
    cp = execute(["git", "--git-dir", str(git_dir), "archive", "--format=tar", commit], timeout=600, text=False)
    if cp.returncode != 0:
        raise sources.CalibrationError(f"git archive {commit} in {git_dir}: {cp.stderr.decode(errors='replace').strip()} "
                                   "(--ggml-git: a clone of ggml-org/ggml with the row's commits)")
    with tempfile.TemporaryDirectory(dir=dest.parent.parent) as tmp:
        with tempfile.TemporaryFile() as f:
            f.write(cp.stdout)
            f.seek(0)
            with tarfile.open(fileobj=f) as t:
                t.extractall(tmp, filter="data")
        dest.parent.mkdir(parents=True, exist_ok=True)
        Path(tmp).rename(dest)
    return dest


#: A row's ``after_lmul``: the line of AFTER's tinyBLAS_RVV that picks its tiling, and where it is.
SGEMM = Path("src/ggml-cpu/llamafile/sgemm.cpp")
LMUL_LINE = "#define LMUL 4"


def with_edit(tree: Path, file: str | Path, old: str, new: str, tag: str) -> Path:
    """``tree`` with the one occurrence of ``old`` in ``file`` replaced by ``new``, a tree of its own beside it named
    with ``tag``: a configuration a pull request measured in another column or row of its table (a row's
    ``after_lmul`` or ``before_edit``).  The exported tree is never changed."""
    dest = tree.with_name(f"{tree.name}-{tag}")
    if (dest / file).is_file():
        return dest
    text = (tree / file).read_text() if (tree / file).is_file() else ""
    if text.count(old) != 1:
        raise sources.CalibrationError(f"{tree / file}: no single '{old.strip()}' to replace ({tag})")
    with tempfile.TemporaryDirectory(dir=tree.parent) as tmp:
        shutil.copytree(tree, Path(tmp) / "t", symlinks=True)
        (Path(tmp) / "t" / file).write_text(text.replace(old, new))
        (Path(tmp) / "t").rename(dest)
    return dest


def with_lmul(tree: Path, lmul: int) -> Path:
    """``tree`` with tinyBLAS_RVV's tiling switch set to ``lmul`` (a row's ``after_lmul``)."""
    return with_edit(tree, SGEMM, LMUL_LINE + "\n", f"#define LMUL {lmul}\n", f"lmul{lmul}")


def edited(tree: Path, edit: dict[str, str]) -> Path:
    """``tree`` with a row's ``before_edit`` (``file``, ``old``, ``new``) made, named by a digest of the edit."""
    tag = "edit-" + hashlib.sha256(f"{edit['file']}\0{edit['old']}\0{edit['new']}".encode()).hexdigest()[:10]
    return with_edit(tree, edit["file"], edit["old"], edit["new"], tag)


def trees_of(raw: dict[str, Any], ggml_git: Path) -> tuple[Path, Path]:
    """A row's BEFORE and AFTER trees: its commits exported from ``ggml_git``, with its ``before_edit`` and
    ``after_lmul`` made."""
    before, after = export(ggml_git, raw["before"]), export(ggml_git, raw["after"])
    if raw.get("before_edit"):
        before = edited(before, raw["before_edit"])
    if raw.get("after_lmul"):
        after = with_lmul(after, int(raw["after_lmul"]))
    return before, after


def measure_again(name: str, ggml_git: Path, compilers: list[str] | None, out: Path | None, *,
                  dry_run: bool = False) -> int:
    """Row ``name`` measured again (module docstring; ``rvvdiff calibration measure``): its trees exported from
    ``ggml_git``, the runs :func:`plan` gives made one after the other by ``rvvdiff cost`` (none with ``dry_run``:
    their commands printed), and recorded; the command's exit status (1: a run failed, nothing recorded)."""
    out = out or Path(tempfile.mkdtemp(prefix="calibration-"))
    runs = plan(name, compilers, trees_of(row(name), ggml_git), out)
    for cc, args in runs:
        print("rvvdiff cost " + shlex.join(args), flush=True)
        if dry_run:
            continue
        # no timeout: the user watches the run (its output goes to the terminal) and can interrupt it
        if execute([sys.executable, "-m", "harness.commands.cli", "cost", *args], timeout=None, stdout=None,
                   stderr=None).returncode != 0:
            print(f"rvvdiff calibration measure: a run failed ({cc}); nothing recorded", file=sys.stderr)
            return 1
    if dry_run:
        return 0
    for cc in dict.fromkeys(cc for cc, _ in runs):
        files = [Path(args[args.index("--out") + 1]) / "cost.json" for c, args in runs if c == cc]
        new = sources.record(name, files, cc)
        print(f"{sources.DATA}: {name} ({cc}): {new}")
    return 0
