"""The rest of a token: what a llama-architecture forward pass runs at a model's shape besides one layer's seven
mul_mats (harness/cost/prices/per_token.py), measured call by call under Spike, and the token it makes with them.

Per layer, at a batch of ``n`` tokens (llama.cpp's graph, ``llm_build_llama`` / ``llm_build_qwen3``):

* ``rms_norm`` of the hidden rows twice (before the attention and before the FFN) and the ``mul`` by each norm's
  weight row;
* Qwen3 only: ``rms_norm`` and ``mul`` of every query and key head (``q_norm``, ``k_norm``: one call over the
  ``heads + kv_heads`` rows of ``head_dim``, each row's work the same);
* ``rope`` (``ggml_rope_ext``) of the queries and of the keys: LLaMA's normal mode, Qwen3's NeoX mode;
* the K and V rows stored into the f16 KV cache (a ``cpy`` from f32 to f16 each);
* the attention: ``ggml_flash_attn_ext`` (Q f32, K and V f16: llama.cpp's f16 cache), the kernel server's fused
  ``attention`` request, at ``n`` queries over :func:`context` positions, a causal mask.  Flash attention is what
  ``llama-bench`` runs on a CPU by default now (``-fa auto`` resolves to on for the CPU backend: llama.cpp issue
  #27086 measures it so); the pull requests of the calibration rows do not name their ``-fa``;
* the two residual ``add`` s;
* ``swiglu`` (``ggml_swiglu_split``: silu(gate) x up) over the FFN rows.

Once a forward pass: the output ``rms_norm`` and its ``mul``, and the output head's mul_mat (``vocab`` x ``hidden``
weights).  The head's weight type is the model file's: a float model's own
type, Bonsai-1.7B's ``q1_0`` (its model card: "1-bit coverage: embeddings, attention projections, MLP projections,
LM head"), else ``q6_K`` (llama-quantize's rule for ``output.weight``).  Where it is the model-shaped case's own
type, the head is that case's own fit at ``k = hidden`` on each tree (:func:`own_head`: the changed kernel runs
it); otherwise it is measured with the rest, as the model-shaped case measures a mul_mat (two slices of weight
rows, :data:`per_token.SLICES`, scaled to ``vocab`` rows).

Left out, named: ``get_rows`` of the batch's embedding rows (a copy of ``n`` rows of ``hidden`` once a pass, a
quantized table's rows dequantized), the views, permutes and reshapes (no compute), the mask's set-up, the graph's
scheduling between ops, the sampling.  RoPE of the queries and the keys is measured as one call over both's heads
(each head row's work the same; the call computes its per-position sin / cos table once, a model's two calls twice).

An op's work is the same for every token row, so the ops are measured at the smallest and the largest batch and
scaled between by rows (:func:`by_batch`, as the model-shaped case scales a mul_mat by weight rows); the attention,
whose KV positions grow with the batch, at every batch.

The **set-up cancels** as in the model-shaped case: every call is measured at reps 1 and 2 and one compute is
the difference (:func:`per_token.compute`).  A pass's rest is ``sum(calls x their count)``; per token it is over
``n``.  :func:`token` adds it to the model-shaped case's cycles: BEFORE's token over AFTER's is the estimated
speed-up of a whole token (Amdahl's: the rest does not change with the kernel unless it runs the kernel).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.cost.prices import per_token

#: How every cost case of the rest is named (before its shape).
CASE_PREFIX = "rest-"
#: The KV positions of a token generation step (batch 1): the longest ``tg`` test of the rows (tg32; a tg test's
#: steps see 1 to its length).  A prompt of ``n`` tokens attends over its own ``n`` positions.
TG_CONTEXT = 32
#: The output head's weight type when the model file's is not its layers' own (llama-quantize's ``output.weight``
#: rule for a quantized model: q6_K when the row length is a multiple of 256).
QUANTIZED_HEAD = "q6_K"
#: Weight types whose models keep the head in the layers' own type: the float types (converted, not quantized), and
#: q1_0 (Bonsai-1.7B: 1-bit LM head, its model card).
OWN_HEAD = ("f32", "f16", "bf16", "q1_0")


@dataclass(frozen=True)
class Model:
    """What the rest needs of a shape beyond :class:`per_token.Shape` (the model's config.json)."""

    vocab: int
    rope_theta: float
    rope_neox: bool
    n_ctx_orig: int
    qk_norm: bool
    eps: float
    source: str


MODELS = {
    "tinyllama": Model(32000, 10000.0, False, 2048, False, 1e-5,
                       "TinyLlama-1.1B config.json (vocab_size, rope_theta, max_position_embeddings, rms_norm_eps); "
                       "llama.cpp's LLM_ARCH_LLAMA: RoPE normal mode"),
    "qwen3-1.7b": Model(151936, 1000000.0, True, 40960, True, 1e-6,
                        "Qwen3-1.7B config.json; llama.cpp's LLM_ARCH_QWEN3: RoPE NeoX mode, q_norm and k_norm"),
}


@dataclass(frozen=True)
class Call:
    """One measured call of the rest at a batch: the kernel server request (``op``: the op adapter's op by name,
    harness/server/k_ops.cpp; ``attention``: ggml_flash_attn_ext), its sources (type, ne), parameters, and how
    many times a layer and a pass run it."""

    name: str
    request: str
    op: str
    srcs: tuple[tuple[str, tuple[int, int, int, int]], ...]
    dst: str = "f32"
    iparams: tuple[int, ...] = ()
    fparams: tuple[float, ...] = ()
    per_layer: int = 0
    per_pass: int = 0
    what: str = ""
    #: Its work is the same for every token row (an op over the batch's rows): measured at the smallest and the
    #: largest batch and scaled between (:func:`by_batch`); the attention (its KV positions grow with the batch) at
    #: every batch.
    linear: bool = True
    #: attention: (n_q, n_kv, head_dim, heads, kv_heads)
    attention: tuple[int, int, int, int, int] = ()  # type: ignore[assignment]

    @property
    def units(self) -> int:
        """Elements of the first source (the attention: query rows x heads x KV positions x 2 head_dim, MAC)."""
        if self.attention:
            q, kv, d, h, _ = self.attention
            return q * h * kv * 2 * d
        ne = self.srcs[0][1]
        return ne[0] * ne[1] * ne[2] * ne[3]


def context(batch: int) -> int:
    """KV positions the attention of a batch covers (:data:`TG_CONTEXT` for token generation)."""
    return TG_CONTEXT if batch == 1 else batch


def calls(shape: per_token.Shape, n: int) -> list[Call]:
    """The rest's calls of ``shape`` at a batch of ``n`` tokens (module docstring), table-driven."""
    m = MODELS[shape.name]
    h, f, d = shape.hidden, shape.ffn, shape.head_dim
    rows = lambda w, *more: (("f32", (w, n, 1, 1)),) + more  # noqa: E731
    rope = (d, 2 if m.rope_neox else 0, m.n_ctx_orig)
    rope_fp = (m.rope_theta, 1.0, 0.0, 1.0, 32.0, 1.0)
    pos = ("i32", (n, 1, 1, 1))
    out = [
        Call("rms_norm", "op", "rms_norm", rows(h), fparams=(m.eps,), per_layer=2, per_pass=1,
             what="attn_norm and ffn_norm a layer, output_norm once"),
        Call("norm_mul", "op", "mul", rows(h, ("f32", (h, 1, 1, 1))), per_layer=2, per_pass=1,
             what="x times the norm's weight row"),
        Call("rope", "op", "rope", (("f32", (d, shape.heads + shape.kv_heads, n, 1)), pos), iparams=rope,
             fparams=rope_fp, per_layer=1, what="RoPE of the queries and the keys (one call over both's heads)"),
        Call("kv_store", "op", "cpy", rows(shape.kv_heads * d), dst="f16", per_layer=2,
             what="K and V rows into the f16 KV cache"),
        Call("attention", "attention", "flash_attn_ext", (), per_layer=1, linear=False,
             attention=(n, context(n), d, shape.heads, shape.kv_heads),
             what=f"ggml_flash_attn_ext, {n} queries over {context(n)} positions, causal"),
        Call("residual_add", "op", "add", rows(h, ("f32", (h, n, 1, 1))), per_layer=2, what="the residual adds"),
        Call("swiglu", "op", "swiglu", rows(f, ("f32", (f, n, 1, 1))), per_layer=1, what="silu(gate) x up"),
    ]
    if m.qk_norm:
        qk = shape.heads + shape.kv_heads
        out += [Call("qk_norm", "op", "rms_norm", (("f32", (d, qk, n, 1)),), fparams=(m.eps,), per_layer=1,
                     what="q_norm and k_norm over every head's row"),
                Call("qk_norm_mul", "op", "mul", (("f32", (d, qk, n, 1)), ("f32", (d, 1, 1, 1))), per_layer=1,
                     what="the head rows times their norm's weight")]
    return out


# ------------------------------------------------------------------ the spec and the case names


@dataclass(frozen=True)
class Spec:
    """The rest at one shape and its batches; ``head``: the head's weight type measured with it (None: none)."""

    shape: per_token.Shape
    head: str | None
    batches: tuple[int, ...]
    #: The batches the head is measured at (default: every batch).
    head_batches: tuple[int, ...] = ()

    def head_spec(self) -> per_token.Spec | None:
        return per_token.Spec(self.shape, self.head, self.head_batches or self.batches) if self.head else None

    def head_slices(self) -> list[tuple[int, int, int, int]]:
        """(k, m, n, reps) of the head's slices: the two slices at ``k = hidden``, each of its batches, both reps."""
        return [(self.shape.hidden, m, n, r) for n in (self.head_batches or self.batches) for m in per_token.SLICES
                for r in per_token.REPS]

    def measured(self, call: Call) -> tuple[int, ...]:
        """The batches ``call`` is measured at: every batch, or a linear call's smallest and largest."""
        return tuple(sorted({min(self.batches), max(self.batches)})) if call.linear else self.batches

    def cases(self) -> list[tuple[Call, int]]:
        """(call, batch) of every call measurement (each at both reps)."""
        names = {c.name for n in self.batches for c in calls(self.shape, n)}
        out = []
        for name in sorted(names):
            for n in self.batches:
                c = next(c for c in calls(self.shape, n) if c.name == name)
                if n in self.measured(c):
                    out.append((c, n))
        return out


def parse_spec(text: str) -> list[Spec]:
    """``SHAPE:HEAD[@BATCH+BATCH]:BATCH+BATCH`` items, comma-separated (``tinyllama:q6_K@1+32:1+32+128``; HEAD
    ``own``: no head measured, the model-shaped case's own type gives it; ``@``: the head's batches)."""
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        parts = item.split(":")
        head, _, at = (parts[1] if len(parts) > 1 else "").partition("@")
        try:
            batches = tuple(int(b) for b in parts[2].split("+"))
            head_batches = tuple(int(b) for b in at.split("+")) if at else ()
        except (IndexError, ValueError):
            batches = head_batches = ()
        if len(parts) != 3 or parts[0] not in MODELS or not batches or min(batches) < 1 or (
                head != "own" and head not in per_token.TYPES) or any(b not in batches for b in head_batches):
            raise per_token.ModelCostError(f"rest case {item!r}: write SHAPE:HEAD[@BATCH+BATCH]:BATCH+BATCH, SHAPE one "
                                           f"of {', '.join(MODELS)}, HEAD a weight type or 'own', its batches among "
                                           "the batches (tinyllama:q6_K@1+32:1+32+128)")
        out.append(Spec(per_token.SHAPES[parts[0]], None if head == "own" else head, batches, head_batches))
    return out


def case_name(shape: per_token.Shape, call: str) -> str:
    return f"{CASE_PREFIX}{shape.name}-{call}"


def head_name(shape: per_token.Shape, type_: str) -> str:
    return f"{CASE_PREFIX}{shape.name}-head-{type_}"


def size_label(n: int, reps: int) -> str:
    return f"n{n}-r{reps}"


def head_type(model_type: str) -> str:
    """The output head's weight type of a model whose layers are ``model_type`` (module docstring)."""
    return model_type if model_type in OWN_HEAD else QUANTIZED_HEAD


# ------------------------------------------------------------------ the arithmetic

Work = per_token.Work


def _diff(rows: Mapping[tuple[str, str], Mapping[str, Any]], name: str, n: int, what: str) -> Work:
    got = [rows.get((name, size_label(n, r))) for r in per_token.REPS]
    if any(g is None for g in got):
        raise per_token.ModelCostError(f"{what}: {name} at batch {n} not measured at reps "
                                       f"{' and '.join(map(str, per_token.REPS))}")
    return per_token.compute(per_token.work_of(got[0]), per_token.work_of(got[1]), f"{what}: {name} n{n}")


def head_fit(rows: Mapping[tuple[int, int, int, int], Mapping[str, Any]], k: int, n: int, what: str) -> per_token.Fit:
    """``fixed + m * per_row`` of a mul_mat at row length ``k`` and batch ``n`` from its slices' rows by (k, m, n,
    reps), as the model-shaped case fits one."""
    def work(m: int) -> Work:
        got = [rows.get((k, m, n, r)) for r in per_token.REPS]
        if any(g is None for g in got):
            raise per_token.ModelCostError(f"{what}: the head's slice k{k}-m{m}-n{n} not measured")
        return per_token.compute(per_token.work_of(got[0]), per_token.work_of(got[1]), f"{what} k{k}-m{m}-n{n}")

    return per_token.fit({m: work(m) for m in per_token.SLICES})


@dataclass(frozen=True)
class Rest:
    """The rest of a token at one shape and batch, one core: per call (each counted as a pass runs it) and the
    head, per token."""

    shape: per_token.Shape
    batch: int
    parts: dict[str, Work]  # call name (and "head" where measured) -> per-token figure, all layers
    head_type: str | None

    def total(self, with_head: bool = True) -> Work:
        common = set.intersection(*(set(w) for w in self.parts.values()))
        return {e: sum(w[e] for k, w in self.parts.items() if with_head or k != "head") for e in common
                if e in per_token.ESTIMATORS}


def rest(spec: Spec, rows: list[Mapping[str, Any]], vlen: int = 256, only: tuple[int, ...] = ()) -> list[Rest]:
    """The rest per batch (``only``: at these of the spec's) from a cost run's rows (cost.json's ``head``) of ``spec``
    at ``vlen``; raises naming a call not measured."""
    mine = {(r["name"], r["size"]): r for r in rows if str(r.get("name", "")).startswith(CASE_PREFIX)
            and int(r["vlen"]) == vlen}
    out = []
    for n in [b for b in spec.batches if not only or b in only]:
        parts: dict[str, Work] = {}
        for c in calls(spec.shape, n):
            at = {b: _diff(mine, case_name(spec.shape, c.name), b, f"rest {spec.shape.name}")
                  for b in ((n,) if n in spec.measured(c) else spec.measured(c))}
            one = at[n] if n in at else by_batch(at, n)
            count = c.per_layer * spec.shape.layers + c.per_pass
            parts[c.name] = {e: v * count / n for e, v in one.items() if e in per_token.ESTIMATORS}
        if spec.head and n in (spec.head_batches or spec.batches):
            by_slice = {per_token.parse_size(r["size"]): r for r in rows if r.get("name") == head_name(spec.shape, spec.head)
                        and int(r["vlen"]) == vlen}
            f = head_fit(by_slice, spec.shape.hidden, n, f"rest {spec.shape.name} head {spec.head}")
            parts["head"] = {e: v / n for e, v in f.at(MODELS[spec.shape.name].vocab).items()
                             if e in per_token.ESTIMATORS}
        out.append(Rest(spec.shape, n, parts, spec.head))
    return out


def by_batch(at: Mapping[int, Work], n: int) -> Work:
    """A linear call's compute at batch ``n`` from two measured batches: ``fixed + n * per_row`` through them."""
    (b1, w1), (b2, w2) = sorted(at.items())[0], sorted(at.items())[-1]
    if b1 == b2:
        raise per_token.ModelCostError(f"batch {n}: one measured batch ({b1}) cannot be scaled")
    return {e: w1[e] + (n - b1) * (w2[e] - w1[e]) / (b2 - b1) for e in w1 if e in w2}


def own_head(spec: per_token.Spec, rows: Mapping[tuple[int, int, int, int], Mapping[str, Any]], n: int) -> Work:
    """The head per token on one tree when it is the model-shaped case's own type: that tree's fit at ``k = hidden``
    and batch ``n`` (per_token.py's slices), at ``vocab`` rows, over ``n``."""
    f = head_fit(rows, spec.shape.hidden, n, per_token.case_name(spec))
    return {e: v / n for e, v in f.at(MODELS[spec.shape.name].vocab).items() if e in per_token.ESTIMATORS}


def token(mul_mats: Work, rest_: Work, head: Work | None = None) -> Work:
    """A whole token on one core: the layers' mul_mats, the rest (with its head, or without it and ``head`` the
    tree's own), per estimator present in all."""
    parts = [mul_mats, rest_] + ([head] if head is not None else [])
    return {e: sum(p[e] for p in parts) for e in per_token.ESTIMATORS if all(e in p for p in parts)}


def share(before: Work, after: Work, kernel_before: Work, kernel_after: Work) -> dict[str, tuple[float, float]]:
    """The changed work's share of the token on each tree (BEFORE's, AFTER's), per estimator."""
    return {e: (kernel_before[e] / before[e], kernel_after[e] / after[e]) for e in before if e in after
            and e in kernel_before and e in kernel_after}


def speedup(before: Work, after: Work) -> dict[str, float]:
    """BEFORE's token over AFTER's, per estimator (Amdahl: the rest is in both)."""
    return {e: before[e] / after[e] for e in per_token.ESTIMATORS if e in before and e in after}


def head_bytes(shape: per_token.Shape, type_: str) -> float:
    """The head's weight bytes: read once a pass."""
    return per_token.weight_bytes(per_token.Spec(shape, type_, (1,))) / shape.layers / sum(
        m * k for _, m, k in shape.matmuls()) * MODELS[shape.name].vocab * shape.hidden
