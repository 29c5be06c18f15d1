"""Failure reports, replay, standalone C reproducers, and the run's summary matrix.

A failing differential test leaves a directory in ``--report-dir``::

    <report-dir>/cases/<test id>/case.json    what ran and what was expected (kernel, VLEN, ISA build,
                                               stress, ggml source and commit, QEMU command, comparison)
    <report-dir>/cases/<test id>/inputs.npz   the minimal case: every buffer of the failing call,
                                               the failing outputs and the expected values
    <report-dir>/cases/<test id>/README.md    the short version a person reads first

It is written by the process that ran the test (an xdist worker) as soon as
the test fails, so a later crash of that worker loses nothing.  After
shrinking, Hypothesis runs the minimal failing example last: the call and the
comparison recorded then are the minimal case.

``rvvdiff repro <dir>`` reruns the recorded call in QEMU (same or another
tree, VLEN, ISA build), prints the comparison and exits 1 while it still
fails; ``--c`` also writes a standalone C++ program with the inputs as
literals that calls the kernel adapter directly, and prints the commands that
build it with the harness's toolchain and run it under qemu-riscv64 (or wait
for gdb with ``-g PORT``).

At the end of a run, the controlling process writes ``summary.md`` (a matrix
kernel x VLEN x ISA build: pass, fail, known failure, skipped with its reason),
``summary.html`` (the same, with a plot of error/bound ratios per kernel and
VLEN) and ``results.json``.  JUnit XML comes from pytest's ``--junitxml``.
"""

from __future__ import annotations

import html
import json
import math
import re
import shlex
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import protocol as P

ID_RE = re.compile(r"^(?:(?P<kernel>.*)-)?vlen(?P<vlen>\d+)-(?P<isa>[a-z0-9_]+)(?P<stress>-stress)?$")


# ------------------------------------------------------------ test ids

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


def _slug(nodeid: str) -> str:
    """``cases/test_vec_dot.py::test_vec_dot[f16-vlen128-zvfh]`` -> ``test_vec_dot.test_vec_dot_f16-vlen128-zvfh``."""
    path, _, name = nodeid.partition("::")
    return re.sub(r"[^A-Za-z0-9_.+=-]+", "_", f"{Path(path).stem}.{name}").strip("_")[:150]


def clear(report_dir: Path) -> None:
    """Remove the previous run's reports (a run's report directory describes that run only)."""
    import shutil

    shutil.rmtree(report_dir / "cases", ignore_errors=True)
    for name in ("summary.md", "summary.html", "results.json"):
        (report_dir / name).unlink(missing_ok=True)


# ------------------------------------------------------- failure reports

