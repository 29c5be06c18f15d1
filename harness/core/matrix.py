"""The test matrix: the axes a run of the differential suite spans, in one table, each option parsed once.

The axes (:data:`AXES`) are VLEN, ISA build, compiler, tail/mask stress, emulator and ggml tree.  Each
names its option (``--vlen``, ``--isa``, ``--cc``, ``--rvv-stress``, ``--emulator``, ``--ggml-src``),
its values, its default and its grammar; the constraints between the axes stand beside them: the
VLENs each emulator runs and whether it has the stress mode (:data:`EMULATOR_VALUES`: QEMU 128 to
1024, Spike also 2048 and 4096, a board its own VLEN only), and the ISA builds a compiler cannot make
(:data:`CANNOT_MAKE`: GCC 14 and zvfbfwma).

A command line becomes one typed value, a :class:`Matrix`, at its edge: :func:`add_options` declares
the options (one spelling, grammar and help) on the pytest plugin (harness/plugin/options.py) and on
every ``rvvdiff`` subcommand that takes them, each parsed once by its axis's parser, and
:meth:`Matrix.of` reads them back.  :meth:`Matrix.pytest_args` is the one writer of a matrix as the
pytest arguments a command passes on to the suite (harness/core/runner.py); :func:`from_args` reads the
matrix of a pytest command line kept as data (a mutant's ``select:`` line).  The options' rows of
docs/options.md and the job matrices of ci/github/rvvdiff.yml are written from the table
(harness/core/matrix_doc.py).  One target of a matrix is a :class:`Point` (VLEN, ISA build, stress,
compiler, emulator), passed whole past the command line; what a command asked of one target
(``add_options(..., one=True)``) is :func:`one_values`, laid over a point by :meth:`Point.given`.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.core.config import (
    DISPATCH_V,
    DISPATCH_V_ZVFH,
    DISPATCH_VARIANTS,
    ISA_BUILDS,
    NOVECTOR,
    SPACEMIT,
    SPIKE_VLENS,
    VLENS,
    IsaBuild,
)

# ------------------------------------------------------------------ the values and their constraints

#: Every ISA build by name: the vector builds of ggml-cpu's kernels, SpacemiT's backend, and some selected by name
#: only: the build without V (rv64gc, ggml's generic C) and the RVV variants of a distribution's dispatch build
#: (riscv64_v: V alone; riscv64_v_zvfh: V + zfh + zvfh, on a tree with the proposal that adds it; docs/dispatch.md).
#: ``all`` and the default are the vector builds: ggml-cpu's, which the kernel families test, and SpacemiT's, which
#: its family tests.
ISAS: dict[str, IsaBuild] = {**ISA_BUILDS, SPACEMIT.name: SPACEMIT, NOVECTOR.name: NOVECTOR, **DISPATCH_VARIANTS}
DEFAULT_ISAS: tuple[str, ...] = (*ISA_BUILDS, SPACEMIT.name)


@dataclass(frozen=True)
class CompilerValue:
    """A compiler by the name test ids, known failures and ``--cc`` give it."""

    name: str
    what: str


#: The compilers (harness/toolchain/compilers.py's registry says how each is found and installed;
#: tests/test_matrix.py holds the two together).  Named here, in the first layer, because test ids and
#: the known failures (harness/ggml/known.py) name them too.
COMPILER_VALUES: tuple[CompilerValue, ...] = (
    CompilerValue("clang", "zig's clang"),
    CompilerValue("gcc14", "GCC 14, Debian stable's (ci/setup.sh --gcc14)"),
)
COMPILER_NAMES: tuple[str, ...] = tuple(c.name for c in COMPILER_VALUES)
#: The compiler of a run that names none and has no ``RVVDIFF_COMPILER`` (harness/toolchain/compilers.py's ``selected``).
DEFAULT_COMPILER = "clang"

#: (compiler, ISA build) pairs the compiler cannot make, and why: the targets stay in the matrix (their
#: tests are skipped with the compiler's own words, harness/toolchain/builds.py probes it), and what plans
#: a matrix leaves them out: the CI workflow's jobs, the main job's selection, a series' test runs.
CANNOT_MAKE: dict[tuple[str, str], str] = {
    ("gcc14", "zvfbfwma"): "GCC 14 cannot make the zvfbfwma build: it does not know the extension (GCC 15 does)",
    ("gcc14", "spacemit"): "GCC 14 cannot make the spacemit build: Debian's binutils 2.40 know no IME instruction, so "
                           "the tree's FindSMTIME probe finds neither IME1 nor IME2 and spacemit/ime.cpp stops with "
                           '#error "RISCV64_SPACEMIT_IME1 or RISCV64_SPACEMIT_IME2 not defined" (the backend needs an '
                           "IME assembler: SpacemiT's toolchain, binutils 2.46 or clang with rvvdiff's additions)",
}


def can_make(compiler: str, isa: str) -> bool:
    """Whether ``compiler`` can make ISA build ``isa`` (:data:`CANNOT_MAKE`)."""
    return (compiler, isa) not in CANNOT_MAKE


@dataclass(frozen=True)
class EmulatorValue:
    """An emulator (or a board) by the name ``--emulator`` gives it, with what it can run."""

    name: str
    #: The VLENs it runs; None: a board, whose VLEN is its own, read from its hardware.
    vlens: tuple[int, ...] | None
    #: Whether it has QEMU's tail/mask stress mode.
    stress: bool
    what: str


EMULATOR_VALUES: tuple[EmulatorValue, ...] = (
    EmulatorValue("qemu", VLENS, True, "qemu-riscv64 user mode"),
    EmulatorValue("spike", SPIKE_VLENS, False, "Spike, the RISC-V reference simulator (bare metal, one thread; "
                  "install: ci/setup.sh --spike)"),
    EmulatorValue("native", None, False, "this riscv64 host's own CPU"),
    EmulatorValue("ssh:HOST[:DIR]", None, False, "a RISC-V board over ssh (docs/board.md)"),
)
DEFAULT_EMULATOR = "qemu"
#: ``ssh:HOST[:DIR]``: a board reached over ssh (harness/emulators/board.py).
SSH_SPEC = re.compile(r"^ssh:(?P<host>[A-Za-z0-9_.@\[\]-]+)(?::(?P<dir>.+))?$")


def emulator_value(name: str) -> EmulatorValue:
    """The table's entry of an emulator's name (``ssh:...``: the board entry); ValueError otherwise."""
    for e in EMULATOR_VALUES:
        if name == e.name or (e.name.startswith("ssh:") and SSH_SPEC.match(name)):
            return e
    raise ValueError(f"--emulator {name}: give qemu, spike, native or ssh:HOST[:DIR] (a board reached over ssh; "
                     "docs/board.md)")


#: ``--rvv-stress``: off, on (also the bare flag) or both.
STRESS_MODES: dict[str, tuple[bool, ...]] = {"off": (False,), "on": (True,), "both": (False, True)}

# ------------------------------------------------------------------ the grammar: text -> typed value


def parse_selection(option: str, value: str, allowed: Sequence[str | int], every: Sequence[str | int] | None = None
                    ) -> tuple:
    """``all`` (``every``, default ``allowed``) or a comma list of ``allowed`` values (converted to their
    type); anything else raises ValueError with a message that names the option and the allowed values."""
    if value.strip() == "all":
        return tuple(allowed if every is None else every)
    names = {str(a): a for a in allowed}
    out = []
    for part in (p.strip() for p in value.split(",")):
        if part not in names:
            raise ValueError(f"{option} {value!r}: {part!r} is not allowed; "
                             f"use 'all' or a comma list of {', '.join(names)}")
        out.append(names[part])
    return tuple(dict.fromkeys(out))


def parse_vlens(value: str) -> tuple[int, ...] | None:
    """``--vlen``: a comma list of VLENs, or None for ``all``: every VLEN of the emulator (known once
    ``--emulator`` is: :func:`vlens_on`)."""
    try:
        return None if value.strip() == "all" else parse_selection("--vlen", value, SPIKE_VLENS)
    except ValueError as e:
        raise ValueError(f"{e} (VLENs rvvdiff can emulate: 2048 and 4096 on Spike only)") from None


def parse_isas(value: str) -> tuple[str, ...]:
    """``--isa``: ``all`` (the vector builds) or a comma list of ISA builds (rv64gc among them)."""
    try:
        return parse_selection("--isa", value, tuple(ISAS), DEFAULT_ISAS)
    except ValueError as e:
        raise ValueError(f"{e} (ISA builds; 'all' is {', '.join(DEFAULT_ISAS)})") from None


def parse_compilers(value: str) -> dict[str, tuple[str, ...]]:
    """``--cc``: ``all`` or a comma list of compiler names, an entry ``NAME:ISA+ISA`` limiting that
    compiler to those ISA builds; returns each selected compiler with the ISA builds it may make (every
    one, :data:`ISAS`, when unrestricted).  Anything else raises ValueError naming the allowed values."""
    isas = tuple(ISAS)
    if value.strip() == "all":
        return {c: isas for c in COMPILER_NAMES}
    out: dict[str, tuple[str, ...]] = {}
    for part in (p.strip() for p in value.split(",")):
        name, colon, limit = part.partition(":")
        if name not in COMPILER_NAMES:
            raise ValueError(f"--cc {value!r}: unknown compiler {name!r}; known are {', '.join(COMPILER_NAMES)} "
                             "(or 'all'; NAME:ISA+ISA limits one to those ISA builds)")
        chosen = tuple(dict.fromkeys(i.strip() for i in limit.split("+") if i.strip())) if colon else isas
        bad = [i for i in chosen if i not in isas]
        if bad or not chosen:
            raise ValueError(f"--cc {value!r}: {name}:{limit} names {', '.join(map(repr, bad)) or 'no ISA build'}; "
                             f"after ':' give ISA builds joined by '+', of {', '.join(isas)}")
        if name in out:
            raise ValueError(f"--cc {value!r}: {name} is named twice")
        out[name] = chosen
    return out


def parse_stress(value: str) -> tuple[bool, ...]:
    """``--rvv-stress``: off, on or both."""
    if value not in STRESS_MODES:
        raise ValueError(f"--rvv-stress {value!r}: use off, on or both")
    return STRESS_MODES[value]


def parse_emulator(value: str) -> str:
    """``--emulator``: an emulator's name or a board's spec."""
    emulator_value(value)
    return value


def split_compiler(nodeid: str) -> tuple[str, str]:
    """A test id without its compiler component, and that compiler (``""`` when it names none: a run
    of one compiler), e.g. ``t.py::f[f16-vlen512-zvfh-gcc14]`` -> ``(t.py::f[f16-vlen512-zvfh], gcc14)``."""
    for name in COMPILER_NAMES:
        if nodeid.endswith(f"-{name}]"):
            return nodeid[:-len(name) - 2] + "]", name
    return nodeid, ""


def vlens_on(emulator: str, asked: tuple[int, ...] | None) -> tuple[int, ...]:
    """The VLENs of ``asked`` (None: all) on an emulator (not a board: its VLEN is read from it); ValueError
    for one it cannot run."""
    have = emulator_value(emulator).vlens
    if have is None:
        raise ValueError(f"--emulator {emulator}: a board runs at its own VLEN, read from its hardware")
    if asked is None:
        return have
    if any(v not in have for v in asked):
        raise ValueError(f"--vlen {','.join(map(str, asked))}: {emulator} runs VLEN {', '.join(map(str, have))}")
    return asked


# ------------------------------------------------------------------ the table of axes


def _one(parse: Callable[[str], Any], what: str) -> Callable[[str], Any]:
    """A parser of one value of an axis whose options take lists."""
    def one(value: str) -> Any:
        got = parse(value)
        if not isinstance(got, tuple) or len(got) != 1:
            raise ValueError(f"{value!r}: give one {what}")
        return got[0]
    return one


def _one_compiler(value: str) -> str:
    got = parse_compilers(value)
    if len(got) != 1 or ":" in value or value.strip() == "all":
        raise ValueError(f"--cc {value!r}: give one compiler, of {', '.join(COMPILER_NAMES)}")
    return next(iter(got))


def _one_stress(value: str) -> bool:
    got = parse_stress(value)
    if len(got) != 1:
        raise ValueError(f"--rvv-stress {value!r}: use off or on")
    return got[0]


def _write_compilers(chosen: Mapping[str, tuple[str, ...]]) -> str:
    return ",".join(c if tuple(isas) == tuple(ISAS) else f"{c}:{'+'.join(isas)}" for c, isas in chosen.items())


@dataclass(frozen=True)
class Axis:
    """One axis of the matrix: its :class:`Matrix` field, its option, its grammar and default in words."""

    field: str
    option: str
    metavar: str
    #: What it selects and how it is written (the help text and docs/options.md's row).
    what: str
    #: The default, in words.
    default_words: str
    #: The default of the pytest plugin, as parsed (None: resolved later: every VLEN of the emulator, the
    #: setting's compiler, the pinned tree).
    default: Any
    parse: Callable[[str], Any]
    write: Callable[[Any], str]
    #: One value (``rvvdiff repro --vlen 512``): its parser, what it is, its metavar.
    parse_one: Callable[[str], Any]
    one_what: str
    one_metavar: str

    @property
    def dest(self) -> str:
        return self.option.lstrip("-").replace("-", "_")


AXES: tuple[Axis, ...] = (
    Axis("vlens", "--vlen", "LIST",
         f"VLENs: 'all' or a comma list of {', '.join(map(str, VLENS))} (QEMU), "
         f"{', '.join(str(v) for v in SPIKE_VLENS if v not in VLENS)} (Spike only); a board runs at its own",
         "all, every VLEN of the emulator", None, parse_vlens, lambda v: ",".join(map(str, v)),
         _one(parse_vlens, "VLEN"), f"a VLEN, of {', '.join(map(str, SPIKE_VLENS))} (2048 and 4096 on Spike only)", "VLEN"),
    Axis("isas", "--isa", "LIST",
         f"ISA builds: 'all' ({', '.join(DEFAULT_ISAS)}) or a comma list of them, {NOVECTOR.name} (no vector "
         f"extension: ggml's generic C), {DISPATCH_V.name} (a distribution's RVV variant: V alone) and "
         f"{DISPATCH_V_ZVFH.name} (the variant a proposal adds: V + zfh + zvfh)", "all",
         DEFAULT_ISAS, parse_isas, ",".join,
         _one(parse_isas, "ISA build"), f"an ISA build, of {', '.join(ISAS)}", "ISA"),
    Axis("compilers", "--cc", "LIST",
         f"compilers that build ggml: 'all' or a comma list of {', '.join(COMPILER_NAMES)}; NAME:ISA+ISA limits one to "
         "those ISA builds (e.g. clang,gcc14:zvfh). With more than one, test ids end in the compiler's name",
         "RVVDIFF_COMPILER, else clang", None, parse_compilers, _write_compilers,
         _one_compiler, f"a compiler, of {', '.join(COMPILER_NAMES)}", "NAME"),
    Axis("stress", "--rvv-stress", "MODE",
         "QEMU's tail/mask stress (agnostic elements set to all ones, vl = half the AVL): off, on (also the bare "
         "flag) or both", "off", STRESS_MODES["off"], parse_stress,
         lambda v: next(k for k, m in STRESS_MODES.items() if m == tuple(v)),
         _one_stress, "off or on (also the bare flag)", "MODE"),
    Axis("emulator", "--emulator", "NAME",
         "; ".join(f"{e.name}: {e.what}" for e in EMULATOR_VALUES), DEFAULT_EMULATOR, DEFAULT_EMULATOR,
         parse_emulator, str, parse_emulator, "qemu, spike, native or ssh:HOST[:DIR]", "NAME"),
    Axis("tree", "--ggml-src", "PATH",
         "the llama.cpp or ggml tree to test: a checkout, or llama-cpp-python==X", "the pinned tree, fetched once",
         None, str, str, str, "a llama.cpp or ggml checkout", "PATH"),
)
AXIS: dict[str, Axis] = {a.field: a for a in AXES}
FIELDS: tuple[str, ...] = tuple(AXIS)


def option_type(parse: Callable[[str], Any], error: type[Exception] = argparse.ArgumentTypeError
                ) -> Callable[[str], Any]:
    """``parse`` as an option's ``type=``: a ValueError of the grammar becomes ``error``."""
    def typed(value: str) -> Any:
        try:
            return parse(value)
        except ValueError as e:
            raise error(str(e)) from None
    return typed


