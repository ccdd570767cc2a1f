#!/usr/bin/env python3
"""Differential test: inferd's GGUF tokenizer (runtime/loader/gguf_tokenizer.h)
against transformers' own GGUF tokenizer conversion, id for id.

Reference: transformers' `get_gguf_tokenizer` (its GGUF metadata reader) and
`LlamaTokenizer.from_pretrained(dir, gguf_file=...)`, the class AutoTokenizer
picks for `general.architecture = llama`. transformers' reader module imports
torch at the top only for tensor loading; the venv has no torch, so that
module is loaded with a placeholder `torch` (never called: only metadata is
read).

GGUF files checked:
  * the real SmolLM2-135M-Instruct GGUF (gpt2 / pre smollm), when present
    (scripts/fetch-models.sh);
  * files this test writes with the `gguf` package (tokenizer metadata plus a
    dummy tensor): the SmolLM2 vocabulary and merges re-labelled pre=llama-bpe
    and pre=qwen2 (with user-defined tokens, eot id, add_eos), and
    stories260K (examples/models/stories260K, a real llama SentencePiece BPE
    vocabulary) as tokenizer.ggml.model=llama with scores that order its
    merges, byte tokens, control and user-defined tokens.

Where llama.cpp and transformers disagree inferd follows llama.cpp (it defines
what a GGUF means), and the reference is adjusted in the same way, stated per
case below: transformers keeps GPT-2's pre-tokenizer for pre types it
does not list (smollm splits digits one by one in llama.cpp and in SmolLM2's
own tokenizer.json), never sets BPE ignore_merges (llama.cpp sets it for
llama-bpe, as Llama 3's tokenizer.json does), and appends GPT2Tokenizer's
default "<|endoftext|>" past the vocabulary when the vocabulary lacks it.
The unadjusted mismatch count is printed too.

  * the real all-MiniLM-L6-v2 WordPiece vocabulary (build/models, from
    scripts/fetch-models.sh) written as a `bert` GGUF the way
    convert_hf_to_gguf's BertModel.set_vocab does (control tokens verbatim,
    "##x" as "x", other tokens as "\u2581x"; special ids and add_* flags from
    gguf.SpecialVocab). transformers' GGUF integration has no converter for
    `bert` vocabularies, so here the reference is the model's own
    tokenizer.json (the `tokenizers` package): the GGUF round trip must
    give back the original tokenizer, ids and decoded text.
  * optionally (--shared DIR or $INFERD_SHARED_DIR), the real Llama 3 and
    Qwen3 tokenizer.json files there, written as gpt2 GGUFs (llama-bpe,
    qwen2) the way convert_hf_to_gguf.py does; skipped when absent.

usage: gguf_tokenizer_diff_test.py --cli BIN --models DIR [--shared DIR]
       [--count N]
Run with the venv's Python (build/venv/bin/python).
"""
import argparse
import importlib.util
import json
import logging
import os
import subprocess
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "tokenizer_diff"))
from tokenizer_diff_test import corpus  # noqa: E402  (the shared generator)

SMOLLM_GGUF = os.path.join("smollm2-135m-instruct",
                           "SmolLM2-135M-Instruct.Q4_1.gguf")
STORIES = os.path.join(ROOT, "examples", "models", "stories260K")

# Extra texts aimed at what GGUF conversion touches.
EXTRA = [
    "<think>reason</think> answer", "a<think>b", "<tool> call <tool>",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<s>hello</s>", " <s> </s> <unk>", "x² ½ ¾ 10½ Ⅻ ٣٤٥ १२३",
    "1234567 12 123 1234", " 1 22 333 4444 55555", "I'm you're we'll they'd IT'S",
    "   ", "\t\t", "\n \n", "café\u0301", "\u2581already\u2581metaspace",
    "<0x41> <0x0A>", "emoji 🤖🤖", "tail space ", " lead",
]


