"""Marks put on collected tests: not in this tree, known failures."""

from __future__ import annotations

import fnmatch

import pytest

from harness.core.matrix import DEFAULT_ISAS
from harness.emulators import registry
from harness.ggml import known, tree
from harness.ggml.source import GgmlSource
from harness.plugin.options import compilers


def requirements(item: pytest.Item) -> list[str]:
    """What a test's kernel needs from the tree: the ``requires`` of its parameters (kernel table
    entries declare the ggml enumerators, functions and structs they call)."""
    out: list[str] = []
    for p in getattr(getattr(item, "callspec", None), "params", {}).values():
        out += list(getattr(p, "requires", ()) or ())
    return list(dict.fromkeys(out))


def tree_needs(item: pytest.Item) -> list[str]:
    """What a test needs from the tree besides its kernels' names: the ``tree_needs`` of its parameters, files or
    ``file:function`` where a bare name would be found in another file too (harness/ggml/tree.py's ``Tree.has``);
    they decide "not in this tree" only, not what the PR gate's call graph starts from."""
    out: list[str] = []
    for p in getattr(getattr(item, "callspec", None), "params", {}).values():
        out += list(getattr(p, "tree_needs", ()) or ())
    return out


def entry_points(item: pytest.Item) -> list[str]:
    """The code a test exists to check: its parameters' ``entry_points`` where a family declares
    them (a graph op, not the vec_dot another family owns), else their ``requires``."""
    out: list[str] = []
    for p in getattr(getattr(item, "callspec", None), "params", {}).values():
        out += list(getattr(p, "entry_points", None) or getattr(p, "requires", ()) or ())
    return list(dict.fromkeys(out))


def mark_not_in_tree(source: GgmlSource, items: list[pytest.Item]) -> None:
    """Skip, as "not in this tree", the tests whose kernel needs a name the tree lacks."""
    inv = tree.of(source)
    for it in items:
        missing = inv.missing(dict.fromkeys([*requirements(it), *tree_needs(it)]))
        if missing:
            it.add_marker(pytest.mark.skip(reason=f"not in this tree: {', '.join(missing)} ({source.label})"))


def mark_known_failures(config: pytest.Config, source: GgmlSource,
                        items: list[pytest.Item]) -> tuple[list[known.KnownState], list[known.Known]]:
    """Mark the tests of the known failures that apply to ``source`` (harness/ggml/known.py: by the
    fingerprint of the buggy function, or the tree named by ``ggml``) as strict xfails.

    Returns the verdicts of the entries whose function changed in this tree (their tests are judged
    afresh: the summary says so) and the stale entries (none of their tests matched a full run)."""
    try:
        verdicts = known.judge(known.load(), source)  # reads each named source file once
    except (known.KnownFailuresError, ValueError, OSError) as e:
        raise pytest.UsageError(str(e)) from None
    emulator = config.getoption("emulator")
    chosen = compilers(config)
    # An entry of this emulator only, or of one compiler only, comes first: its reason is the one a
    # test there fails for.  An entry of compilers the run did not select is left out.
    entries = sorted((v.entry for v in verdicts if v.applies and v.entry.emulator in ("", emulator)
                      and any(v.entry.for_compiler(c) for c in chosen)),
                     key=lambda k: (k.emulator == "", not k.compilers))
    # Entries whose function changed in this tree: their tests are judged afresh; say so.
    changed = [v for v in verdicts if v.state == "changed"
               and any(v.entry.matches(it.nodeid, emulator, _compiler(it)) for it in items)]
    used: set[int] = set()
    for it in items:
        isa = getattr(_target(it), "isa", None)
        novector = isa is not None and not isa.vector  # rv64gc: only entries of code without RVV branches
        for i, k in enumerate(entries):
            if k.matches(it.nodeid, emulator, _compiler(it)) and not (novector and not k.in_build_without_vector(source)):
                used.add(i)
                it.add_marker(pytest.mark.xfail(strict=True, reason=f"known failure: {k.reason} (reproducer: {k.reproducer})"))
                break
    # An entry is stale when its test file ran over the whole matrix (every VLEN, ISA build and
    # stress mode, for a compiler of the entry) and none of its tests matched; a narrower selection
    # says nothing about it.  (Only an emulator with the stress mode runs the whole matrix.)
    kind = registry.kind(emulator)
    full = (kind.has_stress and tuple(config.getoption("vlen")) == kind.vlens
            and tuple(config.getoption("isa")) == DEFAULT_ISAS and tuple(config.getoption("rvv_stress")) == (False, True))
    whole = [c for c, isas in chosen.items() if set(isas) >= set(DEFAULT_ISAS)]
    # A file whose tests choose their own targets (the rvvdiff_targets mark: the model family's budget) runs its
    # whole matrix only with --thorough.
    narrowed = {it.nodeid.split("::", 1)[0] for it in items
                if getattr(it, "get_closest_marker", lambda _: None)("rvvdiff_targets")}
    files = {it.nodeid.split("::", 1)[0] for it in items} - (set() if narrowed and config.getoption("thorough") else narrowed)
    unused = [k for i, k in enumerate(entries)
              if full and i not in used and any(k.for_compiler(c) for c in whole)
              and any(fnmatch.fnmatchcase(f, k.test.split("::", 1)[0]) for f in files)]
    return changed, unused


def _target(item: pytest.Item):
    """A test's target (None when it has none)."""
    return getattr(getattr(item, "callspec", None), "params", {}).get("target")


def _compiler(item: pytest.Item) -> str:
    """The compiler of a test's target ("" when it has none)."""
    return getattr(_target(item), "compiler", "")
