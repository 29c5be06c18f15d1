"""The model-shaped cost case: one transformer layer's matrix multiplications at a model's shape, as
estimated cycles per token on one core, a tokens/s ratio between two trees and a ceiling rate.

What is measured (costs/model.py builds the calls): ``mul_mat(W, X)`` through ggml's own graph on one
thread, W of ``m`` rows of ``k`` elements of the weight type, X a batch of ``n`` f32 rows (1: token
generation; 32, 128, 512: a prompt).  A quantized W goes through the kernel server's ``repack_mul_mat``
(the weights placed as llama.cpp places them, in CPU_REPACK where the tree repacks the type, else in the
CPU buffer); a float W (f32, f16, bf16) through its ``mul_mat``, the differential mul_mat family's
request: ggml converts X to the weight's dot type, then tinyBLAS_RVV or the type's vec_dot runs, which
one depending on the batch.  The rows record the path measured and the report names it per batch.

Two rules turn a few small measurements into a layer:

* **Set-up cancels.**  A request places and repacks the weights once and computes the graph ``reps``
  times; the compute is the measurement at reps 2 minus the one at reps 1 (:func:`compute`), for every
  estimator (instructions retired, rvv-bench's X60 prices of the instruction mix, LLVM's X60 model:
  all three are sums over executed instructions, so a difference is the difference's estimate).
* **Scaling by rows.**  A mul_mat's compute at fixed ``k`` and ``n`` is a part that does not depend on the
  weight rows (quantizing X to the vec_dot type, the graph's set-up) plus the same work per weight row:
  ``c(m) = fixed + m * per_row``.  Two slices (:data:`SLICES` rows) give ``fixed`` and ``per_row``
  (:func:`fit`); one larger slice (:data:`CHECK_SLICE`) checks the rule (:func:`check`).  A layer is the
  sum of its mul_mats, each ``fixed + m * per_row`` at its own ``k`` (:func:`layer`).

Per token = a layer's cycles over ``n``, times the model's layers.  The **estimated rate** on a board is
``clock x threads / cycles per token``: a ceiling estimate, not a bound: it ignores memory bandwidth (token
generation reads every weight once per token), threading overhead and everything of a forward pass
but these mul_mats (attention, norms, the output head).  The ratio between two trees (BEFORE's cycles
per token over AFTER's) is the figure held against a board's before / after tokens/s
(harness/cost/calibration/model_rows.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.core.config import ISA_BUILDS
from harness.core.errors import RvvdiffError
from harness.cost.prices import cores, estimate_pair, memory_system
from oracles import quant_types as QT

#: Weight rows of the two slices the rule is fitted on, and of the slice that checks it (multiples of 16:
#: the repacked layouts interleave 16 rows).
SLICES = (32, 64)
CHECK_SLICE = 256
#: Repetitions of the compute in the two requests of one slice (their difference is one compute).
REPS = (1, 2)
#: Estimators: instructions retired, rvv-bench's X60 prices, LLVM's X60 model.
ESTIMATORS = ("instructions", "table", "mca")
#: The traffic a slice's row carries where it was counted (``RVVDIFF_COST_TRAFFIC``): bytes between the L1s and the
#: L2 and between the L2 and DRAM through the X60's cache model (harness/cost/measure/spike_traffic.py).  Scaled by
#: rows as the estimators are; a difference of two requests may be 0 or below (the second compute finds its data
#: in the caches), so it is not checked as they are.
TRAFFIC = ("l2_bytes", "dram_bytes")
#: The check slice's measured compute may differ from the rule's prediction by this fraction at most.
CHECK_TOLERANCE = 0.02


class ModelCostError(RvvdiffError, ValueError):
    """A model-shaped measurement that does not add up; the message names the slice and what is wrong."""


@dataclass(frozen=True)
class Shape:
    name: str
    label: str
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    head_dim: int
    layers: int
    source: str

    def matmuls(self) -> tuple[tuple[str, int, int], ...]:
        """(name, weight rows m, row length k) of one layer's mul_mats."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return (("q", q, self.hidden), ("k", kv, self.hidden), ("v", kv, self.hidden), ("o", self.hidden, q),
                ("gate", self.ffn, self.hidden), ("up", self.ffn, self.hidden), ("down", self.hidden, self.ffn))

    def ks(self) -> tuple[int, ...]:
        return tuple(sorted({k for _, _, k in self.matmuls()}))


