#!/usr/bin/env python3
"""Differential test: inferd's tokenizer against the Hugging Face `tokenizers`
library (PyPI, pinned in scripts/python-requirements.txt), id for id.

A generated corpus (prose, code, whitespace runs, accents, CJK, emoji, mixed
scripts, random Unicode; deterministic) is encoded by both, without and with
special tokens, and the encodings are compared; decoding of the ids is
compared too. Every tokenizer.json the tests have is checked: the real
all-MiniLM-L6-v2 (fetched by scripts/fetch-models.sh), stories260K (in the
repository) and, when ../shared is present, the real tokenizers there
(llama2, llama3, mistral, qwen3, roberta-base, t5-small, bert-base-uncased,
xlm-roberta); the ones that are absent are listed as skipped.

usage: tokenizer_diff_test.py --cli BIN --minilm DIR [--shared DIR]
       [--count N] [--seed S]
Run it with the venv's Python (build/venv/bin/python), which has
`tokenizers`.
"""
import argparse
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

PROSE = [
    "Once upon a time, there was a little girl named Lily.",
    "The quick brown fox jumps over the lazy dog.",
    "What is the capital of France? Paris is the capital of France.",
    "Machine learning models turn text into numbers, and numbers into text.",
    "I can't believe it's not butter! She said: \"don't\" -- twice.",
    "Prices rose 3.5% in 2024; the CEO's e-mail (ceo@example.com) said so.",
    "naïve café résumé coöperate façade Ångström jalapeño São Paulo Zürich",
    "Straße, ﬁnance, Ⅻ, ２０２４, ｆｕｌｌ ｗｉｄｔｈ, ﬀ ligatures",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.",
    "Привет, мир! Γειά σου Κόσμε! مرحبا بالعالم שלום עולם नमस्ते दुनिया",
    "สวัสดีชาวโลก Xin chào thế giới ສະບາຍດີ ជំរាបសួរ",
    "emoji 😀🎉👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ ✨ 🤖 and text",
    "   leading spaces, trailing spaces   ",
    "tabs\tand\nnewlines\r\nand \u00a0no-break\u2009thin\u200bzero-width",
    "",
    " ",
    "\n\n\n",
    "a",
    "A.B.C. U.S.A. e.g. i.e. etc.",
    "1234567890 3.14159 -42 +7 1e10 0x1F 1,000,000",
]

CODE = [
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name;",
    "<div class=\"box\">Hello &amp; welcome</div>",
    "const re = /^[a-z0-9_-]{3,16}$/; // username",
    "    if (err != nil) {\n\t\treturn fmt.Errorf(\"x: %w\", err)\n\t}",
    "{\"key\": [1, 2, {\"nested\": null}], \"b\": true}",
    "$ curl -sSL https://example.com/install.sh | bash -s -- --yes",
    "x=1;y=2;z=x+y;print(z)",
    "#include <vector>\nint main() { return 0; }\n",
]

WORDS = ("the of and to in is that it was for on are as with his they at be "
         "this have from or one had by word but not what all were we when "
         "your can said there use an each which she do how their if will up "
         "other about out many then them these so some her would make like "
         "him into time has look two more write go see number no way could "
         "people my than first water been call who oil its now find long down "
         "day did get come made may part tokenization embedding retrieval "
         "reranking unbelievable antidisestablishmentarianism").split()

SPECIAL_CHUNKS = ["<s>", "</s>", "<unk>", "[CLS]", "[SEP]", "[MASK]", "<pad>",
                  "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<mask>"]


def random_unicode(r, n):
    out = []
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF),
              (0x590, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x3040, 0x30FF),
              (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x1F300, 0x1FAFF),
              (0x2000, 0x206F), (0xFF00, 0xFFEF), (0x0300, 0x036F)]
    for _ in range(n):
        if r.random() < 0.05:
            cp = r.randint(0x20, 0x10FFFF)
        else:
            lo, hi = r.choice(ranges)
            cp = r.randint(lo, hi)
        if 0xD800 <= cp <= 0xDFFF:  # surrogates are not text
            cp = 0x20
        out.append(chr(cp))
    return "".join(out)


def corpus(count, seed):
    r = random.Random(seed)
    texts = list(PROSE) + list(CODE)
    while len(texts) < count:
        kind = r.random()
        if kind < 0.3:
            s = " ".join(r.choice(WORDS) for _ in range(r.randint(1, 40)))
            if r.random() < 0.5:
                s = s.capitalize() + r.choice([".", "!", "?", "", ","])
        elif kind < 0.45:
            s = r.choice(CODE)
            s = s.replace("x", r.choice(["value", "y", "πr", "über"]))
        elif kind < 0.55:
            ws = ["", " ", "  ", "   ", "\t", "\n", " \n ", "\r\n", "\u3000"]
            s = "".join(r.choice(ws) + r.choice(WORDS) for _ in range(r.randint(1, 12)))
            s += r.choice(ws)
        elif kind < 0.7:
            s = random_unicode(r, r.randint(1, 30))
        elif kind < 0.8:
            a, b = r.choice(PROSE), r.choice(PROSE)
            cut = r.randint(0, len(a))
            s = a[:cut] + b[cut % (len(b) + 1):]
        elif kind < 0.88:
            parts = [r.choice(WORDS) for _ in range(r.randint(1, 6))]
            pos = r.randint(0, len(parts))
            parts.insert(pos, r.choice(SPECIAL_CHUNKS))
            s = r.choice([" ", ""]).join(parts)
        elif kind < 0.95:
            s = "".join(r.choice("0123456789.,-+ %$€") for _ in range(r.randint(1, 25)))
        else:
            s = r.choice(WORDS) * r.randint(1, 30)
        texts.append(s)
    return texts[:count]