def load_transformers():
    """transformers with its GGUF reader importable without torch."""
    import transformers  # noqa: F401
    import transformers.integrations.gguf as tg
    pkg = os.path.dirname(tg.__file__)
    placeholder = types.ModuleType("torch")
    placeholder.__getattr__ = lambda name: object
    had = sys.modules.get("torch")
    sys.modules["torch"] = placeholder
    try:
        for name in ("dequant", "reader"):
            full = "transformers.integrations.gguf." + name
            spec = importlib.util.spec_from_file_location(
                full, os.path.join(pkg, name + ".py"))
            module = importlib.util.module_from_spec(spec)
            sys.modules[full] = module
            spec.loader.exec_module(module)
    finally:
        if had is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = had
    return transformers


def reference(path, adjust):
    from tokenizers import Regex, pre_tokenizers
    from transformers import LlamaTokenizer
    tok = LlamaTokenizer.from_pretrained(os.path.dirname(path),
                                         gguf_file=os.path.basename(path))
    backend = tok.backend_tokenizer
    raw = type(backend).from_str(backend.to_str())
    if adjust.get("digits"):
        backend.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    j = json.loads(backend.to_str())
    if adjust.get("ignore_merges"):
        j["model"]["ignore_merges"] = True
    # GPT2Tokenizer's default special token "<|endoftext|>" gets appended
    # past the file's vocabulary when the vocabulary lacks it (a token the
    # model has no embedding for); inferd adds no such token.
    n = len(read_fields(path)["tokenizer.ggml.tokens"])
    extra = [a for a in j["added_tokens"] if a["id"] >= n]
    if extra:
        adjust["beyond-vocab " + ",".join(a["content"] for a in extra)] = True
        j["added_tokens"] = [a for a in j["added_tokens"] if a["id"] < n]
    backend = type(backend).from_str(json.dumps(j))
    for t in (backend, raw):
        t.no_truncation()
        t.no_padding()
    config = {"bos_token": tok.bos_token, "eos_token": tok.eos_token,
              "unk_token": tok.unk_token, "pad_token": tok.pad_token,
              "add_bos_token": bool(tok.add_bos_token),
              "add_eos_token": bool(tok.add_eos_token),
              "chat_template": tok.chat_template or ""}
    return backend, raw, config


def encode_all(tok, texts):
    out = []
    for t in texts:
        plain = tok.encode(t, add_special_tokens=False).ids
        special = tok.encode(t, add_special_tokens=True).ids
        out.append((plain, special, tok.decode(plain, skip_special_tokens=False)))
    return out


def run_cli(cli, path, texts):
    data = "".join(json.dumps(t) + "\n" for t in texts)
    p = subprocess.run([cli, path], input=data.encode(), capture_output=True,
                       timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"{cli} {path}: {p.stderr.decode()[-2000:]}")
    lines = p.stdout.decode().split("\n")
    config = json.loads(lines[0])
    answers = [json.loads(l) for l in lines[1:] if l]
    if len(answers) != len(texts):
        raise RuntimeError(f"{len(answers)} answers for {len(texts)} texts")
    return config, answers


# ---------------------------------------------------------------- GGUF files

def read_fields(path):
    from gguf import GGUFReader
    r = GGUFReader(path)
    out = {}
    for name, field in r.fields.items():
        if name.startswith("tokenizer.") or name == "general.architecture":
            out[name] = field.contents()
    return out