SHAPES = {s.name: s for s in (
    Shape("tinyllama", "TinyLlama 1.1B", 2048, 5632, 32, 4, 64, 22, "TinyLlama-1.1B config.json"),
    # Bonsai-1.7B is a 1-bit model of Qwen3-1.7B's architecture; its shape is Qwen3-1.7B's config.json.
    Shape("qwen3-1.7b", "Qwen3-1.7B (Bonsai-1.7B's shape)", 2048, 6144, 16, 8, 128, 28, "Qwen3-1.7B config.json"),
)}


@dataclass(frozen=True)
class Spec:
    """One model-shaped case: a shape, a weight type, the batches, and whether the rule's check slice runs."""

    shape: Shape
    type: str
    batches: tuple[int, ...]
    check: bool = False
    #: The weights in the plain CPU buffer (the type's vec_dot path), not in CPU_REPACK: a tree as it was
    #: before the type's repacked layout, or llama.cpp with repacking off.
    cpu: bool = False

    def slices(self) -> list[tuple[int, int, int, int]]:
        """(k, m, n, reps) of every request it needs: both slices at every k and batch, the check slice at
        the first k and the largest batch."""
        out = [(k, m, n, r) for n in self.batches for k in self.shape.ks() for m in SLICES for r in REPS]
        if self.check:
            out += [(self.shape.ks()[0], CHECK_SLICE, max(self.batches), r) for r in REPS]
        return out


FLAGS = ("check", "cpu")
#: The float weight types: measured as the differential mul_mat family's request (no repacking, so no ``:cpu``).
FLOAT_TYPES = ("f32", "f16", "bf16")
#: The weight types the model-shaped case takes: the quantized types with a dot product (oracles/quant_types.py),
#: whose weight rows costs/model.py builds from the type's blocks, and the float types.
TYPES = (*FLOAT_TYPES, *(r.name for r in QT.RECORDS if r.vec_dot_type))
#: The extension a float type's vector kernels (tinyBLAS_RVV, the vec_dot) need in the pinned tree; a build
#: without it runs ggml's C loop.  The report names the path each batch measured, read from the run.
VECTOR_EXTENSION = {"f16": "zvfh", "bf16": "zvfbfwma"}


def parse_spec(text: str) -> list[Spec]:
    """``SHAPE:TYPE:BATCH+BATCH[:check][:cpu]`` items, comma-separated (``tinyllama:q4_0:1+32``)."""
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        parts = item.split(":")
        flags = parts[3:]
        if len(parts) < 3 or parts[0] not in SHAPES or any(f not in FLAGS for f in flags) or len(set(flags)) < len(flags):
            raise ModelCostError(f"model case {item!r}: write SHAPE:TYPE:BATCH+BATCH[:check][:cpu], SHAPE one of "
                                 f"{', '.join(SHAPES)} (e.g. tinyllama:q4_0:1+32)")
        try:
            batches = tuple(int(b) for b in parts[2].split("+"))
        except ValueError:
            batches = ()
        if not batches or min(batches) < 1:
            raise ModelCostError(f"model case {item!r}: batches are positive integers joined by '+' (1+32)")
        if parts[1] not in TYPES:
            raise ModelCostError(f"model case {item!r}: the model-shaped case takes a float or quantized weight type, "
                                 f"not {parts[1]!r}: one of {', '.join(TYPES)} (e.g. {parts[0]}:q4_0:{parts[2]})")
        if parts[1] in FLOAT_TYPES and "cpu" in flags:
            raise ModelCostError(f"model case {item!r}: ':cpu' places quantized weights outside CPU_REPACK; float "
                                 f"weights are not repacked (write {':'.join(p for p in parts if p != 'cpu')})")
        out.append(Spec(SHAPES[parts[0]], parts[1], batches, "check" in flags, "cpu" in flags))
    return out