def _jsonable(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist() if v.size <= 64 else f"<array {v.dtype} shape {v.shape}; see inputs.npz>"
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return f if math.isfinite(f) else repr(f)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def _worst(comp: dict[str, Any]) -> dict[str, Any]:
    """Index, got, expected and error of the worst element of a recorded comparison."""
    got = np.asarray(comp["got"]).reshape(-1)
    exp = np.asarray(comp["expected"]).reshape(-1)
    if got.size == 0 or got.shape != exp.shape:
        return {}
    if comp["mode"] == "ulps":
        ratio = np.asarray(comp["ulps"]) / np.maximum(np.asarray(comp["allowed"]), 1e-300)
        i = int(np.nanargmax(np.where(np.isnan(ratio), np.inf, ratio)))
        return {"index": i, "got": got[i], "expected": exp[i], "error_ulps": comp["ulps"][i],
                "bound_ulps": comp["allowed"][i]}
    with np.errstate(invalid="ignore", over="ignore"):
        g, e = got.astype(np.float64), exp.astype(np.float64)
        diff = np.abs(g - e)
        same = (g == e) | (np.isnan(g) & np.isnan(e))
    score = np.where(same, -1.0, np.where(np.isnan(diff), np.inf, diff))
    i = int(np.argmax(score))
    out = {"index": i, "got": got[i], "expected": exp[i], "abs_error": diff[i]}
    if comp["mode"] == "bound":
        out["bound"] = comp["bound"]
        out["error/bound"] = diff[i] / comp["bound"] if comp["bound"] > 0 else math.inf
    return out


def write_failure(report_dir: Path, *, nodeid: str, longrepr: str, kept: dict[str, Any], target: Any,
                  source: Any, replay: str, emulator: str = "qemu") -> Path:
    """Write the report of one failed test; returns its directory."""
    d = report_dir / "cases" / _slug(nodeid)
    d.mkdir(parents=True, exist_ok=True)
    call = kept.get("call") or {}
    comp = kept.get("comparison")
    arrays: dict[str, np.ndarray] = {}
    bufs = []
    for i, b in enumerate(call.get("bufs", [])):
        bufs.append({"kind": P.Kind(b.kind).name, "size": b.size, "fill": b.fill})
        if b.kind != P.Kind.OUT:
            arrays[f"buf{i}"] = np.frombuffer(b.data, np.uint8)
    for i, o in enumerate(call.get("outputs") or []):
        arrays[f"out{i}"] = np.frombuffer(o, np.uint8)
    comparison = None
    if comp is not None:
        arrays["expected"] = np.asarray(comp["expected"])
        arrays["got"] = np.asarray(comp["got"])
        for k in ("bound", "ulps", "allowed"):
            if k in comp:
                arrays[k] = np.asarray(comp[k])
        comparison = {k: v for k, v in comp.items() if k not in ("got", "expected", "ulps", "allowed")}
        comparison["worst"] = _jsonable(_worst(comp))
        comparison["expected_dtype"] = str(np.asarray(comp["expected"]).dtype)
        comparison["got_dtype"] = str(np.asarray(comp["got"]).dtype)
    np.savez_compressed(d / "inputs.npz", **arrays)
    blob = re.search(r"@reproduce_failure\(([^)]*)\)", longrepr)
    case = {
        "test": nodeid,
        "target": {"vlen": target.vlen, "isa": target.isa.name, "stress": target.stress, "emulator": emulator,
                   "isa_cmake": target.isa.cmake, "qemu_props": target.isa.qemu},
        "ggml": {"root": str(source.root), "label": source.label, "commit": source.commit,
                 "version": source.version},
        "call": {"kernel": call.get("kernel"), "ip": call.get("ip", []), "fp": _jsonable(call.get("fp", [])),
                 "buffers": bufs, "qemu_argv": call.get("argv"), "server_message": call.get("message", "")},
        "comparison": _jsonable(comparison),
        "hypothesis_reproduce_failure": blob.group(0) if blob else None,
        "replay": replay,
        "repro": f"rvvdiff repro {shlex.quote(str(d))}",
        "failure": longrepr[-6000:],
    }
    (d / "case.json").write_text(json.dumps(case, indent=2))
    worst = (comparison or {}).get("worst") or {}
    lines = [f"# {nodeid}", "",
             f"- kernel call: `{call.get('kernel')}` ip={call.get('ip')} fp={call.get('fp')}",
             f"- target: VLEN {target.vlen}, ISA build {target.isa.name}" + (", tail/mask stress" if target.stress else "")
             + (", on Spike" if emulator == "spike" else ""),
             f"- ggml: {source.label}, commit {source.commit} (ggml {source.version})"]
    if comparison:
        lines.append(f"- comparison: {comparison['mode']} `{comparison['name']}` [{comparison['context']}]")
        if worst:
            lines.append(f"- worst element: {worst}")
    lines += ["", "Replay in pytest:", "", f"    {replay}", "", "Replay outside pytest (and write a C reproducer):",
              "", f"    rvvdiff repro {shlex.quote(str(d))} --c", "", "Failure:", "", "```", longrepr[-3000:], "```", ""]
    (d / "README.md").write_text("\n".join(lines))
    return d


# ----------------------------------------------------------------- replay

@dataclass
class Case:
    dir: Path
    data: dict[str, Any]
    arrays: dict[str, np.ndarray]

    @property
    def call(self) -> dict[str, Any]:
        return self.data["call"]

    def buffers(self) -> list[P.Buf]:
        out = []
        for i, b in enumerate(self.call["buffers"]):
            kind = P.Kind[b["kind"]]
            data = self.arrays[f"buf{i}"].tobytes() if kind != P.Kind.OUT else b""
            out.append(P.Buf(kind, b["size"], data, b["fill"]))
        return out

    def recorded_outputs(self) -> list[bytes]:
        return [self.arrays[k].tobytes() for k in sorted((k for k in self.arrays if re.fullmatch(r"out\d+", k)),
                                                         key=lambda k: int(k[3:]))]


def load_case(path: Path) -> Case:
    d = path if path.is_dir() else path.parent
    if not (d / "case.json").exists():
        raise FileNotFoundError(f"{d}: no case.json here; give a directory under <report-dir>/cases/")
    with np.load(d / "inputs.npz") as z:
        arrays = {k: z[k] for k in z.files}
    return Case(d, json.loads((d / "case.json").read_text()), arrays)


def _decode_like(outputs: list[bytes], got: np.ndarray) -> tuple[int, np.dtype] | None:
    """Which output buffer, read as which dtype, holds the recorded ``got`` values."""
    flat = got.reshape(-1)
    import ml_dtypes

    for i, o in enumerate(outputs):
        for dt in dict.fromkeys([got.dtype, np.dtype(np.float32), np.dtype(np.float16),
                                 np.dtype(ml_dtypes.bfloat16), np.dtype(np.float64)]):
            if len(o) != flat.size * dt.itemsize:
                continue
            a = np.frombuffer(o, dt)
            with np.errstate(invalid="ignore"):
                a64, f64 = a.astype(np.float64), flat.astype(np.float64)
            if np.all((a64 == f64) | (np.isnan(a64) & np.isnan(f64))):
                return i, dt
    return None


def judge(case: Case, outputs: list[bytes]) -> tuple[bool, str]:
    """Re-judge a recorded comparison on new outputs: (still failing?, explanation)."""
    comp = case.data.get("comparison")
    recorded = case.recorded_outputs()
    if comp is None or "got" not in case.arrays:
        same = outputs == recorded
        return same, ("the outputs equal the recorded failing outputs" if same else
                      "the outputs differ from the recorded failing outputs (no comparison was recorded)")
    where = _decode_like(recorded, case.arrays["got"])
    if where is None or comp["mode"] == "ulps":
        same = outputs == recorded
        return same, ("the outputs equal the recorded failing outputs (the comparison is derived from them; "
                      "judge it with the pytest replay command)" if same else
                      "the outputs changed; judge them with the pytest replay command")
    i, dt = where
    got = np.frombuffer(outputs[i], dt).astype(np.float64)
    exp = case.arrays["expected"].reshape(-1).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        if comp["mode"] == "bitwise":
            gb = np.frombuffer(outputs[i], dt)
            eb = case.arrays["expected"].reshape(-1).astype(dt)
            ok = (gb.view(f"u{dt.itemsize}") == eb.view(f"u{dt.itemsize}")) | (np.isnan(got) & np.isnan(exp))
        else:
            ok = (np.abs(got - exp) <= float(case.arrays["bound"])) | (np.isnan(got) & np.isnan(exp)) | (got == exp)
    bad = np.flatnonzero(~ok)
    lines = [f"{comp['name']}: {bad.size} of {got.size} elements fail ({comp['mode']}"
             + (f", bound {float(case.arrays['bound']):.6g}" if comp["mode"] == "bound" else "") + ")"]
    for j in bad[:5]:
        lines.append(f"  [{j}] got {float(got[j])!r}, expected {float(exp[j])!r}")
    return bad.size > 0, "\n".join(lines)


def arr(name: str, data: bytes) -> str:
    """A C array of ``data``, 24 bytes a line (one element when empty: C has no empty arrays)."""
    rows = [",".join(str(b) for b in data[i:i + 24]) for i in range(0, len(data), 24)] or ["0"]
    return f"static const unsigned char {name}[{max(len(data), 1)}] = {{\n    " + ",\n    ".join(rows) + "\n};"


def c_reproducer(case: Case, path: Path) -> Path:
    """A standalone C++ program: the failing call's inputs as literals, the kernel adapter called
    directly (linked with the server's adapter objects and the same ggml build), guard regions
    checked, outputs printed and compared with the recorded expected bytes where they map."""
    call = case.call
    comp = case.data.get("comparison")
    recorded = case.recorded_outputs()
    where = _decode_like(recorded, case.arrays["got"]) if comp and "got" in case.arrays else None

    decls, setup = [], []
    for i, b in enumerate(call["buffers"]):
        kind = b["kind"]
        if kind != "OUT":
            decls.append(arr(f"buf{i}", case.arrays[f"buf{i}"].tobytes()))
        setup.append(f"    add_buffer(c, rvvdiff::BUF_{kind}, {b['size']}u, {b['fill']}, "
                     f"{'buf' + str(i) if kind != 'OUT' else 'nullptr'});")
    # Without per-element expected values to compare with (an ULP comparison, or one recorded as a
    # single worst element), the program does what `rvvdiff repro` does: it prints the outputs and
    # fails while they equal the recorded failing ones.
    outs = [j for j, b in enumerate(call["buffers"]) if b["kind"] != "IN"]
    for k, (j, data) in enumerate(zip(outs, recorded)):
        decls.append(arr(f"recorded{k}", data))
    same = " && ".join(f"memcmp(c.bufs[{j}].data(), recorded{k}, {len(data)}u) == 0"
                       for k, (j, data) in enumerate(zip(outs, recorded))) or "false"
    show = "".join(f"    print_floats({j}, c.bufs[{j}].data(), {len(data) // 4});\n" for j, data in zip(outs, recorded))
    check = (f"{show}"
             f"    if ({same}) {{ printf(\"outputs equal the recorded failing outputs: STILL FAILS\\n\"); return 1; }}\n"
             f"    printf(\"outputs differ from the recorded failing outputs; judge them with the pytest replay command\\n\");\n"
             f"    return 0;")
    if where is not None and comp["mode"] in ("bitwise", "bound"):
        i, dt = where
        out_buf = [j for j, b in enumerate(call["buffers"]) if b["kind"] != "IN"][i]
        exp = case.arrays["expected"].reshape(-1).astype(np.float64)
        ctype = {4: "float", 8: "double"}.get(dt.itemsize)
        if ctype and dt.kind == "f":
            decls.append(f"static const double expected[{exp.size}] = {{{','.join(repr(float(v)) if math.isfinite(v) else ('NAN' if math.isnan(v) else ('INFINITY' if v > 0 else '-INFINITY')) for v in exp)}}};")
            tol = float(case.arrays["bound"]) if comp["mode"] == "bound" else 0.0
            check = (f"    const {ctype} * got = reinterpret_cast<const {ctype} *>(c.bufs[{out_buf}].data());\n"
                     f"    int bad = 0;\n"
                     f"    for (int k = 0; k < {exp.size}; ++k) {{\n"
                     f"        double g = got[k], e = expected[k];\n"
                     f"        bool ok = (std::isnan(g) && std::isnan(e)) || g == e || std::fabs(g - e) <= {tol!r};\n"
                     f"        if (!ok && bad++ < 10) printf(\"[%d] got %.9g, expected %.9g\\n\", k, g, e);\n"
                     f"    }}\n"
                     f"    printf(\"%d of {exp.size} elements fail ({comp['mode']}, bound {tol!r})\\n\", bad);\n"
                     f"    return bad ? 1 : 0;")
    src = f"""// rvvdiff standalone reproducer for {case.data['test']}
// ggml: {case.data['ggml']['label']} commit {case.data['ggml']['commit']}
// target: VLEN {case.data['target']['vlen']}, ISA build {case.data['target']['isa']}
// Calls the kernel adapter "{call['kernel']}" directly (no protocol), with the recorded inputs.
#include "server.h"
#include "ggml-cpu.h"
#include <cmath>
#include <cstdio>
#include <cstring>

{chr(10).join(decls)}

static void print_floats(size_t i, const void * p, size_t n) {{
    printf("output %zu as float32:", i);
    for (size_t k = 0; k < n && k < 16; ++k) printf(" %.9g", static_cast<const float *>(p)[k]);
    printf(n > 16 ? " ...\\n" : "\\n");
}}

static void add_buffer(rvvdiff::Call & c, uint32_t kind, size_t size, int fill, const unsigned char * data) {{
    rvvdiff::Buffer b;
    b.kind = kind;
    b.allocate(size, kind == rvvdiff::BUF_IN ? rvvdiff::GUARD_BYTE_IN : rvvdiff::GUARD_BYTE_OUT);
    if (data) memcpy(b.data(), data, size); else memset(b.data(), fill, size);
    c.bufs.push_back(static_cast<rvvdiff::Buffer &&>(b));
}}

int main() {{
    ggml_cpu_init();
    rvvdiff::Call c;
    c.name = "{call['kernel']}";
    c.ip = {{{', '.join(str(int(v)) for v in call['ip'])}}};
    c.fp = {{{', '.join(repr(float(v)) for v in call['fp'])}}};
{chr(10).join(setup)}
    rvvdiff::KernelFn fn = nullptr;
    for (const auto & k : rvvdiff::registry()) if (c.name == k.name) fn = k.fn;
    if (!fn) {{ printf("kernel %s is not in this build\\n", c.name.c_str()); return 2; }}
    printf("VLEN %d: calling %s\\n", ggml_cpu_get_rvv_vlen() * 8, c.name.c_str());
    if (fn(c) != rvvdiff::ST_OK) {{ printf("adapter rejected the call: %s\\n", c.err.c_str()); return 2; }}
    for (size_t i = 0; i < c.bufs.size(); ++i) {{
        long where = 0;
        if (!c.bufs[i].guards_intact(where)) {{ printf("wrote outside buffer %zu at offset %ld\\n", i, where); return 1; }}
    }}
{check}
}}
"""
    path.write_text(src)
    return path


#: ggml types by name, for the kernels whose ggml-only program names the type (ggml.h's enum values).
_FLOAT_TYPES = {"f32": 0, "f16": 1, "bf16": 30}


def upstream_call(call: dict[str, Any]) -> tuple[int, int] | None:
    """(ggml type, n) when the recorded call is a vec_dot that ggml's public API reaches
    (``ggml_get_type_traits_cpu(type)->vec_dot``): the quantized dots' entry point and the float
    dots.  Other adapters have no public equivalent; their reproducer is the adapter program."""
    k, ip = call["kernel"], call["ip"]
    if k == "quant_vec_dot" and len(ip) == 3 and ip[2] == 0:
        return int(ip[0]), int(ip[1])
    if k.startswith("vec_dot_") and k[8:] in _FLOAT_TYPES and len(ip) == 1:
        return _FLOAT_TYPES[k[8:]], int(ip[0])
    return None


def upstream_reproducer(case: Case, path: Path) -> Path | None:
    """A C program that needs only ggml (ggml.h, ggml-cpu.h and the two libraries): the failing
    vec_dot through the CPU type traits with the recorded rows, printing got and expected and
    exiting 1 while they differ by more than the bound.  None when the kernel has no such form."""
    call = case.call
    tn = upstream_call(call)
    comp = case.data.get("comparison") or {}
    if tn is None or "expected" not in case.arrays:
        return None
    t, n = tn
    exp = float(case.arrays["expected"].reshape(-1)[0])
    tol = float(case.arrays["bound"]) if comp.get("mode") == "bound" and "bound" in case.arrays else 0.0
    x, y = (case.arrays[f"buf{i}"].tobytes() for i in (0, 1))

    src = f"""// Reproducer: {case.data['test']}
// ggml {case.data['ggml']['label']} commit {case.data['ggml']['commit']}; VLEN {case.data['target']['vlen']}, ISA build {case.data['target']['isa']}{', agnostic elements written with ones (QEMU rvv_ta_all_1s / rvv_ma_all_1s)' if case.data['target'].get('stress') else ''}.
// The shrunk case rvvdiff found: x is one row of ggml type {t}, y one row of its vec_dot_type, n = {n}.
#include "ggml.h"
#include "ggml-cpu.h"
#include <math.h>
#include <stdio.h>

{arr("x", x)}
{arr("y", y)}

int main(void) {{
    ggml_cpu_init();
    const enum ggml_type type = (enum ggml_type) {t};
    float s = 0.0f;
    ggml_get_type_traits_cpu(type)->vec_dot({n}, &s, 0, x, 0, y, 0, 1);
    const double expected = {exp!r}, bound = {tol!r};
    printf("VLEN %d: vec_dot of %s, n = {n}: got %.9g, expected %.9g\\n", ggml_cpu_get_rvv_vlen() * 8,
           ggml_type_name(type), s, expected);
    return !(fabs(s - expected) <= bound);
}}
"""
    path.write_text(src)
    return path


@dataclass
class Replay:
    """One replay of a recorded call: on which emulator, whether it fails, why, the raw outputs."""

    emulator: str
    argv: list[str]
    failing: bool | None  # None: not run (the emulator cannot run this target)
    text: str
    outputs: list[bytes] | None = None


def replay_on(case: Case, build: Any, vlen: int, stress: bool, emulator: Any) -> Replay:
    """Run the recorded call once on ``emulator`` and judge it as the recorded comparison would."""
    from .pool import KernelFailure, KernelServer, ServerError

    server = KernelServer(build, vlen, stress, emulator)
    if vlen not in emulator.vlens:
        return Replay(emulator.name, [], None, f"{emulator.describe()} cannot run VLEN {vlen} "
                      f"(it runs {', '.join(map(str, emulator.vlens))})")
    try:
        argv = server.argv
        r = server.call(case.call["kernel"], case.call["ip"], case.call["fp"], case.buffers(), timeout=600)
        failing, text = judge(case, r.outputs)
        return Replay(emulator.name, argv, failing, text, r.outputs)
    except KernelFailure as e:
        return Replay(emulator.name, server.argv, True, str(e))
    except ServerError as e:
        return Replay(emulator.name, [], None, str(e))
    finally:
        server.stop()


def side_by_side(case: Case, a: Replay, b: Replay, n: int = 8) -> list[str]:
    """The judged output of two replays, element by element where they differ (or the first ``n``)."""
    if a.outputs is None or b.outputs is None:
        return []
    if a.outputs == b.outputs:
        return [f"outputs: {a.emulator} and {b.emulator} are bit-identical "
                f"({sum(map(len, a.outputs))} bytes in {len(a.outputs)} buffer(s))"]
    where = _decode_like(case.recorded_outputs(), case.arrays["got"]) if "got" in case.arrays else None
    i, dt = where if where else (next(k for k, (x, y) in enumerate(zip(a.outputs, b.outputs)) if x != y),
                                 np.dtype(np.uint8))
    x, y = np.frombuffer(a.outputs[i], dt), np.frombuffer(b.outputs[i], dt)
    exp = case.arrays["expected"].reshape(-1) if where else None
    differ = np.flatnonzero(x.view(f"u{dt.itemsize}") != y.view(f"u{dt.itemsize}"))
    lines = [f"outputs differ: {differ.size} of {x.size} elements of output {i} ({dt})",
             f"  {'element':>8}  {'expected':>14}  {a.emulator:>14}  {b.emulator:>14}"]
    for j in differ[:n]:
        e = f"{float(exp[j]):.8g}" if exp is not None and j < exp.size else "-"
        lines.append(f"  {j:>8}  {e:>14}  {float(x[j]):>14.8g}  {float(y[j]):>14.8g}")
    return lines


def spike_verdict(qemu_run: Replay, spike_run: Replay, stress: bool, qemu_plain: Replay | None = None) -> str:
    """The one-line verdict of a finding's replay on Spike next to QEMU's (``qemu_plain``: QEMU
    without stress, for a stress finding)."""
    if spike_run.failing is None:
        return f"not replayed on Spike: {spike_run.text}"
    if qemu_run.failing is None:
        return ("fails on Spike; QEMU cannot run this target" if spike_run.failing
                else "passes on Spike; QEMU cannot run this target")
    if spike_run.failing and qemu_run.failing:
        if spike_run.outputs is not None and spike_run.outputs == qemu_run.outputs:
            return "reproduced on Spike, bit-identical"
        if spike_run.outputs is None and qemu_run.outputs is None:
            return "reproduced on Spike: both emulators stop the kernel (see the messages)"
        if spike_run.outputs is None:
            return "fails on Spike differently: Spike stops the kernel where QEMU returns wrong values (see its message)"
        if qemu_run.outputs is None:
            return "fails on Spike differently: Spike returns wrong values where QEMU stops the kernel"
        return "reproduced on Spike, different values"
    if qemu_run.failing and stress:
        same = (qemu_plain is not None and spike_run.outputs is not None and qemu_plain.outputs == spike_run.outputs)
        return ("not reproduced on Spike: the failure needs QEMU's tail/mask stress mode (agnostic elements "
                "written with ones), which Spike does not have; Spike keeps them undisturbed"
                + (", and its outputs are bit-identical to QEMU's without stress" if same else ""))
    if qemu_run.failing:
        return "not reproduced on Spike (suspect the emulator: shrink the case and read the specification)"
    if spike_run.failing:
        return "fails on Spike only (an emulator difference: shrink the case and read the specification)"
    return "passes on both emulators"


def main_repro(argv: list[str]) -> int:
    """``rvvdiff repro``: replay a failure report outside pytest."""
    import argparse

    from .build import ensure_built, link_objects
    from .config import ISA_BUILDS
    from .source import resolve
    from .spike import emulator as emulator_named
    from .spike import spike_link_args
    from .toolchain import SERVER_DIR, ToolchainError, compiler, qemu

    p = argparse.ArgumentParser(prog="rvvdiff repro", description=main_repro.__doc__)
    p.add_argument("report", type=Path, help="a directory under <report-dir>/cases/ (or its case.json)")
    p.add_argument("--ggml-src", help="replay against another tree (default: the recorded one)")
    p.add_argument("--vlen", type=int, help="replay at another VLEN")
    p.add_argument("--isa", choices=list(ISA_BUILDS), help="replay in another ISA build")
    p.add_argument("--emulator", choices=("qemu", "spike"), help="replay on QEMU or on Spike (default: the one "
                   "that recorded the failure); spike replays on both and prints them side by side with a verdict")
    p.add_argument("--c", action="store_true", help="also write and print the standalone C++ reproducer (and, for a "
                   "vec_dot that ggml's API reaches, a ggml-only C program for an upstream report)")
    a = p.parse_args(argv)
    case = load_case(a.report.resolve())
    t = case.data["target"]
    vlen, isa = a.vlen or t["vlen"], ISA_BUILDS[a.isa or t["isa"]]
    on = a.emulator or t.get("emulator", "qemu")
    src_path = a.ggml_src or case.data["ggml"]["root"]
    src = resolve(None if (not a.ggml_src and case.data["ggml"]["label"].startswith("pinned")) else src_path)
    try:
        emulator = emulator_named(on)
    except ToolchainError as e:
        print(f"rvvdiff repro: {e}")
        return 2
    build = ensure_built(src, isa)
    print(f"replaying {case.data['test']}\n  kernel {case.call['kernel']} ip={case.call['ip']} fp={case.call['fp']}\n"
          f"  on {src.describe()}")
    if on == "spike":
        # QEMU as recorded (a VLEN beyond QEMU's is "not run", with the reason), QEMU without stress
        # for a stress report (what Spike, without such a mode, should match), then Spike.
        runs = [replay_on(case, build, vlen, t["stress"], qemu()), replay_on(case, build, vlen, False, emulator)]
        if t["stress"]:
            runs.insert(1, replay_on(case, build, vlen, False, qemu()))
        labels = (["QEMU, tail/mask stress (as recorded)", "QEMU, no stress", "Spike (no stress mode)"]
                  if t["stress"] else ["QEMU", "Spike"])
        for label, r in zip(labels, runs):
            state = {True: "FAILS", False: "passes", None: "not run"}[r.failing]
            print(f"\n== {label}: {state}" + (f"\n  {shlex.join(r.argv)}" if r.argv else ""))
            print("  " + r.text.replace("\n", "\n  "))
        print()
        for line in side_by_side(case, runs[0], runs[-1]) + (side_by_side(case, runs[1], runs[2]) if t["stress"] else []):
            print(line)
        print(f"\nverdict: {spike_verdict(runs[0], runs[-1], t['stress'], runs[1] if t['stress'] else None)}")
        if runs[-1].failing is None:
            return 2
        failing = bool(runs[-1].failing)
        server_argv = runs[-1].argv
    else:
        r = replay_on(case, build, vlen, t["stress"], emulator)
        if r.failing is None:
            print(f"rvvdiff repro: not replayed: {r.text}" + ("; replay on Spike: --emulator spike"
                                                              if on == "qemu" and vlen not in emulator.vlens else ""))
            return 2
        print(f"  {shlex.join(r.argv)}\n{r.text}")
        failing, server_argv = bool(r.failing), r.argv
    if a.c:
        prog = c_reproducer(case, case.dir / "repro.cpp")
        exe = case.dir / ("repro-spike" if on == "spike" else "repro")
        cc = compiler()
        objs = link_objects(build)
        extra = spike_link_args(build) if on == "spike" else []
        build_cmd = [cc.cxx, "-O1", "-g", *build.cflags, "-I", str(SERVER_DIR), str(prog), *map(str, objs),
                     *map(str, build.libs), "-static", "-lm", "-lpthread", *extra, "-o", str(exe)]
        run_cmd = server_argv[:-1] + [str(exe)] if server_argv else [str(exe)]
        print(f"\nstandalone reproducer: {prog}\nbuild:\n  {shlex.join(build_cmd)}\nrun:\n  {shlex.join(run_cmd)}")
        if on != "spike":
            print(f"debug (then: gdb-multiarch {exe} -ex 'target remote :1234'):\n  "
                  f"{shlex.join(run_cmd[:-1] + ['-g', '1234', str(exe)])}")
        up = upstream_reproducer(case, case.dir / "repro_ggml.c")
        if up is not None:
            public = [f for f in build.cflags if f.startswith("-I") and f.rstrip("/").endswith("/include")]
            up_exe = case.dir / ("repro_ggml-spike" if on == "spike" else "repro_ggml")
            up_cmd = [cc.cxx, "-O1", *[f for f in build.cflags if f.startswith(("-march", "-mabi"))], *public, str(up),
                      *map(str, build.libs), "-static", "-lm", "-lpthread", *extra, "-o", str(up_exe)]
            print(f"\nggml-only reproducer: {up}\n  (for an upstream report: only ggml's headers and libraries)\n"
                  f"build:\n  {shlex.join(up_cmd)}\nrun:\n  {shlex.join(run_cmd[:-1] + [str(up_exe)])}")
    print("STILL FAILS" + (" on Spike" if on == "spike" else "") if failing else "PASSES now")
    return 1 if failing else 0


# --------------------------------------------------------------- summary

_MARK = {"passed": "pass", "failed": "FAIL", "xfailed": "known", "xpassed": "FIXED?", "skipped": "skip",
         "error": "ERROR"}


def write_summary(report_dir: Path, results: list[dict[str, Any]], header: list[str]) -> None:
    """summary.md, summary.html and results.json from the per-test results of a run."""
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / "results.json").write_text(json.dumps(_jsonable(results), indent=1))
    rows: dict[str, dict[tuple[str, int], list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    cols: set[tuple[str, int]] = set()
    for r in results:
        tid = parse_id(r["nodeid"])
        if tid is None:
            continue
        rows[tid.row][(tid.column, tid.vlen)].append(r)
        cols.add((tid.column, tid.vlen))
    columns = sorted(cols)
    counts = defaultdict(int)
    for r in results:
        counts[r["outcome"]] += 1

    def cell(rs: list[dict[str, Any]]) -> str:
        if not rs:
            return ""
        worst = max(rs, key=lambda r: ["passed", "skipped", "xfailed", "xpassed", "failed", "error"].index(r["outcome"]))
        return _MARK[worst["outcome"]]

    md = ["# rvvdiff results", "", *[f"- {h}" for h in header], "",
          "- " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())), "",
          "| test | " + " | ".join(f"{c} {v}" for c, v in columns) + " |",
          "|---|" + "---|" * len(columns)]
    for row in sorted(rows):
        md.append(f"| `{row}` | " + " | ".join(cell(rows[row].get(c, [])) for c in columns) + " |")
    reasons = sorted({(r["nodeid"], r.get("reason", "")) for r in results if r["outcome"] in ("skipped", "xfailed", "failed", "error")})
    if reasons:
        md += ["", "## Not passing", ""]
        md += [f"- `{n}`: {_MARK.get(next(r['outcome'] for r in results if r['nodeid'] == n), '')} {reason[:300]}"
               for n, reason in reasons]
    (report_dir / "summary.md").write_text("\n".join(md) + "\n")
    (report_dir / "summary.html").write_text(_html(rows, columns, header, counts, results))


