#!/usr/bin/python3
"""Independent NumPy (float64) forward passes for the model families inferd
serves, written from the published model definitions, to check inferd's
numerics against.

Families: BERT, XLM-RoBERTa and MPNet encoders (post-LN, exact erf GELU, absolute
positions, token types, sequence-classification heads), NomicBERT (rotary,
SwiGLU), JinaBERT v2 (ALiBi, GEGLU), GTE "new" (rotary with NTK scaling,
gated GELU), ModernBERT
(pre-norm, local/global attention) and Llama / Mistral /
Qwen2 / Qwen3 / SmolLM3 / Phi-3 / Gemma 2 / Gemma 3 decoders (RMSNorm, or
Gemma's (1 + w) RMSNorm with four norms per block, scaled embeddings,
attention and final-logit soft caps and local/global RoPE; rotary
embeddings in the rotate-half layout, partial or whole, with linear /
dynamic / llama3 / yarn / longrope scaling and GGUF per-dimension factors,
SmolLM3's layers without RoPE, Phi-3's fused q|k|v and gate|up projections,
grouped-query attention, causal or bidirectional masks, sliding windows,
SwiGLU / GeGLU MLP, tied or untied LM head). Sentence-transformers pooling
(CLS / MEAN / MAX / LAST) and normalization follow the model directory's
modules.json.

CLI:
  reference.py --model DIR --ids 1,2,3 [--type-ids 0,0,1] [--bidirectional]
               [--greedy N] [--logits all|last|none] [--out out.json]
Writes JSON with "hidden_states" ([tokens][hidden], the model's last hidden
state), "logits" ([tokens][vocab] for causal LMs, or [num_labels] for
sequence classifiers), "embedding" (when the directory is a
sentence-transformers model) and "greedy" (N greedily decoded ids).
"""

import argparse
import collections
import json
import math
import os
import sys

import numpy as np

# --------------------------------------------------------------------------
# Loading

_NP_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8",
              "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "u1"}


def read_safetensors(path):
    """name -> numpy array (float tensors as float64)."""
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = data[base + b:base + e]
        shape = tuple(info["shape"])
        if info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32).astype(np.float64)
        else:
            arr = np.frombuffer(raw, dtype=_NP_DTYPES[info["dtype"]])
            if arr.dtype.kind == "f":
                arr = arr.astype(np.float64)
        out[name] = arr.reshape(shape)
    return out


def load_weights(model_dir):
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.isfile(single):
        return read_safetensors(single)
    with open(os.path.join(model_dir, "model.safetensors.index.json")) as f:
        index = json.load(f)
    out = {}
    for shard in sorted(set(index["weight_map"].values())):
        out.update(read_safetensors(os.path.join(model_dir, shard)))
    return out


class Weights:
    """Tensor lookup tolerant of the base-model prefixes HF checkpoints use."""

    PREFIXES = ("", "bert.", "roberta.", "mpnet.", "new.", "model.")

    def __init__(self, tensors):
        self.t = tensors

    def __call__(self, name):
        for p in self.PREFIXES:
            if p + name in self.t:
                return self.t[p + name]
        raise KeyError("tensor %s not found" % name)

    def has(self, name):
        return any(p + name in self.t for p in self.PREFIXES)


def load_json(path, default=None):
    if not os.path.isfile(path):
        return default
    with open(path) as f:
        return json.load(f)


# --------------------------------------------------------------------------
# Building blocks

_erf = np.vectorize(math.erf, otypes=[np.float64])