def notes(specs: list[Spec], isas: tuple[str, ...]) -> list[str]:
    """One line per float spec whose vector kernels some selected ISA build lacks (:data:`VECTOR_EXTENSION`):
    what that build measures instead."""
    out = []
    for spec in specs:
        ext = VECTOR_EXTENSION.get(spec.type)
        lack = [i for i in isas if ext and i in ISA_BUILDS and ext not in ISA_BUILDS[i].extensions]
        if lack:
            having = ", ".join(b.name for b in ISA_BUILDS.values() if ext in b.extensions)
            out.append(f"model case {spec.shape.name}:{spec.type}: {spec.type}'s vector kernels (tinyBLAS_RVV, "
                       f"ggml_vec_dot_{spec.type}) need {ext} (--isa {having}); "
                       f"at --isa {','.join(lack)} it measures ggml's C loop (the report names each batch's path)")
    return out


#: How every model-shaped case's name begins.
CASE_PREFIX = "model-"


def case_name(spec: Spec) -> str:
    return f"{CASE_PREFIX}{spec.shape.name}-{spec.type}" + ("-cpu" if spec.cpu else "")


def size_label(k: int, m: int, n: int, reps: int) -> str:
    return f"k{k}-m{m}-n{n}-r{reps}"


def parse_size(size: str) -> tuple[int, int, int, int]:
    k, m, n, r = (int(p[1:]) for p in size.split("-"))
    return k, m, n, r


# ------------------------------------------------------------------ the arithmetic


Work = dict[str, float]  # estimator -> cycles (instructions for "instructions")


def work_of(row: Mapping[str, Any]) -> Work:
    """The estimators' figures of one measured row (a cost-log row at VLEN 256 has all three), and its traffic
    through the X60's caches where it was counted (:data:`TRAFFIC`)."""
    out: Work = {"instructions": float(row["instret"])}
    core = estimate_pair.x60(int(row["vlen"]))
    if core is not None and row.get("mix"):
        out["table"] = cores.estimate(core, row["mix"]).cycles
    if (m := estimate_pair.mca_cycles(dict(row))) is not None:
        out["mca"] = m
    if (t := (row.get("traffic") or {}).get(estimate_pair.X60_KEY)) is not None:
        out.update({k: float(t[k]) for k in TRAFFIC})
    return out


def compute(once: Work, twice: Work, what: str) -> Work:
    """One compute: the request with reps 2 minus the one with reps 1 (the set-up cancels)."""
    out = {e: twice[e] - once[e] for e in (*ESTIMATORS, *TRAFFIC) if e in once and e in twice}
    bad = [e for e, v in out.items() if v <= 0 and e in ESTIMATORS]
    if bad:
        raise ModelCostError(f"{what}: reps 2 costs no more than reps 1 by {', '.join(bad)} "
                             "(the compute was not repeated, or the set-up is not the same in both requests)")
    return out


@dataclass(frozen=True)
class Fit:
    fixed: Work
    per_row: Work

    def at(self, m: int) -> Work:
        return {e: self.fixed[e] + m * self.per_row[e] for e in self.per_row}


def fit(slices: Mapping[int, Work]) -> Fit:
    """``c(m) = fixed + m * per_row`` through the two slices of :data:`SLICES`."""
    m1, m2 = SLICES
    a, b = slices[m1], slices[m2]
    per = {e: (b[e] - a[e]) / (m2 - m1) for e in a if e in b}
    return Fit({e: a[e] - m1 * per[e] for e in per}, per)


def check(f: Fit, m: int, measured: Work) -> dict[str, float]:
    """The rule's relative error at a measured slice of ``m`` rows, per estimator."""
    want = f.at(m)
    return {e: measured[e] / want[e] - 1 for e in want if e in measured and want[e]}


