"""A series as real commits: ``git format-patch`` output, and ``git am`` of it onto a tree.

:func:`base_repo` makes a git repository whose single commit is a ggml / llama.cpp tree (read through
``--work-tree``: the tree itself is never written); :func:`commit` applies one diff to a clone of it and commits it
as the author of :func:`identity` (git's own: the person who runs the generator), dated when it is made, or with
the date of its previous write when its patch did not change (:func:`previous`: a re-render does not churn the
files of unchanged commits); :func:`format_patches` writes the commits as ``git format-patch`` writes them
(``000N-*.patch``: the commit's id on the ``From`` line, its author and date, the numbered subject, the diffstat,
the diff and git's signature; 12-digit blob ids); :func:`am` applies such files to a clean clone with ``git am``.
Only the scratch repository's base commit, never written to a patch, has a fixed author and date
(:data:`BASE_AUTHOR`, :data:`BASE_DATE`).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from harness.core.errors import RvvdiffError
from harness.core.proc import Result, execute

BASE_DATE = 1795651200  # 2026-11-26 00:00:00 UTC: the scratch repository's base commit (never in a patch)
#: git's own test identity (its test suite's ``GIT_AUTHOR_NAME`` / ``GIT_AUTHOR_EMAIL``): the committed example series
#: are written as it, and a series page written as it says that it is an example.
TEST_IDENTITY = "A U Thor <author@example.com>"
_GIT_CONFIG = ["-c", "core.abbrev=12", "-c", "core.autocrlf=false", "-c", "commit.gpgsign=false",
               "-c", "user.useConfigOnly=false", "-c", "init.defaultBranch=master"]


class GitError(RuntimeError):
    """A git step failed; the message names the step and git's own words."""


class NoIdentity(RvvdiffError):
    """Git knows no author: the message says what to set."""


def identity(repo: Path | None = None) -> str:
    """The commits' author, ``Name <mail>``, as git itself would write it for the person who runs the generator:
    ``GIT_AUTHOR_NAME`` / ``GIT_AUTHOR_EMAIL`` when set, else ``git config user.name`` / ``user.email`` of the
    repository ``repo`` (default: the current directory's) and the user's git configuration."""
    said = {}
    for key, env in (("name", "GIT_AUTHOR_NAME"), ("email", "GIT_AUTHOR_EMAIL")):
        val = os.environ.get(env, "").strip()
        if not val:
            cp = execute(["git", *(["-C", str(repo)] if repo else []), "config", "--get", f"user.{key}"],
                         timeout=60).finished(f"git config user.{key}")
            val = cp.stdout.strip() if cp.returncode == 0 else ""
        said[key] = val
    if not said["name"] or not said["email"]:
        raise NoIdentity(_NO_IDENTITY.format(" and ".join(f"user.{k}" for k, v in said.items() if not v)))
    return f"{said['name']} <{said['email']}>"


#: What :func:`identity` says when git knows no author (one line: the commands that set one).
_NO_IDENTITY = ("the commits are written as you, and git has no {}: run "
                "git config --global user.name 'Your Name'; git config --global user.email you@example.org")


def _env(author: str, when: int | str | None) -> dict[str, str]:
    """The environment of a git command: ``author`` as author and committer, dated ``when`` (seconds, UTC; a
    format-patch ``Date:`` value, with its own offset) or, for None, now in the user's own time zone, as git dates a
    commit; no system or global configuration."""
    name, _, mail = author.partition(" <")
    who = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": mail.rstrip(">"), "GIT_COMMITTER_NAME": name,
           "GIT_COMMITTER_EMAIL": mail.rstrip(">"), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "LC_ALL": "C"}
    if isinstance(when, str):
        who.update(GIT_AUTHOR_DATE=when, GIT_COMMITTER_DATE=when)
    elif when is not None:
        who.update(GIT_AUTHOR_DATE=f"@{when} +0000", GIT_COMMITTER_DATE=f"@{when} +0000", TZ="UTC")
    return who


#: The author of the scratch repository's base commit (never written to a patch: format-patch writes the series'
#: own commits, whose author is :func:`identity`'s).
BASE_AUTHOR = "base <base@invalid>"


