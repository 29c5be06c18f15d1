"""What a tree's CMake can express for an ISA build: the options it declares or reads, the plan of options
for an ISA build, and whether the -march ggml-cpu compiles with keeps the build's promise.  (Running CMake is
harness/toolchain/cmake_build.py's.)"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.config import CMAKE_OWN, COMMON_CMAKE, IsaBuild
from harness.ggml.source import GgmlSource


def cmake_options(isa: IsaBuild) -> dict[str, str]:
    """The options the harness wants for ``isa`` (what is passed is :func:`plan_options`)."""
    return {**COMMON_CMAKE, **isa.cmake, **isa.user_cmake}


# A CMake comment (line or bracket) outside a quoted argument; quoted arguments are kept.
_CMAKE_COMMENT = re.compile(r'("(?:\\.|[^"\\])*")|#\[(=*)\[.*?\]\2\]|#[^\n]*', re.S)


def _uncommented(cmake_text: str) -> str:
    return _CMAKE_COMMENT.sub(lambda m: m.group(1) or "", cmake_text)


_OPTION = re.compile(r'\b(?:option|cmake_dependent_option)\s*\(\s*([A-Za-z_]\w*)\s+"(?:\\.|[^"\\])*"'
                     r'(?:\s+([^\s)]+))?', re.I)


def declared_options(cmake_text: str) -> dict[str, str]:
    """``{name: default}`` of the ``option()`` (and ``cmake_dependent_option()``) commands in CMake text."""
    return {m.group(1): m.group(2) or "OFF" for m in _OPTION.finditer(_uncommented(cmake_text))}


# How CMake code reads a variable: ``${VAR}`` / ``$CACHE{VAR}`` anywhere (quoted or not), or a bare
# word of an ``if()`` / ``elseif()`` / ``while()`` condition (up to two levels of nested parentheses).
_REFERENCE = re.compile(r"\$(?:CACHE)?\{([A-Za-z_]\w*)\}")
_PARENS = r"\((?:[^()]|\([^()]*\))*\)"
_CONDITION = re.compile(rf"\b(?:if|elseif|while)\s*\(((?:[^()]|{_PARENS})*)\)", re.I)
_QUOTED = re.compile(r'"(?:\\.|[^"\\])*"')
_WORD = re.compile(r"(?<![\w${])[A-Za-z_]\w*")


def read_variables(cmake_text: str) -> set[str]:
    """The variables CMake text tests or expands, outside comments (``option()`` alone is not a read)."""
    text = _uncommented(cmake_text)
    names = set(_REFERENCE.findall(text))
    for cond in _CONDITION.finditer(text):
        names.update(_WORD.findall(_QUOTED.sub(" ", cond.group(1))))
    return names


# How CMake code sets a variable: ``set(VAR ...)`` or ``list(APPEND|PREPEND|INSERT ... VAR ...)``.
_SETS = re.compile(r"\bset\s*\(\s*([A-Za-z_]\w*)|\blist\s*\(\s*(?:APPEND|PREPEND|INSERT)\s+([A-Za-z_]\w*)", re.I)


def set_variables(cmake_text: str) -> set[str]:
    """The variables CMake text sets (``set()``, ``list(APPEND ...)``), outside comments."""
    return {a or b for a, b in _SETS.findall(_uncommented(cmake_text))}


def cmake_files(source: GgmlSource) -> list[Path]:
    """The CMake files a tree's ggml-base / ggml-cpu build reads: the top-level CMakeLists.txt, ggml's,
    ggml/src's, ggml/cmake/*.cmake and ggml-cpu's CMakeLists.txt / *.cmake.  All of them are part of
    the source's content hash (harness/ggml/source.py), so what is passed changes only with the key."""
    files = [source.root / "CMakeLists.txt", source.ggml / "CMakeLists.txt", source.ggml / "src" / "CMakeLists.txt"]
    for d in (source.ggml / "cmake", source.cpu_dir):
        if d.is_dir():
            files += sorted(p for p in d.rglob("*") if p.name == "CMakeLists.txt" or p.suffix == ".cmake")
    return [f for f in dict.fromkeys(files) if f.is_file()]


def tree_options(source: GgmlSource) -> dict[str, str]:
    """The options a tree's CMake declares, with their defaults."""
    out: dict[str, str] = {}
    for f in cmake_files(source):
        out.update(declared_options(f.read_text(errors="replace")))
    return out


def tree_sets(source: GgmlSource) -> set[str]:
    """The variables the CMake files under ggml/ set themselves."""
    return {n for f in cmake_files(source) if f.is_relative_to(source.ggml)
            for n in set_variables(f.read_text(errors="replace"))}


def tree_reads(source: GgmlSource) -> dict[str, str]:
    """``{variable: the first file that reads it}`` over the CMake files under ggml/ (the build's own)."""
    out: dict[str, str] = {}
    for f in cmake_files(source):
        if f.is_relative_to(source.ggml):
            for name in sorted(read_variables(f.read_text(errors="replace"))):
                out.setdefault(name, str(f.relative_to(source.root)))
    return out


@dataclass(frozen=True)
class CmakePlan:
    """What is passed to a tree's CMake for one ISA build, and whether the build can be expressed at all."""

    passed: dict[str, str]
    #: Wanted but neither declared nor read by the tree: not passed (recorded in the build log and meta).
    undeclared: dict[str, str]
    #: Why the ISA build cannot be expressed for this tree (an option it needs ON is neither declared nor read), or None.
    unavailable: str | None = None
    #: Passed without an ``option()`` because the tree's CMake reads them: ``{name: the file that reads it}``.
    read_only: dict[str, str] = field(default_factory=dict)