def add_options(parser: Any, *fields: str, error: type[Exception] = argparse.ArgumentTypeError,
                unset: bool = False, defaults: Mapping[str, Any] | None = None, one: bool = False,
                repeat: bool = False, default_words: Mapping[str, str] | None = None, prefix: str = "",
                aliases: Mapping[str, tuple[str, ...]] | None = None) -> None:
    """Declare the options of the axes ``fields`` (default: every axis) on ``parser``: an argparse parser
    or group, or the pytest plugin's group (``addoption``).

    ``error``: what a value the grammar refuses raises (argparse.ArgumentTypeError, pytest.UsageError).
    ``unset``: an option not given stays None (a command that passes on only what it was given), else
    it is the plugin's default (:attr:`Axis.default`); ``defaults`` overrides either per field, with
    ``default_words`` saying what the command's default is.  ``one``: each option takes one value
    (a VLEN, an ISA build, a compiler without limits, stress off or on), not given: None.  ``repeat``:
    ``--vlen`` and ``--ggml-src`` may be repeated (the lists add up).  ``prefix`` starts every help text;
    ``aliases``: other spellings a command keeps for an option (``--stress``)."""
    add = getattr(parser, "addoption", None) or parser.add_argument
    defaults, words = defaults or {}, default_words or {}
    for a in (AXIS[f] for f in (fields or FIELDS)):
        default = defaults.get(a.field, None if unset or one else a.default)
        said = words.get(a.field) or (a.write(default) if a.field in defaults and default is not None
                                      else a.default_words)
        kw: dict[str, Any] = {"type": option_type(a.parse_one if one else a.parse, error), "default": default,
                              "metavar": a.one_metavar if one else a.metavar,
                              "help": f"{prefix}{a.one_what if one else a.what} (default: {said})"}
        if a.field == "stress":
            kw.update(nargs="?", const=True if one else STRESS_MODES["on"])
        if repeat and a.field in ("vlens", "tree"):
            kw["action"] = "extend" if a.field == "vlens" else "append"
            kw["default"] = None
            if a.field == "vlens":
                kw["type"] = option_type(lambda v: parse_vlens(v) or VLENS, error)
        add(a.option, *(aliases or {}).get(a.field, ()), dest=a.dest, **kw)


