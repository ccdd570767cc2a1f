#!/usr/bin/env python3
"""Greedy decoding of a GGUF decoder by the float64 NumPy reference
(tests/reference), on weights dequantized by the PyPI `gguf` package: an
implementation of the GGUF side that shares nothing with inferd's (metadata
read by gguf-py, tensors mapped to Hugging Face names here, llama.cpp's q/k
row interleaving undone here so the reference keeps its rotate-half RoPE).

With --hf-dir DIR --quantize TYPE instead of --gguf: the safetensors
model in DIR with the weights inferd's `dtype=q8_0|q4_0|q4_1` quantizes at
load (every GEMM weight whose rows fill whole blocks, and a tied embedding
table, which doubles as the LM head) quantized and dequantized by gguf-py's
ports of ggml's reference quantizers (gguf.quants); other weights float.

With --activations int8: inferd's default activation policy for
block-quantized weights emulated: before every Linear whose weight is stored
block-quantized (and the LM head), x is quantized as inferd's kernels do
(device/ops.h ActivationPrecision::kInt8): per row and block of 32 values
as llama.cpp's q8_0 (sx = max |x| / 127 in float32, v = rint(x *
float32(127 / max |x|)), x -> float16(sx) v), per super-block of 256 for
the K-quants as its q8_K (v = rint(x * float32(1 / sx)), x -> sx v); the
products then in float64 as before. (For Q4_1 / Q5_1 weights inferd's
minimum term takes float16(sx sum v) where this takes float16(sx) sum v.)

With --score JSON (a list of [prompt ids, generated ids] pairs) instead of
--prompts: the teacher-forced check of someone else's greedy output: one
forward pass over prompt + generated, and for each generated token its rank
among the reference's logits at that position (0 = the argmax) and its gap
to the largest logit; prints {"scores": [[[rank, gap], ...], ...]}.

A `bert` GGUF (with --texts JSON --tokenizer-json FILE instead of
--prompts): the texts tokenized by the model's original tokenizer.json (the
`tokenizers` package), the float64 encoder forward, pooling per
`bert.pooling_type`, L2-normalized (llama.cpp's server normalizes): prints
{"ids": [[...], ...], "embeddings": [[...], ...], "pooling": MODE}.

Runs in the venv (gguf, numpy, tokenizers).
usage: gguf_reference.py (--gguf FILE | --hf-dir DIR --quantize TYPE)
                         --prompts JSON --tokens N [--out F]
       gguf_reference.py --gguf BERT_FILE --texts JSON --tokenizer-json F
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
    "attn_qkv": "self_attn.qkv_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
GLOBAL = {"token_embd": "embed_tokens", "output_norm": "norm",
          "output": "lm_head"}
BERT_LAYER = {
    "attn_q": "attention.self.query",
    "attn_k": "attention.self.key",
    "attn_v": "attention.self.value",
    "attn_output": "attention.output.dense",
    "attn_output_norm": "attention.output.LayerNorm",
    "ffn_up": "intermediate.dense",
    "ffn_down": "output.dense",
    "layer_output_norm": "output.LayerNorm",
}
BERT_GLOBAL = {
    "token_embd": "embeddings.word_embeddings",
    "token_types": "embeddings.token_type_embeddings",
    "position_embd": "embeddings.position_embeddings",
    "token_embd_norm": "embeddings.LayerNorm",
}
POOLING = {1: "mean", 2: "cls", 3: "lasttoken"}
ARCHS = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
         "qwen3": "Qwen3ForCausalLM", "smollm3": "SmolLM3ForCausalLM",
         "phi3": "Phi3ForCausalLM", "gemma2": "Gemma2ForCausalLM",
         "gemma3": "Gemma3ForCausalLM"}
GEMMA = {"gemma2": ("gemma2", 46), "gemma3": ("gemma3_text", 62)}
# Gemma's block norms (the rest as LAYER).
GEMMA_NORMS = {"post_attention_norm": "post_attention_layernorm",
               "ffn_norm": "pre_feedforward_layernorm",
               "post_ffw_norm": "post_feedforward_layernorm"}
# q/k rows interleaved by llama.cpp's converter. smollm3: no metadata key
# names the layers without RoPE; llama.cpp takes every 4th, as
# SmolLM3Config's default no_rope_layer_interval does (reference.py).
INTERLEAVED = ("llama", "smollm3")


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def hf_name(name, arch=None):
    stem, suffix = name.rsplit(".", 1)
    if stem.startswith("blk."):
        _, layer, part = stem.split(".", 2)
        if arch == "phi3" and part == "ffn_up":
            # llama.cpp's phi3 keeps gate | up stacked in ffn_up.
            return "layers.%s.mlp.gate_up_proj.%s" % (layer, suffix)
        if arch in GEMMA and part in GEMMA_NORMS:
            return "layers.%s.%s.%s" % (layer, GEMMA_NORMS[part], suffix)
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


def bert_hf_name(name):
    stem, suffix = name.rsplit(".", 1)
    if stem.startswith("blk."):
        _, layer, part = stem.split(".", 2)
        if part not in BERT_LAYER:
            return None
        return "encoder.layer.%s.%s.%s" % (layer, BERT_LAYER[part], suffix)
    if stem in BERT_GLOBAL:
        return "%s.%s" % (BERT_GLOBAL[stem], suffix)
    return None


# ggml types whose Linear activations the int8 policy quantizes: per block
# of 32, or per super-block of 256 (K-quants).
LEGACY_TYPES = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"}
K_TYPES = {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}
# id(weight array) -> "legacy" | "k" for the block-quantized weights.
INT8_X = {}


def quantize_x(x, block):
    """x [..., K] as inferd's int8 policy sees it (see the module doc)."""
    x32 = np.asarray(x, dtype=np.float32)
    shape = x32.shape
    b = x32.reshape(-1, shape[-1] // block, block)
    amax = np.abs(b).max(axis=2, keepdims=True)
    sx = (amax / np.float32(127.0)).astype(np.float32)
    tiny = np.finfo(np.float32).tiny
    normal = sx >= tiny
    with np.errstate(divide="ignore", invalid="ignore"):
        if block == 32:
            inv = np.where(normal, np.float32(127.0) / np.where(normal, amax, np.float32(1.0)),
                           np.float32(0.0)).astype(np.float32)
            step = sx.astype(np.float16).astype(np.float64)
        else:
            inv = np.where(normal, np.float32(1.0) / np.where(normal, sx, np.float32(1.0)),
                           np.float32(0.0)).astype(np.float32)
            step = sx.astype(np.float64)
    v = np.clip(np.rint((b * inv).astype(np.float32)), -127, 127)
    return (v.astype(np.float64) * step).reshape(shape)


def int8_input(x, w):
    kind = INT8_X.get(id(w))
    if kind is None:
        return x
    return quantize_x(x, 256 if kind == "k" else 32)


def use_int8_activations():
    """Routes the reference's Linear layers and LM head through int8_input."""
    linear, logits = REF.linear, REF._logits

    def linear_int8(x, w, b=None):
        return linear(int8_input(x, w), w, b)

    def logits_int8(cfg, w, x):
        return logits(cfg, w, int8_input(x, REF._lm_head(cfg, w)))

    REF.linear = linear_int8
    REF._logits = logits_int8


def dequantized(t):
    a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
    return a.reshape([int(x) for x in reversed(t.shape)])


def load_bert(path):
    """(config, weights, pooling mode) of a `bert` GGUF, from gguf-py."""
    r = gguf.GGUFReader(path)
    p = "bert."
    tensors = {}
    for t in r.tensors:
        name = bert_hf_name(t.name)
        if name is not None:
            tensors[name] = dequantized(t)
    cfg = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_size": int(field(r, p + "embedding_length")),
        "num_hidden_layers": int(field(r, p + "block_count")),
        "num_attention_heads": int(field(r, p + "attention.head_count")),
        "intermediate_size": int(field(r, p + "feed_forward_length")),
        "layer_norm_eps": float(field(r, p + "attention.layer_norm_epsilon")),
        "hidden_act": "gelu",
    }
    pooling = POOLING.get(int(field(r, p + "pooling_type", 0)))
    return cfg, REF.Weights(tensors), pooling


