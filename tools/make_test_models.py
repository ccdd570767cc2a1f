#!/usr/bin/python3
"""Generates deterministic random-weight Hugging Face model directories.

Every architecture inferd serves gets a tiny model (hidden 32-64, 2 layers)
with config.json as transformers writes it, model.safetensors (written here
with numpy), tokenizer files and, for embedders, the sentence-transformers
files. Larger "bench" shapes (MiniLM-L6, BERT-base, TinyLlama) are available
with --shape for benchmarks.

Usage:
  /usr/bin/python3 tools/make_test_models.py --out DIR [--only a,b]
      [--dtype f32|bf16] [--shape tiny|minilm-l6|bert-base|tinyllama]

Tokenizers are generated here (a small WordPiece for encoders, a byte-level
BPE for decoders), so the models are the same on every machine; the
embedding table is padded to at least MIN_TEST_VOCAB rows (as real
checkpoints pad theirs), so tests may use any id below it. `--shared DIR`
copies real tokenizers from DIR/tokenizers/<name> instead (for the bench
shapes). Idempotent: a model directory whose stamp matches the script and
arguments is left alone.
"""

import argparse
import collections
import hashlib
import json
import os
import re
import shutil
import sys
import time
import zlib

import numpy as np

SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))
# Embedding rows of every tiny model, at least: tests feed ids below it.
MIN_TEST_VOCAB = 12000
STAMP = ".inferd_stamp"
TRANSFORMERS_VERSION = "4.44.2"

# --------------------------------------------------------------------------
# safetensors writer


def f32_to_bf16_bits(a):
    """Round-to-nearest-even float32 -> bfloat16 bit patterns (uint16)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    out = ((bits + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        out[nan] = 0x7FC0
    return out


_ST_DTYPES = {"f32": ("F32", 4), "bf16": ("BF16", 2), "i64": ("I64", 8)}


def write_safetensors(path, specs, make, metadata=None):
    """Writes a safetensors file.

    specs: list of (name, shape, dtype) with dtype in f32 | bf16 | i64.
    make(name) -> numpy array of that shape (float or int), produced one
    tensor at a time so large models never sit in memory whole.
    """
    header = {}
    offset = 0
    for name, shape, dtype in specs:
        st_dtype, size = _ST_DTYPES[dtype]
        nbytes = int(np.prod(shape, dtype=np.int64)) * size
        header[name] = {"dtype": st_dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    header["__metadata__"] = metadata or {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)  # data starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for name, shape, dtype in specs:
            a = np.asarray(make(name))
            assert tuple(a.shape) == tuple(shape), (name, a.shape, shape)
            if dtype == "f32":
                f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())
            elif dtype == "bf16":
                f.write(f32_to_bf16_bits(a.astype(np.float32)).astype("<u2").tobytes())
            else:
                f.write(np.ascontiguousarray(a, dtype="<i8").tobytes())
    os.replace(tmp, path)


# --------------------------------------------------------------------------
# torch.save writer (torch is not needed): the zip layout torch >= 1.6
# writes for torch.save(state_dict, path), by hand.
#
#   archive/data.pkl    pickle protocol 2 of an OrderedDict name -> tensor,
#                       each tensor pickled as
#                       torch._utils._rebuild_tensor_v2(storage, offset,
#                       size, stride, requires_grad, OrderedDict()), the
#                       storage as a persistent id ('storage',
#                       torch.FloatStorage, key, 'cpu', numel)
#   archive/byteorder   "little"
#   archive/data/<key>  the storage's raw little-endian bytes
#   archive/version     "3"
# Entries are stored uncompressed; data is 64-byte aligned as torch does.


def _pk_str(s):
    b = s.encode()
    return b"X" + len(b).to_bytes(4, "little") + b


def _pk_int(v):
    if 0 <= v < 256:
        return b"K" + bytes([v])
    if 0 <= v < 65536:
        return b"M" + v.to_bytes(2, "little")
    return b"J" + v.to_bytes(4, "little", signed=True)


def _pk_tuple(items):
    if not items:
        return b")"
    return b"(" + b"".join(items) + b"t"


def torch_state_dict_pickle(tensors):
    """data.pkl bytes for an OrderedDict of float32 tensors (name -> array);
    storage keys are "0", "1", ... in order."""
    out = [b"\x80\x02", b"ccollections\nOrderedDict\nq\x00", b")Rq\x01", b"("]
    for key, (name, a) in enumerate(tensors):
        shape = list(a.shape)
        stride, acc = [], 1
        for d in reversed(shape):
            stride.insert(0, acc)
            acc *= d
        pid = _pk_tuple([_pk_str("storage"), b"ctorch\nFloatStorage\n",
                         _pk_str(str(key)), _pk_str("cpu"), _pk_int(int(a.size))])
        args = _pk_tuple([pid + b"Q", _pk_int(0),
                          _pk_tuple([_pk_int(d) for d in shape]),
                          _pk_tuple([_pk_int(d) for d in stride]), b"\x89",
                          b"ccollections\nOrderedDict\n)R"])
        out += [_pk_str(name), b"ctorch._utils\n_rebuild_tensor_v2\n", args, b"R"]
    out.append(b"u")
    # The state dict's _metadata attribute, applied with BUILD.
    out += [b"}", _pk_str("_metadata"), b"ccollections\nOrderedDict\n)R",
            b"(", _pk_str(""), b"}", _pk_str("version"), _pk_int(1), b"su", b"s",
            b"b", b"."]
    return b"".join(out)


def write_torch_state_dict(path, tensors):
    import zipfile
    tensors = [(n, np.ascontiguousarray(a, dtype="<f4")) for n, a in tensors]
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as z:
        def add(name, data):
            info = zipfile.ZipInfo("archive/" + name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            # Pad the local header's extra field so the data is 64-byte aligned.
            header = 30 + len(info.filename.encode())
            pad = (-(z.fp.tell() + header + 4)) % 64
            info.extra = b"FB" + pad.to_bytes(2, "little") + b"Z" * pad
            z.writestr(info, data)
        add("data.pkl", torch_state_dict_pickle(tensors))
        add("byteorder", b"little")
        for key, (_, a) in enumerate(tensors):
            add("data/%d" % key, a.tobytes())
        add("version", b"3\n")
    os.replace(tmp, path)


def write_m3_heads(out_dir, hidden, rng, fmt):
    """BGE-M3's sparse_linear (Linear(H, 1)) and colbert_linear
    (Linear(H, H)) as torch files (fmt "pt") or safetensors copies."""
    heads = {
        "sparse_linear": [
            ("weight", rng.standard_normal((1, hidden), dtype=np.float32)
             / np.float32(np.sqrt(hidden))),
            ("bias", np.full((1,), 0.05, np.float32))],
        "colbert_linear": [
            ("weight", rng.standard_normal((hidden, hidden), dtype=np.float32)
             / np.float32(np.sqrt(hidden))),
            ("bias", 0.1 * rng.standard_normal((hidden,), dtype=np.float32))],
    }
    for name, tensors in heads.items():
        if fmt == "pt":
            write_torch_state_dict(os.path.join(out_dir, name + ".pt"), tensors)
        else:
            arrays = dict(tensors)
            write_safetensors(os.path.join(out_dir, name + ".safetensors"),
                              [(n, a.shape, "f32") for n, a in tensors],
                              lambda n: arrays[n])


# --------------------------------------------------------------------------
# Fallback tokenizers (used when ../shared/tokenizers is absent)

_CORPUS = (
    "Once upon a time there was a little girl named Lily. She liked to play "
    "outside in the park with her friends. The quick brown fox jumps over the "
    "lazy dog. What is the capital of France? Paris is the capital and most "
    "populous city of France. Machine learning models turn text into numbers "
    "and numbers into text. Hello world! This is a test of the tokenizer, "
    "with punctuation, numbers like 12345 and 2024, and some longer words "
    "such as information, retrieval, embedding, ranking and generation. "
    "query: passage: the weather today is sunny and warm. "
)


def _added(i, content, special=True):
    return {"id": i, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": False, "special": special}


def make_wordpiece_tokenizer(style):
    """A small WordPiece tokenizer. style: 'bert' ([CLS] x [SEP]) or
    'roberta' (<s> x </s>, pad id 1)."""
    if style == "bert":
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        cls, sep, unk = "[CLS]", "[SEP]", "[UNK]"
    else:
        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        cls, sep, unk = "<s>", "</s>", "<unk>"
    words = sorted(set(re.findall(r"[a-z]+", _CORPUS.lower())))
    chars = sorted(set("abcdefghijklmnopqrstuvwxyz0123456789.,!?'\"-:;()"))
    vocab = list(specials) + chars + ["##" + c for c in chars if c.isalnum()]
    vocab += [w for w in words if w not in vocab]
    ids = {t: i for i, t in enumerate(vocab)}
    if style == "bert":
        post = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": cls, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": sep, "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": cls, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": sep, "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": sep, "type_id": 1}}],
            "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]}
                               for t in (cls, sep)},
        }
    else:
        post = {"type": "RobertaProcessing", "sep": [sep, ids[sep]],
                "cls": [cls, ids[cls]], "trim_offsets": True,
                "add_prefix_space": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [_added(ids[t], t) for t in specials],
        "normalizer": {"type": "BertNormalizer", "clean_text": True,
                       "handle_chinese_chars": True, "strip_accents": None,
                       "lowercase": style == "bert"},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": post,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": unk,
                  "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": ids},
    }


def _bytes_to_unicode():
    """GPT-2's reversible byte -> printable character table."""
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) +
            list(range(0xAE, 0x100)))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


