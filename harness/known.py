"""Known failures: real kernel bugs of a ggml tree (findings), expected to fail until fixed.

``known_failures.toml`` at the project root (or ``$RVVDIFF_KNOWN_FAILURES``) holds entries::

    [[known]]
    test = "cases/test_quant_dot.py::test_vec_dot[q4_0-vlen512-*]"  # fnmatch pattern on the node id
    ggml = ["0c1e570"]       # commit prefixes or "ggml-<version>" where it applies; ["*"]: any tree
    reason = "what is wrong, in one line"
    reproducer = "the shortest command or file that shows it"

A matching test is marked ``xfail(strict=True)``: it must keep failing, and
one that starts to pass fails the run ("known failure now passes: remove the
entry").  An entry that matches no collected test is reported, so stale
entries do not pile up.  The gate's exit code therefore fails only on new
failures and on fixed-but-listed ones.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

KNOWN_FILE = Path(__file__).resolve().parent.parent / "known_failures.toml"


def known_file() -> Path:
    """``$RVVDIFF_KNOWN_FAILURES`` if set (e.g. a CI job's own list), else the project's file."""
    return Path(os.environ.get("RVVDIFF_KNOWN_FAILURES") or KNOWN_FILE)


@dataclass(frozen=True)
class Known:
    test: str
    ggml: tuple[str, ...]
    reason: str
    reproducer: str

    def applies_to(self, commit: str, version: str) -> bool:
        return any(g == "*" or commit.startswith(g) or g == f"ggml-{version}" for g in self.ggml)

    def matches(self, nodeid: str) -> bool:
        return fnmatch.fnmatchcase(nodeid, self.test)


class KnownFailuresError(ValueError):
    pass


def load(path: Path | None = None) -> list[Known]:
    path = path or known_file()
    if not path.exists():
        return []
    data = tomllib.loads(path.read_text())
    out = []
    for i, e in enumerate(data.get("known", [])):
        missing = [k for k in ("test", "ggml", "reason", "reproducer") if k not in e]
        if missing:
            raise KnownFailuresError(f"{path}: entry {i + 1} lacks {', '.join(missing)}")
        ggml = e["ggml"] if isinstance(e["ggml"], list) else [e["ggml"]]
        out.append(Known(e["test"], tuple(ggml), e["reason"], e["reproducer"]))
    return out