def bert_embeddings(path, texts, tokenizer_json, hf_dir=None):
    """Embeddings of a `bert` GGUF (`path`), or of the Hugging Face model
    directory a GGUF was converted from (`hf_dir`: its own forward pass and
    pooling), L2-normalized as llama.cpp's server returns them."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tokenizer_json)
    ids = [tok.encode(t).ids for t in texts]
    out = []
    if hf_dir is not None:
        model = REF.Model(hf_dir)
        pooling = None
        for m in json.load(open(os.path.join(hf_dir, "modules.json"))):
            if m["type"].endswith("Pooling"):
                pc = json.load(open(os.path.join(hf_dir, m["path"], "config.json")))
                pooling = ("mean" if pc.get("pooling_mode_mean_tokens") else
                           "cls" if pc.get("pooling_mode_cls_token") else "lasttoken")
        for seq in ids:
            hidden, _ = model.forward(seq)
            out.append(REF.normalize(REF.pool(hidden, pooling)).tolist())
        return {"ids": ids, "embeddings": out, "pooling": pooling}
    cfg, w, pooling = load_bert(path)
    for seq in ids:
        hidden = REF.encoder_forward(cfg, w, seq)
        out.append(REF.normalize(REF.pool(hidden, pooling)).tolist())
    return {"ids": ids, "embeddings": out, "pooling": pooling}


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
    if arch == "phi3":
        # Phi3Config's view of llama.cpp's phi3 keys: partial rotary from
        # rope.dimension_count, the original context, a sliding window
        # (0: none), longrope from the factor tensors below.
        rope_dims = int(field(r, p + "rope.dimension_count", cfg["head_dim"]))
        cfg["partial_rotary_factor"] = rope_dims / cfg["head_dim"]
        orig = field(r, p + "rope.scaling.original_context_length")
        if orig is not None:
            cfg["original_max_position_embeddings"] = int(orig)
        window = int(field(r, p + "attention.sliding_window", 0))
        cfg["sliding_window"] = window if window > 0 else None
    if arch in GEMMA:
        # Gemma2Config / Gemma3TextConfig's view of llama.cpp's keys: the
        # window, soft caps (Gemma 2), linear scaling of Gemma 3's global
        # layers, the attention scale llama.cpp uses (head_dim; hidden /
        # heads for the 27B models, 46 / 62 layers); Gemma 3's local base
        # 10000 and one global layer in 6 are llama.cpp's fixed choices (and
        # the config's defaults).
        model_type, layers_27b = GEMMA[arch]
        cfg["model_type"] = model_type
        cfg["hidden_activation"] = "gelu_pytorch_tanh"
        del cfg["hidden_act"]
        cfg["sliding_window"] = int(field(r, p + "attention.sliding_window"))
        cfg["query_pre_attn_scalar"] = (hidden // heads
                                        if cfg["num_hidden_layers"] == layers_27b
                                        else cfg["head_dim"])
        for key in ("attn_logit_softcapping", "final_logit_softcapping"):
            if field(r, p + key) is not None:
                cfg[key] = float(field(r, p + key))
        if field(r, p + "rope.scaling.type") == "linear":
            cfg["rope_scaling"] = {"rope_type": "linear",
                                   "factor": float(field(r, p + "rope.scaling.factor"))}
    factors = {}
    tensors = {}
    for t in r.tensors:
        if t.name == "rope_freqs.weight":
            # Per-dimension divisors of the RoPE frequencies (llama.cpp).
            cfg["rope_freqs"] = dequantized(t).reshape(-1).tolist()
            continue
        if t.name in ("rope_factors_short.weight", "rope_factors_long.weight"):
            factors[t.name.split("_")[2].split(".")[0]] = \
                dequantized(t).reshape(-1).tolist()
            continue
        name = hf_name(t.name, arch)
        if name is None:
            continue
        a = dequantized(t)
        if arch in INTERLEAVED and name.endswith(("q_proj.weight", "k_proj.weight")):
            a = uninterleave(a, heads if "q_proj" in name else kv)
        if arch in GEMMA and name.endswith("norm.weight"):
            a = a - 1  # the converter stored Gemma's 1 + w; back to w
        tensors[name] = a
        qtype = gguf.GGMLQuantizationType(t.tensor_type).name
        if a.ndim == 2 and (qtype in LEGACY_TYPES or qtype in K_TYPES):
            INT8_X[id(a)] = "k" if qtype in K_TYPES else "legacy"
    if factors:
        cfg["rope_scaling"] = {
            "rope_type": "longrope", "short_factor": factors["short"],
            "long_factor": factors["long"],
            "attention_factor": float(field(r, p + "rope.scaling.attn_factor"))}
    cfg["tie_word_embeddings"] = "lm_head.weight" not in tensors
    eos = []
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"):
        v = field(r, key)
        if v is not None:
            eos.append(int(v))
    return cfg, REF.Weights(tensors), eos


GEMM_SUFFIXES = ("q_proj.weight", "k_proj.weight", "v_proj.weight",
                 "o_proj.weight", "gate_proj.weight", "up_proj.weight",
                 "down_proj.weight", "lm_head.weight")


def quantize_dequantize(a, qtype):
    """float64 [rows, cols] -> the same values after a round trip through
    ggml's `qtype` blocks (from the float32 values inferd reads)."""
    q = gguf.quants.quantize(np.asarray(a, dtype=np.float32), qtype)
    return gguf.quants.dequantize(q, qtype).astype(np.float64).reshape(a.shape)