def layer(shape: Shape, fits: Mapping[int, Fit]) -> Work:
    """One layer's mul_mats at one batch: each ``fixed + m * per_row`` of its own ``k``."""
    common = set.intersection(*(set(fits[k].per_row) for _, _, k in shape.matmuls()))
    out: Work = {}
    for _, m, k in shape.matmuls():
        for e, v in fits[k].at(m).items():
            if e in common:  # a figure some row length lacks (traffic not counted there) is no layer's
                out[e] = out.get(e, 0.0) + v
    return out


@dataclass(frozen=True)
class Result:
    """One tree's model-shaped estimate at one batch."""

    spec: Spec
    batch: int
    per_token: Work  # cycles per token, all layers, one core
    checked: dict[str, float]  # the rule's relative error at the check slice ({} without one)
    #: The paths the batch's slices measured (a float type's rows record it: costs/graph.py ``path_of``), and
    #: the tree's predictions that differ from them.
    paths: tuple[str, ...] = ()
    unexpected: tuple[str, ...] = ()

    def rate(self, estimator: str, clock_ghz: float, threads: int) -> float:
        """Tokens/s ceiling estimate (module docstring): not a bound, a board can beat it."""
        return clock_ghz * 1e9 * threads / self.per_token[estimator]


def results(spec: Spec, rows: Mapping[tuple[int, int, int, int], Mapping[str, Any]]) -> list[Result]:
    """One tree's results per batch from its rows by (k, m, n, reps); raises naming a missing slice."""
    def work(k: int, m: int, n: int) -> Work:
        got = [rows.get((k, m, n, r)) for r in REPS]
        what = f"{case_name(spec)} {size_label(k, m, n, 1)[:-3]}"
        if any(g is None for g in got):
            raise ModelCostError(f"{what}: not measured at reps {' and '.join(map(str, REPS))}")
        return compute(work_of(got[0]), work_of(got[1]), what)

    out = []
    for n in spec.batches:
        fits = {k: fit({m: work(k, m, n) for m in SLICES}) for k in spec.shape.ks()}
        per_layer = layer(spec.shape, fits)
        checked: dict[str, float] = {}
        k0 = spec.shape.ks()[0]
        if spec.check and n == max(spec.batches):
            checked = check(fits[k0], CHECK_SLICE, work(k0, CHECK_SLICE, n))
        mine = [r for key, r in rows.items() if key[2] == n]
        out.append(Result(spec, n, {e: v * spec.shape.layers / n for e, v in per_layer.items()}, checked,
                          tuple(sorted({r["path"] for r in mine if r.get("path")})),
                          tuple(sorted({r["path_expected"] for r in mine if r.get("path_expected")}))))
    return out


def rows_by_slice(cost_rows: list[Mapping[str, Any]], spec: Spec, vlen: int = 256
                  ) -> dict[tuple[int, int, int, int], Mapping[str, Any]]:
    """A cost run's rows (cost.json's ``head`` or ``base``) of ``spec`` at ``vlen``, by (k, m, n, reps)."""
    name = case_name(spec)
    mine = [r for r in cost_rows if r.get("name") == name and int(r["vlen"]) == vlen]
    isas = sorted({r.get("isa", "") for r in mine})
    if len(isas) > 1:
        raise ModelCostError(f"{name}: measured in several ISA builds ({', '.join(isas)}); run with one --isa")
    return {parse_size(r["size"]): r for r in mine}


#: Bytes an element of a float weight type takes (a quantized type's: its block's bytes over its elements).
FLOAT_BYTES = {"f32": 4, "f16": 2, "bf16": 2}


def weight_bytes(spec: Spec) -> float:
    """The bytes of every layer's mul_mat weights: what one forward pass must read from DRAM at least (the weights
    do not fit a cache: 8.6 MB a layer at the least here, against the K1's 512 KiB L2 per cluster)."""
    rec = next((r for r in QT.RECORDS if r.name == spec.type), None)
    per = FLOAT_BYTES[spec.type] if rec is None else rec.nbytes / rec.block
    return sum(m * k for _, m, k in spec.shape.matmuls()) * per * spec.shape.layers