def plan_options(source: GgmlSource, isa: IsaBuild, declared: dict[str, str] | None = None,
                 read: dict[str, str] | None = None, sets: set[str] | None = None) -> CmakePlan:
    """The -D options for ``isa`` on ``source``: the wanted ones the tree honours, plus CMake's own.

    The tree honours an option it declares (``option()``) or whose variable a CMake file of its
    ggml build reads (:func:`read_variables`): ``if (GGML_RV_ZVFBFWMA)`` takes ``-DGGML_RV_ZVFBFWMA=ON``
    with or without an ``option()``.  An option of the ISA build itself (``isa.cmake``) wanted ON that
    the tree does not honour makes the build inexpressible (unless the build names it ``optional``); one wanted
    OFF is simply absent.  A variable of ``isa.user_cmake`` is passed only to a tree that reads it and sets it
    nowhere (the builder's setting in that tree's era).  Either way the -march check after configuring
    (:func:`march_mismatch`) judges what the build got.
    """
    declared = tree_options(source) if declared is None else declared
    read = tree_reads(source) if read is None else read
    sets = (tree_sets(source) if isa.user_cmake else set()) if sets is None else sets
    wanted = cmake_options(isa)
    passed = {k: v for k, v in wanted.items()
              if k in CMAKE_OWN or k.startswith("CMAKE_") or k in declared or k in read}
    own = {k for k in isa.user_cmake if k in sets}  # the tree sets these itself: nothing to pass, nothing missing
    passed = {k: v for k, v in passed.items() if k not in own}
    undeclared = {k: v for k, v in wanted.items() if k not in passed and k not in own}
    read_only = {k: read[k] for k in passed if k in read and k not in declared and k not in CMAKE_OWN}
    needed = [k for k, v in isa.cmake.items() if v.upper() == "ON" and k in undeclared and k not in isa.optional]
    reason = None
    if needed:
        reason = (f"no CMake file of {tree_name(source)} reads {' / '.join(needed)} (no option(), no if() or "
                  f"${{}} of it outside comments): its CMake cannot build {isa.name} ({isa.summary})")
    return CmakePlan(passed, undeclared, reason, read_only)


# What "g" stands for, and the base letters: never part of an ISA build's promise, always emulated.
_G = ("i", "m", "a", "f", "d", "zicsr", "zifencei")


_BASE = frozenset({*_G, "g", "c"})


def march_extensions(march: str) -> frozenset[str]:
    """The extensions a -march string names, in either era's spelling:
    ``rv64gc_zfh_v_zvfh_zicbop`` (2025) or ``rv64gcv_zfh_zvfh_zvfbfwma_zicbop_zihintpause`` (later)."""
    m = re.fullmatch(r"rv(?:32|64)([a-z0-9]*)((?:_[a-z0-9]+)*)", march.strip().lower().removeprefix("-march="))
    if not m:
        raise ValueError(f"not a RISC-V -march string: {march!r}")
    singles = re.sub(r"\d+(?:p\d+)?", "", m.group(1))  # drop version numbers (i2p1 ...)
    exts = set(singles)
    for tok in m.group(2).split("_")[1:]:
        tok = re.sub(r"(?<=[a-z])\d+p\d+$", "", tok)  # zfh1p0 -> zfh
        if len(tok) > 1 and not tok.startswith(("z", "s", "x")):
            exts.update(tok)  # a run of single letters after an underscore ("_v", "_vc")
        else:
            exts.add(tok)
    if "g" in exts:
        exts.update(_G)
    return frozenset(exts)


def march_of(cflags: tuple[str, ...] | list[str]) -> str | None:
    found = [f.removeprefix("-march=") for f in cflags if f.startswith("-march=")]
    return found[-1] if found else None


def _promise(isa: IsaBuild) -> str:
    banned = [e for e, on in isa.qemu.items() if not on and not e.endswith("min")]
    return f"{' + '.join(isa.march)}" + (f" without {', '.join(banned)}" if banned else "")


def march_mismatch(isa: IsaBuild, march: str | None) -> str | None:
    """Why a -march does not give what ``isa`` promises (its ``march`` extensions, none of its
    ``qemu`` properties that are off), or None when it does.  Extra extensions are fine here
    (see :func:`march_extras`)."""
    if march is None:
        return (f"ggml-cpu is compiled without -march, so without the {isa.name} build's "
                f"{' + '.join(isa.march)}")
    try:
        exts = march_extensions(march)
    except ValueError as e:
        return str(e)
    missing = [e for e in isa.march if e not in exts]
    banned = [e for e, on in isa.qemu.items() if not on and e in exts]
    if not (missing or banned):
        return None
    what = "; ".join(p for p in (f"lacks {', '.join(missing)}" if missing else "",
                                 f"has {', '.join(banned)}" if banned else "") if p)
    return f"its CMake compiles ggml-cpu with -march={march}, which {what}; the {isa.name} build is {_promise(isa)}"


def march_extras(isa: IsaBuild, march: str | None) -> tuple[str, ...]:
    """Extensions the tree's -march adds beyond the base ISA and ``isa``'s own (zicbop, zihintpause, zba ...)."""
    if march is None:
        return ()
    try:
        exts = march_extensions(march)
    except ValueError:
        return ()
    return tuple(sorted(exts - _BASE - set(isa.extensions)))


def tree_name(source: GgmlSource) -> str:
    """A short name of a tree for messages: ``ggml 0.9.4 at /path``."""
    return f"ggml {source.version} at {source.root}"
