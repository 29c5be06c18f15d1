"""The second model: SmolLM2's own weights cut to shapes whose rows are a multiple of 256, so that the
K- and i-quants take every tensor when it is requantized (SmolLM2's rows of 576 keep all but ffn_down at
the fallback types).

Same architecture (llama) and tokenizer as SmolLM2; hidden 512 (SmolLM2's first 512 dimensions), 8 heads
of 64 (its first 8 query heads), 2 KV heads (its first 2), FFN 1536 (whole), the first ``layers`` layers;
the token embedding (tied to the output, as in SmolLM2) is cut to 512 columns.  Every value is SmolLM2's
own (dequantized from the shipped Q4_1), so weights, norms and embeddings have real scales; the cut model
no longer speaks English, which a differential test does not need.  Written in F32 with gguf-py's
writer, once per source digest and layer count, into the cache.
"""

from __future__ import annotations

import numpy as np

from harness.core.config import cache_dir, locked
from harness.model.catalogue import sha256_of

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN = 512, 8, 2, 64, 1536
LAYERS = 6


def _cut(name: str, w: np.ndarray) -> np.ndarray:
    """``w`` as (rows = outputs, columns = inputs), cut to the synthetic shapes."""
    h, kv = HIDDEN, KV_HEADS * HEAD_DIM
    if name.endswith(("attn_norm.weight", "ffn_norm.weight")) or name == "output_norm.weight":
        return w[:h]
    if name == "token_embd.weight":
        return w[:, :h]
    if name.endswith("attn_q.weight") or name.endswith("attn_output.weight"):
        return w[:h, :h]
    if name.endswith(("attn_k.weight", "attn_v.weight")):
        return w[:kv, :h]
    if name.endswith(("ffn_gate.weight", "ffn_up.weight")):
        return w[:FFN, :h]
    if name.endswith("ffn_down.weight"):
        return w[:h, :FFN]
    raise ValueError(f"a tensor the synthetic model does not know: {name}")


def write(source_gguf, layers: int = LAYERS, out=None):
    """Write the synthetic model made from ``source_gguf`` (SmolLM2); return its path (cached)."""
    from pathlib import Path

    import gguf
    from gguf import GGUFReader, GGUFWriter
    from gguf.quants import dequantize

    source_gguf = Path(source_gguf)
    key = f"{sha256_of(source_gguf)[:16]}-l{layers}"
    out = Path(out) if out else cache_dir() / "models" / f"synth-{key}.f32.gguf"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with locked(out.with_suffix(".lock")):
        if out.is_file():
            return out
        r = GGUFReader(source_gguf)
        arch = str(r.fields["general.architecture"].contents())
        tmp = out.with_name(out.name + ".part")
        w = GGUFWriter(tmp, arch)
        w.add_name(f"rvvdiff synthetic ({HIDDEN}x{FFN}, {layers} layers, from SmolLM2-135M's weights)")
        w.add_block_count(layers)
        w.add_context_length(8192)
        w.add_embedding_length(HIDDEN)
        w.add_feed_forward_length(FFN)
        w.add_head_count(HEADS)
        w.add_head_count_kv(KV_HEADS)
        w.add_rope_dimension_count(HEAD_DIM)
        w.add_rope_freq_base(float(r.fields[f"{arch}.rope.freq_base"].contents()))
        w.add_layer_norm_rms_eps(float(r.fields[f"{arch}.attention.layer_norm_rms_epsilon"].contents()))
        w.add_vocab_size(int(r.fields[f"{arch}.vocab_size"].contents()))
        w.add_file_type(gguf.LlamaFileType.ALL_F32)
        for k, f in r.fields.items():
            if k.startswith("tokenizer."):
                vtype = f.types[0]
                sub = f.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
                w.add_key_value(k, f.contents(), vtype, sub_type=sub)
        for t in r.tensors:
            name = t.name
            if name.startswith("blk."):
                if int(name.split(".")[1]) >= layers:
                    continue
            full = dequantize(t.data, t.tensor_type).astype(np.float32)
            full = full.reshape(tuple(int(d) for d in reversed(t.shape))) if full.ndim != len(t.shape) else full
            w.add_tensor(name, np.ascontiguousarray(_cut(name, full)))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        tmp.replace(out)
    return out