def write_gguf(path, meta):
    import numpy as np
    from gguf import GGUFWriter, TokenType  # noqa: F401
    w = GGUFWriter(path, "llama")
    w.add_tokenizer_model(meta["model"])
    if meta.get("pre") is not None:
        w.add_tokenizer_pre(meta["pre"])
    w.add_token_list(meta["tokens"])
    if meta.get("scores") is not None:
        w.add_token_scores(meta["scores"])
    w.add_token_types(meta["types"])
    if meta.get("merges"):
        w.add_token_merges(meta["merges"])
    for key, fn in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id),
                    ("unk", w.add_unk_token_id), ("pad", w.add_pad_token_id),
                    ("eot", w.add_eot_token_id)):
        if meta.get(key) is not None:
            fn(meta[key])
    if meta.get("add_bos") is not None:
        w.add_add_bos_token(meta["add_bos"])
    if meta.get("add_eos") is not None:
        w.add_add_eos_token(meta["add_eos"])
    if meta.get("add_space_prefix") is not None:
        w.add_add_space_prefix(meta["add_space_prefix"])
    if meta.get("chat_template"):
        w.add_chat_template(meta["chat_template"])
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def smollm_relabelled(src, pre, add_bos, add_eos):
    f = read_fields(src)
    tokens = list(f["tokenizer.ggml.tokens"])
    types_ = [int(t) for t in f["tokenizer.ggml.token_type"]]
    # User-defined tokens (type 4): matched whole, not special.
    for extra in ("<think>", "</think>"):
        tokens.append(extra)
        types_.append(4)
    return {
        "model": "gpt2", "pre": pre, "tokens": tokens, "types": types_,
        "merges": list(f["tokenizer.ggml.merges"]),
        "bos": int(f["tokenizer.ggml.bos_token_id"]),
        "eos": int(f["tokenizer.ggml.eos_token_id"]),
        "unk": int(f["tokenizer.ggml.unknown_token_id"]),
        "pad": int(f["tokenizer.ggml.padding_token_id"]),
        "eot": 2, "add_bos": add_bos, "add_eos": add_eos,
        "chat_template": "{{ messages }}",
    }


def stories_spm():
    """stories260K's vocabulary as a llama (SentencePiece) GGUF: a merged
    token's score is minus its merge rank, so merges derived from the scores
    (as llama.cpp and transformers do) come back in the original order."""
    with open(os.path.join(STORIES, "tokenizer.json"), encoding="utf-8") as fh:
        tj = json.load(fh)
    vocab = tj["model"]["vocab"]
    tokens = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    rank = {}
    for n, m in enumerate(tj["model"]["merges"]):
        a, b = m.split(" ") if isinstance(m, str) else m
        rank.setdefault(a + b, n)
    scores, types_ = [], []
    for t in tokens:
        scores.append(-float(rank[t] + 1) if t in rank else -1e4)
        if t == "<unk>":
            types_.append(2)
        elif t in ("<s>", "</s>"):
            types_.append(3)
        elif len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            types_.append(6)
        else:
            types_.append(1)
    tokens.append("<tool>")  # user-defined
    scores.append(0.0)
    types_.append(4)
    return {"model": "llama", "tokens": tokens, "scores": scores,
            "types": types_, "bos": 1, "eos": 2, "unk": 0,
            "add_space_prefix": True}


def hf_bytelevel_as_gguf(folder, pre, add_bos):
    """A byte-level BPE tokenizer.json as convert_hf_to_gguf.py writes it:
    tokens by id, added special tokens as control (3), other added tokens as
    user-defined (4)."""
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as fh:
        tj = json.load(fh)
    with open(os.path.join(folder, "tokenizer_config.json"),
              encoding="utf-8") as fh:
        tc = json.load(fh)
    ids = dict(tj["model"]["vocab"])
    types = {}
    for a in tj["added_tokens"]:
        ids[a["content"]] = a["id"]
        types[a["id"]] = 3 if a["special"] else 4
    n = max(ids.values()) + 1
    tokens = [f"[PAD{i}]" for i in range(n)]
    for t, i in ids.items():
        tokens[i] = t
    merges = [m if isinstance(m, str) else " ".join(m)
              for m in tj["model"]["merges"]]

    def token_id(name):
        v = tc.get(name)
        if isinstance(v, dict):
            v = v.get("content")
        return ids.get(v) if v is not None else None

    return {"model": "gpt2", "pre": pre, "tokens": tokens,
            "types": [types.get(i, 1) for i in range(n)], "merges": merges,
            "bos": token_id("bos_token"), "eos": token_id("eos_token"),
            "pad": token_id("pad_token"), "add_bos": add_bos,
            "add_eos": False}


