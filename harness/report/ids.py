"""Test ids: parsing ``<kernel>-vlen<N>-<isa>[-stress][-<compiler>]``, the command that replays one, and
the suite's module ids (``cases/test_vec_dot.py``), the same in a checkout and in an installed wheel."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.core.config import PROJECT_ROOT
from harness.core.matrix import COMPILER_NAMES, DEFAULT_EMULATOR, ISAS, Matrix, split_compiler

#: The compiler component ends an id only when a run selected more than one compiler.
ID_RE = re.compile(r"^(?:(?P<kernel>.*)-)?vlen(?P<vlen>\d+)-(?P<isa>[a-z0-9_]+)(?P<stress>-stress)?"
                   rf"(?:-(?P<compiler>{'|'.join(map(re.escape, COMPILER_NAMES))}))?$")


@dataclass(frozen=True)
class TestId:
    nodeid: str
    test: str  # function name
    kernel: str  # the kernel / type part of the id ("" when the test has none)
    vlen: int
    isa: str
    stress: bool
    #: The compiler the id names ("" when the run had one compiler: its ids name none).
    compiler: str = ""

    @property
    def row(self) -> str:
        return f"{self.test}[{self.kernel}]" if self.kernel else self.test

    @property
    def column(self) -> str:
        return f"{self.isa}{' stress' if self.stress else ''}{f' {self.compiler}' if self.compiler else ''}"


#: The packages of test modules: their ids are relative to PROJECT_ROOT, whatever pytest's rootdir.
SUITE_PACKAGES = ("cases", "costs")


def suite_module_id(path: Path) -> str | None:
    """``cases/test_vec_dot.py`` for a test module of the suite (under PROJECT_ROOT's cases/ or
    costs/), None for any other.  The plugin gives the module this id whatever the rootdir (an
    installed wheel run as ``pytest --pyargs cases`` has site-packages/cases as its rootdir), so that
    known failures, replay lines, the gate's reports and Hypothesis's saved examples see one id."""
    try:
        rel = Path(path).resolve().relative_to(PROJECT_ROOT)
    except ValueError:
        return None
    return rel.as_posix() if len(rel.parts) > 1 and rel.parts[0] in SUITE_PACKAGES else None


def as_pyarg(nodeid: str) -> str:
    """``cases/test_vec_dot.py::test_vec_dot[...]`` as ``--pyargs`` names it, ``cases.test_vec_dot::test_vec_dot[...]``."""
    path, sep, rest = nodeid.partition("::")
    return str(Path(path).with_suffix("")).replace("/", ".") + sep + rest


def parse_id(nodeid: str) -> TestId | None:
    """Split ``file::test[kernel-vlenN-isa(-stress)(-compiler)]``; None for tests without a target."""
    m = re.match(r"^(?P<path>[^:]*)::(?P<test>[^\[]+)\[(?P<params>.*)\]$", nodeid)
    if not m:
        return None
    p = ID_RE.match(m.group("params"))
    if not p:
        return None
    return TestId(nodeid, m.group("test"), p.group("kernel") or "", int(p.group("vlen")), p.group("isa"),
                  bool(p.group("stress")), p.group("compiler") or "")


def replay_argv(nodeid: str, *, ggml_src: str | None = None, example_db: str | None = None,
                known_failures: str = "apply", compiler: str = "", emulator: str = DEFAULT_EMULATOR,
                extra: Sequence[str] = (), pyargs: bool = False) -> list[str]:
    """``pytest`` arguments that rerun one differential test alone (its target from its id), and so
    its saved shrunk example first: the plugin's replay line, the gate's per tree, bisect's.  ``--cc``
    names the compiler first: the id's, else ``compiler`` (a one-compiler run's ids name none); an id
    that names one is replayed with every compiler selected, so that it stays the same id.  ``emulator``
    is named when it is not the default.
    ``pyargs``: the test named by its module (:func:`as_pyarg`), for an installed wheel, from any directory."""
    tid = parse_id(nodeid)
    named = split_compiler(nodeid)[1]
    # An id names its compiler (Hypothesis's key of the saved example) only with several selected: all, its own first.
    order = [named, *(c for c in COMPILER_NAMES if c != named)] if named else [compiler] if compiler in COMPILER_NAMES else []
    target = Matrix(vlens=(tid.vlen,) if tid else None, isas=(tid.isa,) if tid else None,
                    compilers={c: tuple(ISAS) for c in order} or None, stress=(tid.stress,) if tid else None,
                    emulator=emulator if emulator != DEFAULT_EMULATOR else None, tree=str(ggml_src) if ggml_src else None)
    argv = ["pytest", *(["--pyargs", as_pyarg(nodeid)] if pyargs else [nodeid]), *target.pytest_args(), "-p", "no:xdist"]
    if example_db:
        argv += ["--example-db", str(example_db)]
    if known_failures != "apply":
        argv += ["--known-failures", known_failures]
    return argv + list(extra)


def slug(nodeid: str) -> str:
    """``cases/test_vec_dot.py::test_vec_dot[f16-vlen128-zvfh]`` -> ``test_vec_dot.test_vec_dot_f16-vlen128-zvfh``."""
    path, _, name = nodeid.partition("::")
    return re.sub(r"[^A-Za-z0-9_.+=-]+", "_", f"{Path(path).stem}.{name}").strip("_")[:150]