def pair_merges(data):
    """tokenizer.json text with BPE merges written as [left, right] pairs.
    Older files write a merge as one string "left right"; a merge whose
    tokens contain a space (llama2 has three, of tokens made of raw spaces)
    is ambiguous in that form and the `tokenizers` library refuses the
    file. The split kept is the one whose halves and join are all in the
    vocabulary: the same merge, unambiguously spelled."""
    t = json.loads(data)
    model = t.get("model", {})
    vocab = model.get("vocab")
    merges = model.get("merges")
    if model.get("type") != "BPE" or not isinstance(vocab, dict) or not merges:
        return None
    out = []
    for m in merges:
        if not isinstance(m, str):
            out.append(m)
            continue
        splits = [(m[:i], m[i + 1:]) for i, c in enumerate(m) if c == " "]
        good = [(a, b) for a, b in splits if a in vocab and b in vocab and a + b in vocab]
        if len(good) != 1:
            raise ValueError(f"merge {m!r} has {len(good)} valid splits")
        out.append(list(good[0]))
    model["merges"] = out
    return json.dumps(t)


def hf_encode(path, texts):
    from tokenizers import Tokenizer
    try:
        tok = Tokenizer.from_file(path)
    except Exception:  # noqa: BLE001 — retried with unambiguous merges
        with open(path, encoding="utf-8") as f:
            fixed = pair_merges(f.read())
        if fixed is None:
            raise
        tok = Tokenizer.from_str(fixed)
        print(f"  ({os.path.basename(os.path.dirname(path))}: merges given "
              "to tokenizers as [left, right] pairs)")
    tok.no_truncation()
    tok.no_padding()
    out = []
    for t in texts:
        plain = tok.encode(t, add_special_tokens=False).ids
        special = tok.encode(t, add_special_tokens=True).ids
        out.append((plain, special, tok.decode(plain, skip_special_tokens=False)))
    return out


def inferd_encode(cli, path, texts):
    data = "".join(json.dumps(t) + "\n" for t in texts)
    p = subprocess.run([cli, path], input=data.encode(), capture_output=True,
                       timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{cli} {path} failed: {p.stderr.decode()[-2000:]}")
    lines = p.stdout.decode().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != len(texts):
        raise RuntimeError(f"{len(lines)} answers for {len(texts)} texts")
    return [json.loads(l) for l in lines]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--minilm", required=True)
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=20261123)
    args = ap.parse_args()
    shared = os.environ.get("INFERD_SHARED_DIR") or args.shared
    try:
        import tokenizers
    except ImportError:
        print("FAIL: the Python running this test has no `tokenizers`; run it "
              "with build/venv/bin/python (scripts/python-deps.sh)")
        return 1

    candidates = [
        ("all-MiniLM-L6-v2", os.path.join(args.minilm, "tokenizer.json")),
        ("sre-embedding", os.path.join(os.path.dirname(args.minilm.rstrip("/")),
                                       "sre-embedding-minilm", "tokenizer.json")),
        ("stories260K", os.path.join(ROOT, "examples", "models", "stories260K",
                                     "tokenizer.json")),
    ]
    for name in ("bert-base-uncased", "llama2", "llama3", "mistral", "qwen3",
                 "roberta-base", "t5-small", "xlm-roberta"):
        candidates.append((name, os.path.join(shared, "tokenizers", name,
                                              "tokenizer.json")))
    texts = corpus(args.count, args.seed)
    print(f"tokenizers {tokenizers.__version__}; corpus of {len(texts)} texts "
          f"(seed {args.seed})")
    failures = 0
    checked = 0
    for name, path in candidates:
        if not os.path.isfile(path):
            print(f"  {name:18s} skipped: {path} absent")
            if name in ("all-MiniLM-L6-v2", "sre-embedding"):
                print(f"FAIL: the {name} tokenizer is required "
                      "(scripts/fetch-models.sh fetches it)")
                return 1
            continue
        try:
            want = hf_encode(path, texts)
        except Exception as e:  # noqa: BLE001
            print(f"  {name:18s} FAIL: tokenizers {tokenizers.__version__} "
                  f"cannot load {path}: {e}")
            failures += 1
            continue
        got = inferd_encode(args.cli, path, texts)
        bad_ids = bad_special = bad_decode = 0
        examples = []
        for text, (plain, special, decoded), g in zip(texts, want, got):
            if "error" in g:
                bad_ids += 1
                examples.append(f"{text!r}: inferd error {g['error']}")
                continue
            if g["ids"] != plain:
                bad_ids += 1
                examples.append(f"{text!r}: hf {plain[:20]} inferd {g['ids'][:20]}")
            if g["special"] != special:
                bad_special += 1
                examples.append(f"{text!r} (special): hf {special[:20]} "
                                f"inferd {g['special'][:20]}")
            if g.get("decoded") != decoded:
                bad_decode += 1
                examples.append(f"{text!r} (decode): hf {decoded!r} "
                                f"inferd {g.get('decoded')!r}")
        checked += 1
        status = "ok" if not (bad_ids or bad_special or bad_decode) else "FAIL"
        print(f"  {name:18s} {status}: {len(texts)} texts, id mismatches "
              f"{bad_ids} (+special {bad_special}), decode mismatches "
              f"{bad_decode}")
        for e in examples[:8]:
            print("      " + e)
        if status != "ok":
            failures += 1
    print(f"{checked} tokenizer(s) compared, {failures} with mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