def make_bytelevel_bpe_tokenizer(style, num_merges=200):
    """A small byte-level BPE trained on a fixed corpus. style 'llama':
    <unk>,<s>,</s> at 0..2 and BOS added; style 'qwen': bytes first, then
    <|endoftext|>, <|im_start|>, <|im_end|>; nothing added."""
    b2u = _bytes_to_unicode()
    words = collections.Counter(
        "".join(b2u[b] for b in w.encode())
        for w in re.findall(r" ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+", _CORPUS))
    seqs = {w: list(w) for w in words}
    merges = []
    for _ in range(num_merges):
        pairs = collections.Counter()
        for w, n in words.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        merges.append(best)
        for w in seqs:
            s, out, i = seqs[w], [], 0
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == best:
                    out.append(s[i] + s[i + 1])
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    specials = (["<unk>", "<s>", "</s>"] if style == "llama" else [])
    vocab = list(specials) + [b2u[b] for b in range(256)]
    vocab += [a + b for a, b in merges if a + b not in vocab]
    trailing = (["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
                if style == "qwen" else [])
    ids = {t: i for i, t in enumerate(vocab)}
    added = [_added(ids[t], t) for t in specials]
    for t in trailing:
        added.append(_added(len(ids), t))
        ids[t] = len(ids)
    if style == "llama":
        post = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
        }
    else:
        post = {"type": "ByteLevel", "add_prefix_space": False,
                "trim_offsets": False, "use_regex": False}
    model_vocab = {t: i for t, i in ids.items() if t not in trailing}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                          "trim_offsets": True, "use_regex": True},
        "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True,
                    "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False,
                  "vocab": model_vocab,
                  "merges": ["%s %s" % m for m in merges]},
    }


def with_vocab_words(tok, words):
    """`tok` with `words` added to its BPE vocabulary as whole tokens (after
    every id it has), e.g. a decoder reranker's score tokens "yes" / "no",
    which the small trained vocabulary lacks."""
    vocab = tok["model"]["vocab"]
    next_id = max(list(vocab.values()) + [a["id"] for a in tok["added_tokens"]]) + 1
    for word in words:
        if word not in vocab:
            vocab[word] = next_id
            next_id += 1
    return tok


def tokenizer_vocab_size(tok):
    vocab = tok["model"]["vocab"]
    ids = list(vocab.values()) if isinstance(vocab, dict) else [len(vocab) - 1]
    ids += [a["id"] for a in tok.get("added_tokens", [])]
    return max(ids) + 1


def token_id(tok, content):
    for a in tok.get("added_tokens", []):
        if a["content"] == content:
            return a["id"]
    vocab = tok["model"]["vocab"]
    if isinstance(vocab, dict):
        return vocab.get(content)
    for i, entry in enumerate(vocab):
        if entry[0] == content:
            return i
    return None


# Shared tokenizer folder, fallback generator, tokenizer_config defaults.
TOKENIZERS = {
    "bert": ("bert-base-uncased", lambda: make_wordpiece_tokenizer("bert"), {
        "tokenizer_class": "BertTokenizer", "do_lower_case": True,
        "cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]",
        "unk_token": "[UNK]", "mask_token": "[MASK]", "model_max_length": 512,
        "clean_up_tokenization_spaces": True, "tokenize_chinese_chars": True,
        "strip_accents": None}),
    "xlmr": ("xlm-roberta", lambda: make_wordpiece_tokenizer("roberta"), {
        "tokenizer_class": "XLMRobertaTokenizer", "bos_token": "<s>",
        "eos_token": "</s>", "cls_token": "<s>", "sep_token": "</s>",
        "pad_token": "<pad>", "unk_token": "<unk>",
        "mask_token": {"content": "<mask>", "lstrip": True, "normalized": False,
                       "rstrip": False, "single_word": False, "special": True},
        "model_max_length": 512, "clean_up_tokenization_spaces": True}),
    "llama": ("llama2", lambda: make_bytelevel_bpe_tokenizer("llama"), {
        "tokenizer_class": "LlamaTokenizer", "add_bos_token": True,
        "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "pad_token": None, "legacy": False,
        "model_max_length": 1000000000000000019884624838656,
        "clean_up_tokenization_spaces": False}),
    "mistral": ("mistral", lambda: make_bytelevel_bpe_tokenizer("llama"), {
        "tokenizer_class": "LlamaTokenizer", "add_bos_token": True,
        "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "pad_token": None, "legacy": True,
        "model_max_length": 1000000000000000019884624838656,
        "clean_up_tokenization_spaces": False}),
    "qwen2": ("qwen3", lambda: make_bytelevel_bpe_tokenizer("qwen"), {
        "tokenizer_class": "Qwen2Tokenizer", "add_bos_token": False,
        "bos_token": None, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "unk_token": None,
        "model_max_length": 131072, "clean_up_tokenization_spaces": False,
        "chat_template": (
            "{% for message in messages %}{{'<|im_start|>' + message['role'] + "
            "'\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
            "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
            "{% endif %}")}),
}
# bge-reranker-v2-gemma's score token "Yes" in a generated Llama-style
# tokenizer (a folder ../shared does not have: always generated).
TOKENIZERS["llama-rerank"] = (
    "generated-llama-rerank",
    lambda: with_vocab_words(make_bytelevel_bpe_tokenizer("llama"), ["Yes"]),
    TOKENIZERS["llama"][2])