def write_bert_gguf(folder, path):
    """`folder`'s WordPiece tokenizer.json as a llama.cpp `bert` GGUF."""
    import numpy as np
    from gguf import GGUFWriter, SpecialVocab, TokenType
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as fh:
        tj = json.load(fh)
    ids = dict(tj["model"]["vocab"])
    types = {}
    for a in tj["added_tokens"]:
        ids[a["content"]] = a["id"]
        types[a["id"]] = (TokenType.CONTROL if a["special"]
                          else TokenType.USER_DEFINED)
    n = max(ids.values()) + 1
    tokens = [f"[PAD{i}]" for i in range(n)]
    for t, i in ids.items():
        tokens[i] = t
    ttypes = [types.get(i, TokenType.NORMAL) for i in range(n)]
    spelt = [t if tt == TokenType.CONTROL else
             t[2:] if t.startswith("##") else "\u2581" + t
             for t, tt in zip(tokens, ttypes)]
    w = GGUFWriter(path, "bert")
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("default")
    w.add_token_list(spelt)
    w.add_token_types(ttypes)
    # gguf-py has no writer for the cls id (llama.cpp uses bos as CLS).
    logging.getLogger("gguf.vocab").setLevel(logging.ERROR)
    SpecialVocab(folder, n_vocab=n).add_to_gguf(w, quiet=True)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def compare_with_tokenizer_json(name, cli, path, folder, texts, failures):
    from tokenizers import Tokenizer
    ref = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    ref.no_truncation()
    ref.no_padding()
    want = encode_all(ref, texts)
    config, got = run_cli(cli, path, texts)
    mism = dec_mism = errors = 0
    examples = []
    for text, w, g in zip(texts, want, got):
        if "error" in g:
            errors += 1
            examples.append((text, "error", g["error"]))
        elif g["ids"] != w[0] or g["special"] != w[1]:
            mism += 1
            if len(examples) < 5:
                examples.append((text, w[:2], (g["ids"], g["special"])))
        elif g.get("decoded") != w[2]:
            dec_mism += 1
            if len(examples) < 5:
                examples.append((text, w[2], g.get("decoded")))
    with open(os.path.join(folder, "tokenizer_config.json"),
              encoding="utf-8") as fh:
        tc = json.load(fh)
    config_diffs = [k for k in ("unk_token", "pad_token")
                    if config.get(k) != tc.get(k)]
    print(f"  {name:26s} {len(texts)} texts: {mism} id mismatches, "
          f"{dec_mism} decode mismatches, {errors} errors"
          + (f"; config differs on {config_diffs}" if config_diffs else ""))
    for ex in examples:
        print(f"      {ex!r}"[:600])
    if mism or dec_mism or errors or config_diffs:
        failures.append(name)


# ---------------------------------------------------------------- main

