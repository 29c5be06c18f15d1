"""The root of the errors rvvdiff reports to its user.

:class:`RvvdiffError` is the base of every error the harness raises on purpose with a message that
says what went wrong and what to do: a tree that cannot be read (SourceError), a missing tool
(ToolchainError), a build that failed (BuildError), a command that failed (CommandError), a
malformed known_failures.toml (KnownFailuresError), a git revision that does not exist
(RevisionError), a gate or a bisect that cannot go on (GateError, BisectError).  The command line
(harness/commands/cli.py) prints such an error as one line, ``rvvdiff COMMAND: message``, and
exits with status 2; anything else is a bug of rvvdiff and keeps its traceback.

The subclasses keep the built-in base they had (RuntimeError, ValueError, KeyError), so code
that catches them as such still does.
"""

from __future__ import annotations


class RvvdiffError(Exception):
    """An error the command line reports as a one-line message (``rvvdiff COMMAND: ...``) with exit
    status 2; its message says what is wrong and what to do."""


class UnknownName(RvvdiffError, KeyError):
    """A name given on the command line (a mutant, a fix) that its catalogue does not have; the
    message lists the names it has."""
