"""The model files the family runs, and what llama.cpp repacks of one when it loads it.

A file is a base model (SmolLM2 as shipped, fetched once; the synthetic model cut from it; or the user's
``--gguf``, which the caller passes as a path) as it is, or requantized by the host's tools of a tree
(harness/model/requant.py).  Which of its weights llama.cpp repacks at a VLEN is ggml's selection, read
from the tree (harness/ggml/cwalk.py), applied to each weight's type and row count.
"""

from __future__ import annotations

import functools
from pathlib import Path

from harness.ggml import cwalk
from harness.ggml.source import GgmlSource
from harness.model import catalogue, gguf_file, requant, synth
from harness.model.tools import Tools, host_tools


@functools.cache
def base_model(base: str) -> Path:
    """The base model's file: ``smollm2`` (SmolLM2 as shipped, fetched once) or ``synth`` (cut from it)."""
    shipped = catalogue.fetch()
    return shipped if base == "smollm2" else synth.write(shipped)


@functools.cache
def host(source: GgmlSource) -> Tools:
    """The host's build of ``source``'s tools (the quantizers, and the reference's second opinion)."""
    return host_tools(source)


@functools.cache
def model_file(source: GgmlSource, base: Path, quantize: str | None, imatrix: bool = False) -> Path:
    """``base`` as it is (``quantize`` None), or requantized to llama-quantize's type ``quantize`` by the host's
    tools of ``source`` (with an importance matrix on the fixed text when ``imatrix``)."""
    if quantize is None:
        return base
    h = host(source)
    im = requant.imatrix(h, base) if imatrix else None
    return requant.requantize(h, base, quantize, imatrix_file=im)


def ggml_spelling(gguf_type: str) -> str:
    """gguf-py's lower-case name (``q4_k``) in ggml's spelling (``q4_K``)."""
    return gguf_type[:-1] + "K" if gguf_type.endswith("_k") else gguf_type


def repack_layout(source: GgmlSource, ggml_type: str, vlen: int, zvfh: bool, rows: int = 576) -> str | None:
    """The repacked layout ggml's selection (read from the tree) picks for ``rows``-row weights of a type."""
    rule = cwalk.read_selection(source.cpu_dir, zvfh).rules.get(ggml_type, {}).get(vlen)
    return rule.layout if rule and rows % rule.divisor == 0 else None


def repacked(source: GgmlSource, info: gguf_file.GgufInfo, vlen: int, zvfh: bool) -> dict[str, int]:
    """``{layout: tensors}`` that llama.cpp repacks when it loads the file at this VLEN (ggml's selection,
    read from the tree, applied to each weight's type and row count)."""
    out: dict[str, int] = {}
    tied = not any(t.name == "output.weight" for t in info.tensors)  # the output matmul reads token_embd
    for t in info.tensors:
        if len(t.shape) == 2 and (t.name != "token_embd.weight" or tied):
            layout = repack_layout(source, ggml_spelling(t.type), vlen, zvfh, t.shape[1])
            if layout:
                out[layout] = out.get(layout, 0) + 1
    return out
