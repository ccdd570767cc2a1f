#!/usr/bin/env python3
"""Models by their Hugging Face names, from the Hugging Face cache
(runtime/loader/hf_cache.h): a cache laid out as huggingface_hub writes it
(blobs, snapshots/<commit> symlinks, refs/main) holding a tiny model, which

- huggingface_hub itself (build/venv) reads back: scan_cache_dir lists the
  repo at that commit, hf_hub_download(local_files_only=True) and
  snapshot_download(local_files_only=True) resolve to the snapshot inferd
  serves;
- inferd serves as `--model tiny=org/tiny` (HF_HUB_CACHE pointing at it)
  with the same greedy tokens as from the model's own directory, and as
  `org/tiny@v1` (a tag in refs/);
- huggingface_hub's snapshot_download from a local Hub (hub_server.py, the
  Hub's HTTP API over a directory) fills the same cache, and inferd serves
  what it fetched (HF_HUB_OFFLINE=1);
- a name missing from the cache is a FAILED model naming what is missing
  and how to fetch it, while the others serve.

usage: hf_cache_serve_test.py --inferd BIN --stubs DIR --test-models DIR
       --venv-python PY
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import inferd_testlib as lib  # noqa: E402

COMMIT = "3f1c2a9b7d5e4f60718293a4b5c6d7e8f9012345"


def write_cache(cache, repo, src):
    """models--org--repo as huggingface_hub lays it out."""
    d = os.path.join(cache, "models--" + repo.replace("/", "--"))
    os.makedirs(os.path.join(d, "blobs"))
    os.makedirs(os.path.join(d, "refs"))
    snap = os.path.join(d, "snapshots", COMMIT)
    os.makedirs(snap)
    for name in sorted(os.listdir(src)):
        path = os.path.realpath(os.path.join(src, name))
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        blob = hashlib.sha256(data).hexdigest()
        with open(os.path.join(d, "blobs", blob), "wb") as f:
            f.write(data)
        os.symlink(os.path.join("..", "..", "blobs", blob),
                   os.path.join(snap, name))
    for ref in ("main", "v1"):
        with open(os.path.join(d, "refs", ref), "w") as f:
            f.write(COMMIT)
    return snap


# huggingface_hub fetches a repo from the local Hub (hub_server.py) into the
# cache, as a user's `hf download` would.
HUB_FETCH = r'''
import os, sys
sys.path.insert(0, sys.argv[1])
from hub_server import HubServer
hub = HubServer({"org/hubtiny": sys.argv[3]})
os.environ["HF_ENDPOINT"] = hub.start()
from huggingface_hub import snapshot_download
print(snapshot_download("org/hubtiny", cache_dir=sys.argv[2]))
hub.stop()
'''

HF_CHECK = r'''
import json, sys
from huggingface_hub import scan_cache_dir, hf_hub_download, snapshot_download
cache, repo = sys.argv[1], sys.argv[2]
info = scan_cache_dir(cache)
repos = {r.repo_id: r for r in info.repos}
r = repos[repo]
print(json.dumps({
    "repos": sorted(repos), "errors": [str(e) for e in info.warnings],
    "commits": sorted(rev.commit_hash for rev in r.revisions),
    "refs": sorted(ref for rev in r.revisions for ref in rev.refs),
    "files": sorted(f.file_name for rev in r.revisions for f in rev.files),
    "config": hf_hub_download(repo, "config.json", cache_dir=cache,
                              local_files_only=True),
    "snapshot": snapshot_download(repo, cache_dir=cache, local_files_only=True),
}))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--test-models", required=True)
    ap.add_argument("--venv-python", required=True)
    ap.add_argument("--shared")  # passed to every TEST_MODELS test; unused
    a = ap.parse_args()
    failures = []

    def check(cond, what):
        print(("ok    " if cond else "FAIL  ") + what, flush=True)
        if not cond:
            failures.append(what)

    src = os.path.join(a.test_models, "qwen2-tiny")
    with tempfile.TemporaryDirectory(prefix="inferd-hf-cache-") as cache:
        snap = write_cache(cache, "org/tiny", src)
        p = subprocess.run([a.venv_python, "-c", HF_CHECK, cache, "org/tiny"],
                           capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, f"huggingface_hub read the cache: {p.stderr[-500:]}")
        hf = json.loads(p.stdout) if p.returncode == 0 else {}
        check(hf.get("repos") == ["org/tiny"] and hf.get("errors") == [] and
              hf.get("commits") == [COMMIT] and hf.get("refs") == ["main", "v1"] and
              "config.json" in hf.get("files", []),
              f"scan_cache_dir sees the repo, its commit and refs: {hf}")
        check(hf.get("config") == os.path.join(snap, "config.json") and
              hf.get("snapshot") == snap,
              f"hf_hub_download / snapshot_download resolve to {snap}: {hf}")

        p = subprocess.run(
            [a.venv_python, "-c", HUB_FETCH, HERE, cache, src],
            capture_output=True, text=True, timeout=300,
            env=dict(os.environ, HF_HUB_DISABLE_TELEMETRY="1"))
        fetched = p.stdout.strip().splitlines()[-1] if p.returncode == 0 else ""
        check(p.returncode == 0 and os.path.isfile(os.path.join(fetched, "config.json")),
              f"huggingface_hub fetched org/hubtiny from the local Hub into the "
              f"cache: {fetched} {p.stderr[-300:]}")

        env = dict(os.environ, HF_HUB_CACHE=cache, HF_HUB_OFFLINE="1")
        models = [("direct", src), ("tiny", "org/tiny"), ("tagged", "org/tiny@v1"),
                  ("fetched", "org/hubtiny"), ("absent", "org/absent-model")]
        with lib.InferdProcess(a.inferd, models, log_prefix="inferd-hfcache-",
                               extra=["--http-listen", "127.0.0.1:0",
                                      "--allow-partial-start"],
                               env=env) as srv:
            srv.wait_for(r"(\d+) of \d+ model\(s\) ready after", timeout=300)
            base = f"http://127.0.0.1:{srv.http_port}"

            def post(path, body):
                req = urllib.request.Request(
                    base + path, data=json.dumps(body).encode(),
                    headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=120) as f:
                    return json.load(f)

            tokens = {}
            for name in ("direct", "tiny", "tagged", "fetched"):
                out = post("/v1/completions", {
                    "model": name, "prompt": "Hello world", "max_tokens": 12,
                    "temperature": 0, "ignore_eos": True, "logprobs": 1})
                lp = out["choices"][0]["logprobs"]
                tokens[name] = list(zip(lp["tokens"], lp["token_logprobs"]))
            check(tokens["tiny"] == tokens["direct"] == tokens["tagged"] ==
                  tokens["fetched"] and len(tokens["direct"]) == 12,
                  f"org/tiny, org/tiny@v1 and org/hubtiny (fetched by "
                  f"huggingface_hub) serve the same greedy tokens as the "
                  f"directory: {tokens}")
            try:  # 503: not every model is ready
                with urllib.request.urlopen(base + "/health", timeout=30) as f:
                    health = json.load(f)
            except urllib.error.HTTPError as e:
                health = json.load(e)
            check(health["models"].get("absent") == "failed",
                  f"a name missing from the cache is a failed model: {health}")
            log = srv.output()
            check("models--org--absent-model" in log and
                  "hf download org/absent-model" in log,
                  "its error names the missing repo and how to fetch it")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