def git(repo: Path | None, *args: str, stdin: str | None = None, author: str = BASE_AUTHOR,
        when: int | str | None = BASE_DATE,
        git_dir: Path | None = None, work_tree: Path | None = None, check: bool = True) -> Result:
    argv = ["git", *_GIT_CONFIG]
    if git_dir is not None:
        argv += [f"--git-dir={git_dir}"]
    if work_tree is not None:
        argv += [f"--work-tree={work_tree}"]
    if repo is not None:
        argv += ["-C", str(repo)]
    cp = execute([*argv, *args], input=stdin, env=_env(author, when), timeout=600).finished(f"git {args[0]}")
    if check and cp.returncode != 0:
        raise GitError(f"git {' '.join(args[:3])} failed: {(cp.stderr or cp.stdout).strip()[:400]}")
    return cp


def base_repo(tree: Path, dest: Path, files: Sequence[str] | None = None, message: str = "base") -> Path:
    """``dest``: a repository whose one commit holds ``tree`` (its tracked-looking files: .gitignore is
    honoured, as in a clone) or only ``files`` of it.  ``tree`` is only read.  Returns ``dest``."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    git(dest, "init", "-q")
    gd = dest / ".git"
    if files is None:
        git(None, "add", "-A", ".", git_dir=gd, work_tree=tree)  # dest's own work tree stays empty: clone() it
    else:
        for f in files:
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tree / f, dest / f)
        git(dest, "add", "--", *files)
    git(dest, "commit", "-q", "-m", message)
    return dest


def clone(base: Path, dest: Path) -> Path:
    """A clean clone of ``base`` at ``dest`` (objects shared, files checked out)."""
    if dest.exists():
        shutil.rmtree(dest)
    git(None, "clone", "-q", "--shared", str(base), str(dest))
    return dest


def strip_header(patch_text: str) -> str:
    """The unified diff of an rvvdiff patch file: everything from the first ``--- a/`` line."""
    i = patch_text.find("\n--- a/")
    if patch_text.startswith("--- a/"):
        return patch_text
    if i < 0:
        raise GitError("no '--- a/' line: not a unified diff")
    return patch_text[i + 1:]


def commit(repo: Path, diff: str, message: str, *, author: str, when: str | None = None) -> None:
    """Apply ``diff`` (``-p1``, no fuzz) to ``repo``'s index and work tree and commit it as ``message`` by
    ``author``, dated now, or ``when`` (a ``Date:`` value of :func:`previous`; the committer's date too, so the same
    commit on the same parent has the same id)."""
    git(repo, "apply", "--index", "--whitespace=nowarn", "-", stdin=diff)
    git(repo, "commit", "-q", "-F", "-", stdin=message, author=author, when=when)


_STAMP = re.compile(r"\AFrom [0-9a-f]{40} |^Date: .*$", re.M)
_DATE = re.compile(r"^Date: (.*)$", re.M)


def unstamped(patch: str) -> str:
    """A format-patch file without what differs between two writes of the same change: the commit id, the date."""
    return _STAMP.sub("", patch)


def previous(out: Path) -> dict[str, tuple[str, str]]:
    """The ``000N-*.patch`` files of an earlier write in ``out``: file name -> (its text :func:`unstamped`, its
    ``Date:`` value)."""
    got = {}
    for f in sorted(out.glob("[0-9][0-9][0-9][0-9]-*.patch")):
        text = f.read_text()
        if m := _DATE.search(text.split("\ndiff --git ")[0]):
            got[f.name] = (unstamped(text), m.group(1))
    return got


def format_patches(repo: Path, count: int, out: Path) -> list[Path]:
    """The last ``count`` commits of ``repo`` as ``out/000N-<subject>.patch``, as ``git format-patch`` writes them
    by default (older files of that form removed)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("[0-9][0-9][0-9][0-9]-*.patch"):
        old.unlink()
    cp = git(repo, "format-patch", "-q", "-o", str(out), f"-{count}")
    return [Path(p) for p in cp.stdout.split()] or sorted(out.glob("[0-9][0-9][0-9][0-9]-*.patch"))


def am(repo: Path, patches: Sequence[Path]) -> tuple[bool, str]:
    """``git am`` the mbox files onto ``repo`` (a clean clone); (True, 'applies') or (False, git's first words),
    the repository left as it was (``git am --abort``)."""
    cp = git(repo, "am", "-q", *[str(p) for p in patches], check=False)
    if cp.returncode == 0:
        return True, "applies"
    git(repo, "am", "--abort", check=False)
    said = [ln for ln in (cp.stderr + cp.stdout).splitlines() if ln.strip() and not ln.startswith("hint:")]
    return False, " ".join(said[:3])[:300] or f"git am exit {cp.returncode}"
