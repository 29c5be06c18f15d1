"""The ``python -m`` forms of programs that became ``rvvdiff`` subcommands, kept as aliases for one release.

An alias says so on stderr and runs the subcommand with the arguments it was given, in a child process:
the command line (harness/commands) is the top layer, which the module of a lower layer that keeps the
old form may not import.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence

from harness.core.proc import execute


def forward(old: str, new: Sequence[str], argv: Sequence[str]) -> int:
    """Run ``rvvdiff NEW ARGV`` for ``python -m OLD ARGV`` and return its exit status."""
    print(f"rvvdiff: `python -m {old}` is an alias kept for one release: use `rvvdiff {shlex.join(new)}`",
          file=sys.stderr)
    r = execute([sys.executable, "-m", "harness.commands.cli", *new, *argv], timeout=None, stdout=None, stderr=None)
    return r.returncode or 0