def _html(rows, columns, header, counts, results) -> str:
    color = {"pass": "#cfc", "FAIL": "#f99", "known": "#fd8", "FIXED?": "#f9f", "skip": "#ddd", "ERROR": "#f66"}
    out = ["<!doctype html><meta charset=utf-8><title>rvvdiff results</title>",
           "<style>body{font:14px sans-serif}td,th{border:1px solid #999;padding:2px 6px}"
           "table{border-collapse:collapse}</style>", "<h1>rvvdiff results</h1><ul>"]
    out += [f"<li>{html.escape(h)}</li>" for h in header]
    out.append("<li>" + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + "</li></ul>")
    out.append("<table><tr><th>test</th>" + "".join(f"<th>{html.escape(c)}<br>{v}</th>" for c, v in columns) + "</tr>")
    for row in sorted(rows):
        out.append(f"<tr><td><code>{html.escape(row)}</code></td>")
        for c in columns:
            rs = rows[row].get(c, [])
            mark = ""
            if rs:
                mark = _MARK[max(rs, key=lambda r: ["passed", "skipped", "xfailed", "xpassed", "failed", "error"].index(r["outcome"]))["outcome"]]
            out.append(f"<td style='background:{color.get(mark, '#fff')}'>{mark}</td>")
        out.append("</tr>")
    out.append("</table>")
    out.append(_plot(results))
    return "\n".join(out)