def load_hf_quantized(model_dir, qtype_name):
    cfg = REF.load_json(os.path.join(model_dir, "config.json"))
    qtype = gguf.GGMLQuantizationType[qtype_name.upper()]
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    tensors = REF.load_weights(model_dir)
    tied = "lm_head.weight" not in tensors and cfg.get("tie_word_embeddings",
                                                       True)
    quantized = []
    for name, a in tensors.items():
        gemm = name.endswith(GEMM_SUFFIXES) or (
            tied and name.endswith("embed_tokens.weight"))
        if gemm and a.ndim == 2 and a.shape[1] % block == 0:
            tensors[name] = quantize_dequantize(a, qtype)
            INT8_X[id(tensors[name])] = "legacy"
            quantized.append(name)
    eos = cfg.get("eos_token_id")
    eos = [] if eos is None else eos if isinstance(eos, list) else [eos]
    return cfg, REF.Weights(tensors), eos, sorted(quantized)


def score(cfg, w, prompt, generated):
    """[rank, gap] of each generated token under the reference's logits
    after prompt + the tokens generated before it (teacher forcing)."""
    if not generated:
        return []
    _, logits = REF.decoder_forward(cfg, w, list(prompt) + list(generated[:-1]))
    out = []
    for j, tok in enumerate(generated):
        row = logits[len(prompt) - 1 + j]
        out.append([int((row > row[tok]).sum()), float(row.max() - row[tok])])
    return out


