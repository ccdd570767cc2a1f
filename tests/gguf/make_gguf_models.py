#!/usr/bin/env python3
"""Writes tiny GGUF decoders from the generated Hugging Face test models
(tools/make_test_models.py), the way llama.cpp's converter lays them out,
with the PyPI `gguf` package (GGUFWriter, gguf.quants): `<arch>.*`
hyper-parameters, tensors under GGUF names (llama: each head's q/k rows
interleaved), GEMM weights quantized to a chosen type, and a byte-level BPE
tokenizer (`tokenizer.ggml.model` gpt2) from the model's tokenizer.json.

Runs in the venv (gguf, numpy).
usage: make_gguf_models.py --test-models DIR --out DIR
Writes DIR/<name>.gguf for every entry of MODELS.
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

# name -> (source test model, GGUF architecture, GEMM weight type)
MODELS = {
    "llama-tiny-q8_0": ("llama-tiny", "llama", "Q8_0"),
    "llama-tiny-f16": ("llama-tiny", "llama", "F16"),
    "qwen2-tiny-q4_0": ("qwen2-tiny", "qwen2", "Q4_0"),
    "qwen3-tiny-q4_1": ("qwen3-tiny", "qwen3", "Q4_1"),
    "qwen3-tiny-bf16": ("qwen3-tiny", "qwen3", "BF16"),
}

LAYER = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def gguf_name(hf):
    name = hf[len("model."):] if hf.startswith("model.") else hf
    stem, suffix = name.rsplit(".", 1)
    if stem.startswith("layers."):
        _, layer, part = stem.split(".", 2)
        return "blk.%s.%s.%s" % (layer, LAYER[part], suffix)
    return {"embed_tokens": "token_embd", "norm": "output_norm",
            "lm_head": "output"}[stem] + "." + suffix


def interleave(w, heads):
    """llama.cpp's row order for `llama` q/k: each head's rows i and
    i + d/2 side by side."""
    rows = w.shape[0]
    d = rows // heads
    return w.reshape(heads, 2, d // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write(src, out_path, arch, qtype):
    cfg = json.load(open(os.path.join(src, "config.json")))
    tensors = REF.load_weights(src)
    tok = json.load(open(os.path.join(src, "tokenizer.json")))
    w = gguf.GGUFWriter(out_path, arch)
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    hidden = cfg["hidden_size"]
    head_dim = cfg.get("head_dim") or hidden // heads
    w.add_context_length(min(cfg["max_position_embeddings"], 4096))
    w.add_embedding_length(hidden)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_layer_norm_rms_eps(cfg.get("rms_norm_eps", 1e-6))
    w.add_rope_freq_base(cfg.get("rope_theta", 10000.0))
    w.add_rope_dimension_count(head_dim)
    if arch == "qwen3":
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_vocab_size(cfg["vocab_size"])

    # Tokenizer: every id up to the embedding rows (padding ids unused).
    vocab = dict(tok["model"]["vocab"])
    types = {}
    for t in tok.get("added_tokens", []):
        vocab[t["content"]] = t["id"]
        types[t["id"]] = (gguf.TokenType.CONTROL if t.get("special")
                          else gguf.TokenType.USER_DEFINED)
    n = cfg["vocab_size"]
    tokens = ["[PAD%d]" % i for i in range(n)]
    ttypes = [gguf.TokenType.UNUSED] * n
    for s, i in vocab.items():
        if i < n:
            tokens[i] = s
            ttypes[i] = types.get(i, gguf.TokenType.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m)
              for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2" if arch.startswith("qwen") else "llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types(ttypes)
    w.add_token_merges(merges)
    if cfg.get("bos_token_id") is not None:
        w.add_bos_token_id(cfg["bos_token_id"])
    eos = cfg.get("eos_token_id")
    if isinstance(eos, list):
        eos = eos[0]
    if eos is not None:
        w.add_eos_token_id(eos)
    w.add_add_bos_token(False)

    qt = gguf.GGMLQuantizationType[qtype]
    block = gguf.GGML_QUANT_SIZES[qt][0]
    for hf, a in sorted(tensors.items()):
        if hf.endswith("rotary_emb.inv_freq"):
            continue
        a = np.asarray(a, dtype=np.float32)
        if arch == "llama" and hf.endswith(("q_proj.weight", "k_proj.weight")):
            a = interleave(a, heads if "q_proj" in hf else kv)
        name = gguf_name(hf)
        if a.ndim == 2 and qt == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, a.astype(np.float16))
        elif a.ndim == 2 and a.shape[1] % block == 0:
            # Quantized (and BF16) data: uint8 rows; the writer derives the
            # element shape from the byte shape.
            w.add_tensor(name, gguf.quants.quantize(a, qt), raw_dtype=qt)
        elif a.ndim == 2:
            w.add_tensor(name, a.astype(np.float16))
        else:
            w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--test-models", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, (src, arch, qtype) in MODELS.items():
        write(os.path.join(args.test_models, src),
              os.path.join(args.out, name + ".gguf"), arch, qtype)
        print("wrote", name)


if __name__ == "__main__":
    main()