# ------------------------------------------------------------------ the typed value


@dataclass(frozen=True)
class Matrix:
    """A selection of targets: each axis as parsed, None where it was not given (its default applies:
    every VLEN of the emulator, the vector builds, the setting's compiler, stress off, QEMU, the
    pinned tree)."""

    vlens: tuple[int, ...] | None = None
    isas: tuple[str, ...] | None = None
    compilers: Mapping[str, tuple[str, ...]] | None = None
    stress: tuple[bool, ...] | None = None
    emulator: str | None = None
    tree: str | None = None

    @classmethod
    def of(cls, options: object) -> Matrix:
        """The matrix of parsed options (an argparse namespace, pytest's ``config.option``): the axes it has."""
        return cls(**{a.field: getattr(options, a.dest, None) for a in AXES})

    @staticmethod
    def others(options: argparse.Namespace) -> dict[str, Any]:
        """A command's parsed options that are not the matrix's, by name."""
        return {k: v for k, v in vars(options).items() if k not in {a.dest for a in AXES}}

    def given(self) -> dict[str, Any]:
        return {f: v for f in FIELDS if (v := getattr(self, f)) is not None}

    def merged(self, over: Matrix) -> Matrix:
        """This matrix with the axes ``over`` gives in place of its own."""
        return dataclasses.replace(self, **over.given())

    def pytest_args(self) -> list[str]:
        """The pytest arguments that select this matrix (an axis not given: none, the suite's default)."""
        return [x for a in AXES if (v := getattr(self, a.field)) is not None for x in (a.option, a.write(v))]

    @property
    def isa_builds(self) -> tuple[str, ...]:
        return self.isas if self.isas is not None else DEFAULT_ISAS

    @property
    def compiler_names(self) -> tuple[str, ...]:
        """The compilers given (none: the setting's one)."""
        return tuple(self.compilers or ())

    def builds(self) -> list[tuple[str | None, str]]:
        """(compiler, ISA build) of every build the matrix runs, by ISA build, then compiler (None: the
        setting's compiler, when none was given)."""
        chosen: Mapping[str | None, tuple[str, ...]] = self.compilers or {None: tuple(ISAS)}
        return [(c, i) for i in self.isa_builds for c, allowed in chosen.items() if i in allowed]