def compare(name, cli, path, texts, adjust, failures):
    ref, raw, ref_config = reference(path, adjust)
    want = encode_all(ref, texts)
    config, got = run_cli(cli, path, texts)
    mism = dec_mism = errors = 0
    examples = []
    for text, w, g in zip(texts, want, got):
        if "error" in g:
            errors += 1
            examples.append((text, "error", g["error"]))
            continue
        if g["ids"] != w[0] or g["special"] != w[1]:
            mism += 1
            if len(examples) < 5:
                examples.append((text, w[:2], (g["ids"], g["special"])))
        elif g.get("decoded") != w[2]:
            dec_mism += 1
            if len(examples) < 5:
                examples.append((text, w[2], g.get("decoded")))
    raw_mism = 0
    if adjust:
        raw_want = encode_all(raw, texts)
        raw_mism = sum(1 for r, g in zip(raw_want, got)
                       if "error" in g or r[0] != g["ids"] or r[1] != g["special"])
    config_diffs = [k for k, v in ref_config.items() if config.get(k) != v]
    print(f"  {name:26s} {len(texts)} texts: {mism} id mismatches, "
          f"{dec_mism} decode mismatches, {errors} errors"
          + (f"; vs unadjusted transformers {raw_mism} id mismatches "
             f"({', '.join(sorted(adjust))})" if adjust else "")
          + (f"; config differs on {config_diffs}" if config_diffs else ""))
    for ex in examples:
        print(f"      {ex!r}"[:600])
    if config_diffs:
        for k in config_diffs:
            print(f"      {k}: inferd {config.get(k)!r} vs {ref_config[k]!r}"[:300])
    if mism or dec_mism or errors or config_diffs:
        failures.append(name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--shared", default=os.environ.get("INFERD_SHARED_DIR"),
                    help="optional: real tokenizers under DIR/tokenizers")
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=20261124)
    args = ap.parse_args()
    # CI's second pass hides ../shared through the environment.
    if "INFERD_SHARED_DIR" in os.environ:
        args.shared = os.environ["INFERD_SHARED_DIR"]
    try:
        tr = load_transformers()
        import gguf  # noqa: F401
    except ImportError as e:
        print(f"FAIL: this Python lacks transformers/gguf ({e}); run it with "
              "build/venv/bin/python (scripts/python-deps.sh)")
        return 1
    texts = corpus(args.count, args.seed) + EXTRA
    print(f"transformers {tr.__version__}; {len(texts)} texts "
          f"(seed {args.seed})")
    smollm = os.path.join(args.models, SMOLLM_GGUF)
    if not os.path.isfile(smollm):
        print(f"FAIL: {smollm} absent (scripts/fetch-models.sh fetches it)")
        return 1
    failures = []
    with tempfile.TemporaryDirectory(prefix="inferd_gguf_tok_") as tmp:
        cases = [("SmolLM2 (gpt2/smollm)", smollm, {"digits": True})]
        for pre, add_bos, add_eos, adjust in (
                ("llama-bpe", True, False, {"ignore_merges": True}),
                ("qwen2", False, True, {})):
            path = os.path.join(tmp, pre, f"smollm-vocab-{pre}.gguf")
            os.makedirs(os.path.dirname(path))
            write_gguf(path, smollm_relabelled(smollm, pre, add_bos, add_eos))
            cases.append((f"SmolLM2 vocab as {pre}", path, adjust))
        path = os.path.join(tmp, "stories", "stories260K-spm.gguf")
        os.makedirs(os.path.dirname(path))
        write_gguf(path, stories_spm())
        cases.append(("stories260K (llama SPM)", path, {}))
        # Optional: real Llama 3 and Qwen3 vocabularies when ../shared has
        # them (not required; the test passes without).
        for folder, pre, add_bos, adjust in (
                ("llama3", "llama-bpe", True, {"ignore_merges": True}),
                ("qwen3", "qwen2", False, {})):
            src = os.path.join(args.shared or "", "tokenizers", folder)
            if not args.shared or not os.path.isfile(
                    os.path.join(src, "tokenizer.json")):
                print(f"  {folder + ' (' + pre + ')':26s} skipped: "
                      f"{src} absent")
                continue
            path = os.path.join(tmp, folder, f"{folder}.gguf")
            os.makedirs(os.path.dirname(path))
            write_gguf(path, hf_bytelevel_as_gguf(src, pre, add_bos))
            cases.append((f"{folder} vocab as {pre}", path, adjust))
        for name, path, adjust in cases:
            compare(name, args.cli, path, texts, adjust, failures)
        minilm = os.path.join(args.models, "all-minilm-l6-v2")
        if not os.path.isfile(os.path.join(minilm, "tokenizer.json")):
            print(f"FAIL: {minilm} absent (scripts/fetch-models.sh fetches it)")
            return 1
        path = os.path.join(tmp, "minilm", "all-minilm-l6-v2-bert.gguf")
        os.makedirs(os.path.dirname(path))
        write_bert_gguf(minilm, path)
        compare_with_tokenizer_json("all-MiniLM-L6-v2 (bert)", args.cli,
                                    path, minilm, texts, failures)
    if failures:
        print(f"FAIL: {', '.join(failures)}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