# A decoder reranker's: Qwen's, with the score tokens "yes" and "no" (the
# real Qwen3 tokenizer under ../shared has them).
TOKENIZERS["qwen2-rerank"] = (
    "qwen3",
    lambda: with_vocab_words(make_bytelevel_bpe_tokenizer("qwen"), ["yes", "no"]),
    TOKENIZERS["qwen2"][2])


def install_tokenizer(out_dir, kind, shared_dir):
    """Copies or generates tokenizer.json + tokenizer_config.json; returns
    (parsed tokenizer.json, source description)."""
    folder, fallback, config = TOKENIZERS[kind]
    src = os.path.join(shared_dir, "tokenizers", folder) if shared_dir else None
    if src and os.path.isfile(os.path.join(src, "tokenizer.json")):
        shutil.copyfile(os.path.join(src, "tokenizer.json"),
                        os.path.join(out_dir, "tokenizer.json"))
        with open(os.path.join(src, "tokenizer.json"), encoding="utf-8") as f:
            tok = json.load(f)
        src_config = os.path.join(src, "tokenizer_config.json")
        if os.path.isfile(src_config):
            shutil.copyfile(src_config, os.path.join(out_dir, "tokenizer_config.json"))
        else:
            with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
                json.dump(config, f, indent=2)
        return tok, "shared:" + folder
    tok = fallback()
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    return tok, "generated"


# --------------------------------------------------------------------------
# Model definitions


def encoder_config(arch, family, vocab, s, extra):
    xlmr = family == "xlmr"
    cfg = {
        "architectures": [arch],
        "attention_probs_dropout_prob": 0.1,
        "classifier_dropout": None,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": s["hidden"],
        "initializer_range": 0.02,
        "intermediate_size": s["ffn"],
        "layer_norm_eps": 1e-05 if xlmr else 1e-12,
        "max_position_embeddings": 514 if xlmr else 512,
        "model_type": "xlm-roberta" if xlmr else "bert",
        "num_attention_heads": s["heads"],
        "num_hidden_layers": s["layers"],
        "pad_token_id": 1 if xlmr else 0,
        "position_embedding_type": "absolute",
        "transformers_version": TRANSFORMERS_VERSION,
        "type_vocab_size": 1 if xlmr else 2,
        "use_cache": True,
        "vocab_size": vocab,
    }
    if xlmr:
        cfg.update({"bos_token_id": 0, "eos_token_id": 2})
    if family == "jina":
        # jina-embeddings-v2's config: BERT's keys with ALiBi and a GEGLU
        # MLP (no position table).
        cfg.update({"position_embedding_type": "alibi",
                    "feed_forward_type": "geglu",
                    "max_position_embeddings": 8192,
                    "attn_implementation": "torch",
                    "auto_map": {"AutoConfig": "jinaai/jina-bert-implementation--configuration_bert.JinaBertConfig",
                                 "AutoModel": "jinaai/jina-bert-implementation--modeling_bert.JinaBertModel"}})
    if family == "mpnet":
        # MPNetConfig's keys: no token types or position type; RoBERTa's
        # ids and positions; the relative-position bias.
        for key in ("type_vocab_size", "position_embedding_type",
                    "classifier_dropout", "use_cache"):
            del cfg[key]
        cfg.update({"model_type": "mpnet", "max_position_embeddings": 514,
                    "layer_norm_eps": 1e-05, "pad_token_id": 1,
                    "bos_token_id": 0, "eos_token_id": 2,
                    "relative_attention_num_buckets": 32})
    cfg.update(extra)
    return dict(sorted(cfg.items()))


def encoder_specs(cfg, prefix, pooler, head):
    """(name, shape) list in HF naming for BERT / XLM-R models."""
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    P = cfg["max_position_embeddings"]
    mpnet = cfg["model_type"] == "mpnet"
    jina = cfg.get("position_embedding_type") == "alibi"
    p = prefix
    specs = [(p + "embeddings.word_embeddings.weight", (V, H))]
    if not jina:
        specs += [(p + "embeddings.position_embeddings.weight", (P, H))]
    if not mpnet:
        specs += [(p + "embeddings.token_type_embeddings.weight",
                   (cfg["type_vocab_size"], H))]
    specs += [(p + "embeddings.LayerNorm.weight", (H,)),
              (p + "embeddings.LayerNorm.bias", (H,))]
    if mpnet:
        specs += [(p + "encoder.relative_attention_bias.weight",
                   (cfg["relative_attention_num_buckets"],
                    cfg["num_attention_heads"]))]
    for i in range(cfg["num_hidden_layers"]):
        L = "%sencoder.layer.%d." % (p, i)
        if mpnet:
            for m in ("q", "k", "v", "o"):
                specs += [(L + "attention.attn.%s.weight" % m, (H, H)),
                          (L + "attention.attn.%s.bias" % m, (H,))]
            specs += [(L + "attention.LayerNorm.weight", (H,)),
                      (L + "attention.LayerNorm.bias", (H,))]
        else:
            for m in ("query", "key", "value"):
                specs += [(L + "attention.self.%s.weight" % m, (H, H)),
                          (L + "attention.self.%s.bias" % m, (H,))]
            specs += [(L + "attention.output.dense.weight", (H, H)),
                      (L + "attention.output.dense.bias", (H,)),
                      (L + "attention.output.LayerNorm.weight", (H,)),
                      (L + "attention.output.LayerNorm.bias", (H,))]
        if jina:
            specs += [(L + "mlp.gated_layers.weight", (2 * I, H)),
                      (L + "mlp.wo.weight", (H, I)), (L + "mlp.wo.bias", (H,)),
                      (L + "mlp.layernorm.weight", (H,)),
                      (L + "mlp.layernorm.bias", (H,))]
            continue
        specs += [(L + "intermediate.dense.weight", (I, H)),
                  (L + "intermediate.dense.bias", (I,)),
                  (L + "output.dense.weight", (H, I)),
                  (L + "output.dense.bias", (H,)),
                  (L + "output.LayerNorm.weight", (H,)),
                  (L + "output.LayerNorm.bias", (H,))]
    if pooler:
        specs += [(p + "pooler.dense.weight", (H, H)), (p + "pooler.dense.bias", (H,))]
    n = cfg.get("num_labels", len(cfg.get("id2label", {})) or 2)
    if head == "bert":
        specs += [("classifier.weight", (n, H)), ("classifier.bias", (n,))]
    elif head == "xlmr":
        specs += [("classifier.dense.weight", (H, H)), ("classifier.dense.bias", (H,)),
                  ("classifier.out_proj.weight", (n, H)), ("classifier.out_proj.bias", (n,))]
    return specs


