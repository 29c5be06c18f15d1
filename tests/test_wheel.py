"""The wheel: built from the files git tracks, it holds every one of them under the packages, and
installed (not editable) into a fresh virtual environment it works without the checkout:
``rvvdiff --help``, ``rvvdiff known`` (package data) and a slice of the differential suite run as a
user of the wheel runs it, ``python -m pytest --pyargs cases ...``, from a directory outside the
checkout.

Offline: the wheel is built without build isolation by the running environment's setuptools, the
fresh environment gets the wheel alone (``--no-deps --no-index``) and reaches its dependencies
through a ``.pth`` naming this environment's site-packages (whose own ``.pth`` files, an editable
install of rvvdiff among them, are not read from there).  The kernel server and ggml build come
from the shared cache (``RVVDIFF_CACHE``), keyed by the sources, so the checkout's builds serve.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import helpers
import pytest
from launch import pytest_child, rvvdiff

from harness.report.ids import as_pyarg, replay_argv, suite_module_id

ROOT = helpers.ROOT


def _packages() -> tuple[str, ...]:
    """The top-level packages the wheel installs (pyproject.toml's ``packages.find`` include list)."""
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    return tuple(p.rstrip("*") for p in include)


def _git_files() -> list[str]:
    """The files of the checkout git tracks or would (untracked but not ignored), that exist."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--deduplicate"],
                         cwd=ROOT, capture_output=True, text=True, check=True, timeout=60).stdout
    return sorted(f for f in out.split("\0") if f and (ROOT / f).is_file())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the checkout's git files (no build output, no stray file)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for f in _git_files():
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, src / f)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                        "--disable-pip-version-check", "-q", "-w", str(tmp / "dist"), str(src)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"pip wheel failed (setuptools < 70.1 needs the wheel package: ci/setup.sh):\n{r.stderr}"
    (whl,) = (tmp / "dist").glob("rvvdiff-*.whl")
    return whl


def test_wheel_holds_every_file_of_the_packages(wheel: Path) -> None:
    """Package data is complete: every git file under a package is in the wheel (the kernel server's
    sources, harness/data/ and any folder added later), and nothing else is."""
    tops = _packages()
    want = {f for f in _git_files() if f.split("/", 1)[0] in tops}
    with zipfile.ZipFile(wheel) as z:
        have = {n for n in z.namelist() if not n.endswith("/") and n.split("/", 1)[0] in tops}
    assert {"harness/server/probe.c", "harness/data/known_failures.toml"} <= want  # the comparison sees data
    assert not want - have, f"git files missing from the wheel (MANIFEST.in): {sorted(want - have)}"
    assert not have - want, f"files in the wheel that git does not track: {sorted(have - want)}"


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed (not editable); its python."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                        "--disable-pip-version-check", "-q", str(wheel)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True, timeout=60).stdout.strip())
    deps = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))  # this environment's
    (purelib / "_rvvdiff_test_deps.pth").write_text("".join(f"{d}\n" for d in deps))
    return python


#: The environment of a run of the installed wheel: nothing points at the checkout.
OUTSIDE = {"PYTHONPATH": None, "PYTEST_ADDOPTS": None}


#: Run from the fresh environment: say where the packages come from, then run pytest in the same process.
_DRIVER = """
import sys, pytest, harness, cases, oracles
print("imported:", *(m.__file__ for m in (harness, cases, oracles)), sep="\\n")
sys.exit(pytest.main(sys.argv[1:]))
"""


def test_installed_wheel_runs_without_the_checkout(installed: Path, tmp_path: Path) -> None:
    venv = installed.parent.parent
    outside = tmp_path / "work"
    outside.mkdir()
    assert not outside.resolve().is_relative_to(ROOT)

    installed_rvvdiff = [venv / "bin" / "rvvdiff"]
    r = rvvdiff("--help", command=installed_rvvdiff, cwd=outside, env=OUTSIDE, timeout=600)
    assert r.stdout.startswith("usage: rvvdiff"), r.stdout + r.stderr
    r = rvvdiff("known", command=installed_rvvdiff, cwd=outside, env=OUTSIDE, timeout=600)  # package data, as installed
    assert "entries" in r.stdout, r.stdout + r.stderr

    r = pytest_child("--pyargs", "cases.test_vec_dot", "-k", "f16 and not bf16", "--vlen", "128", "--isa", "zvfh",
                     "--max-examples", "3", "-p", "no:xdist", "-q", command=[installed, "-c", _DRIVER], cwd=outside,
                     env=OUTSIDE, timeout=600, code=None)
    out = r.stdout + r.stderr
    files = [Path(ln) for ln in r.stdout.split("imported:\n", 1)[-1].splitlines()[:3]]
    assert len(files) == 3 and all(f.is_relative_to(venv) for f in files), f"not the installed packages:\n{out}"
    assert r.returncode == 0, out
    results = json.loads((outside / "reports" / "results.json").read_text())  # the reports go where the run started
    ids = [e["nodeid"] for e in results]
    assert len(ids) == 2 and all(i.startswith("cases/test_vec_dot.py::") and "[f16-vlen128-zvfh]" in i for i in ids), ids
    assert {e["outcome"] for e in results} == {"passed"}, results

    # A failure's replay line from an installed run names the test by its module (--pyargs): it selects it.
    argv = replay_argv(ids[0], pyargs=True)
    r = pytest_child(*argv[1:], "--collect-only", "-q", command=[installed, "-m", "pytest"], cwd=outside, env=OUTSIDE,
                     timeout=600)
    assert r.stdout.splitlines()[0] == ids[0], r.stdout + r.stderr


def test_suite_modules_keep_their_checkout_ids(tmp_path: Path) -> None:
    assert suite_module_id(ROOT / "cases" / "test_vec_dot.py") == "cases/test_vec_dot.py"
    assert suite_module_id(ROOT / "costs" / "test_cost.py") == "costs/test_cost.py"
    assert suite_module_id(ROOT / "tests" / "test_wheel.py") is None
    assert suite_module_id(tmp_path / "cases" / "test_x.py") is None  # another directory's cases/
    nodeid = "cases/test_vec_dot.py::test_vec_dot[f16-vlen128-zvfh]"
    assert as_pyarg(nodeid) == "cases.test_vec_dot::test_vec_dot[f16-vlen128-zvfh]"
    assert replay_argv(nodeid, pyargs=True)[:3] == ["pytest", "--pyargs", as_pyarg(nodeid)]
