#!/usr/bin/env python3
"""Writes tiny GGUF models from the generated Hugging Face test models
(tools/make_test_models.py), the way llama.cpp's converter lays them out,
with the PyPI `gguf` package (GGUFWriter, gguf.quants): `<arch>.*`
hyper-parameters, tensors under GGUF names (llama, smollm3: each head's
q/k rows interleaved; a `llama3` rope_scaling as the rope_freqs tensor; phi3:
fused attn_qkv and gate|up ffn_up, longrope factor tensors; gemma2/3: norm
weights as 1 + w, their norm names), GEMM
weights quantized to a chosen type, and the tokenizer from the model's
tokenizer.json: byte-level BPE (`tokenizer.ggml.model`
gpt2) for the decoders; for `bert` encoders WordPiece (`bert`) spelt as
convert_hf_to_gguf's BertModel.set_vocab writes it (control tokens
verbatim, "##x" continuations as "x", other tokens as "\u2581x"), special
ids and add_* flags as gguf.SpecialVocab derives them, and
`bert.pooling_type` from the sentence-transformers Pooling module.

Runs in the venv (gguf, numpy).
usage: make_gguf_models.py --test-models DIR --out DIR [--only a,b]
Writes DIR/<name>.gguf for every entry of MODELS (or those named).
"""
import argparse
import json
import logging
import math
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
    # Llama 3.1-style rope scaling as llama.cpp's converter writes it: a
    # rope_freqs tensor of per-dimension factors.
    "llama31-tiny-f32": ("llama31-tiny", "llama", "F32"),
    "qwen2-tiny-q4_0": ("qwen2-tiny", "qwen2", "Q4_0"),
    "qwen2-tiny-q5_1": ("qwen2-tiny", "qwen2", "Q5_1"),
    "llama-tiny-q5_0": ("llama-tiny", "llama", "Q5_0"),
    "smollm3-tiny-q8_0": ("smollm3-tiny", "smollm3", "Q8_0"),
    "smollm3-tiny-f32": ("smollm3-tiny", "smollm3", "F32"),
    "phi3-tiny-q8_0": ("phi3-tiny", "phi3", "Q8_0"),
    "phi3-tiny-f32": ("phi3-tiny", "phi3", "F32"),
    "gemma2-tiny-q8_0": ("gemma2-tiny", "gemma2", "Q8_0"),
    "gemma2-tiny-f32": ("gemma2-tiny", "gemma2", "F32"),
    "gemma3-tiny-q8_0": ("gemma3-tiny", "gemma3", "Q8_0"),
    "gemma3-tiny-f32": ("gemma3-tiny", "gemma3", "F32"),
    "qwen3-tiny-q4_1": ("qwen3-tiny", "qwen3", "Q4_1"),
    # A type inferd rewrites at load (IQ4_NL -> Q8_0,
    # runtime/loader/gguf_transcode.h); gguf-py only decodes it, so the
    # blocks come from iq4_nl_blocks below.
    "llama-tiny-iq4_nl": ("llama-tiny", "llama", "IQ4_NL"),
    "qwen3-tiny-bf16": ("qwen3-tiny", "qwen3", "BF16"),
    "bert-embed-f16": ("bert-embed", "bert", "F16"),
    "bert-mean-q8_0": ("bert-mean", "bert", "Q8_0"),
    # The embedders llama.cpp converts under their own architectures.
    "nomic-embed-f16": ("nomic-embed", "nomic-bert", "F16"),
    "jina-embed-q8_0": ("jina-embed", "jina-bert-v2", "Q8_0"),
}

# Architectures whose q/k rows llama.cpp's converter interleaves (its
# LlamaModel and subclasses).
INTERLEAVED = ("llama", "smollm3")

BERT_LAYER = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
BERT_GLOBAL = {
    "embeddings.word_embeddings": "token_embd",
    "embeddings.token_type_embeddings": "token_types",
    "embeddings.position_embeddings": "position_embd",
    "embeddings.LayerNorm": "token_embd_norm",
}

LAYER = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.qkv_proj": "attn_qkv",
    "mlp.gate_up_proj": "ffn_up",  # phi3: gate | up stacked
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


