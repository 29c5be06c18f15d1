"""What is written from the table of the matrix (harness/core/matrix.py): the table of the axes in
docs/options.md (between ``<!-- matrix -->`` markers) and the job matrices of ci/github/rvvdiff.yml
(between ``# matrix: JOB`` and ``# /matrix`` comments): the PR gate's shards (VLEN x ISA build x
compiler, without the builds a compiler cannot make) and the nightly model job's (VLEN x compiler x stress).

``rvvdiff docs --write options`` rewrites both; tests/test_matrix.py fails when either is stale.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from harness.core.matrix import AXES, CANNOT_MAKE, COMPILER_NAMES, DEFAULT_ISAS, EMULATOR_VALUES, emulator_value

#: The files written from the table, relative to the checkout.
OPTIONS_DOC = "docs/options.md"
WORKFLOW = "ci/github/rvvdiff.yml"

_ROWS = re.compile(r"(<!-- matrix -->\n)(.*?)(<!-- /matrix -->)", re.S)
_JOB = re.compile(r"^(?P<indent>[ \t]*)# matrix: (?P<job>\w+)\n(?P<body>.*?)^(?P=indent)# /matrix$", re.S | re.M)


def markdown() -> str:
    """docs/options.md's table of the matrix's options, and the constraints between the axes."""
    rows = ["| option | values | default |", "|---|---|---|"]
    rows += [f"| `{a.option} {a.metavar}` | {a.what} | {a.default_words} |" for a in AXES]
    rows += ["", "Between the axes:", ""]
    rows += [f"- `{e.name}` runs " + (f"VLEN {', '.join(map(str, e.vlens))}" if e.vlens else "at its own VLEN only")
             + ("; it has the stress mode" if e.stress else "; it has no stress mode") for e in EMULATOR_VALUES]
    rows += [f"- {why}: the `{isa}` targets of `{cc}` are skipped with the compiler's own words"
             for (cc, isa), why in CANNOT_MAKE.items()]
    return "\n".join(rows) + "\n"


def _qemu_vlens() -> str:
    return ", ".join(map(str, emulator_value("qemu").vlens or ()))


def job_matrix(job: str) -> list[str]:
    """The lines of a CI job's matrix (without indentation): ``gate``: a shard per QEMU VLEN x vector ISA build
    x compiler, but the builds a compiler cannot make; ``model``: a shard per QEMU VLEN x compiler x stress
    mode (each night one part of the week's split, docs/model.md)."""
    lines = [f"vlen: [{_qemu_vlens()}]"]
    if job == "gate":
        lines.append(f"isa: [{', '.join(DEFAULT_ISAS)}]")
    elif job != "model":
        raise ValueError(f"{WORKFLOW}: no job matrix {job!r} (gate, model)")
    lines.append(f"cc: [{', '.join(COMPILER_NAMES)}]")
    if job == "model":
        lines.append('stress: ["off", "on"]')  # quoted: YAML 1.1 reads a bare off / on as a boolean
    gaps = [(cc, isa, why) for (cc, isa), why in CANNOT_MAKE.items() if isa in DEFAULT_ISAS]
    if job == "gate" and gaps:
        lines.append("exclude:")
        for cc, isa, why in gaps:
            lines += [f"  # {why}", f"  - isa: {isa}", f"    cc: {cc}"]
    return lines


def render_options(text: str) -> str:
    """``text`` (docs/options.md) with its ``<!-- matrix -->`` table replaced by the current :func:`markdown`."""
    if not _ROWS.search(text):
        raise ValueError(f"{OPTIONS_DOC} has no <!-- matrix --> ... <!-- /matrix --> block")
    return _ROWS.sub(lambda m: m.group(1) + markdown() + m.group(3), text)


def render_workflow(text: str) -> str:
    """``text`` (the workflow) with each ``# matrix: JOB`` block replaced by the current :func:`job_matrix`."""
    if not _JOB.search(text):
        raise ValueError(f"{WORKFLOW} has no '# matrix: JOB' ... '# /matrix' block")

    def block(m: re.Match[str]) -> str:
        ind = m.group("indent")
        return (f"{ind}# matrix: {m.group('job')}\n" + "".join(f"{ind}{line}\n" for line in job_matrix(m.group("job")))
                + f"{ind}# /matrix")
    return _JOB.sub(block, text)


#: Each written file and how it is rendered.
RENDERED: dict[str, Callable[[str], str]] = {OPTIONS_DOC: render_options, WORKFLOW: render_workflow}
