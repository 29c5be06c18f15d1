"""Known failures: real kernel bugs (findings), expected to fail wherever the buggy code is.

``harness/data/known_failures.toml`` (package data: found on any install; or ``$RVVDIFF_KNOWN_FAILURES``) holds entries::

    [[known]]
    test = "cases/test_vec_dot.py::test_vec_dot*[[]bf16-vlen*-zvfbfwma-stress]"  # fnmatch on node ids
    function = "ggml_vec_dot_bf16"       # the buggy function, or a list of them
    file = "src/ggml-cpu/vec.cpp"        # relative to the tree's ggml directory (or one per function)
    fingerprint = ["95d71924d9e3e17c"]   # versions of that code known to have the bug
    reason = "what is wrong, in one line"
    reproducer = "the shortest command or file that shows it"
    # ggml = ["0c1e570", "ggml-0.25.3", "*"]  # optional: trees named explicitly
    # fix = "q4_K_int16_subblock_sum"      # optional: harness/data/fixes/<fix>.patch fixes it (`rvvdiff fixes`)
    # fix_pending = "why there is no fix patch yet"  # instead of fix, for a finding of the pinned tree
    # emulator = "spike"                    # optional: only on this emulator (default: every one)
    # compiler = "gcc14"                    # optional: only in builds of this compiler, or a list
                                            # of them (default: every compiler)

**Compilers.**  With more than one compiler selected (``--cc``), test ids end in the compiler's
name (``...-vlen512-zvfh-gcc14]``); ``test`` globs are matched against the id with that component
removed, so one glob covers every compiler, and ``compiler`` says which builds show the bug (a
bug that needs one compiler's code generation or register allocation).  An entry whose
compilers the run did not select is neither applied nor "stale".

**When an entry applies.**  An entry describes a bug, not a commit: it applies to the tree under
test when

* every function it names is in the tree and each one's current fingerprint is among the entry's
  ``fingerprint`` values (so a tree of another month that still has the same code gets the same
  expected failures), or
* the tree is named by ``ggml``: a commit prefix, ``"ggml-<version>"`` (the tree's GGML_VERSION),
  or ``"*"`` (any tree).  This is for bugs that no function fingerprint can describe; the
  fingerprint is the primary key.

A tree where a named function changed does not get the entry: its tests are judged afresh (a
failure there is a new failure, to be looked at), and the run says so in its summary.  A tree that
lacks a named function (or its file) does not get the entry either, and the entry is not "stale"
there.  ``fingerprint`` is one flat list for all the entry's functions: it may hold several
versions of a function (code that changed for another reason and kept the bug); each function's
fingerprint must be in it.

**The fingerprint** is :attr:`harness.ggml.csource.Function.fingerprint` (signature and body, comments
removed, whitespace collapsed, and for a function with inline assembly the string literals that hold its
instructions; sha256, 16 hex digits; an entry listing the fingerprint without the assembly, as entries written
before it was read do, matches too) of the definition an RVV build of the widest
ISA build (:data:`FINGERPRINT_BUILD`: v + zfh + zvfh + zvfbfwma and the extensions they imply)
compiles, read with :func:`harness.ggml.csource.rvv_macros` of that build's extensions plus the
object-like macros the file's own local headers define in that build (simd-mappings.h's
``GGML_SIMD``, which vec.h's RVV paths sit under; see :func:`_macros`).  Why that
definition: ggml defines many kernels once per architecture in ``#if`` branches (vec.cpp's
``ggml_vec_dot_bf16`` has an RVV branch and x86 / ARM / Power ones inside it; quants.c has
``_xtheadvector`` and RVV twins), and the bugs listed here are in the RVV code.  Reading every
branch would make an unrelated x86 change look like a change of the bug; reading the RVV branch
the ISA build of the entry compiles keeps exactly the code that runs.  The widest build is a
superset: with zvfbfwma defined, every branch an RVV build takes for zfh / zvfh / zvfbfwma is the
one read, and one set of macros for every entry keeps the rule simple.  What it does not see: a
fallback branch only a narrower build compiles (e.g. the ``v`` build's path of an FP16 function
that has a zvfh path).  A change there alone keeps the entry, and if it fixed the bug the strict
xfail reports the pass; a change of the read branch alone drops the entry and the failures show
as new.  Both are loud, neither is silent.

**The build without V** (``rv64gc``, ggml's generic C) compiles none of the RVV code the
fingerprints read: an entry applies to its tests only when every function it names compiles to the
same code without the vector extension (a bug in code with no RVV branch), or when it names no
function (:meth:`Known.in_build_without_vector`).

**Strictness.**  A test matching an applicable entry is marked ``xfail(strict=True)``: it must keep
failing, and one that starts to pass fails the run ("known failure now passes: remove the entry,
or its fingerprint").  An applicable entry that matches no collected test (on a run over the whole
matrix of its file) is reported, so stale entries do not pile up.  The gate's exit code therefore
fails only on new failures and on fixed-but-listed ones.

``rvvdiff known [--ggml-src TREE]`` shows each entry, its functions' fingerprints in a tree and
whether it applies there (and why not); ``rvvdiff known --fingerprint FILE FUNCTION...`` prints
the lines to paste into a new entry.  Source files are read once per process (and again only when
they change on disk).
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from harness.core import settings
from harness.core.config import DATA_DIR, ISA_BUILDS
from harness.core.errors import RvvdiffError
from harness.core.matrix import COMPILER_NAMES, split_compiler
from harness.ggml import csource
from harness.ggml.source import GgmlSource, resolve

KNOWN_FILE = DATA_DIR / "known_failures.toml"

#: The ISA build whose RVV code the fingerprints are taken of: the one with the most extensions.
FINGERPRINT_BUILD = max(ISA_BUILDS.values(), key=lambda b: len(b.extensions)).name
#: ``__riscv_v`` keeps csource's value (the compiler's 1000000), hence ``v`` is left out.
FINGERPRINT_MACROS = csource.rvv_macros(e for e in ISA_BUILDS[FINGERPRINT_BUILD].extensions if e != "v")

_KEYS_REQUIRED = ("test", "reason", "reproducer")
_KEYS_FUNCTION = ("function", "file", "fingerprint")
_KEYS = (*_KEYS_REQUIRED, *_KEYS_FUNCTION, "ggml", "seen_in", "fix", "fix_pending", "emulator", "compiler")
_FINGERPRINT = re.compile(r"[0-9a-f]{16}")


def known_file() -> Path:
    """``$RVVDIFF_KNOWN_FAILURES`` if set (e.g. a CI job's own list), else the project's file."""
    return settings.path("KNOWN_FAILURES") or KNOWN_FILE


class KnownFailuresError(RvvdiffError, ValueError):
    """known_failures.toml is unreadable or an entry is malformed; the message names the entry."""


# ------------------------------------------------------------------ fingerprints of a tree

@functools.lru_cache(maxsize=64)
def _compiled(path: Path, mtime_ns: int) -> tuple[dict[str, csource.Function], tuple[csource.Note, ...]]:
    f = csource.read(path)
    funcs = f.functions(csource.with_includes(path, FINGERPRINT_MACROS), members=True)
    return funcs, tuple(n for n in f.notes if n.file == path)


@functools.lru_cache(maxsize=64)
def _every_branch(path: Path, mtime_ns: int) -> dict[str, csource.Function]:
    return csource.read(path).functions(None, members=True)


def definitions(path: Path) -> dict[str, csource.Function]:
    """The functions of ``path`` an RVV build of :data:`FINGERPRINT_BUILD` compiles (read once per
    content change)."""
    return _compiled(path, path.stat().st_mtime_ns)[0]


def fingerprint(source: GgmlSource, file: str, function: str) -> str | None:
    """The fingerprint of ``function`` in ``file`` of ``source`` (None when the tree lacks either)."""
    path = source.ggml / file
    if not path.is_file():
        return None
    f = definitions(path).get(function)
    return f.fingerprint if f else None


def fingerprint_without_asm(source: GgmlSource, file: str, function: str) -> str | None:
    """The fingerprint of ``function`` with its inline assembly's literals blanked, as fingerprints were taken
    before they read inline assembly (:attr:`csource.Function.fingerprint_without_asm`; None when absent)."""
    path = source.ggml / file
    f = definitions(path).get(function) if path.is_file() else None
    return f.fingerprint_without_asm if f else None


@functools.lru_cache(maxsize=64)
def _compiled_without_vector(path: Path, mtime_ns: int) -> dict[str, csource.Function]:
    macros = csource.with_includes(path, csource.scalar_macros(FINGERPRINT_MACROS))
    return csource.read(path).functions(macros, members=True)


def same_without_vector(source: GgmlSource, file: str, function: str) -> bool:
    """``function`` compiles to the same code in a build without the vector extension (rv64gc) as in
    the RVV build its fingerprint reads: the code holds no RVV branch."""
    path = source.ggml / file
    if not path.is_file():
        return False
    rvv = definitions(path).get(function)
    scalar = _compiled_without_vector(path, path.stat().st_mtime_ns).get(function)
    return rvv is not None and scalar is not None and rvv.fingerprint == scalar.fingerprint


def _absence(source: GgmlSource, file: str, function: str) -> str:
    """Why ``function`` has no fingerprint in ``source``, in words."""
    path = source.ggml / file
    if not path.is_file():
        return f"{file} not in this tree"
    every = _every_branch(path, path.stat().st_mtime_ns)
    notes = _compiled(path, path.stat().st_mtime_ns)[1]
    if function in every:
        cond = " && ".join(every[function].conditions) or "a condition this reader could not evaluate"
        why = (f"{function} is in {file} but not compiled by an RVV {FINGERPRINT_BUILD} build "
               f"(line {every[function].line}, under #if {cond})")
    else:
        why = f"{function} not in this tree's {file}"
    if notes:
        why += f" ({len(notes)} #if of {file} could not be evaluated, first: {notes[0]})"
    return why


# ------------------------------------------------------------------ entries

@dataclass(frozen=True)
class Known:
    test: str
    reason: str
    reproducer: str
    functions: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # one per function
    fingerprints: frozenset[str] = frozenset()
    ggml: tuple[str, ...] = ()
    #: Trees other than the pinned one where the bug was seen (e.g. "ggml 2026-08-21 (d99724f2)"):
    #: an entry without it is a finding of the pinned tree and must apply to it (tests/test_known.py).
    seen_in: tuple[str, ...] = ()
    #: The patch that fixes the bug: ``harness/data/fixes/<fix>.patch`` (harness/jobs/fix_checks.py verifies it).
    fix: str = ""
    #: Why a finding has no fix patch yet (found, explained, its fix not written): every finding of the
    #: pinned tree names its ``fix`` or says this (tests/test_fixes.py), never neither or both.
    fix_pending: str = ""
    #: Only on this emulator ("spike", "qemu"); empty: on every emulator.  For a kernel that relies on
    #: behaviour the specification leaves to the hart, and only one emulator chooses the failing side
    #: (misaligned vector element accesses trap on Spike, not on QEMU).
    emulator: str = ""
    #: Only in builds of these compilers (harness/core/matrix.py's ``COMPILER_NAMES``); empty: every compiler.
    compilers: tuple[str, ...] = ()
    number: int = 0  # 1-based position in the file, for messages

    def names_tree(self, source: GgmlSource) -> bool:
        """The tree is named explicitly by ``ggml``."""
        return any(g == "*" or source.commit.startswith(g) or g == f"ggml-{source.version}" for g in self.ggml)

    def matches(self, nodeid: str, emulator: str, compiler: str) -> bool:
        """The entry is about this test of a run on ``emulator``: its glob matches the id without its
        compiler component, and the compiler of the test's build (the one the id names, else ``compiler``,
        the run's: a run of one compiler names none in its ids) is one of the entry's.  A ``compiler`` of
        "" (a test without a build) matches only an entry of every compiler."""
        bare, named = split_compiler(nodeid)
        return (fnmatch.fnmatchcase(bare, self.test) and self.emulator in ("", emulator)
                and self.for_compiler(named or compiler))

    def in_build_without_vector(self, source: GgmlSource) -> bool:
        """The entry holds in a build without V (rv64gc, ggml's generic C): it names no function (a
        tree named by ``ggml``: nothing says which code), or every function it names holds no RVV
        branch (:func:`same_without_vector`).  A bug in RVV code is not in a build that compiles none."""
        return all(same_without_vector(source, f, n) for n, f in zip(self.functions, self.files))

    def for_compiler(self, compiler: str) -> bool:
        """The bug shows in builds of ``compiler``."""
        return not self.compilers or compiler in self.compilers

    def judge(self, source: GgmlSource) -> KnownState:
        states = tuple(FunctionState(n, f, fingerprint(source, f, n), self.fingerprints,
                                     fingerprint_without_asm(source, f, n))
                       for n, f in zip(self.functions, self.files))
        missing = [s for s in states if s.current is None]
        changed = [s for s in states if s.current is not None and not s.known]
        if self.functions and not missing and not changed:
            return KnownState(self, True, "fingerprint",
                           "the fingerprint" + ("s match" if len(states) > 1 else " matches"), states)
        if self.names_tree(source):
            return KnownState(self, True, "listed", f"the tree is named by ggml = {list(self.ggml)}", states)
        if not self.functions:
            return KnownState(self, False, "unlisted", f"the tree is not among ggml = {list(self.ggml)}", states)
        if missing:
            return KnownState(self, False, "missing", "; ".join(_absence(source, s.file, s.name) for s in missing), states)
        return KnownState(self, False, "changed", "; ".join(
            f"{s.name} changed (fingerprint {s.current} here, not among the entry's)" for s in changed), states)


@dataclass(frozen=True)
class FunctionState:
    name: str
    file: str
    current: str | None  # fingerprint in the tree; None when the tree lacks it
    listed: frozenset[str] = field(default=frozenset(), repr=False)
    #: the fingerprint with inline assembly's literals blanked (what entries written before assembly was read list)
    without_asm: str | None = field(default=None, repr=False)

    @property
    def known(self) -> bool:
        return self.current is not None and (self.current in self.listed or self.without_asm in self.listed)


@dataclass(frozen=True)
class KnownState:
    """Whether an entry applies to a tree, and why (``state``: fingerprint, listed, changed,
    missing, unlisted)."""

    entry: Known
    applies: bool
    state: str
    why: str
    functions: tuple[FunctionState, ...] = ()


def judge(entries: list[Known], source: GgmlSource) -> list[KnownState]:
    """Every entry's verdict on ``source`` (each source file read once)."""
    return [k.judge(source) for k in entries]


def _strings(value: object, where: str, key: str) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, str) and v.strip() for v in items):
        raise KnownFailuresError(f"{where}: {key} must be a non-empty string or a list of them, not {value!r}")
    return tuple(v.strip() for v in items)