def activation(name):
    if name == "gelu":  # exact
        return lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return lambda x: 0.5 * x * (1.0 + np.tanh(
            math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if name in ("silu", "swish"):
        return lambda x: x / (1.0 + np.exp(-x))
    if name == "relu":
        return lambda x: np.maximum(x, 0.0)
    raise ValueError("unsupported activation %s" % name)


def linear(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def attention(q, k, v, mask, scale=None, softcap=None, bias=None):
    """q: [heads, T, D]; k, v: [kv_heads, T, D]; mask: [T, T] bool (allowed).
    Scores times `scale` (default 1/sqrt(D)), then softcap * tanh(s /
    softcap) when a softcap is given (Gemma 2), plus `bias` [heads, T, T]
    when given (MPNet's relative-position bias)."""
    heads, kv = q.shape[0], k.shape[0]
    group = heads // kv
    k = np.repeat(k, group, axis=0)
    v = np.repeat(v, group, axis=0)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    scores = q @ k.transpose(0, 2, 1) * scale
    if softcap:
        scores = softcap * np.tanh(scores / softcap)
    if bias is not None:
        scores = scores + bias
    scores = np.where(mask[None], scores, -np.inf)
    return softmax(scores) @ v  # [heads, T, D]


# --------------------------------------------------------------------------
# Encoders (BERT, XLM-RoBERTa)


def encoder_position_ids(cfg, ids):
    if cfg["model_type"] in ("xlm-roberta", "roberta", "mpnet"):
        # Positions count non-padding tokens from padding_idx + 1; padding
        # tokens sit at padding_idx.
        pad = cfg.get("pad_token_id", 1)
        mask = (ids != pad).astype(np.int64)
        return np.cumsum(mask) * mask + pad
    return np.arange(len(ids))


def mpnet_bucket(rel, num_buckets=32, max_distance=128):
    """MPNet's bucket of each relative position (key - query): half the
    buckets per direction (keys after the query in the upper half), exact
    below a quarter of them, log-spaced up to max_distance, the last one
    beyond. The log part in float32, as the published model computes it."""
    half = num_buckets // 2
    ret = np.where(rel > 0, half, 0)
    n = np.abs(rel)
    exact = half // 2
    with np.errstate(divide="ignore", invalid="ignore"):
        large = exact + (np.log(n.astype(np.float32) / np.float32(exact)) /
                         np.float32(math.log(max_distance / exact)) *
                         np.float32(half - exact)).astype(np.int64)
    large = np.minimum(large, half - 1)
    return ret + np.where(n < exact, n, large)


def mpnet_position_bias(w, T):
    """[heads, T, T]: the relative-position bias every MPNet layer adds.
    transformers buckets with 32 whatever relative_attention_num_buckets
    says."""
    rel = np.arange(T)[None, :] - np.arange(T)[:, None]
    table = w("encoder.relative_attention_bias.weight")  # [buckets, heads]
    return table[mpnet_bucket(rel)].transpose(2, 0, 1)


def alibi_slopes(heads):
    """ALiBi's per-head slopes (Press et al.): 2^(-8/n) * its powers for a
    power of two n, else the lower power of two's slopes then every other
    slope of twice as many heads."""
    def power_of_2(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]
    lower = 2 ** int(math.floor(math.log2(heads)))
    if lower == heads:
        return power_of_2(heads)
    return power_of_2(lower) + power_of_2(2 * lower)[0::2][:heads - lower]


def alibi_bias(heads, T):
    """[heads, T, T]: JinaBERT's symmetric ALiBi, -slope * |j - i|."""
    rel = np.abs(np.arange(T)[None, :] - np.arange(T)[:, None])
    return -np.asarray(alibi_slopes(heads))[:, None, None] * rel[None]


# Per family: the attention tensors of a layer and its norm.
_ENCODER_NAMES = {
    "mpnet": ("attention.attn.q", "attention.attn.k", "attention.attn.v",
              "attention.attn.o", "attention.LayerNorm"),
}
_BERT_NAMES = ("attention.self.query", "attention.self.key",
               "attention.self.value", "attention.output.dense",
               "attention.output.LayerNorm")


def encoder_forward(cfg, w, ids, type_ids=None):
    ids = np.asarray(ids, dtype=np.int64)
    T = len(ids)
    H, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    D = H // heads
    eps = cfg.get("layer_norm_eps", 1e-12)
    act = activation(cfg.get("hidden_act", "gelu"))
    if type_ids is None:
        type_ids = np.zeros(T, dtype=np.int64)
    alibi = cfg.get("position_embedding_type") == "alibi"  # JinaBERT v2
    x = w("embeddings.word_embeddings.weight")[ids]
    if not alibi:
        x = x + w("embeddings.position_embeddings.weight")[encoder_position_ids(cfg, ids)]
    if w.has("embeddings.token_type_embeddings.weight"):
        x = x + w("embeddings.token_type_embeddings.weight")[np.asarray(type_ids)]
    x = layer_norm(x, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"), eps)
    mask = np.ones((T, T), dtype=bool)
    qn, kn, vn, on, normn = _ENCODER_NAMES.get(cfg["model_type"], _BERT_NAMES)
    bias = mpnet_position_bias(w, T) if cfg["model_type"] == "mpnet" else None
    if alibi:
        bias = alibi_bias(heads, T)
    for i in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % i

        def proj(name, inp):
            return linear(inp, w(p + name + ".weight"), w(p + name + ".bias"))

        q = proj(qn, x).reshape(T, heads, D).transpose(1, 0, 2)
        k = proj(kn, x).reshape(T, heads, D).transpose(1, 0, 2)
        v = proj(vn, x).reshape(T, heads, D).transpose(1, 0, 2)
        ctx = attention(q, k, v, mask, bias=bias).transpose(1, 0, 2).reshape(T, H)
        x = layer_norm(proj(on, ctx) + x, w(p + normn + ".weight"),
                       w(p + normn + ".bias"), eps)
        if w.has(p + "mlp.gated_layers.weight"):
            # JinaBERT's GEGLU: act(first half) * second half, no bias.
            I = cfg["intermediate_size"]
            g = x @ w(p + "mlp.gated_layers.weight").T
            x = layer_norm(proj("mlp.wo", act(g[:, :I]) * g[:, I:]) + x,
                           w(p + "mlp.layernorm.weight"), w(p + "mlp.layernorm.bias"), eps)
            continue
        h = act(proj("intermediate.dense", x))
        x = layer_norm(proj("output.dense", h) + x, w(p + "output.LayerNorm.weight"),
                       w(p + "output.LayerNorm.bias"), eps)
    return x


def nomic_forward(cfg, w, ids, type_ids=None):
    """NomicBERT (nomic-embed-text): word + token-type embeddings and a
    LayerNorm, then post-LN blocks of rotary attention (rotate-half pairs
    over the whole head, base rotary_emb_base) over a fused q|k|v
    projection, and a gated MLP fc2(act(fc12 x) * fc11 x); no biases.
    Reads nomic's remote-code config keys and tensor names."""
    ids = np.asarray(ids, dtype=np.int64)
    T = len(ids)
    H, heads = cfg["n_embd"], cfg["n_head"]
    D = H // heads
    eps = cfg.get("layer_norm_epsilon", 1e-12)
    act = activation({"swiglu": "silu", "geglu": "gelu"}[cfg["activation_function"]])
    if type_ids is None:
        type_ids = np.zeros(T, dtype=np.int64)
    x = (w("embeddings.word_embeddings.weight")[ids] +
         w("embeddings.token_type_embeddings.weight")[np.asarray(type_ids)])
    x = layer_norm(x, w("emb_ln.weight"), w("emb_ln.bias"), eps)
    inv_freq = 1.0 / cfg["rotary_emb_base"] ** (np.arange(0, D, 2) / D)

    def rotate(a):  # [heads, T, D]
        return apply_rope(a, np.arange(T), inv_freq, 1.0)

    mask = np.ones((T, T), dtype=bool)
    for i in range(cfg["n_layer"]):
        p = "encoder.layers.%d." % i
        q, k, v = np.split(x @ w(p + "attn.Wqkv.weight").T, 3, axis=-1)
        q, k, v = (a.reshape(T, heads, D).transpose(1, 0, 2) for a in (q, k, v))
        ctx = attention(rotate(q), rotate(k), v, mask).transpose(1, 0, 2).reshape(T, H)
        x = layer_norm(x + ctx @ w(p + "attn.out_proj.weight").T,
                       w(p + "norm1.weight"), w(p + "norm1.bias"), eps)
        h = act(x @ w(p + "mlp.fc12.weight").T) * (x @ w(p + "mlp.fc11.weight").T)
        x = layer_norm(x + h @ w(p + "mlp.fc2.weight").T,
                       w(p + "norm2.weight"), w(p + "norm2.bias"), eps)
    return x


def gte_forward(cfg, w, ids, type_ids=None):
    """GTE "new" (Alibaba's remote code: gte-base-en-v1.5): word (+ token
    type) embeddings and a LayerNorm, then post-LN blocks of rotary
    attention over qkv_proj (with biases) and a gated MLP
    down(gelu(gate) * up) whose up_gate_proj holds up first. rope_scaling
    "ntk": base * factor, every inverse frequency / factor^(2 / dim)."""
    ids = np.asarray(ids, dtype=np.int64)
    T = len(ids)
    H, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    D = H // heads
    I = cfg["intermediate_size"]
    eps = cfg.get("layer_norm_eps", 1e-12)
    act = activation(cfg.get("hidden_act", "gelu"))
    x = w("embeddings.word_embeddings.weight")[ids]
    if cfg.get("type_vocab_size", 0) > 0:
        if type_ids is None:
            type_ids = np.zeros(T, dtype=np.int64)
        x = x + w("embeddings.token_type_embeddings.weight")[np.asarray(type_ids)]
    x = layer_norm(x, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"), eps)
    base = float(cfg.get("rope_theta", 10000.0))
    inv_freq = 1.0 / base ** (np.arange(0, D, 2) / D)
    scaling = cfg.get("rope_scaling")
    if scaling:
        f = scaling["factor"]
        inv_freq = 1.0 / (base * f) ** (np.arange(0, D, 2) / D) / f ** (2.0 / D)

    def rotate(a):
        return apply_rope(a, np.arange(T), inv_freq, 1.0)

    mask = np.ones((T, T), dtype=bool)
    for i in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % i
        qkv = linear(x, w(p + "attention.qkv_proj.weight"), w(p + "attention.qkv_proj.bias"))
        q, k, v = (a.reshape(T, heads, D).transpose(1, 0, 2) for a in np.split(qkv, 3, axis=-1))
        ctx = attention(rotate(q), rotate(k), v, mask).transpose(1, 0, 2).reshape(T, H)
        x = layer_norm(x + linear(ctx, w(p + "attention.o_proj.weight"),
                                  w(p + "attention.o_proj.bias")),
                       w(p + "attn_ln.weight"), w(p + "attn_ln.bias"), eps)
        up_gate = x @ w(p + "mlp.up_gate_proj.weight").T
        up, gate = up_gate[:, :I], up_gate[:, I:]
        h = linear(act(gate) * up, w(p + "mlp.down_proj.weight"), w(p + "mlp.down_proj.bias"))
        x = layer_norm(x + h, w(p + "mlp_ln.weight"), w(p + "mlp_ln.bias"), eps)
    return x


def modernbert_forward(cfg, w, ids):
    """ModernBERT: token embeddings + LayerNorm (no biases unless stored),
    pre-LN blocks h += Wo(attn(LN(h))) (layer 0: on h), h += Wo(gelu(first
    half of Wi) * second half) on LN(h), a final LayerNorm. Layers are
    global (rotary base global_rope_theta) every global_attn_every_n_layers
    from 0, else local: keys with |i - j| <= local_attention // 2, rotary
    base local_rope_theta."""
    ids = np.asarray(ids, dtype=np.int64)
    T = len(ids)
    H, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    D = H // heads
    I = cfg["intermediate_size"]
    eps = cfg.get("norm_eps", 1e-5)
    act = activation(cfg.get("hidden_activation", "gelu"))

    def ln(x, name):
        b = w(name + ".bias") if w.has(name + ".bias") else 0.0
        return layer_norm(x, w(name + ".weight"), b, eps)

    def inv_freq(theta):
        return 1.0 / theta ** (np.arange(0, D, 2) / D)

    def rotate(a, inv):
        return apply_rope(a, np.arange(T), inv, 1.0)

    tables = {"global": inv_freq(cfg.get("global_rope_theta", 160000.0)),
              "local": inv_freq(cfg.get("local_rope_theta", 10000.0))}
    i_idx, j_idx = np.arange(T)[:, None], np.arange(T)[None, :]
    masks = {"global": np.ones((T, T), dtype=bool),
             "local": np.abs(i_idx - j_idx) <= cfg.get("local_attention", 128) // 2}
    every = cfg.get("global_attn_every_n_layers", 3)
    x = ln(w("embeddings.tok_embeddings.weight")[ids], "embeddings.norm")
    for i in range(cfg["num_hidden_layers"]):
        p = "layers.%d." % i
        kind = "global" if i % every == 0 else "local"
        a = ln(x, p + "attn_norm") if i > 0 else x
        qkv = a @ w(p + "attn.Wqkv.weight").T
        q, k, v = (t.reshape(T, heads, D).transpose(1, 0, 2) for t in np.split(qkv, 3, axis=-1))
        ctx = attention(rotate(q, tables[kind]), rotate(k, tables[kind]), v,
                        masks[kind]).transpose(1, 0, 2).reshape(T, H)
        x = x + ctx @ w(p + "attn.Wo.weight").T
        m = ln(x, p + "mlp_norm") @ w(p + "mlp.Wi.weight").T
        x = x + (act(m[:, :I]) * m[:, I:]) @ w(p + "mlp.Wo.weight").T
    return ln(x, "final_norm")


def encoder_classify(cfg, w, hidden):
    """Sequence-classification logits [num_labels] from the first token."""
    first = hidden[0]
    if cfg["model_type"] in ("xlm-roberta", "roberta"):
        h = np.tanh(linear(first, w("classifier.dense.weight"), w("classifier.dense.bias")))
        return linear(h, w("classifier.out_proj.weight"), w("classifier.out_proj.bias"))
    pooled = np.tanh(linear(first, w("pooler.dense.weight"), w("pooler.dense.bias")))
    return linear(pooled, w("classifier.weight"), w("classifier.bias"))


# --------------------------------------------------------------------------
# Decoders (Llama, Mistral, Qwen2)


def rope_parameters(cfg):
    """(theta, rope_scaling dict or None), also from newer rope_parameters."""
    theta = cfg.get("rope_theta", 10000.0)
    scaling = cfg.get("rope_scaling")
    params = cfg.get("rope_parameters")
    if params:
        theta = params.get("rope_theta", theta)
        scaling = scaling or params
    if scaling:
        kind = scaling.get("rope_type", scaling.get("type"))
        if kind in (None, "default"):
            scaling = None
    return theta, scaling


def _yarn_mscale(scale, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_inv_freq(cfg, head_dim, seq_len):
    """(inv_freq [head_dim/2], attention scale applied to cos/sin). A GGUF
    file's per-dimension factors (cfg["rope_freqs"], its rope_freqs tensor)
    divide the frequencies after the scaling, as llama.cpp applies them."""
    inv, scale = _scaled_inv_freq(cfg, head_dim, seq_len)
    if cfg.get("rope_freqs") is not None:
        inv = inv / np.asarray(cfg["rope_freqs"], dtype=np.float64)
    return inv, scale


def _scaled_inv_freq(cfg, head_dim, seq_len):
    theta, s = rope_parameters(cfg)
    dim = head_dim
    inv = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    if s is None:
        return inv, 1.0
    kind = s.get("rope_type", s.get("type"))
    factor = float(s.get("factor", 1.0))
    max_pos = cfg.get("max_position_embeddings", 2048)
    if kind == "linear":
        return inv / factor, 1.0
    if kind == "dynamic":
        orig = s.get("original_max_position_embeddings") or max_pos
        if seq_len > orig:
            base = theta * ((factor * seq_len / orig) - (factor - 1)) ** (dim / (dim - 2))
            inv = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
        return inv, 1.0
    if kind == "llama3":
        orig = s["original_max_position_embeddings"]
        low, high = s["low_freq_factor"], s["high_freq_factor"]
        low_wavelen, high_wavelen = orig / low, orig / high
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (orig / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return np.where(medium, smoothed, scaled), 1.0
    if kind == "longrope":
        # Phi3Config: the top-level original context wins; without a factor,
        # max / original; short factors up to the original context.
        orig = cfg.get("original_max_position_embeddings") or \
            s.get("original_max_position_embeddings") or max_pos
        factor = s.get("factor") or max_pos / orig
        att = s.get("attention_factor")
        if att is None:
            att = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(orig))
        ext = np.asarray(s["long_factor"] if seq_len > orig else s["short_factor"],
                         dtype=np.float64)
        return inv / ext, att
    if kind == "yarn":
        orig = s.get("original_max_position_embeddings") or max_pos
        beta_fast, beta_slow = s.get("beta_fast", 32), s.get("beta_slow", 1)
        att = s.get("attention_factor")
        if att is None:
            if s.get("mscale") and s.get("mscale_all_dim"):
                att = (_yarn_mscale(factor, s["mscale"]) /
                       _yarn_mscale(factor, s["mscale_all_dim"]))
            else:
                att = _yarn_mscale(factor)

        def correction_dim(rot):
            return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(theta))

        lo = max(math.floor(correction_dim(beta_fast)), 0)
        hi = min(math.ceil(correction_dim(beta_slow)), dim - 1)
        if lo == hi:
            hi += 0.001
        ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - lo) / (hi - lo), 0, 1)
        extrapolation = 1.0 - ramp
        pos_freqs = theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
        inv = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
        return inv, att
    raise ValueError("unsupported rope scaling %s" % kind)


def apply_rope(x, positions, inv_freq, scale):
    """x: [heads, T, D]; rotate-half layout (first half pairs with second)
    over the first 2 * len(inv_freq) dims (partial rotary); the rest pass."""
    rot = 2 * len(inv_freq)
    x, rest = x[..., :rot], x[..., rot:]
    freqs = np.outer(positions, inv_freq)  # [T, rot/2]
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb) * scale, np.sin(emb) * scale
    half = rot // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return np.concatenate([x * cos[None] + rotated * sin[None], rest], axis=-1)


def rotary_dim(cfg, head_dim):
    """Rotated dims per head: int(head_dim * partial_rotary_factor) (Phi-3 /
    Phi-4-mini; top level or in rope_parameters)."""
    params = cfg.get("rope_parameters") or {}
    factor = cfg.get("partial_rotary_factor",
                     params.get("partial_rotary_factor", 1.0))
    return int(head_dim * factor)


GEMMA = ("gemma2", "gemma3_text")
# Gemma2Config / Gemma3TextConfig defaults of the keys read here.
_GEMMA_DEFAULTS = {
    "gemma2": {"query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0,
               "final_logit_softcapping": 30.0, "sliding_window": 4096},
    "gemma3_text": {"query_pre_attn_scalar": 256, "attn_logit_softcapping": None,
                    "final_logit_softcapping": None, "sliding_window": 4096},
}


def gemma_key(cfg, key):
    return cfg[key] if key in cfg else _GEMMA_DEFAULTS[cfg["model_type"]][key]


def gemma_layer_types(cfg):
    """Gemma 2: every other layer sliding; Gemma 3: every
    sliding_window_pattern-th (default 6) global, the others sliding."""
    if cfg.get("layer_types"):
        return cfg["layer_types"]
    pattern = 2 if cfg["model_type"] == "gemma2" else cfg.get("sliding_window_pattern", 6)
    return ["sliding_attention" if (i + 1) % pattern else "full_attention"
            for i in range(cfg["num_hidden_layers"])]


def attention_options(cfg):
    """(scale, softcap) of the attention scores."""
    if cfg["model_type"] not in GEMMA:
        return None, None
    return (1.0 / math.sqrt(gemma_key(cfg, "query_pre_attn_scalar")),
            gemma_key(cfg, "attn_logit_softcapping"))


def layer_rope(cfg, layer, dim, seq_len):
    """(inv_freq, scale) of `layer`: Gemma 3's sliding layers rotate with
    rope_local_base_freq (default 10000) and no scaling."""
    if (cfg["model_type"] == "gemma3_text" and
            gemma_layer_types(cfg)[layer] == "sliding_attention"):
        local = dict(cfg, rope_theta=cfg.get("rope_local_base_freq", 10000.0),
                     rope_scaling=None, rope_parameters=None)
        return rope_inv_freq(local, dim, seq_len)
    return rope_inv_freq(cfg, dim, seq_len)


def layer_uses_rope(cfg, layer):
    """SmolLM3 leaves RoPE out of the layers whose no_rope_layers entry is 0
    (by default every no_rope_layer_interval-th layer, counting from 1)."""
    if cfg["model_type"] != "smollm3":
        return True
    flags = cfg.get("no_rope_layers")
    if flags is None:
        return (layer + 1) % cfg.get("no_rope_layer_interval", 4) != 0
    return bool(flags[layer])


def sliding_window_for_layer(cfg, layer):
    if cfg["model_type"] in GEMMA:
        window = gemma_key(cfg, "sliding_window")
        sliding = gemma_layer_types(cfg)[layer] == "sliding_attention"
        return window if sliding else None
    window = cfg.get("sliding_window")
    if window is None:
        return None
    if cfg["model_type"] == "smollm3":
        # Only with use_sliding_window, on "sliding_attention" layers
        # (without layer_types: the layers without RoPE).
        if not cfg.get("use_sliding_window", False):
            return None
        if not cfg.get("layer_types"):
            return None if layer_uses_rope(cfg, layer) else window
    if cfg.get("layer_types"):
        return window if cfg["layer_types"][layer] == "sliding_attention" else None
    if cfg["model_type"] in ("mistral", "phi3"):
        return window
    if cfg["model_type"] in ("qwen2", "qwen3"):
        if cfg.get("use_sliding_window", False) and layer >= cfg.get("max_window_layers", 28):
            return window
    return None


def decoder_mask(T, window, bidirectional):
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    allowed = np.ones((T, T), dtype=bool) if bidirectional else j <= i
    if window is not None and not bidirectional:
        # A query attends to the `window` most recent positions, itself
        # included (i - j < window).
        allowed &= (i - j) < window
    return allowed


def _decoder_dims(cfg):
    H, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    # Qwen3's head_dim defaults to 128 (Qwen3Config), others to H / heads.
    D = cfg.get("head_dim") or (128 if cfg["model_type"] == "qwen3" else H // heads)
    return heads, kv, D


def _decoder_layers(cfg, w, ids, attend):
    """Runs the decoder blocks over token ids [T] and returns the final-norm
    hidden states [T, H]. `attend(layer, q, k, v)` gets this step's
    projections (q [T, heads, D], k and v [T, kv, D], Qwen3's q/k norms
    applied, no RoPE yet) and returns the attention output [T, heads * D]:
    the callers differ only in positions, masks and what earlier tokens'
    keys/values they attend to."""
    ids = np.asarray(ids, dtype=np.int64)
    T = len(ids)
    heads, kv, D = _decoder_dims(cfg)
    qk_norm = cfg["model_type"] in ("qwen3", "gemma3_text")
    gemma = cfg["model_type"] in GEMMA  # Gemma 2 / 3: four norms per block
    # Every Gemma (1 too): (1 + w) norms and embeddings * sqrt(hidden).
    gemma_any = gemma or cfg["model_type"] == "gemma"
    eps = cfg.get("rms_norm_eps", 1e-6)
    act_name = cfg.get("hidden_act") or cfg.get("hidden_activation") or "silu"
    if cfg["model_type"] == "gemma" and act_name == "gelu":
        act_name = "gelu_pytorch_tanh"  # as GemmaConfig reads it
    act = activation(act_name)

    def norm(inp, name):
        # Gemma's RMSNorm scales by (1 + w).
        weight = w(name)
        return rms_norm(inp, 1.0 + weight if gemma_any else weight, eps)

    x = w("embed_tokens.weight")[ids]
    if gemma_any:
        x = x * math.sqrt(cfg["hidden_size"])
    for layer in range(cfg["num_hidden_layers"]):
        p = "layers.%d." % layer

        def proj(name, inp):
            bias = w(p + name + ".bias") if w.has(p + name + ".bias") else None
            return linear(inp, w(p + name + ".weight"), bias)

        h = norm(x, p + "input_layernorm.weight")
        if w.has(p + "self_attn.qkv_proj.weight"):
            # Phi-3: one projection, split q | k | v.
            qkv = proj("self_attn.qkv_proj", h)
            q = qkv[:, :heads * D].reshape(T, heads, D)
            k = qkv[:, heads * D:(heads + kv) * D].reshape(T, kv, D)
            v = qkv[:, (heads + kv) * D:].reshape(T, kv, D)
        else:
            q = proj("self_attn.q_proj", h).reshape(T, heads, D)
            k = proj("self_attn.k_proj", h).reshape(T, kv, D)
            v = proj("self_attn.v_proj", h).reshape(T, kv, D)
        if qk_norm:
            # Qwen3, Gemma 3: RMSNorm over each head's vector, before RoPE.
            q = norm(q, p + "self_attn.q_norm.weight")
            k = norm(k, p + "self_attn.k_norm.weight")
        out = proj("self_attn.o_proj", attend(layer, q, k, v))
        if gemma:
            # Gemma 2/3: norms on the attention and MLP outputs too.
            x = x + norm(out, p + "post_attention_layernorm.weight")
            h = norm(x, p + "pre_feedforward_layernorm.weight")
        else:
            x = x + out
            h = norm(x, p + "post_attention_layernorm.weight")
        if w.has(p + "mlp.gate_up_proj.weight"):
            # Phi-3: gate | up in one projection (gate first).
            gate, up = np.split(proj("mlp.gate_up_proj", h), 2, axis=-1)
        else:
            gate, up = proj("mlp.gate_proj", h), proj("mlp.up_proj", h)
        out = proj("mlp.down_proj", act(gate) * up)
        if gemma:
            out = norm(out, p + "post_feedforward_layernorm.weight")
        x = x + out
    return norm(x, "norm.weight")


def _logits(cfg, w, x):
    """LM head, then Gemma 2's final soft cap."""
    logits = x @ _lm_head(cfg, w).T
    cap = gemma_key(cfg, "final_logit_softcapping") if cfg["model_type"] in GEMMA else None
    if cap:
        logits = cap * np.tanh(logits / cap)
    return logits


def _lm_head(cfg, w):
    if "lm_head.weight" in w.t:
        return w.t["lm_head.weight"]
    if cfg.get("tie_word_embeddings", False):
        return w("embed_tokens.weight")
    raise KeyError("lm_head.weight missing and tie_word_embeddings is false")


def _heads_first(a):
    """[T, heads, D] -> [heads, T, D]."""
    return a.transpose(1, 0, 2)


def decoder_forward(cfg, w, ids, bidirectional=False):
    """(final-norm hidden states [T, H], logits [T, V] or None)."""
    T = len(ids)
    heads, _, D = _decoder_dims(cfg)
    positions = np.arange(T, dtype=np.float64)
    scale, softcap = attention_options(cfg)
    # EmbeddingGemma (use_bidirectional_attention): bidirectional, and its
    # sliding layers see |i - j| < sliding_window // 2 + 1.
    own_bidirectional = bool(cfg.get("use_bidirectional_attention"))
    bidirectional = bidirectional or own_bidirectional

    def attend(layer, q, k, v):
        q, k = _heads_first(q), _heads_first(k)
        if layer_uses_rope(cfg, layer):
            inv_freq, rope_scale = layer_rope(cfg, layer, rotary_dim(cfg, D), T)
            q = apply_rope(q, positions, inv_freq, rope_scale)
            k = apply_rope(k, positions, inv_freq, rope_scale)
        window = sliding_window_for_layer(cfg, layer)
        if own_bidirectional and window is not None:
            i, j = np.arange(T)[:, None], np.arange(T)[None, :]
            mask = np.abs(i - j) < window // 2 + 1
        else:
            mask = decoder_mask(T, window, bidirectional)
        return attention(q, k, _heads_first(v), mask, scale, softcap).transpose(
            1, 0, 2).reshape(T, heads * D)

    x = _decoder_layers(cfg, w, ids, attend)
    if not cfg["architectures"][0].endswith("ForCausalLM"):
        return x, None
    return x, _logits(cfg, w, x)


def _check_static_rope(cfg):
    _, scaling = rope_parameters(cfg)
    if scaling and scaling.get("rope_type", scaling.get("type")) == "dynamic":
        raise ValueError("cached decoding: dynamic RoPE depends on the length")


def _attend_cached(cfg, layer, q, k, v, cache, start):
    """Causal attention of new tokens q/k/v ([T, *, D], positions start..)
    over the keys/values `cache` holds for this layer (appended to)."""
    T = q.shape[0]
    heads, _, D = _decoder_dims(cfg)
    positions = np.arange(start, start + T, dtype=np.float64)
    inv_freq, rope_scale = layer_rope(cfg, layer, rotary_dim(cfg, D), start + T)
    q, k, v = _heads_first(q), _heads_first(k), _heads_first(v)
    if layer_uses_rope(cfg, layer):
        q = apply_rope(q, positions, inv_freq, rope_scale)
        k = apply_rope(k, positions, inv_freq, rope_scale)
    if layer in cache:
        pk, pv = cache[layer]
        k = np.concatenate([pk, k], axis=1)
        v = np.concatenate([pv, v], axis=1)
    cache[layer] = (k, v)
    window = sliding_window_for_layer(cfg, layer)
    i = np.arange(start, start + T)[:, None]
    j = np.arange(start + T)[None, :]
    mask = j <= i
    if window is not None:
        mask &= (i - j) < window
    scale, softcap = attention_options(cfg)
    return attention(q, k, v, mask, scale, softcap).transpose(1, 0, 2).reshape(
        T, heads * D)


def decoder_step(cfg, w, ids, cache):
    """Causal forward of new tokens `ids` after the len(cache) tokens whose
    keys/values `cache` holds (a dict filled in place: layer -> (k, v),
    [kv_heads, T, D]). Returns the logits of the new tokens [T, V]. The same
    computation as decoder_forward on the whole sequence, without
    recomputing earlier tokens (greedy decoding of long outputs)."""
    _check_static_rope(cfg)
    start = cache.get("len", 0)
    x = _decoder_layers(
        cfg, w, ids, lambda layer, q, k, v: _attend_cached(cfg, layer, q, k, v, cache, start))
    cache["len"] = start + len(ids)
    return _logits(cfg, w, x)


def decode_batch(cfg, w, tokens, caches):
    """One decoding step for several sequences at once: token i extends the
    sequence whose keys/values caches[i] holds (as decoder_step fills it).
    Projections run as one matrix product over the batch, so each weight is
    read once per step; attention runs per sequence. Returns logits
    [len(tokens), V]. Same arithmetic as decoder_step row by row."""
    _check_static_rope(cfg)
    starts = [c.get("len", 0) for c in caches]

    def attend(layer, q, k, v):
        return np.concatenate([
            _attend_cached(cfg, layer, q[b:b + 1], k[b:b + 1], v[b:b + 1],
                           caches[b], starts[b])
            for b in range(len(tokens))])

    x = _decoder_layers(cfg, w, tokens, attend)
    for b, c in enumerate(caches):
        c["len"] = starts[b] + 1
    return _logits(cfg, w, x)


def greedy_cached_batch(cfg, w, prompts, n, eos_ids=()):
    """greedy_cached for several prompts, decoding them together."""
    caches = [{} for _ in prompts]
    outs = [[] for _ in prompts]
    nxt = [int(np.argmax(decoder_step(cfg, w, ids, c)[-1]))
           for ids, c in zip(prompts, caches)]
    active = list(range(len(prompts)))
    while active:
        still = []
        for i, b in enumerate(active):
            outs[b].append(nxt[i])
            if nxt[i] not in eos_ids and len(outs[b]) < n:
                still.append((b, nxt[i]))
        if not still:
            break
        logits = decode_batch(cfg, w, [t for _, t in still],
                              [caches[b] for b, _ in still])
        active = [b for b, _ in still]
        nxt = [int(np.argmax(row)) for row in logits]
    return outs


def greedy_cached(cfg, w, ids, n, eos_ids=()):
    """Greedy decoding with decoder_step: up to n new ids (stops after EOS)."""
    cache = {}
    logits = decoder_step(cfg, w, ids, cache)
    out = []
    for _ in range(n):
        nxt = int(np.argmax(logits[-1]))
        out.append(nxt)
        if nxt in eos_ids or len(out) == n:
            break
        logits = decoder_step(cfg, w, [nxt], cache)
    return out


# --------------------------------------------------------------------------
# Pooling


def pool(hidden, mode, attention_mask=None):
    mask = np.ones(len(hidden)) if attention_mask is None else np.asarray(attention_mask, float)
    if mode == "cls":
        return hidden[0]
    if mode == "mean":
        return (hidden * mask[:, None]).sum(0) / max(mask.sum(), 1e-9)
    if mode == "max":
        return np.where(mask[:, None] > 0, hidden, -np.inf).max(0)
    if mode == "lasttoken":
        return hidden[int(np.nonzero(mask)[0][-1])]
    raise ValueError("unsupported pooling %s" % mode)


def normalize(v):
    return v / max(np.linalg.norm(v), 1e-12)


def st_embedding(model_dir, hidden):
    """Embedding per the directory's sentence-transformers modules, or None."""
    modules = load_json(os.path.join(model_dir, "modules.json"))
    if not modules:
        return None
    out = hidden
    for m in sorted(modules, key=lambda m: m.get("idx", 0)):
        kind = m["type"].rsplit(".", 1)[-1]
        if kind == "Pooling":
            pc = load_json(os.path.join(model_dir, m["path"], "config.json"))
            mode = next(mode for key, mode in (
                ("pooling_mode_cls_token", "cls"), ("pooling_mode_mean_tokens", "mean"),
                ("pooling_mode_max_tokens", "max"), ("pooling_mode_lasttoken", "lasttoken"))
                if pc.get(key))
            out = pool(out, mode)
        elif kind == "Normalize":
            out = normalize(out)
        elif kind == "Dense":
            dc = load_json(os.path.join(model_dir, m["path"], "config.json"))
            dw = read_safetensors(os.path.join(model_dir, m["path"], "model.safetensors"))
            out = linear(out, dw["linear.weight"], dw.get("linear.bias"))
            act = dc.get("activation_function", "torch.nn.modules.activation.Tanh")
            if act.endswith("Tanh"):
                out = np.tanh(out)
    return out


# --------------------------------------------------------------------------
# BGE-M3 outputs: dense (CLS), sparse (lexical weights), ColBERT vectors


class _TorchStorageType:
    def __init__(self, dtype):
        self.dtype = dtype


_TORCH_GLOBALS = {
    ("torch", "FloatStorage"): _TorchStorageType("<f4"),
    ("torch", "HalfStorage"): _TorchStorageType("<f2"),
    ("collections", "OrderedDict"): collections.OrderedDict,
}


def _rebuild_tensor_v2(storage, offset, size, stride, *_):
    item = storage.itemsize
    return np.lib.stride_tricks.as_strided(
        storage[offset:], shape=tuple(size),
        strides=tuple(s * item for s in stride)).astype(np.float64)


def read_torch_state_dict(path):
    """name -> float64 array from a torch.save zip file, through Python's
    pickle with only the globals a state dict of tensors needs."""
    import pickle
    import zipfile
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        pkl = next(n for n in names if n.endswith("/data.pkl"))
        folder = pkl[:-len("data.pkl")]

        class Unpickler(pickle.Unpickler):
            def find_class(self, module, name):
                if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
                    return _rebuild_tensor_v2
                if (module, name) in _TORCH_GLOBALS:
                    return _TORCH_GLOBALS[(module, name)]
                raise pickle.UnpicklingError("global %s.%s refused" % (module, name))

            def persistent_load(self, pid):
                kind, storage_type, key, _, numel = pid
                assert kind == "storage"
                raw = z.read(folder + "data/" + key)
                return np.frombuffer(raw, dtype=storage_type.dtype)[:numel]

        import io
        return dict(Unpickler(io.BytesIO(z.read(pkl))).load())


def load_m3_head(model_dir, name):
    pt = os.path.join(model_dir, name + ".pt")
    if os.path.isfile(pt):
        return read_torch_state_dict(pt)
    return read_safetensors(os.path.join(model_dir, name + ".safetensors"))


def m3_special_ids(model_dir):
    """CLS, EOS, PAD and UNK ids (the tokens the sparse output drops)."""
    tc = load_json(os.path.join(model_dir, "tokenizer_config.json"), {})
    tok = load_json(os.path.join(model_dir, "tokenizer.json"), {})
    names = {tc.get(k) for k in ("cls_token", "eos_token", "pad_token", "unk_token")}
    ids = {t["id"] for t in tok.get("added_tokens", []) if t["content"] in names}
    return ids


def m3_outputs(model_dir, hidden, ids, normalize_vectors=True):
    """{"dense": CLS (normalized), "sparse": {id: weight},
    "colbert": [T-1, D]} from an encoder's final hidden states [T, H]."""
    sparse_w = load_m3_head(model_dir, "sparse_linear")
    colbert_w = load_m3_head(model_dir, "colbert_linear")
    dense = hidden[0]
    if normalize_vectors:
        dense = normalize(dense)
    weights = np.maximum(linear(hidden, sparse_w["weight"], sparse_w["bias"])[:, 0], 0)
    special = m3_special_ids(model_dir)
    sparse = {}
    for w, i in zip(weights, ids):
        if i in special or w <= 0:
            continue
        sparse[int(i)] = max(sparse.get(int(i), 0.0), float(w))
    colbert = linear(hidden[1:], colbert_w["weight"], colbert_w["bias"])
    if normalize_vectors:
        colbert = colbert / np.maximum(np.linalg.norm(colbert, axis=1, keepdims=True), 1e-12)
    return {"dense": dense, "sparse": sparse, "colbert": colbert}


def colbert_score(q, d):
    """Late interaction: mean over query vectors of the best dot product."""
    return float((np.asarray(q) @ np.asarray(d).T).max(axis=1).mean())


# --------------------------------------------------------------------------
# Model wrapper


class Model:
    def __init__(self, model_dir):
        self.dir = model_dir
        self.cfg = load_json(os.path.join(model_dir, "config.json"))
        self.w = Weights(load_weights(model_dir))
        self.encoder = self.cfg["model_type"] in ("bert", "xlm-roberta", "roberta", "mpnet")
        self.arch = self.cfg["architectures"][0]

    def forward(self, ids, type_ids=None, bidirectional=False):
        """(hidden [T, H], logits or None)."""
        if self.cfg["model_type"] == "nomic_bert":
            return nomic_forward(self.cfg, self.w, ids, type_ids), None
        if self.cfg["model_type"] == "new":
            return gte_forward(self.cfg, self.w, ids, type_ids), None
        if self.cfg["model_type"] == "modernbert":
            return modernbert_forward(self.cfg, self.w, ids), None
        if self.encoder:
            hidden = encoder_forward(self.cfg, self.w, ids, type_ids)
            logits = (encoder_classify(self.cfg, self.w, hidden)
                      if self.arch.endswith("ForSequenceClassification") else None)
            return hidden, logits
        return decoder_forward(self.cfg, self.w, ids, bidirectional)

    def greedy(self, ids, n, eos_ids=()):
        """Greedily appends up to n tokens (stops after an EOS id)."""
        _, scaling = rope_parameters(self.cfg)
        if scaling and scaling.get("rope_type", scaling.get("type")) == "longrope":
            # LongRoPE's factors depend on the length so far: decode with a
            # cache, as transformers' generate does (cached keys keep the
            # factors of the step that wrote them).
            return greedy_cached(self.cfg, self.w, ids, n, eos_ids)
        seq = list(ids)
        out = []
        for _ in range(n):
            _, logits = self.forward(seq)
            nxt = int(np.argmax(logits[-1]))
            out.append(nxt)
            seq.append(nxt)
            if nxt in eos_ids:
                break
        return out


def parse_ids(text):
    return [int(t) for t in text.replace(" ", "").split(",") if t != ""]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", required=True, help="comma-separated token ids")
    ap.add_argument("--type-ids", "--pair-type-ids", dest="type_ids", default=None)
    ap.add_argument("--bidirectional", action="store_true")
    ap.add_argument("--greedy", type=int, default=0)
    ap.add_argument("--logits", choices=["all", "last", "none"], default="all")
    ap.add_argument("--out", default=None, help="JSON output (default stdout)")
    args = ap.parse_args()

    model = Model(args.model)
    ids = parse_ids(args.ids)
    type_ids = parse_ids(args.type_ids) if args.type_ids else None
    if type_ids is not None and len(type_ids) != len(ids):
        sys.exit("--type-ids must have one entry per id")
    hidden, logits = model.forward(ids, type_ids, args.bidirectional)
    result = {"model": os.path.abspath(args.model), "ids": ids,
              "hidden_states": hidden.tolist()}
    if logits is not None and args.logits != "none":
        if logits.ndim == 2 and args.logits == "last":
            logits = logits[-1:]
        result["logits"] = logits.tolist()
    emb = st_embedding(args.model, hidden)
    if emb is not None:
        result["embedding"] = emb.tolist()
    if args.greedy:
        if logits is None:
            sys.exit("--greedy needs a causal LM")
        eos = model.cfg.get("eos_token_id")
        eos = eos if isinstance(eos, list) else ([] if eos is None else [eos])
        result["greedy"] = model.greedy(ids, args.greedy, eos)
    text = json.dumps(result)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