def nomic_config(arch, vocab, s, extra):
    """nomic-embed-text-v1.5's config.json: nomic's remote-code keys."""
    cfg = {
        "activation_function": "swiglu",
        "architectures": [arch],
        "attn_pdrop": 0.0,
        "auto_map": {"AutoConfig": "nomic-ai/nomic-bert-2048--configuration_hf_nomic_bert.NomicBertConfig",
                     "AutoModel": "nomic-ai/nomic-bert-2048--modeling_hf_nomic_bert.NomicBertModel"},
        "bos_token_id": None,
        "causal": False,
        "embd_pdrop": 0.0,
        "eos_token_id": None,
        "layer_norm_epsilon": 1e-12,
        "mlp_fc1_bias": False,
        "mlp_fc2_bias": False,
        "model_type": "nomic_bert",
        "n_embd": s["hidden"],
        "n_head": s["heads"],
        "n_inner": s["ffn"],
        "n_layer": s["layers"],
        "n_positions": 8192,
        "pad_vocab_size_multiple": 64,
        "prenorm": False,
        "qkv_proj_bias": False,
        "resid_pdrop": 0.0,
        "rotary_emb_base": 1000,
        "rotary_emb_fraction": 1.0,
        "rotary_emb_interleaved": False,
        "rotary_scaling_factor": None,
        "type_vocab_size": 2,
        "use_cache": True,
        "vocab_size": vocab,
    }
    cfg.update(extra)
    return dict(sorted(cfg.items()))


def nomic_specs(cfg):
    """(name, shape) list in nomic's remote-code naming."""
    H, I, V = cfg["n_embd"], cfg["n_inner"], cfg["vocab_size"]
    specs = [("embeddings.word_embeddings.weight", (V, H)),
             ("embeddings.token_type_embeddings.weight", (cfg["type_vocab_size"], H)),
             ("emb_ln.weight", (H,)), ("emb_ln.bias", (H,))]
    for i in range(cfg["n_layer"]):
        L = "encoder.layers.%d." % i
        specs += [(L + "attn.Wqkv.weight", (3 * H, H)),
                  (L + "attn.out_proj.weight", (H, H)),
                  (L + "mlp.fc11.weight", (I, H)),
                  (L + "mlp.fc12.weight", (I, H)),
                  (L + "mlp.fc2.weight", (H, I)),
                  (L + "norm1.weight", (H,)), (L + "norm1.bias", (H,)),
                  (L + "norm2.weight", (H,)), (L + "norm2.bias", (H,))]
    return specs


def gte_config(arch, vocab, s, extra):
    """gte-base-en-v1.5's config.json: Alibaba's remote-code NewConfig."""
    cfg = {
        "architectures": [arch],
        "attention_probs_dropout_prob": 0.0,
        "auto_map": {"AutoConfig": "Alibaba-NLP/new-impl--configuration.NewConfig",
                     "AutoModel": "Alibaba-NLP/new-impl--modeling.NewModel"},
        "classifier_dropout": None,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": s["hidden"],
        "initializer_range": 0.02,
        "intermediate_size": s["ffn"],
        "layer_norm_eps": 1e-12,
        "layer_norm_type": "layer_norm",
        "logn_attention_clip1": False,
        "logn_attention_scale": False,
        "max_position_embeddings": 8192,
        "model_type": "new",
        "num_attention_heads": s["heads"],
        "num_hidden_layers": s["layers"],
        "pack_qkv": True,
        "pad_token_id": 0,
        "position_embedding_type": "rope",
        "rope_scaling": {"factor": 2.0, "type": "ntk"},
        "rope_theta": 500000,
        "transformers_version": TRANSFORMERS_VERSION,
        "type_vocab_size": 0,
        "unpad_inputs": False,
        "use_memory_efficient_attention": False,
        "vocab_size": vocab,
    }
    cfg.update(extra)
    return dict(sorted(cfg.items()))


def gte_specs(cfg):
    """(name, shape) list in GTE's remote-code naming."""
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    specs = [("embeddings.word_embeddings.weight", (V, H))]
    if cfg["type_vocab_size"] > 0:
        specs += [("embeddings.token_type_embeddings.weight", (cfg["type_vocab_size"], H))]
    specs += [("embeddings.LayerNorm.weight", (H,)), ("embeddings.LayerNorm.bias", (H,))]
    for i in range(cfg["num_hidden_layers"]):
        L = "encoder.layer.%d." % i
        specs += [(L + "attention.qkv_proj.weight", (3 * H, H)),
                  (L + "attention.qkv_proj.bias", (3 * H,)),
                  (L + "attention.o_proj.weight", (H, H)),
                  (L + "attention.o_proj.bias", (H,)),
                  (L + "attn_ln.weight", (H,)), (L + "attn_ln.bias", (H,)),
                  (L + "mlp.up_gate_proj.weight", (2 * I, H)),
                  (L + "mlp.down_proj.weight", (H, I)),
                  (L + "mlp.down_proj.bias", (H,)),
                  (L + "mlp_ln.weight", (H,)), (L + "mlp_ln.bias", (H,))]
    return specs


def modernbert_config(arch, vocab, s, extra):
    """ModernBERT-base's config.json keys (a local window of 8 so short
    texts cross it; four layers: global, local, local, global)."""
    cfg = {
        "architectures": [arch],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "classifier_activation": "gelu",
        "classifier_bias": False,
        "classifier_dropout": 0.0,
        "classifier_pooling": "mean",
        "decoder_bias": True,
        "deterministic_flash_attn": False,
        "embedding_dropout": 0.0,
        "global_attn_every_n_layers": 3,
        "global_rope_theta": 160000.0,
        "hidden_activation": "gelu",
        "hidden_size": s["hidden"],
        "initializer_cutoff_factor": 2.0,
        "initializer_range": 0.02,
        "intermediate_size": s["ffn"],
        "local_attention": 8,
        "local_rope_theta": 10000.0,
        "max_position_embeddings": 8192,
        "mlp_bias": False,
        "mlp_dropout": 0.0,
        "model_type": "modernbert",
        "norm_bias": False,
        "norm_eps": 1e-05,
        "num_attention_heads": s["heads"],
        "num_hidden_layers": 4,
        "transformers_version": TRANSFORMERS_VERSION,
        "vocab_size": vocab,
    }
    cfg.update(extra)
    return dict(sorted(cfg.items()))


def modernbert_specs(cfg):
    """(name, shape) list in ModernBertModel's naming (layer 0 has no
    attn_norm; norms without biases)."""
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    specs = [("embeddings.tok_embeddings.weight", (V, H)),
             ("embeddings.norm.weight", (H,))]
    for i in range(cfg["num_hidden_layers"]):
        L = "layers.%d." % i
        if i > 0:
            specs += [(L + "attn_norm.weight", (H,))]
        specs += [(L + "attn.Wqkv.weight", (3 * H, H)),
                  (L + "attn.Wo.weight", (H, H)),
                  (L + "mlp_norm.weight", (H,)),
                  (L + "mlp.Wi.weight", (2 * I, H)),
                  (L + "mlp.Wo.weight", (H, I))]
    return specs + [("final_norm.weight", (H,))]