def first_departure(scores):
    """(index, rank, gap) of the first generated token that is not the
    reference's argmax, or None."""
    for j, (rank, gap) in enumerate(scores):
        if rank > 0:
            return j, rank, gap
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf")
    ap.add_argument("--hf-dir")
    ap.add_argument("--quantize")
    ap.add_argument("--prompts")
    ap.add_argument("--texts")
    ap.add_argument("--tokenizer-json")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--out")
    ap.add_argument("--score")
    ap.add_argument("--activations", choices=("exact", "int8"), default="exact",
                    help="int8: emulate inferd's int8 activation policy")
    ap.add_argument("--check-batch", action="store_true",
                    help="also decode each prompt alone and require the "
                    "same tokens (a self-check of the batched decoding)")
    args = ap.parse_args()
    if args.texts is not None:
        print(json.dumps(bert_embeddings(args.gguf, json.loads(args.texts),
                                         args.tokenizer_json, args.hf_dir)))
        return
    quantized = None
    if args.activations == "int8":
        use_int8_activations()
    if args.gguf:
        cfg, w, eos = load(args.gguf)
    else:
        cfg, w, eos, quantized = load_hf_quantized(args.hf_dir, args.quantize)
    if args.score is not None:
        print(json.dumps({"scores": [score(cfg, w, p, g)
                                     for p, g in json.loads(args.score)]}))
        return
    prompts = json.loads(args.prompts)
    out = {"config": cfg, "eos": eos, "quantized": quantized,
           "greedy": REF.greedy_cached_batch(cfg, w, prompts, args.tokens, eos)}
    if args.check_batch:
        alone = [REF.greedy_cached(cfg, w, ids, args.tokens, eos) for ids in prompts]
        if alone != out["greedy"]:
            raise SystemExit("batched decoding differs from one-by-one: "
                             "%s vs %s" % (out["greedy"], alone))
    text = json.dumps(out)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