GEMMA = ("gemma2", "gemma3")
# Gemma's block norms (llama.cpp's names).
GEMMA_NORMS = {
    "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
}


def gguf_name(hf, arch=None):
    name = hf[len("model."):] if hf.startswith("model.") else hf
    stem, suffix = name.rsplit(".", 1)
    if stem.startswith("layers."):
        _, layer, part = stem.split(".", 2)
        if arch in GEMMA and part in GEMMA_NORMS:
            return "blk.%s.%s.%s" % (layer, GEMMA_NORMS[part], suffix)
        return "blk.%s.%s.%s" % (layer, LAYER[part], suffix)
    return {"embed_tokens": "token_embd", "norm": "output_norm",
            "lm_head": "output"}[stem] + "." + suffix


def interleave(w, heads):
    """llama.cpp's row order for `llama` q/k: each head's rows i and
    i + d/2 side by side."""
    rows = w.shape[0]
    d = rows // heads
    return w.reshape(heads, 2, d // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_freqs(cfg, head_dim):
    """The per-dimension divisors llama.cpp's converter derives from a
    `llama3` rope_scaling (its rope_freqs tensor), or None."""
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) != "llama3":
        return None
    base = cfg.get("rope_theta", 10000.0)
    factor = rs.get("factor", 8.0)
    low, high = rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old_ctx = rs.get("original_max_position_embeddings", 8192)
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    out = []
    for i in range(0, head_dim, 2):
        freq = 1.0 / base ** (i / head_dim)
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.asarray(out, dtype=np.float32)


def add_phi3_rope(w, cfg, head_dim):
    """As llama.cpp's converter writes Phi-3: rotated dims per head, the
    original context, the sliding window (0: none) and, for longrope, the
    attention factor and the rope_factors_short / rope_factors_long
    tensors."""
    rope_dims = int(head_dim * cfg.get("partial_rotary_factor", 1.0))
    w.add_rope_dimension_count(rope_dims)
    orig = cfg.get("original_max_position_embeddings",
                   cfg["max_position_embeddings"])
    w.add_rope_scaling_orig_ctx_len(orig)
    w.add_sliding_window(cfg.get("sliding_window") or 0)
    rs = cfg.get("rope_scaling")
    if rs is None:
        return
    scale = cfg["max_position_embeddings"] / orig
    attn = math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1 else 1.0
    w.add_rope_scaling_attn_factors(attn)
    w.add_tensor("rope_factors_long.weight",
                 np.asarray(rs["long_factor"], dtype=np.float32))
    w.add_tensor("rope_factors_short.weight",
                 np.asarray(rs["short_factor"], dtype=np.float32))


def iq4_nl_blocks(a):
    """IQ4_NL blocks of the rows of `a` (a multiple of 32 wide): per 32
    values d = max|x| / 127 in F16 and, per value, the index of the nearest
    codebook value d * k (gguf-py decodes these; it has no encoder)."""
    kvalues = np.array(gguf.quants.IQ4_NL.kvalues, dtype=np.float32)
    x = np.asarray(a, dtype=np.float32).reshape(-1, 32)
    d = (np.max(np.abs(x), axis=1) / 127.0).astype(np.float16)
    df = d.astype(np.float32)[:, None]
    idx = np.argmin(np.abs(df[:, :, None] * kvalues[None, None, :] - x[:, :, None]),
                    axis=2).astype(np.uint8)
    qs = idx[:, :16] | (idx[:, 16:] << 4)
    blocks = np.concatenate([d.view(np.uint8).reshape(-1, 2), qs], axis=1)
    return blocks.reshape(a.shape[0], -1)


def quantize(a, qt):
    if qt == gguf.GGMLQuantizationType.IQ4_NL:
        return iq4_nl_blocks(a)
    return gguf.quants.quantize(a, qt)


