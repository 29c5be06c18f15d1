"""Test ids: parsing ``<kernel>-vlen<N>-<isa>[-stress]`` and the command that replays one."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ID_RE = re.compile(r"^(?:(?P<kernel>.*)-)?vlen(?P<vlen>\d+)-(?P<isa>[a-z0-9_]+)(?P<stress>-stress)?$")


@dataclass(frozen=True)
class TestId:
    nodeid: str
    test: str  # function name
    kernel: str  # the kernel / type part of the id ("" when the test has none)
    vlen: int
    isa: str
    stress: bool

    @property
    def row(self) -> str:
        return f"{self.test}[{self.kernel}]" if self.kernel else self.test

    @property
    def column(self) -> str:
        return f"{self.isa}{' stress' if self.stress else ''}"


def parse_id(nodeid: str) -> TestId | None:
    """Split ``file::test[kernel-vlenN-isa(-stress)]``; None for tests without a target."""
    m = re.match(r"^(?P<path>[^:]*)::(?P<test>[^\[]+)\[(?P<params>.*)\]$", nodeid)
    if not m:
        return None
    p = ID_RE.match(m.group("params"))
    if not p:
        return None
    return TestId(nodeid, m.group("test"), p.group("kernel") or "", int(p.group("vlen")), p.group("isa"),
                  bool(p.group("stress")))


def replay_argv(nodeid: str, *, ggml_src: str | None = None, example_db: str | None = None,
                known_failures: str = "apply", extra: Sequence[str] = ()) -> list[str]:
    """``pytest`` arguments that rerun one differential test alone (its target from its id), and so
    its saved shrunk example first: the plugin's replay line, the gate's per tree, bisect's."""
    tid = parse_id(nodeid)
    target = ["--vlen", str(tid.vlen), "--isa", tid.isa, "--rvv-stress", "on" if tid.stress else "off"] if tid else []
    argv = ["pytest", nodeid, *target, "-p", "no:xdist"]
    if example_db:
        argv += ["--example-db", str(example_db)]
    if known_failures != "apply":
        argv += ["--known-failures", known_failures]
    if ggml_src:
        argv += ["--ggml-src", str(ggml_src)]
    return argv + list(extra)


def slug(nodeid: str) -> str:
    """``cases/test_vec_dot.py::test_vec_dot[f16-vlen128-zvfh]`` -> ``test_vec_dot.test_vec_dot_f16-vlen128-zvfh``."""
    path, _, name = nodeid.partition("::")
    return re.sub(r"[^A-Za-z0-9_.+=-]+", "_", f"{Path(path).stem}.{name}").strip("_")[:150]