def _entry(e: object, number: int, path: Path) -> Known:
    if not isinstance(e, dict):
        raise KnownFailuresError(f"{path}: entry {number} is not a table ([[known]] with key = value lines)")
    where = f"{path}, entry {number}" + (f" (test = {e['test']!r})" if isinstance(e.get("test"), str) else "")
    unknown = sorted(set(e) - set(_KEYS))
    if unknown:
        hints = [f"{u!r}" + (f" (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(u, _KEYS, 1)) else "")
                 for u in unknown]
        raise KnownFailuresError(f"{where}: unknown key {', '.join(hints)}; the keys are {', '.join(_KEYS)} "
                                 "(harness/ggml/known.py)")
    missing = [k for k in _KEYS_REQUIRED if k not in e]
    if missing:
        raise KnownFailuresError(f"{where}: lacks {', '.join(missing)}")
    for k in _KEYS_REQUIRED:
        if not isinstance(e[k], str) or not e[k].strip():
            raise KnownFailuresError(f"{where}: {k} must be a non-empty string, not {e[k]!r}")
    has = [k for k in _KEYS_FUNCTION if k in e]
    if has and len(has) < len(_KEYS_FUNCTION):
        lacking = [k for k in _KEYS_FUNCTION if k not in e]
        raise KnownFailuresError(
            f"{where}: has {', '.join(has)} but lacks {', '.join(lacking)}; an entry names its buggy "
            "function(s), their file and fingerprint(s) together (`rvvdiff known --fingerprint FILE FUNCTION` "
            "prints them)")
    if not has and "ggml" not in e:
        raise KnownFailuresError(
            f"{where}: says nowhere which trees have the bug; give function, file and fingerprint "
            "(`rvvdiff known --fingerprint FILE FUNCTION` prints them), or name trees with ggml = [...]")
    functions: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    prints: frozenset[str] = frozenset()
    if has:
        functions = _strings(e["function"], where, "function")
        files = _strings(e["file"], where, "file")
        if len(files) == 1:
            files = files * len(functions)
        elif len(files) != len(functions):
            raise KnownFailuresError(f"{where}: {len(files)} files for {len(functions)} functions; give one file "
                                     "for all, or one per function")
        for f in files:
            p = PurePosixPath(f)
            if p.is_absolute() or ".." in p.parts or "\\" in f:
                raise KnownFailuresError(f"{where}: file {f!r} must be a path inside the tree's ggml directory, "
                                         "e.g. \"src/ggml-cpu/vec.cpp\"")
        values = _strings(e["fingerprint"], where, "fingerprint")
        bad = [v for v in values if not _FINGERPRINT.fullmatch(v)]
        if bad:
            raise KnownFailuresError(f"{where}: fingerprint {', '.join(map(repr, bad))} is not 16 lowercase hex "
                                     "digits (`rvvdiff known --fingerprint FILE FUNCTION` prints one)")
        prints = frozenset(values)
    ggml = _strings(e["ggml"], where, "ggml") if "ggml" in e else ()
    seen_in = _strings(e["seen_in"], where, "seen_in") if "seen_in" in e else ()
    fix = _strings(e["fix"], where, "fix")[0] if "fix" in e else ""
    fix_pending = _strings(e["fix_pending"], where, "fix_pending")[0] if "fix_pending" in e else ""
    if fix and fix_pending:
        raise KnownFailuresError(f"{where}: fix and fix_pending both set: a finding has its fix patch or says why not")
    emulator = _strings(e["emulator"], where, "emulator")[0] if "emulator" in e else ""
    if emulator not in ("", "qemu", "spike"):
        raise KnownFailuresError(f"{where}: emulator {emulator!r} must be \"qemu\" or \"spike\"")
    compilers = _strings(e["compiler"], where, "compiler") if "compiler" in e else ()
    bad = [c for c in compilers if c not in COMPILER_NAMES]
    if bad:
        raise KnownFailuresError(f"{where}: compiler {', '.join(map(repr, bad))} is not one of "
                                 f"{', '.join(COMPILER_NAMES)} (harness/core/matrix.py)")
    return Known(e["test"].strip(), e["reason"].strip(), e["reproducer"].strip(), functions, files, prints, ggml,
                 seen_in=seen_in, fix=fix, fix_pending=fix_pending, emulator=emulator, compilers=compilers,
                 number=number)


def load(path: Path | None = None) -> list[Known]:
    """The entries of ``path`` (default :func:`known_file`); raises KnownFailuresError on any problem."""
    explicit = path is not None or settings.get("KNOWN_FAILURES") is not None
    path = path or known_file()
    if not path.exists():
        if explicit:
            raise KnownFailuresError(f"{path}: no such known-failures file (set by RVVDIFF_KNOWN_FAILURES or "
                                     "given); point it at a file, or unset it to use the project's")
        raise KnownFailuresError(f"{path}: the project's known-failures file is missing from this install of rvvdiff "
                                 "(it is package data of harness/data/): reinstall rvvdiff, point RVVDIFF_KNOWN_FAILURES "
                                 "at a copy, or run with --known-failures ignore")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise KnownFailuresError(f"{path}: not valid TOML: {e}") from None
    other = sorted(set(data) - {"known"})
    if other:
        raise KnownFailuresError(f"{path}: unknown top-level key {', '.join(map(repr, other))}; entries are "
                                 "[[known]] tables")
    entries = data.get("known", [])
    if not isinstance(entries, list):
        raise KnownFailuresError(f"{path}: 'known' must be an array of tables: write each entry as [[known]]")
    return [_entry(e, i + 1, path) for i, e in enumerate(entries)]


# ------------------------------------------------------------------ rvvdiff known

def describe(verdicts: list[KnownState], source: GgmlSource, path: Path) -> list[str]:
    """The lines ``rvvdiff known`` prints."""
    lines = [f"known failures: {path}", f"ggml tree: {source.describe()}",
             f"fingerprints: the definitions an RVV {FINGERPRINT_BUILD} build compiles "
             f"(extensions {', '.join(ISA_BUILDS[FINGERPRINT_BUILD].extensions)})", ""]
    for v in verdicts:
        k = v.entry
        lines.append(f"{k.number:3}. {k.test}" + (f"  (on {k.emulator} only)" if k.emulator else "")
                     + (f"  (built by {', '.join(k.compilers)} only)" if k.compilers else ""))
        lines.append(f"     {'applies' if v.applies else 'does not apply'}: {v.why}")
        for s in v.functions:
            mark = "listed" if s.known else ("not in this tree" if s.current is None else "NOT listed")
            lines.append(f"       {s.name}  {s.file}  {s.current or '-'}  ({mark})")
        if k.ggml and v.state != "listed":
            lines.append(f"       ggml = {list(k.ggml)} does not name this tree")
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.state] = counts.get(v.state, 0) + 1
    labels = {"fingerprint": "by fingerprint", "listed": "by ggml listing", "changed": "function changed",
              "missing": "function not in this tree", "unlisted": "tree not listed"}
    applies = sum(v.applies for v in verdicts)
    lines += ["", f"{len(verdicts)} entries, {applies} apply to this tree: "
              + ", ".join(f"{counts[s]} {labels[s]}" for s in labels if s in counts)]
    return lines


