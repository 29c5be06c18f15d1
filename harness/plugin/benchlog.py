"""The per-example time log of `rvvdiff bench`."""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from harness.plugin.targets import Session, Target


class BenchLog:
    """Per-example time split for `rvvdiff bench`: Hypothesis's own timing of generation and
    execution (observability callbacks) plus the harness's request and kernel times; per test,
    the largest call seen is timed again inside the server, repeated (the physical floor)."""

    REPEAT = 20  # calls per pure-kernel-time measurement (timed inside the server)

    def __init__(self, path: str, session: Session) -> None:
        self.path = path
        self.session = session
        self.nodeid = ""
        self._last = {"request_s": 0.0, "kernel_s": 0.0, "calls": 0.0}
        self._largest: dict[str, Any] | None = None

    def _write(self, row: dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")

    def start(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self._last = {k: 0.0 for k in self._last}
        self._largest = None

    def observe(self, obs: Any) -> None:
        if getattr(obs, "type", None) != "test_case":
            return
        now = {k: float(self.session.observation.peek(k)) for k in self._last}
        delta = {k: now[k] - self._last[k] for k in now}
        self._last = now
        t = dict(obs.timing)
        self._write({"kind": "example", "nodeid": self.nodeid, "status": obs.status,
                     "generate_s": sum(v for k, v in t.items() if k.startswith("generate:")),
                     "execute_s": t.get("execute:test", 0.0), **delta})
        call = self.session.observation.kept.get("call")
        if isinstance(call, dict) and call.get("kernel_ns") is not None:
            size = sum(b.size for b in call["bufs"])
            if self._largest is None or size > self._largest["size"]:
                self._largest = {**call, "size": size}

    def pure(self, item: pytest.Item) -> None:
        """Time the test's largest call again inside the server, repeated: the physical floor."""
        c = self._largest
        if c is None:
            return
        t: Target = item.callspec.params["target"]  # type: ignore[attr-defined]
        r = t.server().call(c["kernel"], c["ip"], c["fp"], c["bufs"], repeat=self.REPEAT, timeout=self.session.timeout)
        # the request itself, so that it can be timed again on another build (rvvdiff fixes: before / after)
        calls = Path(self.path + ".calls")
        calls.mkdir(exist_ok=True)
        saved = calls / f"{hashlib.sha256(item.nodeid.encode()).hexdigest()[:16]}.pkl"
        saved.write_bytes(pickle.dumps({k: c[k] for k in ("kernel", "ip", "fp", "bufs")} | {"vlen": t.vlen, "isa": t.isa.name}))
        self._write({"kind": "pure", "nodeid": item.nodeid, "kernel": c["kernel"], "bytes": c["size"],
                     "single_s": c["kernel_ns"] * 1e-9, "repeated_s": r.kernel_ns * 1e-9 / self.REPEAT,
                     "request": str(saved)})