def _plot(results: list[dict[str, Any]]) -> str:
    """An inline SVG: per kernel row, the worst error/bound ratio at each VLEN (log scale, 1 = the bound)."""
    pts: dict[str, dict[int, float]] = defaultdict(dict)
    for r in results:
        tid = parse_id(r["nodeid"])
        ratio = r.get("error/bound")
        if tid is None or ratio is None or not isinstance(ratio, (int, float)):
            continue
        pts[tid.row][tid.vlen] = max(pts[tid.row].get(tid.vlen, 0.0), float(ratio))
    if not pts:
        return "<p>No error/bound ratios were recorded.</p>"
    rows = sorted(pts)
    w, left, h = 900, 330, 22 * len(rows) + 60
    lo, hi = -8.0, 1.0  # log10 range shown: 1e-8 .. 10

    def x(v: float) -> float:
        lv = math.log10(v) if v > 0 else lo
        return left + (min(max(lv, lo), hi) - lo) / (hi - lo) * (w - left - 20)

    palette = {128: "#1f77b4", 256: "#2ca02c", 512: "#ff7f0e", 1024: "#d62728"}
    s = [f"<h2>Error as a fraction of its bound</h2><svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}'>"]
    for e in range(int(lo), int(hi) + 1):
        s.append(f"<line x1='{x(10.0**e):.1f}' y1='20' x2='{x(10.0**e):.1f}' y2='{h - 30}' "
                 f"stroke='{'#c00' if e == 0 else '#ddd'}'/><text x='{x(10.0**e) - 10:.1f}' y='{h - 12}' "
                 f"font-size='11'>1e{e}</text>")
    for i, row in enumerate(rows):
        y = 30 + 22 * i
        s.append(f"<text x='4' y='{y + 4}' font-size='12'>{html.escape(row[:48])}</text>")
        for vlen, ratio in sorted(pts[row].items()):
            s.append(f"<circle cx='{x(ratio):.1f}' cy='{y}' r='5' fill='{palette.get(vlen, '#000')}'>"
                     f"<title>{html.escape(row)} VLEN {vlen}: {ratio:.3g}</title></circle>")
    s.append("".join(f"<text x='{left + 90 * k}' y='14' font-size='12' fill='{c}'>VLEN {v}</text>"
                     for k, (v, c) in enumerate(palette.items())))
    s.append("</svg>")
    return "\n".join(s)


if __name__ == "__main__":
    sys.exit(main_repro(sys.argv[1:]))