@dataclass(frozen=True)
class Point:
    """One target of the matrix: where a kernel or a program runs -- one VLEN, one ISA build (given as itself
    or by name), one tail/mask stress mode, the build of one compiler, one emulator.  A command line becomes a
    :class:`Matrix` at its edge; what runs at one place of it travels as this one value (harness/plugin/targets.py's
    ``Target`` is one), not as its axes one by one."""

    vlen: int
    isa: IsaBuild
    stress: bool = False
    compiler: str = DEFAULT_COMPILER
    emulator: str = DEFAULT_EMULATOR

    def __post_init__(self) -> None:
        if isinstance(self.isa, str):
            if self.isa not in ISAS:
                raise ValueError(f"ISA build {self.isa!r}: use one of {', '.join(ISAS)}")
            object.__setattr__(self, "isa", ISAS[self.isa])

    @classmethod
    def of_record(cls, target: Mapping[str, Any]) -> Point:
        """The point a failure report records (its ``target``: vlen, isa, stress, compiler, emulator; a report of
        before the compiler or the emulator was recorded: the defaults)."""
        return cls(int(target["vlen"]), target["isa"], bool(target["stress"]), target.get("compiler") or DEFAULT_COMPILER,
                   target.get("emulator") or DEFAULT_EMULATOR)

    def name(self, compiler: bool = False) -> str:
        """The point as test ids name it (``vlen256-zvfh``, ``vlen512-v-stress``; ``compiler``: with the compiler's
        name, ``vlen512-zvfh-gcc14``, as in a run of several compilers)."""
        return (f"vlen{self.vlen}-{self.isa.name}" + ("-stress" if self.stress else "")
                + (f"-{self.compiler}" if compiler else ""))

    def given(self, asked: Mapping[str, Any]) -> Point:
        """This point with the fields ``asked`` gives (None: this point's), e.g. :func:`one_values`."""
        return dataclasses.replace(self, **{k: v for k, v in asked.items() if v is not None})


