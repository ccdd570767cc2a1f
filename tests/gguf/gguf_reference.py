#!/usr/bin/env python3
"""Greedy decoding of a GGUF decoder by the float64 NumPy reference
(tests/reference), on weights dequantized by the PyPI `gguf` package: an
implementation of the GGUF side that shares nothing with inferd's (metadata
read by gguf-py, tensors mapped to Hugging Face names here, llama.cpp's q/k
row interleaving undone here so the reference keeps its rotate-half RoPE).

Runs in the venv (gguf, numpy).
usage: gguf_reference.py --gguf FILE --prompts JSON --tokens N [--out F]
  JSON: a list of prompts, each a list of token ids. Prints (or writes)
  {"greedy": [[ids...], ...], "config": {...}}.
"""
import argparse
import json
import os
import sys

import gguf
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import reference as REF  # noqa: E402

LAYER = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
GLOBAL = {"token_embd": "embed_tokens", "output_norm": "norm",
          "output": "lm_head"}
ARCHS = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
         "qwen3": "Qwen3ForCausalLM"}


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def hf_name(name):
    stem, suffix = name.rsplit(".", 1)
    if stem.startswith("blk."):
        _, layer, part = stem.split(".", 2)
        if part not in LAYER:
            return None
        return "layers.%s.%s.%s" % (layer, LAYER[part], suffix)
    if stem in GLOBAL:
        return "%s.%s" % (GLOBAL[stem], suffix)
    return None


def uninterleave(w, heads):
    """llama.cpp stores each head's rows as pairs (i, i + d/2) side by side;
    back to the Hugging Face order."""
    rows, cols = w.shape
    d = rows // heads
    return w.reshape(heads, d // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def load(path):
    r = gguf.GGUFReader(path)
    arch = field(r, "general.architecture")
    if arch not in ARCHS:
        raise SystemExit("unsupported architecture %s" % arch)
    p = arch + "."
    hidden = int(field(r, p + "embedding_length"))
    heads = int(field(r, p + "attention.head_count"))
    kv = int(field(r, p + "attention.head_count_kv", heads))
    cfg = {
        "architectures": [ARCHS[arch]],
        "model_type": arch,
        "hidden_size": hidden,
        "num_hidden_layers": int(field(r, p + "block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": int(field(r, p + "feed_forward_length")),
        "rms_norm_eps": float(field(r, p + "attention.layer_norm_rms_epsilon", 1e-6)),
        "rope_theta": float(field(r, p + "rope.freq_base", 10000.0)),
        "head_dim": int(field(r, p + "attention.key_length", hidden // heads)),
        "hidden_act": "silu",
        "max_position_embeddings": int(field(r, p + "context_length", 2048)),
    }
    tensors = {}
    for t in r.tensors:
        name = hf_name(t.name)
        if name is None:
            continue
        a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        a = a.reshape([int(x) for x in reversed(t.shape)])
        if arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):
            a = uninterleave(a, heads if "q_proj" in name else kv)
        tensors[name] = a
    cfg["tie_word_embeddings"] = "lm_head.weight" not in tensors
    eos = []
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"):
        v = field(r, key)
        if v is not None:
            eos.append(int(v))
    return cfg, REF.Weights(tensors), eos


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--out")
    args = ap.parse_args()
    cfg, w, eos = load(args.gguf)
    prompts = json.loads(args.prompts)
    out = {"config": cfg, "eos": eos,
           "greedy": [REF.greedy_cached(cfg, w, ids, args.tokens, eos)
                      for ids in prompts]}
    text = json.dumps(out)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
