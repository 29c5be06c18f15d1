"""Trees at git revisions: the PR gate's base and ``rvvdiff bisect``'s steps.

A revision of a user's checkout is materialised in rvvdiff's cache, never in the checkout
itself: one ``git clone --shared --no-checkout`` per (repository, slot) borrows the objects of
the user's repository, and each revision is a ``git checkout --detach`` in it.  Moving a slot
from one revision to the next rewrites only the files that differ, so the build directory of
that path (harness/toolchain/builds.py keys it by path) rebuilds incrementally: a bisect step costs the
objects the step changed, not a full build.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from harness.core.config import cache_dir, locked
from harness.core.errors import RvvdiffError
from harness.core.proc import Result, execute


class RevisionError(RvvdiffError, RuntimeError):
    """A revision that cannot be resolved or checked out; the message says what to do."""


def git(repo: Path, *args: str, check: bool = True, timeout: float = 600) -> Result:
    """``git -C repo args``, without the caller's ``GIT_*`` variables (a ``git bisect run`` script's
    would point at another repository); :class:`RevisionError` when it fails and ``check``, or times out."""
    unset = {k: None for k in os.environ if k.startswith("GIT_")}
    cp = execute(["git", "-C", repo, *args], timeout=timeout, env=unset)
    if cp.timed_out:
        raise RevisionError(f"git -C {repo} {' '.join(args)} did not finish within {timeout:g} s")
    if check and cp.returncode != 0:
        raise RevisionError(f"git -C {repo} {' '.join(args)} failed: {(cp.stderr or cp.stdout).strip()}")
    return cp


def _git(repo: Path, *args: str, timeout: float = 600) -> str:
    return git(repo, *args, timeout=timeout).stdout.strip()


def toplevel(path: Path) -> Path | None:
    """The work tree of the git checkout holding ``path`` (None when it is not in one)."""
    try:
        return Path(_git(Path(path), "rev-parse", "--show-toplevel", timeout=30))
    except (RevisionError, FileNotFoundError):
        return None


def commit(repo: Path, rev: str) -> str:
    """The full hash of ``rev`` in ``repo``."""
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except RevisionError:
        raise RevisionError(f"{rev!r} is neither a directory nor a revision of the git checkout {repo} "
                            f"(fetch it first, e.g. git -C {repo} fetch origin {rev})") from None


def subject(repo: Path, rev: str) -> str:
    """``<short hash> <commit date> <subject>``."""
    return _git(repo, "log", "-1", "--format=%h %cd %s", "--date=short", rev)


def merge_base(repo: Path, target: str | None) -> tuple[str, str]:
    """The merge-base of ``HEAD`` with the branch it targets: ``target`` when given, else
    ``origin/$GITHUB_BASE_REF`` (GitHub pull requests), else the first of origin/master,
    origin/main, master, main that exists.  Returns (commit, the branch used)."""
    cands = [target] if target else (
        [f"origin/{os.environ['GITHUB_BASE_REF']}"] if os.environ.get("GITHUB_BASE_REF") else
        ["origin/master", "origin/main", "master", "main"])
    for c in cands:
        try:
            ref = commit(repo, c)
        except RevisionError:
            continue
        try:
            return _git(repo, "merge-base", "HEAD", ref), c
        except RevisionError as e:
            raise RevisionError(f"no merge-base of HEAD and {c} in {repo} (a shallow clone? fetch more history, "
                                f"e.g. git fetch --deepen 200, or give --base): {e}") from None
    raise RevisionError(f"cannot tell which branch {repo} targets (tried {', '.join(cands)}): give --base REV "
                        f"or --target-branch BRANCH")


def checkout(repo: Path, rev: str, slot: str) -> Path:
    """A work tree of ``repo`` at ``rev`` in rvvdiff's cache (``slot`` names it: "base",
    "bisect"); the same slot is reused, so consecutive revisions rebuild incrementally."""
    sha = commit(repo, rev)
    key = hashlib.sha256(str(Path(repo).resolve()).encode()).hexdigest()[:12]
    d = cache_dir() / "checkouts" / f"{Path(repo).name}-{key}-{slot}"
    with locked(d.with_suffix(".lock")):
        if not (d / ".git").exists():
            d.parent.mkdir(parents=True, exist_ok=True)
            _git(Path(repo), "clone", "-q", "--shared", "--no-checkout", str(Path(repo).resolve()), str(d))
        try:
            _git(d, "checkout", "-q", "--detach", "--force", sha)
        except RevisionError:  # a commit the clone does not know yet (fetched into repo later)
            _git(d, "fetch", "-q", str(Path(repo).resolve()), sha)
            _git(d, "checkout", "-q", "--detach", "--force", sha)
        _git(d, "clean", "-q", "-fdx")
    return d


def resolve_base(head_dir: Path, base: str | None, target_branch: str | None) -> tuple[str, str]:
    """The PR gate's BASE: (its path, how it was chosen).  ``base`` a directory is taken as it is; a
    revision of HEAD's checkout, or without ``base`` the merge-base of HEAD with the branch it targets
    (:func:`merge_base`), is checked out in the cache's "base" slot (:func:`checkout`)."""
    if base and Path(base).is_dir():
        return str(Path(base).resolve()), f"directory {base}"
    repo = toplevel(head_dir)
    if repo is None:
        raise RevisionError(f"{head_dir} is not a git checkout, so BASE must be a directory: give --base PATH"
                            + (f" ({base!r} is not a directory)" if base else ""))
    if base:
        sha = commit(repo, base)
        how = f"revision {base} of {repo} ({subject(repo, sha)})"
    else:
        sha, branch = merge_base(repo, target_branch)
        how = f"merge-base of HEAD with {branch} ({subject(repo, sha)})"
    return str(checkout(repo, sha, "base")), how