#: A :class:`Point`'s field of each axis that a command takes one value of (``add_options(..., one=True)``).
POINT_FIELDS: dict[str, str] = {"vlens": "vlen", "isas": "isa", "stress": "stress", "compilers": "compiler",
                                "emulator": "emulator"}


def one_values(options: object) -> dict[str, Any]:
    """The one-value options of the axes a command line gave (``add_options(..., one=True)``), as
    :class:`Point` fields (an option not given: None), for :meth:`Point.given`."""
    return {f: getattr(options, AXIS[a].dest, None) for a, f in POINT_FIELDS.items() if hasattr(options, AXIS[a].dest)}


#: The main job's matrix: every VLEN, vector ISA build and stress mode (the gate, a fix's check, the audit).
WHOLE = Matrix(isas=DEFAULT_ISAS, stress=STRESS_MODES["both"])


def from_args(argv: Sequence[str]) -> tuple[Matrix, list[str]]:
    """The matrix a pytest command line selects (its last option of each axis), and the arguments that are
    not the matrix's; ValueError for a value the grammar refuses."""
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    add_options(p, unset=True)
    try:
        ns, rest = p.parse_known_args(list(argv))
    except argparse.ArgumentError as e:
        raise ValueError(str(e)) from None
    return Matrix.of(ns), rest