def fingerprint_lines(source: GgmlSource, file: str, functions: list[str]) -> list[str]:
    """The ``function`` / ``file`` / ``fingerprint`` lines of a new entry, or KnownFailuresError
    saying why a function has no fingerprint."""
    given = Path(file).expanduser()
    for base in (Path.cwd(), source.root):
        cand = (base / given).resolve() if not given.is_absolute() else given.resolve()
        if cand.is_file() and cand.is_relative_to(source.ggml.resolve()):
            file = cand.relative_to(source.ggml.resolve()).as_posix()
            break
    path = source.ggml / file
    if not path.is_file():
        raise KnownFailuresError(f"no file {file} in {source.ggml} (give FILE relative to the tree's ggml "
                                 "directory, e.g. src/ggml-cpu/vec.cpp)")
    defs = definitions(path)
    out = []
    for name in functions:
        f = defs.get(name)
        if f is None:
            why = _absence(source, file, name)
            close = difflib.get_close_matches(name, list(defs), 3)
            raise KnownFailuresError(why + (f"; close names: {', '.join(close)}" if close else ""))
        cond = f" under #if {' && '.join(f.conditions)}" if f.conditions else ""
        out.append(f"# {name}: {file}:{f.line}{cond}, fingerprint {f.fingerprint} in {source.describe()}")
    prints = [definitions(path)[n].fingerprint for n in functions]
    fn = f'"{functions[0]}"' if len(functions) == 1 else "[" + ", ".join(f'"{n}"' for n in functions) + "]"
    out += [f"function = {fn}", f'file = "{file}"', "fingerprint = [" + ", ".join(f'"{p}"' for p in prints) + "]"]
    return out


def main(ggml_src: str | None, fingerprint_of: list[str] | None, path: Path | None = None) -> int:
    """``rvvdiff known``: exit 0, or 2 with the reason on a bad file or tree."""
    try:
        source = resolve(ggml_src)
        if fingerprint_of:
            if len(fingerprint_of) < 2:
                raise KnownFailuresError("--fingerprint FILE FUNCTION [FUNCTION ...]: give the file and at least "
                                         "one function")
            print("\n".join(fingerprint_lines(source, fingerprint_of[0], fingerprint_of[1:])))
            return 0
        path = path or known_file()
        print("\n".join(describe(judge(load(path), source), source, path)))
        return 0
    except (RvvdiffError, OSError) as e:
        print(f"rvvdiff known: {e}", file=sys.stderr)
        return 2