def write(src, out_path, arch, qtype):
    cfg = json.load(open(os.path.join(src, "config.json")))
    tensors = REF.load_weights(src)
    tok = json.load(open(os.path.join(src, "tokenizer.json")))
    w = gguf.GGUFWriter(out_path, arch)
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    hidden = cfg["hidden_size"]
    head_dim = cfg.get("head_dim") or hidden // heads
    if arch == "phi3":
        # The real context: longrope's default factor is max / original.
        w.add_context_length(cfg["max_position_embeddings"])
    else:
        w.add_context_length(min(cfg["max_position_embeddings"], 4096))
    w.add_embedding_length(hidden)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_layer_norm_rms_eps(cfg.get("rms_norm_eps", 1e-6))
    w.add_rope_freq_base(cfg.get("rope_theta", 10000.0))
    if arch == "phi3":
        add_phi3_rope(w, cfg, head_dim)
    else:
        w.add_rope_dimension_count(head_dim)
    if arch in ("qwen3",) + GEMMA:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if arch == "gemma2":
        w.add_attn_logit_softcapping(cfg["attn_logit_softcapping"])
        w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
    if arch in GEMMA:
        # As llama.cpp's converter: the window, and a linear rope_scaling
        # (Gemma 3's global layers) as metadata.
        w.add_sliding_window(cfg["sliding_window"])
        rs = cfg.get("rope_scaling")
        if rs is not None:
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(rs["factor"])
    w.add_vocab_size(cfg["vocab_size"])
    rope_freqs = llama3_rope_freqs(cfg, head_dim) if arch in INTERLEAVED else None
    if rope_freqs is not None:
        w.add_tensor("rope_freqs.weight", rope_freqs)

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
        if arch in INTERLEAVED and hf.endswith(("q_proj.weight", "k_proj.weight")):
            a = interleave(a, heads if "q_proj" in hf else kv)
        if arch in GEMMA and hf.endswith("norm.weight"):
            a = a + 1  # llama.cpp's converter: Gemma's (1 + w) stored whole
        name = gguf_name(hf, arch)
        if a.ndim == 2 and qt == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, a.astype(np.float16))
        elif qt == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, a)
        elif a.ndim == 2 and a.shape[1] % block == 0:
            # Quantized (and BF16) data: uint8 rows; the writer derives the
            # element shape from the byte shape.
            w.add_tensor(name, quantize(a, qt), raw_dtype=qt)
        elif a.ndim == 2:
            w.add_tensor(name, a.astype(np.float16))
        else:
            w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def bert_gguf_name(hf):
    name = hf[len("bert."):] if hf.startswith("bert.") else hf
    stem, suffix = name.rsplit(".", 1)
    if stem.startswith("encoder.layer."):
        _, _, layer, part = stem.split(".", 3)
        return "blk.%s.%s.%s" % (layer, BERT_LAYER[part], suffix)
    if stem in BERT_GLOBAL:
        return BERT_GLOBAL[stem] + "." + suffix
    return None  # the pooler: llama.cpp drops it


def bert_pooling(src):
    """gguf.PoolingType from the sentence-transformers Pooling module."""
    modules = json.load(open(os.path.join(src, "modules.json")))
    for m in modules:
        if m["type"].endswith("Pooling"):
            pc = json.load(open(os.path.join(src, m["path"], "config.json")))
            if pc.get("pooling_mode_mean_tokens"):
                return gguf.PoolingType.MEAN
            if pc.get("pooling_mode_cls_token"):
                return gguf.PoolingType.CLS
            if pc.get("pooling_mode_lasttoken"):
                return gguf.PoolingType.LAST
    return gguf.PoolingType.NONE


def add_wordpiece_vocab(w, tok_path, n_vocab):
    """A WordPiece tokenizer.json as llama.cpp's BertModel.set_vocab writes
    it (get_vocab_base: ids past the tokenizer padded with "[PADi]" unused
    tokens, special added tokens CONTROL, other added tokens USER_DEFINED)."""
    tok = json.load(open(tok_path))
    vocab = dict(tok["model"]["vocab"])
    types = {}
    for t in tok.get("added_tokens", []):
        vocab[t["content"]] = t["id"]
        types[t["id"]] = (gguf.TokenType.CONTROL if t.get("special")
                          else gguf.TokenType.USER_DEFINED)
    n = max(n_vocab, max(vocab.values()) + 1)
    tokens = ["[PAD%d]" % i for i in range(n)]
    ttypes = [gguf.TokenType.UNUSED] * n
    for t, i in vocab.items():
        tokens[i] = t
        ttypes[i] = types.get(i, gguf.TokenType.NORMAL)

    def phantom(t, tt):
        if tt == gguf.TokenType.CONTROL:
            return t
        if t.startswith("##"):
            return t[2:]
        return "\u2581" + t

    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("default")
    w.add_token_list([phantom(t, tt) for t, tt in zip(tokens, ttypes)])
    w.add_token_types(ttypes)
    # gguf.SpecialVocab on a BERT directory: bos = [CLS], eos = [SEP],
    # add_bos / add_eos from the [CLS] A [SEP] template, add_sep false.
    # (gguf-py has no writer for the cls id and says so; llama.cpp uses
    # bos as CLS.)
    logging.getLogger("gguf.vocab").setLevel(logging.ERROR)
    special = gguf.SpecialVocab(os.path.dirname(tok_path), n_vocab=n)
    special.add_to_gguf(w, quiet=True)
    return n