def dram_roof(spec: Spec, batch: int, system: memory_system.MemorySystem) -> float | None:
    """Tokens/s the DRAM bus allows when each weight is read once a pass of ``batch`` tokens, at the bus's peak
    (harness/data/cost/memory.toml): the compulsory traffic's roof, a ceiling (a board re-reads more, and sustains
    less than the peak); None without a published bus."""
    if system.dram is None:
        return None
    return system.dram.peak_bytes_per_s / (weight_bytes(spec) / batch)


def ratio(before: Result, after: Result) -> dict[str, float]:
    """BEFORE's cycles per token over AFTER's: the estimated tokens/s speed-up, per estimator."""
    return {e: before.per_token[e] / after.per_token[e] for e in ESTIMATORS if e in after.per_token
            and e in before.per_token}


def report(cost: Mapping[str, Any], specs: list[Spec], clock_ghz: float, threads: int, vlen: int = 256) -> list[str]:
    """Markdown lines: per case and batch, cycles per token by estimator on HEAD (and BASE), the ratio,
    the ceiling rate and the rule's check."""
    out = [f"## Model-shaped cases (VLEN {vlen}, one core; rate: ceiling estimate at {clock_ghz:g} GHz x {threads} "
           "threads, ignoring memory bandwidth, threading overhead and all but these mul_mats)", ""]
    for spec in specs:
        head = results(spec, rows_by_slice(cost.get("head", []), spec, vlen))
        base = results(spec, rows_by_slice(cost["base"], spec, vlen)) if cost.get("base") else []
        for i, h in enumerate(head):
            est = [e for e in ESTIMATORS if e in h.per_token]
            cyc = [e for e in est if e != "instructions"]  # the rate needs cycles: a core's estimate

            def rates(res: Result, names: list[str]) -> str:
                return ", ".join(f"{res.rate(e, clock_ghz, threads):.2f} t/s ({e})" for e in names) or "no cycle estimate"

            line = (f"- {spec.shape.label}, {spec.type}{' (CPU buffer)' if spec.cpu else ''}, batch {h.batch}: per "
                    "token " + ", ".join(f"{e} {h.per_token[e] / 1e6:.1f} M" for e in est) + "; ceiling rate "
                    + rates(h, cyc))
            if base:
                r = ratio(base[i], h)
                line += ("; BASE: ceiling rate " + rates(base[i], [e for e in cyc if e in r])
                         + "; BASE / HEAD: " + ", ".join(f"{e} {r[e]:.2f}x" for e in est if e in r))
            if h.paths:
                line += "; path: " + " / ".join(h.paths)
                if base and base[i].paths != h.paths:
                    line += " (BASE: " + " / ".join(base[i].paths) + ")"
            if h.unexpected:
                line += "; the tree predicted " + " / ".join(h.unexpected)
            roof = dram_roof(spec, h.batch, memory_system.systems()[estimate_pair.X60_KEY])
            if roof is not None and vlen == 256:
                line += (f"; DRAM roof {roof:.1f} t/s (each weight read once a pass, {estimate_pair.X60_KEY}'s chip's "
                         "peak bus; compute-bound below it)")
            if all(k in h.per_token for k in TRAFFIC):
                line += (f"; traffic per token through {estimate_pair.X60_KEY}'s caches (one core): L2 "
                         f"{h.per_token['l2_bytes'] / 1e6:.1f} MB, DRAM {h.per_token['dram_bytes'] / 1e6:.1f} MB (the "
                         f"weights once a pass: {weight_bytes(spec) / h.batch / 1e6:.1f} MB)")
            if h.checked:
                line += (f"; rule checked at {CHECK_SLICE} rows: "
                         + ", ".join(f"{e} {v * 100:+.2f} %" for e, v in h.checked.items()))
            out.append(line)
    return out