def decoder_config(arch, family, vocab, s, extra):
    cfg = {
        "architectures": [arch],
        "attention_dropout": 0.0,
        "hidden_act": "silu",
        "hidden_size": s["hidden"],
        "initializer_range": 0.02,
        "intermediate_size": s["ffn"],
        "max_position_embeddings": s.get("max_pos", 2048),
        "model_type": family,
        "num_attention_heads": s["heads"],
        "num_hidden_layers": s["layers"],
        "num_key_value_heads": s["kv_heads"],
        "rms_norm_eps": s.get("rms_eps", 1e-06),
        "rope_theta": s.get("rope_theta", 10000.0),
        "tie_word_embeddings": False,
        "transformers_version": TRANSFORMERS_VERSION,
        "use_cache": True,
        "vocab_size": vocab,
    }
    if family == "llama":
        cfg.update({"attention_bias": False, "mlp_bias": False,
                    "pretraining_tp": 1, "rope_scaling": None,
                    "head_dim": s["hidden"] // s["heads"]})
    elif family == "mistral":
        cfg.update({"sliding_window": 4096, "head_dim": s["hidden"] // s["heads"]})
    elif family == "gemma":
        # bge-reranker-v2-gemma's config: Gemma 1 with the original
        # releases' hidden_act "gelu" (read as the tanh GELU).
        cfg.update({"hidden_act": "gelu", "head_dim": s["hidden"] // s["heads"],
                    "attention_bias": False, "pad_token_id": 0})
    elif family == "phi3":
        # Phi-4-mini's traits: 3/4 of each head rotates; LongRoPE factors
        # for the rotated pairs, switched past the original context.
        D = s["hidden"] // s["heads"]
        pairs = int(D * s["partial_rotary"]) // 2
        cfg.update({"partial_rotary_factor": s["partial_rotary"],
                    "original_max_position_embeddings": s["orig_max_pos"],
                    "rope_scaling": {
                        "type": "longrope",
                        "short_factor": [1.0 + 0.25 * i for i in range(pairs)],
                        "long_factor": [2.0 + 2.0 * i for i in range(pairs)]},
                    "sliding_window": None, "resid_pdrop": 0.0,
                    "embd_pdrop": 0.0, "pad_token_id": None})
    elif family in ("gemma2", "gemma3_text"):
        layers = s["layers"]
        pattern = 2 if family == "gemma2" else s["pattern"]
        cfg.update({"head_dim": s.get("head_dim", s["hidden"] // s["heads"]),
                    "hidden_activation": "gelu_pytorch_tanh",
                    "query_pre_attn_scalar": s["qpas"],
                    "sliding_window": s["window"],
                    "layer_types": ["sliding_attention" if (i + 1) % pattern
                                    else "full_attention" for i in range(layers)],
                    "attention_bias": False, "pad_token_id": 0})
        del cfg["hidden_act"]
        if family == "gemma2":
            # Small caps, so the tiny model's scores and logits feel them.
            cfg.update({"hidden_act": "gelu_pytorch_tanh",
                        "attn_logit_softcapping": s["attn_cap"],
                        "final_logit_softcapping": s["final_cap"]})
        else:
            cfg.update({"rope_local_base_freq": 10000.0,
                        "sliding_window_pattern": pattern,
                        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
                        "attn_logit_softcapping": None,
                        "final_logit_softcapping": None})
    elif family == "smollm3":
        # As transformers saves SmolLM3Config: the derived per-layer lists
        # beside the interval (every 4th layer without RoPE).
        layers = s["layers"]
        cfg.update({"attention_bias": False, "mlp_bias": False,
                    "no_rope_layer_interval": 4,
                    "no_rope_layers": [int((i + 1) % 4 != 0) for i in range(layers)],
                    "layer_types": ["full_attention"] * layers,
                    "use_sliding_window": False, "sliding_window": None,
                    "pad_token_id": None})
    elif family == "qwen2":
        cfg.update({"use_sliding_window": False, "sliding_window": None,
                    "max_window_layers": s["layers"]})
    elif family == "qwen3":
        # head_dim deliberately not hidden / heads (as in Qwen3 checkpoints).
        cfg.update({"use_sliding_window": False, "sliding_window": None,
                    "max_window_layers": s["layers"], "attention_bias": False,
                    "head_dim": s.get("head_dim", 2 * s["hidden"] // s["heads"])})
    cfg.update(extra)
    return dict(sorted(cfg.items()))


def decoder_specs(cfg, family, causal_lm):
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim") or H // heads
    p = "model." if causal_lm else ""
    specs = [(p + "embed_tokens.weight", (V, H))]
    qkv_bias = family == "qwen2" or cfg.get("attention_bias", False)
    for i in range(cfg["num_hidden_layers"]):
        L = "%slayers.%d." % (p, i)
        if family == "phi3":
            # Phi-3: q|k|v and gate|up as single projections.
            specs += [(L + "input_layernorm.weight", (H,)),
                      (L + "self_attn.qkv_proj.weight", ((heads + 2 * kv) * D, H)),
                      (L + "self_attn.o_proj.weight", (H, heads * D)),
                      (L + "post_attention_layernorm.weight", (H,)),
                      (L + "mlp.gate_up_proj.weight", (2 * I, H)),
                      (L + "mlp.down_proj.weight", (H, I))]
            continue
        specs += [(L + "input_layernorm.weight", (H,)),
                  (L + "self_attn.q_proj.weight", (heads * D, H)),
                  (L + "self_attn.k_proj.weight", (kv * D, H)),
                  (L + "self_attn.v_proj.weight", (kv * D, H))]
        if qkv_bias:
            specs += [(L + "self_attn.q_proj.bias", (heads * D,)),
                      (L + "self_attn.k_proj.bias", (kv * D,)),
                      (L + "self_attn.v_proj.bias", (kv * D,))]
        if family in ("qwen3", "gemma3_text"):
            specs += [(L + "self_attn.q_norm.weight", (D,)),
                      (L + "self_attn.k_norm.weight", (D,))]
        if family in ("gemma2", "gemma3_text"):
            specs += [(L + "pre_feedforward_layernorm.weight", (H,)),
                      (L + "post_feedforward_layernorm.weight", (H,))]
        specs += [(L + "self_attn.o_proj.weight", (H, heads * D)),
                  (L + "post_attention_layernorm.weight", (H,)),
                  (L + "mlp.gate_proj.weight", (I, H)),
                  (L + "mlp.up_proj.weight", (I, H)),
                  (L + "mlp.down_proj.weight", (H, I))]
    specs.append((p + "norm.weight", (H,)))
    if causal_lm and not cfg["tie_word_embeddings"]:
        specs.append(("lm_head.weight", (V, H)))
    return specs


def init_tensor(rng, name, shape, encoder):
    """Scaled random values: projections keep activations near unit size,
    norms near 1, biases small, so outputs vary without blowing up."""
    if name.endswith("position_ids"):
        return np.arange(shape[-1], dtype=np.int64).reshape(shape)
    if ("LayerNorm" in name or "layernorm" in name or name.endswith("norm.weight")
            or ".norm1." in name or ".norm2." in name or name.startswith("emb_ln")
            or "attn_ln" in name or "mlp_ln" in name or name.endswith("_norm.weight")
            or name == "embeddings.norm.weight"):
        if name.endswith("bias"):
            return 0.05 * rng.standard_normal(shape, dtype=np.float32)
        return 1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)
    if name.endswith("bias"):
        return 0.1 * rng.standard_normal(shape, dtype=np.float32)
    if name.endswith("relative_attention_bias.weight"):
        # Biases of a few units: they move the attention visibly.
        return rng.standard_normal(shape, dtype=np.float32)
    if "embeddings" in name or "embed_tokens" in name:
        scale = 0.5 if encoder else 1.0
        return scale * rng.standard_normal(shape, dtype=np.float32)
    fan_in = shape[-1]
    return rng.standard_normal(shape, dtype=np.float32) / np.float32(np.sqrt(fan_in))


TINY_ENC = {"hidden": 32, "layers": 2, "heads": 4, "ffn": 64}
TINY_DEC = {"hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 128}
TINY_QWEN = {"hidden": 32, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 64,
             "rope_theta": 1000000.0, "max_pos": 32768}

ST_QUERY_PROMPTS = {"query": "query: ", "passage": "passage: "}
QWEN_PROMPTS = {"query": "Instruct: Given a web search query, retrieve relevant "
                         "passages that answer the query\nQuery: "}
E5_PROMPTS = {"query": "Instruct: Given a web search query, retrieve relevant "
                       "passages that answer the query\nQuery: "}

# name -> definition. kind: encoder | decoder.
MODELS = {
    "bert-embed": dict(kind="encoder", family="bert", arch="BertModel", tok="bert",
                       shape=TINY_ENC, pooling="cls", normalize=True,
                       prompts=ST_QUERY_PROMPTS),
    "bert-mean": dict(kind="encoder", family="bert", arch="BertModel", tok="bert",
                      shape=TINY_ENC, pooling="mean", normalize=False,
                      position_ids_buffer=True),
    # Max pooling: served only with the example plug-in (examples/plugin).
    "bert-maxpool": dict(kind="encoder", family="bert", arch="BertModel",
                         tok="bert", shape=TINY_ENC, pooling="max",
                         normalize=True),
    "xlmr-embed": dict(kind="encoder", family="xlmr", arch="XLMRobertaModel",
                       tok="xlmr", shape=TINY_ENC, pooling="cls", normalize=True),
    # BGE-M3's layout: an XLM-R encoder (CLS, normalized) plus the sparse and
    # ColBERT heads as torch files, or as safetensors copies.
    "bge-m3": dict(kind="encoder", family="xlmr", arch="XLMRobertaModel",
                   tok="xlmr", shape=TINY_ENC, pooling="cls", normalize=True,
                   m3_heads="pt"),
    "bge-m3-st": dict(kind="encoder", family="xlmr", arch="XLMRobertaModel",
                      tok="xlmr", shape=TINY_ENC, pooling="cls", normalize=True,
                      m3_heads="safetensors"),
    # JinaBERT v2 (jina-embeddings-v2-small-en's layout: JinaBertModel,
    # BERT's config keys with ALiBi, mean pooling, normalized).
    "jina-embed": dict(kind="encoder", family="jina", arch="JinaBertModel",
                       tok="bert", shape=TINY_ENC, pooling="mean",
                       normalize=True),
    # MPNet (all-mpnet-base-v2's layout: MPNetForMaskedLM's config, the
    # encoder's tensors, mean pooling, normalized).
    "mpnet-embed": dict(kind="encoder", family="mpnet", arch="MPNetForMaskedLM",
                        tok="xlmr", shape=TINY_ENC, pooling="mean",
                        normalize=True),
    # NomicBERT (nomic-embed-text-v1.5's layout: remote-code config keys
    # and tensor names, mean pooling, normalized, task prompts).
    "nomic-embed": dict(kind="nomic", family="nomic", arch="NomicBertModel",
                        tok="bert", shape=TINY_ENC, pooling="mean",
                        normalize=True,
                        prompts={"query": "search_query: ",
                                 "document": "search_document: "}),
    # GTE "new" (gte-base-en-v1.5's layout: remote-code config with ntk
    # rope scaling, its tensor names, CLS pooling, normalized).
    "gte-embed": dict(kind="gte", family="gte", arch="NewModel", tok="bert",
                      shape=TINY_ENC, pooling="cls", normalize=True),
    # ModernBERT (modernbert-embed's layout: ModernBertModel, mean pooling,
    # normalized).
    "modernbert-embed": dict(kind="modernbert", family="modernbert",
                             arch="ModernBertModel", tok="bert",
                             shape=TINY_ENC, pooling="mean", normalize=True),
    # RoBERTa: XLM-RoBERTa's modeling under model_type "roberta".
    "roberta-embed": dict(kind="encoder", family="xlmr", arch="RobertaModel",
                          tok="xlmr", shape=TINY_ENC, pooling="mean",
                          normalize=True, extra={"model_type": "roberta"}),
    "roberta-classifier": dict(
        kind="encoder", family="xlmr", arch="RobertaForSequenceClassification",
        tok="xlmr", shape=TINY_ENC, head="xlmr",
        extra={"model_type": "roberta",
               "id2label": {"0": "contradiction", "1": "neutral",
                            "2": "entailment"},
               "label2id": {"contradiction": 0, "neutral": 1, "entailment": 2}}),
    "bert-classifier": dict(
        kind="encoder", family="bert", arch="BertForSequenceClassification",
        tok="bert", shape=TINY_ENC, head="bert",
        extra={"id2label": {"0": "negative", "1": "neutral", "2": "positive"},
               "label2id": {"negative": 0, "neutral": 1, "positive": 2},
               "problem_type": "single_label_classification"}),
    "bert-multilabel": dict(
        kind="encoder", family="bert", arch="BertForSequenceClassification",
        tok="bert", shape=TINY_ENC, head="bert",
        extra={"id2label": {"0": "sports", "1": "politics", "2": "science",
                            "3": "arts"},
               "label2id": {"sports": 0, "politics": 1, "science": 2, "arts": 3},
               "problem_type": "multi_label_classification"}),
    "xlmr-reranker": dict(
        kind="encoder", family="xlmr", arch="XLMRobertaForSequenceClassification",
        tok="xlmr", shape=TINY_ENC, head="xlmr",
        extra={"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}),
    "llama-tiny": dict(
        kind="decoder", family="llama", arch="LlamaForCausalLM", tok="llama",
        shape=dict(TINY_DEC, rope_theta=500000.0, max_pos=2048),
        extra={"rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8192,
                                "rope_type": "llama3"}}),
    # Llama 3.1-style scaling that reaches the short wavelengths of a tiny
    # model: an original context of 64 (wavelengths above 64 interpolated by
    # 8, 16..64 smoothed), so prompts of tens of tokens feel it.
    "llama31-tiny": dict(
        kind="decoder", family="llama", arch="LlamaForCausalLM", tok="llama",
        shape=dict(TINY_DEC, rope_theta=10000.0, max_pos=2048),
        extra={"rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 64,
                                "rope_type": "llama3"}}),
    # SmolLM3: 4 layers, so the 4th has no RoPE.
    "smollm3-tiny": dict(
        kind="decoder", family="smollm3", arch="SmolLM3ForCausalLM", tok="llama",
        shape=dict(TINY_DEC, layers=4, rope_theta=100000.0, max_pos=4096),
        extra={"tie_word_embeddings": True}),
    # Phi-3 / Phi-4-mini: fused projections, partial rotary (0.75: 12 of 16
    # dims), LongRoPE with an original context of 32 (longer prompts take
    # the long factors).
    "phi3-tiny": dict(
        kind="decoder", family="phi3", arch="Phi3ForCausalLM", tok="llama",
        shape=dict(TINY_DEC, rms_eps=1e-05, max_pos=4096, orig_max_pos=32,
                   partial_rotary=0.75)),
    # Gemma 2: every other layer sliding (window 8), head_dim 32 (not
    # hidden / heads = 16, like Gemma 2's 256 vs 2304 / 8) and
    # query_pre_attn_scalar = head_dim as llama.cpp assumes for GGUF files;
    # soft caps small enough to act.
    "gemma2-tiny": dict(
        kind="decoder", family="gemma2", arch="Gemma2ForCausalLM", tok="llama",
        shape=dict(TINY_DEC, layers=4, max_pos=8192, window=8, head_dim=32,
                   qpas=32, attn_cap=2.0, final_cap=100.0),
        extra={"tie_word_embeddings": True}),
    # Gemma 3 text (1B-style): q/k norms, layer 5 of 6 global with
    # rope_theta 1e6 and linear scaling, the others sliding (window 8) with
    # the local base 10000; query_pre_attn_scalar = head_dim, as llama.cpp
    # assumes for its GGUF files.
    "gemma3-tiny": dict(
        kind="decoder", family="gemma3_text", arch="Gemma3ForCausalLM",
        tok="llama",
        shape=dict(TINY_DEC, layers=6, max_pos=32768, window=8, qpas=16,
                   pattern=6, rope_theta=1000000.0),
        extra={"tie_word_embeddings": True}),
    "mistral-tiny": dict(
        kind="decoder", family="mistral", arch="MistralForCausalLM",
        tok="mistral", shape=dict(TINY_DEC, max_pos=4096),
        extra={"sliding_window": 16}),
    "qwen2-tiny": dict(
        kind="decoder", family="qwen2", arch="Qwen2ForCausalLM", tok="qwen2",
        shape=TINY_QWEN, extra={"tie_word_embeddings": True}),
    "qwen2-embed": dict(
        kind="decoder", family="qwen2", arch="Qwen2Model", tok="qwen2",
        shape=TINY_QWEN, pooling="lasttoken", normalize=True,
        prompts=QWEN_PROMPTS, extra={"tie_word_embeddings": False}),
    "qwen3-tiny": dict(
        kind="decoder", family="qwen3", arch="Qwen3ForCausalLM", tok="qwen2",
        shape=TINY_QWEN, extra={"tie_word_embeddings": True}),
    # A decoder reranker (Qwen3-Reranker's shape of model: a causal LM
    # served with task=rerank, scored by its "yes" / "no" logits).
    "qwen3-reranker-tiny": dict(
        kind="decoder", family="qwen3", arch="Qwen3ForCausalLM",
        tok="qwen2-rerank", shape=TINY_QWEN,
        extra={"tie_word_embeddings": True}),
    # bge-reranker-v2-gemma's layout: GemmaForCausalLM (Gemma 1), tied
    # embeddings, a tokenizer with "Yes".
    "gemma-reranker-tiny": dict(
        kind="decoder", family="gemma", arch="GemmaForCausalLM",
        tok="llama-rerank", shape=TINY_DEC,
        extra={"tie_word_embeddings": True}),
    "qwen3-embed": dict(
        kind="decoder", family="qwen3", arch="Qwen3Model", tok="qwen2",
        shape=TINY_QWEN, pooling="lasttoken", normalize=True,
        prompts=QWEN_PROMPTS, extra={"tie_word_embeddings": False}),
    # EmbeddingGemma's layout: Gemma3TextModel with
    # use_bidirectional_attention (a sliding layer then a global one; window
    # 8 -> keys within |i - j| < 5), mean pooling, two Dense projections,
    # normalized, task prompts.
    "embeddinggemma-tiny": dict(
        kind="decoder", family="gemma3_text", arch="Gemma3TextModel",
        tok="llama",
        shape=dict(TINY_DEC, layers=2, max_pos=2048, window=8, qpas=16,
                   pattern=2, rope_theta=1000000.0),
        pooling="mean", normalize=True, dense=(128, 64),
        prompts={"query": "task: search result | query: ",
                 "document": "title: none | text: "},
        extra={"use_bidirectional_attention": True,
               "tie_word_embeddings": True}),
    "mistral-embed": dict(
        kind="decoder", family="mistral", arch="MistralModel", tok="mistral",
        shape=dict(TINY_DEC, max_pos=4096), pooling="lasttoken", normalize=True,
        prompts=E5_PROMPTS, extra={"sliding_window": 4096}),
}

BENCH_SHAPES = {
    "minilm-l6": dict(kind="encoder", family="bert", arch="BertModel", tok="bert",
                      shape={"hidden": 384, "layers": 6, "heads": 12, "ffn": 1536},
                      pooling="mean", normalize=True, vocab=30522),
    "bert-base": dict(kind="encoder", family="bert", arch="BertModel", tok="bert",
                      shape={"hidden": 768, "layers": 12, "heads": 12, "ffn": 3072},
                      pooling="cls", normalize=True, vocab=30522),
    "tinyllama": dict(kind="decoder", family="llama", arch="LlamaForCausalLM",
                      tok="llama", default_dtype="bf16", vocab=32000,
                      shape={"hidden": 2048, "layers": 22, "heads": 32,
                             "kv_heads": 4, "ffn": 5632, "rms_eps": 1e-05,
                             "max_pos": 2048}),
}


def write_st_files(out_dir, spec, hidden, rng):
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    # Dense projections after pooling (EmbeddingGemma: 768 -> 3072 -> 768,
    # no bias, identity activation), each in <idx>_Dense.
    features = hidden
    for out_features in spec.get("dense", ()):
        idx = len(modules)
        path = "%d_Dense" % idx
        os.makedirs(os.path.join(out_dir, path), exist_ok=True)
        with open(os.path.join(out_dir, path, "config.json"), "w") as f:
            json.dump({"in_features": features, "out_features": out_features,
                       "bias": False,
                       "activation_function": "torch.nn.modules.linear.Identity"},
                      f, indent=2)
        weight = (rng.standard_normal((out_features, features), dtype=np.float32)
                  / np.float32(np.sqrt(features)))
        write_safetensors(os.path.join(out_dir, path, "model.safetensors"),
                          [("linear.weight", weight.shape, "f32")],
                          lambda n, w=weight: w)
        modules.append({"idx": idx, "name": str(idx), "path": path,
                        "type": "sentence_transformers.models.Dense"})
        features = out_features
    if spec.get("normalize"):
        idx = len(modules)
        modules.append({"idx": idx, "name": str(idx), "path": "%d_Normalize" % idx,
                        "type": "sentence_transformers.models.Normalize"})
        os.makedirs(os.path.join(out_dir, "%d_Normalize" % idx), exist_ok=True)
    with open(os.path.join(out_dir, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)
    os.makedirs(os.path.join(out_dir, "1_Pooling"), exist_ok=True)
    mode = spec["pooling"]
    pooling = {"word_embedding_dimension": hidden,
               "pooling_mode_cls_token": mode == "cls",
               "pooling_mode_mean_tokens": mode == "mean",
               "pooling_mode_max_tokens": mode == "max",
               "pooling_mode_mean_sqrt_len_tokens": False,
               "pooling_mode_weightedmean_tokens": False,
               "pooling_mode_lasttoken": mode == "lasttoken",
               "include_prompt": True}
    with open(os.path.join(out_dir, "1_Pooling", "config.json"), "w") as f:
        json.dump(pooling, f, indent=2)
    st = {"__version__": {"sentence_transformers": "3.0.1",
                          "transformers": TRANSFORMERS_VERSION,
                          "pytorch": "2.3.1"},
          "prompts": spec.get("prompts", {}), "default_prompt_name": None,
          "similarity_fn_name": "cosine"}
    with open(os.path.join(out_dir, "config_sentence_transformers.json"), "w") as f:
        json.dump(st, f, indent=2)
    max_len = 512 if spec["kind"] in ("encoder", "nomic", "gte", "modernbert") else 4096
    with open(os.path.join(out_dir, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": max_len,
                   "do_lower_case": False}, f, indent=2)


def build_model(name, spec, out_dir, dtype, shared_dir):
    os.makedirs(out_dir, exist_ok=True)
    tok, tok_source = install_tokenizer(out_dir, spec["tok"], shared_dir)
    vocab = spec.get("vocab") or max(tokenizer_vocab_size(tok), MIN_TEST_VOCAB)
    if spec["family"] in ("qwen2", "qwen3") and tok_source.startswith("shared"):
        vocab = max(vocab, 151936)  # Qwen2 checkpoints pad the embedding table
    extra = dict(spec.get("extra", {}))
    if spec["kind"] == "nomic":
        cfg = nomic_config(spec["arch"], vocab, spec["shape"], extra)
        specs = nomic_specs(cfg)
    elif spec["kind"] == "gte":
        cfg = gte_config(spec["arch"], vocab, spec["shape"], extra)
        specs = gte_specs(cfg)
    elif spec["kind"] == "modernbert":
        cfg = modernbert_config(spec["arch"], vocab, spec["shape"], extra)
        specs = modernbert_specs(cfg)
    elif spec["kind"] == "encoder":
        cfg = encoder_config(spec["arch"], spec["family"], vocab, spec["shape"], extra)
        head = spec.get("head")
        pooler = head != "xlmr"
        prefix = {"bert": "bert.", "xlmr": "roberta."}.get(head, "")
        specs = encoder_specs(cfg, prefix, pooler, head)
        if spec.get("position_ids_buffer"):
            specs.insert(1, (prefix + "embeddings.position_ids",
                             (1, cfg["max_position_embeddings"])))
    else:
        fam = spec["family"]
        ids = {}
        if fam in ("qwen2", "qwen3"):
            ids["bos_token_id"] = token_id(tok, "<|endoftext|>")
            ids["eos_token_id"] = token_id(tok, "<|endoftext|>" if spec["arch"].endswith("Model")
                                           else "<|im_end|>")
        else:
            ids["bos_token_id"] = token_id(tok, "<s>")
            ids["eos_token_id"] = token_id(tok, "</s>")
        extra = dict(ids, **extra)
        cfg = decoder_config(spec["arch"], fam, vocab, spec["shape"], extra)
        specs = decoder_specs(cfg, fam, spec["arch"].endswith("ForCausalLM"))
    cfg["torch_dtype"] = "bfloat16" if dtype == "bf16" else "float32"
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    hidden = cfg.get("hidden_size", cfg.get("n_embd"))

    rng = np.random.default_rng(zlib.crc32(name.encode()))
    dtypes = [(n, s, "i64" if n.endswith("position_ids") else dtype) for n, s in specs]
    shapes = dict(specs)
    encoder = spec["kind"] in ("encoder", "nomic", "gte", "modernbert")
    write_safetensors(os.path.join(out_dir, "model.safetensors"), dtypes,
                      lambda n: init_tensor(rng, n, shapes[n], encoder))
    if "pooling" in spec:
        write_st_files(out_dir, spec, hidden, rng)
    if spec.get("m3_heads"):
        write_m3_heads(out_dir, hidden, rng, spec["m3_heads"])
    return tok_source


def stamp_for(name, spec, dtype, shared_dir):
    h = hashlib.sha256()
    with open(os.path.abspath(__file__), "rb") as f:
        h.update(f.read())
    folder = TOKENIZERS[spec["tok"]][0]
    has_shared = bool(shared_dir) and os.path.isfile(
        os.path.join(shared_dir, "tokenizers", folder, "tokenizer.json"))
    h.update(json.dumps([name, dtype, has_shared]).encode())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default=None,
                    help="weight dtype (default f32; tinyllama bf16)")
    ap.add_argument("--shape", choices=["tiny"] + sorted(BENCH_SHAPES), default="tiny")
    ap.add_argument("--shared", default=None,
                    help="copy real tokenizers from DIR/tokenizers (optional)")
    ap.add_argument("--force", action="store_true", help="regenerate everything")
    args = ap.parse_args()

    models = MODELS if args.shape == "tiny" else {args.shape: BENCH_SHAPES[args.shape]}
    names = list(models)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in models]
        if unknown:
            sys.exit("unknown model(s) %s; known: %s" % (unknown, ", ".join(models)))
    shared = args.shared if args.shared and os.path.isdir(args.shared) else None
    os.makedirs(args.out, exist_ok=True)
    for name in names:
        spec = models[name]
        dtype = args.dtype or spec.get("default_dtype", "f32")
        out_dir = os.path.join(args.out, name)
        stamp = stamp_for(name, spec, dtype, shared)
        stamp_path = os.path.join(out_dir, STAMP)
        if not args.force and os.path.isfile(stamp_path):
            with open(stamp_path) as f:
                if f.read().strip() == stamp:
                    print("%-16s up to date" % name)
                    continue
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        t0 = time.time()
        source = build_model(name, spec, out_dir, dtype, shared)
        with open(stamp_path, "w") as f:
            f.write(stamp + "\n")
        print("%-16s written (%s, tokenizer %s, %.1fs)" % (name, dtype, source,
                                                         time.time() - t0))


if __name__ == "__main__":
    main()