def write_encoder(src, out_path, arch, qtype):
    """An encoder GGUF as llama.cpp's converter writes it: `bert` with its
    own names (bert_gguf_name), `nomic-bert` / `jina-bert-v2` with gguf-py's
    TensorNameMap for that architecture (llama.cpp's own table); the
    hyper-parameters the converter writes (rope.freq_base for nomic-bert,
    reading nomic's remote-code keys), WordPiece vocabulary; position and
    token-type tables stay float."""
    cfg = json.load(open(os.path.join(src, "config.json")))

    def key(name, remote):  # nomic's remote code spells keys GPT-2 style
        return cfg.get(name, cfg.get(remote))

    layers = key("num_hidden_layers", "n_layer")
    w = gguf.GGUFWriter(out_path, arch)
    w.add_context_length(key("max_position_embeddings", "n_positions"))
    w.add_embedding_length(key("hidden_size", "n_embd"))
    w.add_block_count(layers)
    w.add_feed_forward_length(key("intermediate_size", "n_inner"))
    w.add_head_count(key("num_attention_heads", "n_head"))
    w.add_layer_norm_eps(key("layer_norm_eps", "layer_norm_epsilon") or 1e-12)
    w.add_causal_attention(False)
    w.add_pooling_type(bert_pooling(src))
    w.add_token_type_count(cfg.get("type_vocab_size", 1))
    if arch == "nomic-bert":
        w.add_rope_freq_base(cfg["rotary_emb_base"])
    add_wordpiece_vocab(w, os.path.join(src, "tokenizer.json"),
                        cfg["vocab_size"])
    if arch == "bert":
        gguf_name = bert_gguf_name
    else:
        model_arch = {"nomic-bert": gguf.MODEL_ARCH.NOMIC_BERT,
                      "jina-bert-v2": gguf.MODEL_ARCH.JINA_BERT_V2}[arch]
        names = gguf.get_tensor_name_map(model_arch, layers)
        gguf_name = lambda hf: names.get_name(hf, try_suffixes=(".weight", ".bias"))
    qt = gguf.GGMLQuantizationType[qtype]
    block = gguf.GGML_QUANT_SIZES[qt][0]
    for hf, a in sorted(REF.load_weights(src).items()):
        name = gguf_name(hf)
        if name is None:
            continue  # the pooler: llama.cpp drops it
        a = np.asarray(a, dtype=np.float32)
        if a.ndim == 2 and qt == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, a.astype(np.float16))
        elif (a.ndim == 2 and a.shape[1] % block == 0 and
              not name.startswith(("position_embd", "token_types"))):
            # llama.cpp keeps the position and token-type tables float.
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
    ap.add_argument("--only", default="", help="comma-separated names")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    only = [n for n in args.only.split(",") if n]
    for name, (src, arch, qtype) in MODELS.items():
        if only and name not in only:
            continue
        if arch in ("bert", "nomic-bert", "jina-bert-v2"):
            writer = lambda s, o, q, arch=arch: write_encoder(s, o, arch, q)
        else:
            writer = lambda s, o, q, arch=arch: write(s, o, arch, q)
        writer(os.path.join(args.test_models, src),
               os.path.join(args.out, name + ".gguf"), qtype)
        print("wrote", name)


if __name__ == "__main__":
    main()
