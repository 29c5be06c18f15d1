"""The failure ``rvvdiff bisect`` replays: one test at one target (VLEN, ISA build, stress mode, compiler)
and the example database holding its shrunk example, read from a failure report or named by a test id."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.config import PROJECT_ROOT, VLENS
from harness.core.errors import RvvdiffError
from harness.core.matrix import AXIS, ISAS, POINT_FIELDS, Matrix
from harness.report.ids import parse_id

ROOT = PROJECT_ROOT
#: The option of each field of a point (``--vlen`` ...), for messages.
OPTIONS = {f: AXIS[a].option for a, f in POINT_FIELDS.items()}


class BisectError(RvvdiffError, RuntimeError):
    """The bisect cannot start or go on; the message says what to do."""


@dataclass(frozen=True)
class Failure:
    """One test at one target, and the example database that holds its shrunk example."""

    nodeid: str
    vlen: int
    isa: str
    stress: bool
    example_db: Path
    origin: str  # the report directory it came from, or "--test"
    #: The compiler of its build ("": the setting's; an id of a run of several compilers names it).
    compiler: str = ""

    def target_args(self) -> list[str]:
        return Matrix(vlens=(self.vlen,), isas=(self.isa,), stress=(self.stress,)).pytest_args()


def _replay_parts(replay: str) -> tuple[Path | None, list[str]]:
    """(directory, pytest argv) of a report's replay line ``cd DIR && pytest ...``."""
    try:
        tokens = shlex.split(replay)
    except ValueError:  # not a line rvvdiff wrote: no database to read from it
        return None, []
    cwd = None
    if tokens[:1] == ["cd"] and len(tokens) > 2 and tokens[2] == "&&":
        cwd, tokens = Path(tokens[1]), tokens[3:]
    return cwd, tokens


def default_db(rootdir: Path) -> Path:
    """Hypothesis's database when a run names none: ``.hypothesis/examples`` in its directory."""
    return rootdir / ".hypothesis" / "examples"


def from_report(path: Path, example_db: Path | None = None) -> Failure:
    """The failure a report describes (its directory, or its ``case.json``).  Its example database
    is ``example_db`` when given, else the one the failing run used: the replay line's
    ``--example-db``, else the ``.hypothesis`` of the directory the replay line runs in."""
    d = path if path.is_dir() else path.parent
    if not (d / "case.json").is_file():
        raise BisectError(f"{path}: no case.json here; give a directory under <report-dir>/cases/ "
                          f"(or --test NODEID --vlen V --isa I)")
    try:
        case = json.loads((d / "case.json").read_text())
        nodeid, t = case["test"], case["target"]
        vlen, isa, stress = int(t["vlen"]), str(t["isa"]), bool(t["stress"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BisectError(f"{d / 'case.json'}: not a failure report rvvdiff wrote ({e!r})") from None
    if example_db is None:
        cwd, argv = _replay_parts(case.get("replay") or "")
        if "--example-db" in argv[:-1]:
            example_db = Path(argv[argv.index("--example-db") + 1])
            if not example_db.is_absolute():
                example_db = (cwd or ROOT) / example_db
        else:
            example_db = default_db(cwd or ROOT)
    return Failure(nodeid, vlen, isa, stress, Path(example_db), str(d), str(t.get("compiler", "")))


def from_test(nodeid: str, asked: Mapping[str, Any], example_db: Path | None = None) -> Failure:
    """A failure named by its test id; the target is the one the id names, and what the command line asked
    (``asked``: :func:`harness.core.matrix.one_values`) must agree with it: a test id names its VLEN, ISA build
    and stress mode (and its compiler, in a run of several)."""
    tid = parse_id(nodeid)
    if tid is None:
        raise BisectError(f"--test {nodeid}: not the id of a differential test "
                          f"(cases/FILE.py::TEST[...-vlenN-ISA] or [...-vlenN-ISA-stress])")
    compiler = asked.get("compiler")
    named = {"vlen": tid.vlen, "isa": tid.isa, "stress": tid.stress, "compiler": tid.compiler or compiler}
    for name, given in asked.items():
        if given is not None and given != named.get(name, given):
            raise BisectError(f"{OPTIONS[name]} {given} disagrees with the test id {nodeid} (which names {named[name]})")
    if tid.vlen not in VLENS:
        raise BisectError(f"--test {nodeid}: VLEN {tid.vlen} is not one of {', '.join(map(str, VLENS))}")
    if tid.isa not in ISAS:
        raise BisectError(f"--test {nodeid}: ISA build {tid.isa!r} is not one of {', '.join(ISAS)}")
    return Failure(nodeid, tid.vlen, tid.isa, tid.stress, Path(example_db or default_db(ROOT)), "--test",
                   tid.compiler or compiler or "")
